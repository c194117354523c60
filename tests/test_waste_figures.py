"""The waste a pool, a workload and the totals add (`wastemodel.disjoint_waste`, `waste_figure`,
`workload_waste`): one definition for the pools view, the workloads view and the report's totals.
Findings are hand-made; the figures are sums of theirs."""

from __future__ import annotations

from dataclasses import replace

from tftui.engine.wastemodel import Finding, WorkloadRow, disjoint_waste, waste_figure, workload_waste


def wl(key: str, *classes: str) -> WorkloadRow:
    ns, _, name = key.partition("/")
    return WorkloadRow(
        namespace=ns, name=name, pool="p", in_cluster=True, workers=1, gpu_count=1,
        tflops_request=100.0, tflops_limit=100.0, tflops_avg=10.0, tflops_peak=20.0,
        vram_request_bytes=1.0, vram_peak_bytes=1.0, device_tflops=200.0, device_vram_bytes=2.0,
        device_hours=10.0, autoscale=False, classes=classes,
    )  # fmt: skip


def f(level: str, name: str, cls: str, hours: float | None, money: float | None) -> Finding:
    return Finding(level, name, "p", cls, "", (), hours, money)  # type: ignore[arg-type]


def test_only_disjoint_findings_count() -> None:
    assert disjoint_waste(f("workload", "a/x", "over-request", 1.0, 2.0))
    assert disjoint_waste(f("workload", "a/x", "idle-reservation", 1.0, 2.0))
    assert disjoint_waste(f("node", "n1", "empty-node", 1.0, 2.0))
    assert disjoint_waste(f("node", "n1", "fragmentation", 1.0, 2.0))
    # the same capacity seen from another level, risks, and waste of unknown size are not added
    assert not disjoint_waste(f("node", "n1", "over-request", 1.0, 2.0))
    assert not disjoint_waste(f("gpu", "g1", "idle-reservation", 1.0, 2.0))
    assert not disjoint_waste(f("workload", "a/x", "under-request", 0.0, 0.0))
    assert not disjoint_waste(f("workload", "a/x", "over-request", None, None))


def test_waste_figure_sums_and_marks_what_has_no_price() -> None:
    priced = f("workload", "a/x", "over-request", 2.0, 3.5)
    unpriced = f("node", "n1", "empty-node", 4.0, None)
    ignored = f("node", "n2", "over-request", 9.0, 99.0)
    both = waste_figure([priced, unpriced, ignored])
    assert (both.gpu_hours, both.money, both.unpriced) == (6.0, 3.5, True)  # a lower bound: `$3.50+`
    only_unpriced = waste_figure([unpriced])
    assert (only_unpriced.gpu_hours, only_unpriced.money, only_unpriced.unpriced) == (4.0, None, True)
    nothing = waste_figure([ignored])
    assert (nothing.gpu_hours, nothing.money, nothing.unpriced) == (0.0, 0.0, False)


def test_workload_waste_is_unknown_without_metrics_never_zero() -> None:
    rows = [
        wl("a/over", "over-request"),
        wl("a/idle", "idle-reservation", "under-request"),
        wl("a/fine", "ok"),
        wl("a/silent", "no-data"),
        wl("a/unsized", "over-request"),
        wl("a/unpriced", "over-request"),
    ]
    findings = [
        f("workload", "a/over", "over-request", 2.5, 4.75),
        f("workload", "a/idle", "idle-reservation", 1.0, 1.89),
        f("workload", "a/idle", "under-request", 0.0, 0.0),
        f("node", "n1", "over-request", 3.5, 6.64),  # the node's view of the same requests
        f("workload", "a/unsized", "over-request", None, None),  # the GPUs' capacity unknown
        f("workload", "a/unpriced", "over-request", 2.0, None),
    ]
    got = workload_waste(rows, findings)
    assert set(got) == {r.key for r in rows}
    over, idle, fine = got["a/over"], got["a/idle"], got["a/fine"]
    assert over is not None and (over.gpu_hours, over.money, over.unpriced) == (2.5, 4.75, False)
    assert idle is not None and (idle.gpu_hours, idle.money) == (1.0, 1.89)
    assert fine is not None and (fine.gpu_hours, fine.money) == (0.0, 0.0)  # measured, nothing wasted
    assert got["a/silent"] is None  # no metrics: unknown, not $0
    assert got["a/unsized"] is None
    unpriced = got["a/unpriced"]
    assert unpriced is not None and (unpriced.money, unpriced.unpriced) == (None, True)
    # a workload the diagnosis has no row for is not in the map (the view shows `—`)
    assert "a/absent" not in workload_waste([replace(rows[0])], findings)
