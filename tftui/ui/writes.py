"""The console's writes (a mixin of `TfTuiApp`): one door, `perform`, and the confirmations before it.

`perform` refuses everything when the console is read-only and runs the write in a thread worker
through the runtime; `allows` is the single read-only gate every binding, the help and the palette
ask. Separate from the app class so that everything that can change the cluster reads in one place.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from rich.text import Text
from textual.worker import get_current_worker

from tftui.engine.autoscale import AutoConfig, effective_autoscaling
from tftui.engine.compaction import plan_manual_compaction
from tftui.engine.fit import MODES
from tftui.engine.placement import mode_change_message, pool_mode, template_patch
from tftui.engine.plan import EvictPod, PatchWorkloadAutoscale, Plan
from tftui.engine.prices import price_map
from tftui.engine.state import ClusterState
from tftui.model import keys
from tftui.ui.appbase import (
    CONFIRM_GROUP,
    WRITE_ACTIONS,
    WRITE_GROUP,
    ActionDone,
    ActionFailed,
    CompactionPreviewReady,
    ConsoleBase,
)
from tftui.ui.background import in_thread
from tftui.ui.load.analysis import AUTOSCALE
from tftui.ui.load.autoscale import AutoscaleAnalysis
from tftui.ui.load.data import describe_error
from tftui.ui.load.ops import compaction_capacity
from tftui.ui.render.autoscaleview import toggle_body
from tftui.ui.render.opsviews import confirm_compaction_body
from tftui.ui.screens.modals import ConfirmScreen, ModeScreen

WRITE_SETTLE_S = 5.0
"""Longest a console write waits for the watch cache to show it before its refresh (s)."""


def released_words(plan: Plan, pool: str, *, embedded: bool = True) -> str:
    """What a manual compaction did: on the embedded cluster the round ran; on a live cluster only
    the trigger annotation was written and the controller releases the nodes (behaviour C5)."""
    pp = plan.pools.get(pool)
    released = pp.compaction.released if pp is not None and pp.compaction is not None else []
    if not embedded:
        expected = ", ".join(r.node for r in released) or "nothing"
        return f"requested (tensor-fusion.ai/manual-compaction written; expected to release: {expected})"
    if not released:
        return "nothing released"
    return "released " + ", ".join(r.node for r in released)


class Writes(ConsoleBase):
    """Manual compaction, placement mode, workload autoscaling and defrag-to-admit: ask, then write."""

    # -- writes: one door ------------------------------------------------------------------------

    def allows(self, action: str) -> bool:
        """Whether `action` is offered at all: the single read-only gate. Every binding's
        `check_action` (app and screens), the help, the palette and `perform` ask here, so a
        mutating action of the registry is neither shown nor runnable when read-only."""
        return not (self.read_only and action in WRITE_ACTIONS)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.allows(action)

    def start_manual_compaction(self, pool: str) -> None:
        """`c`: preview the forced round (worker), then ask; nothing is written before the answer."""
        if not self.allows("manual_compaction"):
            self._refuse("manual_compaction")
            return
        if pool in self._writing:
            self.notify(f"manual compaction of {pool} is already running", severity="warning")
            return
        self.run_worker(
            in_thread(partial(self._compaction_preview_work, pool), name="tftui-preview"),
            exclusive=True,
            group=CONFIRM_GROUP,
            exit_on_error=False,
            description="compaction preview",
        )

    def _compaction_preview_work(self, pool: str) -> None:
        data = self.data
        with self._cluster_lock:
            if self.runtime is not None:
                plan = self.runtime.preview_manual_compaction(pool)
            elif data is not None:
                plan = plan_manual_compaction(data.state, pool, self._clock(), prices=price_map(data.state))[
                    0
                ]
            else:
                return
        state: ClusterState | None = data.state if data is not None else None
        if state is None or pool not in state.pools:
            self.post_message(ActionFailed("manual_compaction", pool, f"pool {pool} is not in the cluster"))
            return
        pp = plan.pools.get(pool)
        released = [r.node for r in pp.compaction.released] if pp is not None and pp.compaction else []
        before, after = compaction_capacity(state, pool, released)
        if not get_current_worker().is_cancelled:
            self.post_message(CompactionPreviewReady(pool, plan, before, after))

    def on_compaction_preview_ready(self, message: CompactionPreviewReady) -> None:
        pool = message.pool

        def answered(confirmed: bool | None) -> None:
            if confirmed:
                self.perform("manual_compaction", pool=pool)

        body = confirm_compaction_body(pool, message.plan, message.before, message.after)
        self.push_screen(ConfirmScreen(f"Manual compaction · pool {pool}", body, "Compact"), answered)

    def start_placement_mode(self, pool: str) -> None:
        """`m`: choose the pool's new placement mode in a dialog showing what it changes (P4)."""
        if not self.allows("placement_mode"):
            self._refuse("placement_mode")
            return
        data = self.data
        if data is None or pool not in data.state.pools:
            self.notify(f"pool {pool} is not in the cluster", severity="error")
            return
        state = data.state
        current = pool_mode(state, pool)
        try:
            template_patch(state, pool, current)  # a pool without a (valid) template: nothing to patch
        except ValueError as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return

        def answered(mode: str | None) -> None:
            if mode:
                self.perform("placement_mode", pool=pool, mode=mode)

        self.push_screen(
            ModeScreen(pool, current, MODES, partial(mode_change_message, state, pool)), answered
        )

    def start_workload_autoscale(self, key: str) -> None:
        """`a`: ask, showing the patch and its pod-template equivalent, then turn autoscaling on/off."""
        if not self.allows("workload_autoscale"):
            self._refuse("workload_autoscale")
            return
        data = self.data
        wv = data.state.workloads.get(key) if data is not None else None
        if data is None or wv is None:
            self.notify(f"workload {key} is not in the cluster", severity="error")
            return
        if wv.obj is None:
            self.notify(
                f"{key} has no TensorFusionWorkload object (local-GPU mode): set the "
                f'{keys.AUTOSCALE}: "true" annotation on its pod template instead',
                severity="error",
                timeout=10,
            )
            return
        analysis = self.analysis(AUTOSCALE)
        value = analysis.value if analysis is not None else None
        rec = value.result.workloads.get(key) if isinstance(value, AutoscaleAnalysis) else None
        # from the snapshot on screen (the analysis may still be the one before the last write)
        asc = effective_autoscaling(data.state, wv).get("autoSetResources")
        enable = not AutoConfig.parse(asc).enable
        pod_annotation = any(
            (data.state.workers[w].obj.get("metadata", {}).get("annotations") or {}).get(keys.AUTOSCALE)
            == keys.TRUE
            for w in wv.workers
            if w in data.state.workers
        )

        def answered(confirmed: bool | None) -> None:
            if confirmed:
                self.perform("workload_autoscale", pool=key, enable=enable)

        body = toggle_body(key, rec, enable, pod_annotation)
        label = "Turn on" if enable else "Turn off"
        self.push_screen(
            # a question, not a state: the title must not read like "autoscale is on"
            ConfirmScreen(f"Turn autoscaling {'on' if enable else 'off'}? · {key}", body, label),
            answered,
        )

    def start_admit(self, key: str) -> None:
        """`e` on a Pending worker: show why it waits and the move set, ask, then evict the set."""
        if not self.allows("admit"):
            self._refuse("admit")
            return
        from tftui.engine.pending import explain

        data = self.data
        why = explain(data.state, key) if data is not None else None
        if why is None:
            self.notify(f"{key} is not a Pending worker", severity="warning")
            return
        if why.admission is None or not why.admission.moves:
            self.notify(
                f"{key}: no PDB-safe move set admits it ({why.reason}: {why.detail})", severity="warning"
            )
            return

        def answered(confirmed: bool | None) -> None:
            if confirmed:
                self.perform("admit", pool=key)

        lines = [f"{key} is pending: {why.reason} ({why.detail}).", "", "Evict, in this order:"]
        lines += [f"  {m.pod}  {m.source} → {m.target} ({', '.join(m.gpus)})" for m in why.admission.moves]
        lines.append(f"then it fits on {why.admission.node} ({', '.join(why.admission.gpus)}).")
        self.push_screen(ConfirmScreen(f"Defrag to admit · {key}", Text("\n".join(lines)), "Evict"), answered)

    def perform(self, action: str, *, pool: str, mode: str | None = None, enable: bool | None = None) -> bool:
        """The only way the console writes: refused when read-only, else run in a thread worker.

        `mode` is the new placement mode of `placement_mode`; `workload_autoscale` takes the
        workload key ("ns/name") as `pool` and `enable`. Returns whether the write was started.
        """
        if action not in WRITE_ACTIONS:
            raise ValueError(f"unknown write action {action!r}")
        if self.read_only or self.runtime is None:
            self._refuse(action)
            return False
        if pool in self._writing:
            self.notify(f"{WRITE_ACTIONS[action]} of {pool} is already running", severity="warning")
            return False
        if action == "placement_mode" and mode not in MODES:
            raise ValueError(f"placement_mode needs a mode (one of {', '.join(MODES)}), not {mode!r}")
        if action == "workload_autoscale" and (enable is None or "/" not in pool):
            raise ValueError(
                f"workload_autoscale needs a workload ns/name and enable, not {pool!r}, {enable!r}"
            )
        self._writing.add(pool)
        with self._outcome_lock:
            self.writes_in_flight[pool] = WRITE_ACTIONS[action]
        # not a daemon thread: quitting waits for the write (`run` says so) instead of cutting it
        self.run_worker(
            in_thread(
                partial(self._write_work, action, pool, mode, enable), name="tftui-write", daemon=False
            ),
            group=WRITE_GROUP,
            exit_on_error=False,
            description="write",
        )
        return True

    def _refuse(self, action: str) -> None:
        self.notify(
            f"read-only console: {WRITE_ACTIONS.get(action, action)} is not allowed", severity="error"
        )

    def _write_work(
        self, action: str, pool: str, mode: str | None = None, enable: bool | None = None
    ) -> None:
        try:
            message = self._write(action, pool, mode, enable)
            self._settle_writes()
            with self._outcome_lock:
                self._unseen[id(message)] = self.outcome_text(message)[0]
        finally:
            with self._outcome_lock:
                self.writes_in_flight.pop(pool, None)
        self.post_message(message)

    def _settle_writes(self) -> None:
        """Wait, in the write's thread, until a live cluster's watch cache shows what it wrote (at
        most `WRITE_SETTLE_S`): the refresh after the write reads that cache, which lags the API
        server's answer, and showed the state before the write until the next refresh."""
        settle = getattr(self._cluster, "settle", None)
        if callable(settle):
            settle(WRITE_SETTLE_S)

    def _write(
        self, action: str, pool: str, mode: str | None, enable: bool | None
    ) -> ActionDone | ActionFailed:
        """Carry out one write and say how it went (never raises: a failure is an outcome)."""
        runtime = self.runtime
        if runtime is None:  # perform checked; a runtime never goes away
            return ActionFailed(action, pool, "no runtime")
        try:
            with self._cluster_lock:
                if action == "workload_autoscale" and enable is not None:
                    ns, _, name = pool.partition("/")
                    plan = Plan(self._clock(), actions=[PatchWorkloadAutoscale(ns, name, enable)])
                    data = self.data
                    results = runtime.actuator.execute(plan, data.state if data is not None else None)
                    failed = [r.error for r in results if not r.ok]
                    if failed:
                        return ActionFailed(action, pool, "; ".join(failed))
                    word = "on" if enable else "off"
                    detail = f"{word} (spec.autoScalingConfig.autoSetResources.enable={str(enable).lower()})"
                    return ActionDone(action, pool, None, detail)
                if action == "admit":
                    return self._admit(pool)
                if action == "placement_mode" and mode is not None:
                    return ActionDone(action, pool, None, self._patch_mode(pool, mode))
                plan = runtime.manual_compaction(pool)
        except Exception as exc:
            return ActionFailed(action, pool, describe_error(exc))
        return ActionDone(action, pool, plan)

    def _admit(self, key: str) -> ActionDone | ActionFailed:
        """Evict the move set computed on the snapshot now on screen (it may differ from the one
        confirmed if the cluster moved: the evictions are what this snapshot needs)."""
        from tftui.engine.pending import explain

        runtime, data = self.runtime, self.data
        why = explain(data.state, key) if data is not None else None
        if runtime is None or data is None or why is None or why.admission is None:
            return ActionFailed("admit", key, "no move set admits it any more")
        evictions = [EvictPod(m.pod.split("/", 1)[0], m.pod.split("/", 1)[1]) for m in why.admission.moves]
        results = runtime.actuator.execute(Plan(self._clock(), actions=list(evictions)), data.state)
        failed = [r.error for r in results if not r.ok]
        if failed:
            return ActionFailed("admit", key, "; ".join(str(f) for f in failed))
        return ActionDone("admit", key, None, f"evicted {', '.join(m.pod for m in why.admission.moves)}")

    def outcome_text(self, message: ActionDone | ActionFailed) -> tuple[str, bool]:
        """How a finished write is told to the operator: (text, whether it failed)."""
        words = WRITE_ACTIONS.get(message.action, message.action)
        if isinstance(message, ActionFailed):
            return f"{words} of {message.pool} failed: {message.error}", True
        embedded = bool(getattr(self.runtime, "embedded", True))
        what = (
            message.detail
            if message.plan is None
            else released_words(message.plan, message.pool, embedded=embedded)
        )
        return f"{words} of {message.pool}: {what}", False

    def _seen(self, message: ActionDone | ActionFailed) -> str:
        """The outcome's text, now shown on screen (so `run` need not print it after exit)."""
        self._writing.discard(message.pool)
        with self._outcome_lock:
            self._unseen.pop(id(message), None)
        return self.outcome_text(message)[0]

    def wait_for_writes(self, report: Callable[[str], None]) -> None:
        """After the console closed: wait for the writes still running, then `report` every
        outcome the operator did not see on screen. A quit never abandons a write half-done."""
        with self._outcome_lock:
            pending = [f"{words} of {pool}" for pool, words in self.writes_in_flight.items()]
        if pending:
            report(f"tftui: waiting for {', '.join(pending)} to finish…")
        while True:
            with self._outcome_lock:
                if not self.writes_in_flight:
                    unseen, self._unseen = list(self._unseen.values()), {}
                    break
            time.sleep(0.05)
        for text in unseen:
            report(f"tftui: {text}")

    def _patch_mode(self, pool: str, mode: str) -> str:
        """Patch the SchedulingConfigTemplate of `pool` (read from the cluster as shown)."""
        data = self.data
        if data is None:
            raise ValueError(f"pool {pool}: no cluster state yet")
        name, patch = template_patch(data.state, pool, mode)
        cluster: Any = self._cluster
        if callable(getattr(cluster, "patch_template_mode", None)):  # a live cluster (`KubeCluster`)
            cluster.patch_template_mode(name, mode)
        elif callable(getattr(cluster, "patch", None)):  # the embedded cluster (`ActingSimCluster`)
            cluster.patch("SchedulingConfigTemplate", name, patch)
        else:
            raise ValueError(f"this source cannot patch SchedulingConfigTemplate {name}")
        return f"{mode} in SchedulingConfigTemplate {name}"

    def on_action_done(self, message: ActionDone) -> None:
        self.notify(self._seen(message), timeout=8)
        self.action_refresh()

    def on_action_failed(self, message: ActionFailed) -> None:
        self.notify(self._seen(message), severity="error", timeout=10)
        self.action_refresh()
