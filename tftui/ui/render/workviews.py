"""Pure builders for the workload and worker views, and a namespace's quota summary.

Split from `views` (which keeps the table model and the pools view) because each view kind is its own
set of columns; like every builder they only format what `ClusterState`, `UsageIndex` and the
autoscale analysis derived.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rich.text import Text

from tftui.engine.autoscale import effective_config
from tftui.engine.autoscale_config import enabled_all
from tftui.engine.quota import quotas
from tftui.engine.state import WorkerView, WorkloadView
from tftui.ui.load.autoscale import AutoscaleAnalysis
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.autoscaleview import cells_shown, rec_cell, used_cell
from tftui.ui.render.format import NO_DATA, fmt_bytes, fmt_num, fmt_req_lim, fmt_res
from tftui.ui.render.poolwaste import LOADING, WorkloadWaste
from tftui.ui.render.rowcache import RowCache
from tftui.ui.render.views import (
    ALL,
    NOT_NARROW,
    NOT_WIDE,
    WIDE_ONLY,
    Gauges,
    Row,
    Table,
    _Col,
    _figure,
    _money,
    _money_plus,
    _search,
    _table,
)

# -- workloads and workers -----------------------------------------------------------------------

WORKLOAD_COLUMNS = (
    _Col("key", "NAMESPACE/NAME", (21, 25, 0), NOT_WIDE, flex=1),
    _Col("namespace", "NAMESPACE", 10, WIDE_ONLY, flex=1),
    _Col("name", "NAME", 20, WIDE_ONLY, flex=1),
    _Col("pool", "POOL", (0, 10, 12), NOT_NARROW, flex=1),
    _Col("workers", "WRKS", 4, WIDE_ONLY),  # from 120 to 199 columns WASTE $ takes its room
    _Col("qos", "QOS", 8, WIDE_ONLY),
    _Col("request", "REQUEST/GPU", 12, NOT_NARROW),
    _Col("used", "USED/GPU", 12, WIDE_ONLY),
    _Col("rec", "RECOMMENDED", 12, ALL),
    _Col("autoscale", "AUTOSCALE", 9, ALL),
    _Col("tflops", "TFLOPS use/req", None, ALL),
    _Col("vram", "VRAM use/req", None, ALL),
    _Col("money", "WASTE $", 3, NOT_NARROW),  # at 80 columns the names and gauges come first
)
"""`USED/GPU` is usage per device at the recommender's target percentiles, `RECOMMENDED` the
engine's recommended request per device (bold: it would be applied); both `—` without data.
`AUTOSCALE` says whether autoscaling is on (`a` turns it on or off). The gauges are use against the
request (Σ request × devices): the same percentage `tftui report` calls USE. `WASTE $`: the money
its requests above its use cost over the waste diagnosis' window (`poolwaste.workloads_waste`: `…`
while it loads, `—` without metrics for the workload, `+` where part of it has no price)."""


def workloads_table(
    data: ConsoleData,
    gauges: Gauges,
    autoscale: AutoscaleAnalysis | None = None,
    autoscale_pending: bool = False,
    cache: RowCache[Row] | None = None,
    waste: Mapping[str, WorkloadWaste] | None = None,
) -> Table:
    """Workloads; `autoscale` (the engine's recommendations, when computed) fills USED and REC,
    `waste` (`poolwaste.workloads_waste`; None: loading) WASTE $. With `cache`, rows whose
    workload, usage, autoscaling and analyses are as last time are re-used."""
    st, usage = data.state, data.usage
    unknown = WorkloadWaste(None, False)
    autoscaled = enabled_all(st)  # in one pass, carried from the state before where it can be

    def enabled_of(wl: WorkloadView) -> bool:
        got = autoscaled.get(wl.key)
        return effective_config(st, wl).enable if got is None else got  # None: it fails, and says why

    def make(item: tuple[str, bool]) -> Row:
        key, enabled = item
        wl = st.workloads[key]
        used = usage.workloads.get(key)
        tflops, vram = gauges.request_cells(wl.allocated, used)
        ww = waste.get(key, unknown) if waste is not None else None
        money = (
            _figure(LOADING, _money)
            if ww is None
            else _figure(ww.money, _money_plus if ww.unpriced else _money)
        )
        return Row(
            key,
            {
                "key": key,
                "namespace": wl.namespace,
                "name": wl.name,
                "pool": wl.pool or NO_DATA,
                "workers": str(len(wl.workers)),
                "qos": wl.qos,
                "request": fmt_res(wl.request),
                "used": used_cell(autoscale, key, autoscale_pending),
                "rec": rec_cell(autoscale, key, autoscale_pending),
                "autoscale": "on" if enabled else "off",
                "tflops": tflops,
                "vram": vram,
                "money": money,
            },
            _search(key, wl.pool, wl.qos, "autoscale-on" if enabled else "autoscale-off"),
        )

    items = []
    for key in sorted(st.workloads):
        wl = st.workloads[key]
        enabled = enabled_of(wl)
        ww = waste.get(key) if waste is not None else LOADING
        deps = (wl, usage.workloads.get(key), enabled, cells_shown(autoscale, key, autoscale_pending), ww)
        items.append((key, deps, (key, enabled)))
    if cache is None:
        return _table(WORKLOAD_COLUMNS, gauges.layout, (make(arg) for _, _, arg in items))
    return _table(WORKLOAD_COLUMNS, gauges.layout, cache.rows(gauges.scope, items, make))


def quota_summary(data: ConsoleData, namespace: str | None = None) -> Text | None:
    """One line per namespace with a GPUResourceQuota: usage against each total it sets (bold at
    or above its alert threshold), or why the controller would not enforce it; None without any.
    `namespace` (the `:ns` scope): that namespace's line only."""
    views = {ns: v for ns, v in quotas(data.state).items() if namespace is None or ns == namespace}
    if not views:
        return None
    text = Text(no_wrap=True, overflow="ellipsis")
    for i, (ns, v) in enumerate(views.items()):
        q, u = v.quota, v.usage
        if i:
            text.append("\n")
        text.append(f"quota {ns}", "bold")
        if q.problem:
            text.append(f" · not enforced: {q.problem}")
            continue
        parts: list[tuple[str, float, float | None]] = []
        if q.total_requests is not None:
            parts.append((f"{fmt_num(u.req_tflops)}/{fmt_num(q.total_requests.tflops or 0)} TF req", u.req_tflops,
                          q.total_requests.tflops or 0))  # fmt: skip
            parts.append((f"{fmt_bytes(u.req_vram)}/{fmt_bytes(q.total_requests.vram or 0)} req", u.req_vram,
                          q.total_requests.vram or 0))  # fmt: skip
        if q.total_limits is not None:
            parts.append((f"{fmt_num(u.lim_tflops)}/{fmt_num(q.total_limits.tflops or 0)} TF lim", u.lim_tflops,
                          q.total_limits.tflops or 0))  # fmt: skip
        if q.max_workers is not None:
            parts.append((f"{u.workers}/{q.max_workers} workers", u.workers, q.max_workers))
        for label, used, total in parts:
            text.append(" · ")
            alert = total is not None and (total <= 0 or used >= total * q.alert_percent / 100.0)
            text.append(label, "bold" if alert else "")
    return text


WORKER_COLUMNS = (
    _Col("namespace", "NAMESPACE", 12, WIDE_ONLY, flex=1),
    _Col("name", "NAME", (20, 27, 34), ALL, flex=1),
    _Col("node", "NODE", 14, NOT_NARROW, flex=1),
    _Col("gpus", "GPUS", 4, ALL),
    _Col("qos", "QOS", 8, WIDE_ONLY),
    _Col("reqlim", "REQ/LIM PER GPU", 19, NOT_NARROW),
    _Col("tflops", "TFLOPS use/req", None, ALL),
    _Col("vram", "VRAM use/req", None, ALL),
)


def workers_table(
    data: ConsoleData, gauges: Gauges, keys: Iterable[str], cache: RowCache[Row] | None = None
) -> Table:
    """Workers with their node, devices, request and limit; gauges are use against the request.
    With `cache`, rows whose worker and usage are as last time are re-used (`rowcache`)."""
    st, usage = data.state, data.usage
    # by pod name: the namespace column is hidden below the wide layout
    workers = sorted((st.workers[k] for k in keys if k in st.workers), key=lambda w: (w.name, w.namespace))

    def make(w: WorkerView) -> Row:
        key = w.key
        used = usage.workers.get(key)
        tflops, vram = gauges.request_cells(w.allocated, used)
        return Row(
            key,
            {
                "namespace": w.namespace,
                "name": w.name,
                "workload": w.workload or NO_DATA,
                "node": w.node or NO_DATA,
                "gpus": str(w.gpu_count),
                "qos": w.qos,
                "reqlim": fmt_req_lim(w.request, w.limit),
                "tflops": tflops,
                "vram": vram,
            },
            _search(key, w.workload, w.node, w.qos, w.phase, *w.gpu_ids),
        )

    if cache is None:
        return _table(WORKER_COLUMNS, gauges.layout, map(make, workers))
    items = ((w.key, (w, usage.workers.get(w.key)), w) for w in workers)
    return _table(WORKER_COLUMNS, gauges.layout, cache.rows(gauges.scope, items, make))
