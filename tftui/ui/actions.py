"""The console's action registry: every key binding, its id, description and whether it writes.

One entry per action. Screens take their `BINDINGS` from here (`bindings(scope)`), `?` help and the
command palette list what is active from here, user keymaps are checked against it (`keymap.py`)
and read-only mode hides and refuses every entry with `mutates=True` (`TfTuiApp.allows`). Adding an
action is one entry here plus its `action_*` method on the screen of its scope.

Ids are stable (`tftui.<name>`; mutating ones `tftui.write.<name>`): they are what a user's keymap
names, so renaming one breaks configs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from textual.binding import Binding, BindingType

Scope = Literal[
    "app",  # the App: everywhere, including dialogs
    "resource",  # every ResourceScreen (views and drill-downs)
    "table",  # a ResourceTable with focus
    "pool",  # screens acting on a selected pool (pools, compaction, defrag)
    "workload",  # screens acting on a selected workload (workloads, workload detail)
    "worker",  # screens acting on a selected worker (a GPU's or a workload's workers)
    "tables",  # screens with more than one table
    "placement",  # the placement form
    "finding",  # one waste finding
    "prompt",  # the `:`/`/` prompt's input
    "text",  # the YAML/describe viewer
    "help",
    "warnings",
    "confirm",
    "mode",
    "namespaces",  # the `:ns` list
]


@dataclass(frozen=True, slots=True)
class Action:
    """One bindable action. `keys` are Textual key names, comma-separated (the default keymap)."""

    id: str
    scope: Scope
    keys: str
    action: str
    description: str
    tooltip: str = ""
    mutates: bool = False
    """Writes to the cluster: hidden and refused when read-only, never on a common chord."""
    noun: str = ""
    """How messages name a mutating action ("manual compaction")."""
    show: bool = True
    key_display: str | None = None
    priority: bool = False
    palette: bool = True
    """Offered in the command palette (dialog-only keys are not)."""

    @property
    def name(self) -> str:
        """The action method's name without parameters (`sort('name')` → `sort`)."""
        return self.action.split("(", 1)[0].rsplit(".", 1)[-1]

    def binding(self) -> Binding:
        return Binding(
            self.keys,
            self.action,
            self.description,
            show=self.show,
            key_display=self.key_display,
            priority=self.priority,
            tooltip=self.tooltip,
            id=self.id,
        )


SORT_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("n", "name", "NAME"),
    ("p", "pool", "POOL"),
    ("g", "gpus", "GPUS"),
    ("w", "workers", "WRKS"),
    ("t", "tflops", "TFLOPS (allocated %)"),
    ("v", "vram", "VRAM (allocated %)"),
    ("a", "age", "AGE"),
    ("u", "used", "used % (TFLOPS)"),
    ("x", "gap", "allocated − used gap (TFLOPS, waste first when reversed)"),
    ("$", "money", "waste $"),
)
"""k9s-style sort keys: shift+letter sorts by the column (again: reverse); (letter, column, label)."""


def _sort_actions() -> list[Action]:
    return [
        Action(
            f"tftui.sort_{column}",
            "resource",
            # terminals send `G`; kitty-protocol ones `shift+g`; `$` is its own key
            "dollar_sign" if letter == "$" else f"{letter.upper()},shift+{letter}",
            f"sort('{column}')",
            f"Sort {label.split()[0].lower()}",
            f"Sort by {label}; again reverses",
            show=False,
            key_display=letter.upper(),
        )
        for letter, column, label in SORT_COLUMNS
    ]


ACTIONS: tuple[Action, ...] = (
    # -- everywhere ------------------------------------------------------------------------------
    Action("tftui.refresh", "app", "ctrl+r", "refresh", "Refresh", "Reload the cluster snapshot and metrics now",
           key_display="^r"),
    Action("tftui.pause", "app", "R,shift+r", "toggle_pause", "Pause",
           "Pause or resume the automatic refresh (the screen stays as it is; ^r still refreshes)",
           show=False, key_display="R"),
    Action("tftui.help", "app", "question_mark", "help", "Help", "Keys of this screen, gauge and flag legend",
           key_display="?"),
    Action("tftui.palette", "app", "ctrl+p", "command_palette", "Palette",
           "Search every action of this screen and every view", show=False, key_display="^p", priority=True,
           palette=False),
    Action("tftui.warnings", "app", "w", "warnings", "Warnings",
           "Inconsistencies found in the snapshot (count in the header)", show=False),
    Action("tftui.theme", "app", "ctrl+t", "toggle_theme", "Theme", "Switch between the dark and light theme",
           show=False, key_display="^t"),
    Action("tftui.quit", "app", "q", "quit", "Quit", "Leave the console"),
    Action("tftui.interrupt", "app", "ctrl+c", "quit", "Quit", show=False, priority=True, palette=False),
    # -- every resource view ---------------------------------------------------------------------
    # `:` and `/` are priority bindings: the app runs them as it reads the key, so the prompt has the
    # focus before the next key is dispatched (keys typed after `:` while the app was busy must not
    # be queued to the table as hotkeys); the screen turns them off while an input has the focus
    Action("tftui.command", "resource", "colon", "command", "View",
           "Switch view by name (views listed below; tab completes)", key_display=":", palette=False,
           priority=True),
    Action("tftui.filter", "resource", "slash", "filter", "Filter",
           "Filter: text, !text (not), -l k=v (labels); esc clears",
           key_display="/", priority=True),
    Action("tftui.back", "resource", "escape", "back", "Back",
           "Close the prompt, clear the filter, or go back one screen", key_display="esc"),
    Action("tftui.yaml", "resource", "y", "yaml", "YAML", "The selected object as stored in the cluster",
           show=False),
    Action("tftui.describe", "resource", "d", "describe", "Describe",
           "What tftui derived for the selected object (capacity, allocation, relations)", show=False),
    Action("tftui.mark", "resource", "space", "mark", "Mark", "Mark or unmark the selected row (copy takes marks)",
           show=False, key_display="space"),
    Action("tftui.clear_marks", "resource", "ctrl+backslash", "clear_marks", "Unmark", "Clear every mark",
           show=False, key_display="^\\"),
    Action("tftui.copy", "resource", "n", "copy_names", "Copy name",
           "Copy the marked rows' names (or the selected one) to the clipboard", show=False),
    Action("tftui.export", "resource", "ctrl+s", "export", "Export",
           "Save the table as shown (filter and sort applied) to a CSV file", show=False, key_display="^s"),
    *_sort_actions(),
    Action("tftui.open", "table", "enter", "select_cursor", "Open", "Drill down into the selected row",
           key_display="⏎"),
    # k9s (tview's table): j/k move a row, home/end and g go to the first/last row (DataTable's own
    # home/end scroll the columns sideways, which left/right already do on a row cursor), ctrl+f and
    # ctrl+b a page as pgdn/pgup. k9s's G (last row) stays the GPUs sort: shift+letter sorts
    Action("tftui.down", "table", "j", "cursor_down", "Down", "The next row (as ↓)", show=False, palette=False),
    Action("tftui.up", "table", "k", "cursor_up", "Up", "The row before (as ↑)", show=False, palette=False),
    Action("tftui.top", "table", "home,g", "scroll_top", "Top", "The first row (g too)", show=False, palette=False),
    Action("tftui.bottom", "table", "end", "scroll_bottom", "Bottom", "The last row", show=False, palette=False),
    Action("tftui.page_down", "table", "ctrl+f", "page_down", "Page down", "The next page of rows (as pgdn)",
           show=False, palette=False, key_display="^f"),
    Action("tftui.page_up", "table", "ctrl+b", "page_up", "Page up", "The page of rows before (as pgup)",
           show=False, palette=False, key_display="^b"),
    Action("tftui.next_table", "tables", "tab", "app.focus_next", "Next", "Move between the tables of this screen"),
    # -- pools -----------------------------------------------------------------------------------
    Action("tftui.place", "pool", "p", "place", "Place",
           "Where a new worker would land in this pool, under every mode"),
    Action("tftui.write.manual_compaction", "pool", "c", "manual_compaction", "Compact",
           "Manual compaction of this pool: lists what it releases, asks", mutates=True, noun="manual compaction"),
    Action("tftui.write.placement_mode", "pool", "m", "placement_mode", "Mode",
           "Change the pool's placement mode (patches its SchedulingConfigTemplate), asks",
           mutates=True, noun="placement mode change",
           show=False),  # listed in help: the 80-column footer has no room left
    # -- workloads -------------------------------------------------------------------------------
    Action("tftui.write.workload_autoscale", "workload", "a", "workload_autoscale", "Autoscale",
           "Turn autoscaling on/off for this workload (spec.autoScalingConfig.autoSetResources.enable), asks",
           mutates=True, noun="autoscale change"),
    # -- workers ---------------------------------------------------------------------------------
    Action("tftui.write.admit", "worker", "e", "admit", "Admit",
           "Pending worker: evict the smallest PDB-safe move set that makes room for it (d shows it), asks",
           mutates=True, noun="defrag to admit",
           show=False),  # listed in help and the palette: the footers have no room left
    # -- namespaces ------------------------------------------------------------------------------
    Action("tftui.all_namespaces", "namespaces", "0", "all_namespaces", "All",
           "Clear the namespace scope: every view shows all namespaces (:ns all does the same)"),
    # -- other screens ---------------------------------------------------------------------------
    Action("tftui.place_submit", "placement", "enter", "submit", "Preview",
           "Place the request under every mode (enter in a field too)", key_display="⏎"),
    Action("tftui.copy_fixes", "finding", "c", "copy_fixes", "Copy fixes",
           "Copy every fix of this finding to the clipboard, one per line"),
    Action("tftui.complete", "prompt", "tab", "complete", "Complete", "Accept the completion", show=False,
           palette=False),
    Action("tftui.close_text", "text", "escape", "close", "Back", "Close this view", key_display="esc",
           palette=False),
    Action("tftui.close_help", "help", "escape,question_mark", "dismiss", "Close", palette=False),
    Action("tftui.close_warnings", "warnings", "escape,w", "dismiss", "Close", palette=False),
    Action("tftui.confirm_cancel", "confirm", "escape", "cancel", "Cancel", key_display="esc", palette=False),
    Action("tftui.confirm_next", "confirm", "tab", "app.focus_next", "Next", show=False, palette=False),
    Action("tftui.mode_cancel", "mode", "escape", "cancel", "Cancel", key_display="esc", palette=False),
    Action("tftui.mode_next", "mode", "tab,right", "app.focus_next", "Next", show=False, palette=False),
    Action("tftui.mode_previous", "mode", "shift+tab,left", "app.focus_previous", "Previous", show=False,
           palette=False),
)  # fmt: skip

REGISTRY: dict[str, Action] = {a.id: a for a in ACTIONS}
"""Every action by binding id."""

MOVES: frozenset[str] = frozenset(
    {"tftui.down", "tftui.up", "tftui.top", "tftui.bottom", "tftui.page_down", "tftui.page_up"}
)
"""Cursor moves the help lists last, beside the arrow keys' line."""

MUTATING: dict[str, Action] = {a.name: a for a in ACTIONS if a.mutates}
"""Mutating actions by action name (what `check_action` and `perform` see)."""


def bindings(*scopes: Scope) -> list[BindingType]:
    """The bindings of `scopes`, in registry order, for a class's `BINDINGS`."""
    return [a.binding() for a in ACTIONS if a.scope in scopes]


def action(binding_id: str) -> Action:
    return REGISTRY[binding_id]


if len(REGISTRY) != len(ACTIONS):  # pragma: no cover - caught by any import
    raise RuntimeError("duplicate action id in tftui.ui.actions.ACTIONS")
