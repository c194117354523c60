"""One Plan for the whole cluster at `now`: compaction then defrag for every pool.

This is what `tftui plan`, the console's plan views and the runtime loops share, so "what would
happen now" is computed in one place. Compaction runs first as upstream's reconcile does; defrag
sees the same snapshot (its moves never target nodes compaction is about to release, because those
are empty and D4 never moves work onto empty nodes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from tftui.engine.compaction import plan_compaction
from tftui.engine.defrag import plan_defrag
from tftui.engine.plan import Plan
from tftui.engine.prices import price_map
from tftui.engine.state import ClusterState
from tftui.model.giveway import checkpoint


def plan_cluster(
    state: ClusterState,
    now: datetime,
    *,
    pools: Iterable[str] | None = None,
    last_compaction: Mapping[str, datetime] | None = None,
    force_compaction: bool = False,
) -> Plan:
    """Compaction and defrag decisions of every pool (or `pools`), in pool-name order.

    `last_compaction` holds when each pool's last round ran (the runtime's memory; upstream keeps
    it in process too); a pool missing from it is due, as after a controller restart.
    """
    names = sorted(state.pools) if pools is None else sorted(pools)
    prices = price_map(state)
    plan = Plan(now)
    for name in names:
        checkpoint()
        plan.merge(
            plan_compaction(
                state,
                name,
                now,
                last_run=(last_compaction or {}).get(name),
                force=force_compaction,
                prices=prices,
            )
        )
        checkpoint()
        plan.merge(plan_defrag(state, name, now))
    return plan
