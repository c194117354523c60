"""The console's view of isolation, partitions and quotas (pure table builders and the request form)."""

from __future__ import annotations

from rich.text import Text

from tests.fixtures.engine_builders import GI
from tftui.engine.state import ClusterState
from tftui.engine.usage import UsageIndex
from tftui.sources.sim.cluster import DEFAULT_NOW, generate_objects
from tftui.ui.forms import parse_request
from tftui.ui.load.data import ConsoleData
from tftui.ui.render.nodeviews import gpus_table
from tftui.ui.render.views import NORMAL, WIDE, Gauges
from tftui.ui.render.workviews import quota_summary


def data() -> ConsoleData:
    st = ClusterState.build(generate_objects())
    return ConsoleData(state=st, usage=UsageIndex(), refreshed_at=DEFAULT_NOW, source="demo")


def cells(table_rows: object, key: str) -> dict[str, str]:
    row = next(r for r in table_rows.rows if r.key == key)  # type: ignore[attr-defined]
    return {k: v if isinstance(v, str) else getattr(v, "plain", str(v)) for k, v in row.cells.items()}


def test_gpu_rows_show_isolation_and_partitions() -> None:
    d = data()
    st = d.state
    mig0 = st.gpus_of("iso-a100-03")[0]
    hard0 = st.gpus_of("iso-a100-01")[0]
    table = gpus_table(d, Gauges(WIDE))
    assert [c.key for c in table.columns][3:5] == ["iso", "parts"]
    assert (
        cells(table, mig0.name)["iso"] == "part" and cells(table, mig0.name)["parts"] == "3g.40gb 1g.10gb×2"
    )
    assert cells(table, hard0.name)["iso"] == "hard" and cells(table, hard0.name)["parts"] == "—"
    node_table = gpus_table(d, Gauges(NORMAL), node="iso-a100-03")
    assert "parts" in [c.key for c in node_table.columns]  # the node screen lists partitions under its GPUs
    assert cells(node_table, mig0.name)["parts"] == "3g.40gb 1g.10gb×2"
    assert "1g.10gb" in next(r for r in node_table.rows if r.key == mig0.name).search


def test_workloads_view_shows_quota_per_namespace() -> None:
    text = quota_summary(data())
    assert isinstance(text, Text)
    assert text.plain == ("quota ml-eval · 360/440 TF req · 176Gi/240Gi req · 520/720 TF lim · 8/12 workers")
    bold = [text.plain[s.start : s.end] for s in text.spans if s.style == "bold"]
    assert bold == ["quota ml-eval"]  # 82 % of the TFLOPS quota: below its 90 % alert threshold


def test_placement_form_takes_isolation_partition_and_namespace() -> None:
    base = {"pool": "demo-isolation", "amount": "0", "vram": "0", "count": "1"}
    req, errors = parse_request({**base, "partition": "3g.40gb"}, {"demo-isolation"})
    assert errors == {} and req is not None
    assert (req.isolation, req.partition) == ("partitioned", "3g.40gb")
    req, errors = parse_request({**base, "vram": "8Gi", "isolation": "Hard", "namespace": "ml-eval"})
    assert errors == {} and req is not None
    assert (req.isolation, req.namespace, req.vram) == ("hard", "ml-eval", 8 * GI)
    _, errors = parse_request({**base, "isolation": "strict"})
    assert errors == {"isolation": "'strict': one of shared, soft, hard, partitioned"}
    _, errors = parse_request({**base, "isolation": "soft", "partition": "1g.10gb"})
    assert errors == {"partition": "a partition template needs isolation partitioned, not soft"}
