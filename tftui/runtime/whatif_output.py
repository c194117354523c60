"""What-if output: the table, CSV and JSON of a comparison's `PolicyResult`s (cells through
`model.plaintext`). Apart from the driver: rendering needs no simulation."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from tftui.model.plaintext import csv_cell
from tftui.runtime.whatif_results import PolicyResult

JSON = dict[str, Any]


_COLUMNS: Final = (
    ("policy", "policy", "{}"),
    ("node_hours", "node-h", "{:.1f}"),
    ("gpu_hours_allocated", "GPU-h alloc", "{:.1f}"),
    ("gpu_hours_used", "GPU-h used", "{:.1f}"),
    ("allocation_ratio", "alloc %", "{:.1%}"),
    ("releases", "releases", "{}"),
    ("evictions", "evictions", "{}"),
    ("throttled_minutes", "throttled min", "{:.0f}"),
    ("cost_usd", "cost $", "{:,.0f}"),
    ("final_active_nodes", "active", "{}"),
    ("final_lower_bound", "bound", "{}"),
    ("final_ratio", "active/bound", "{:.2f}"),
)


def render_table(results: Sequence[PolicyResult]) -> str:
    """A plain-text table, one row per policy, then each pool's active ÷ bound at the end."""
    rows = [
        [("—" if s[k] is None else fmt.format(s[k])) for k, _, fmt in _COLUMNS]
        for s in (r.summary() for r in results)
    ]
    heads = [h for _, h, _ in _COLUMNS]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [line(heads), *(line(r) for r in rows)]
    if results:
        out.append("")
        out.append(
            "active nodes ÷ lower bound at the end, per pool (configured bound; packing bound in brackets):"
        )
        for r in results:
            parts = []
            for p in sorted(r.final_active):
                ratio = r.final_ratio(p)
                parts.append(
                    f"{p} {r.final_active[p]}/{r.final_bound[p]} [{r.final_packing_bound[p]}]"
                    + (f" = {ratio:.2f}" if ratio is not None else "")
                )
            out.append(f"  {r.policy}: " + ", ".join(parts))
            for p in sorted(r.final_active):
                if r.final_active[p] > r.final_bound[p] and r.final_holds.get(p):
                    out.append(f"    {p} nodes kept by: {_held_by(r.final_holds[p])}")
    return "\n".join(out) + "\n"


def render_csv(results: Sequence[PolicyResult]) -> str:
    buf = io.StringIO()
    keys_ = [k for k in results[0].summary() if k != "pools"] if results else []
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(keys_)
    for r in results:
        s = r.summary()
        w.writerow(["" if s[k] is None else csv_cell(str(s[k])) for k in keys_])
    return buf.getvalue()


def render_json(results: Sequence[PolicyResult], *, series: bool = True) -> str:
    docs = []
    for r in results:
        doc = r.summary()
        if series:
            doc["series"] = {
                "times": [t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in r.times],
                "active": r.active,
                "lower_bound": r.bound,
            }
        docs.append(doc)
    return json.dumps({"policies": docs}, indent=2, ensure_ascii=False) + "\n"


def _held_by(holds_: Mapping[str, str]) -> str:
    """`above-threshold 6 (dev-05, dev-06, dev-07, …), cordoned 1 (dev-09)`, most nodes first."""
    by: dict[str, list[str]] = {}
    for node in sorted(holds_):
        by.setdefault(holds_[node], []).append(node)
    parts = []
    for reason, nodes in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        names = ", ".join(nodes[:3]) + (", …" if len(nodes) > 3 else "")
        parts.append(f"{reason} {len(nodes)} ({names})")
    return ", ".join(parts)
