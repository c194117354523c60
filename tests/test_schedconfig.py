"""Scheduler settings read from the chart's config ConfigMap (`scheduler-config.yaml`).

Upstream: the chart writes `.Values.schedulerConfig` into ConfigMap `<release>-config` (label
`tensor-fusion.ai/component: config`), the controller mounts it as `--scheduler-config` and the
GPUResourcesFit plugin decodes its args into `GPUFitConfig` (`NewWithDeps`), which feeds the
allocator's `maxWorkerPerNode` and the score's `normalizeScore` weights. The ConfigMap here is built
as the chart renders it.
"""

from __future__ import annotations

import yaml

from tests.fixtures.engine_builders import GI, build, gpu, gpunode, node, pool, worker
from tftui.engine.fit import Request
from tftui.engine.placement import place, scheduler_weights
from tftui.model.schedconfig import DEFAULT, scheduler_settings

P = "p"


def chart_config_map(
    args: dict[str, object] | None, *, name: str = "tensor-fusion-config", text: str | None = None
) -> dict[str, object]:
    """The chart's `templates/config.yaml`: dynamic config and the KubeSchedulerConfiguration."""
    plugin_config: list[dict[str, object]] = [{"name": "GPUNetworkTopologyAware", "args": {"mode": "soft"}}]
    if args is not None:
        plugin_config.insert(0, {"name": "GPUResourcesFit", "args": args})
    sched = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "tensor-fusion-scheduler",
                "plugins": {"score": {"enabled": [{"name": "GPUResourcesFit", "weight": 5}]}},
                "pluginConfig": plugin_config,
            }
        ],
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": "tensor-fusion-sys",
            "labels": {"tensor-fusion.ai/component": "config"},
        },
        "data": {
            "config.yaml": "metricsTTL: 30d\n",
            "scheduler-config.yaml": text if text is not None else yaml.safe_dump(sched),
        },
    }


def test_chart_values_are_read() -> None:
    s = scheduler_settings(
        [chart_config_map({"maxWorkerPerNode": 32, "vramWeight": 0.4, "tflopsWeight": 0.6})]
    )
    assert (s.max_worker_per_node, s.vram_weight, s.tflops_weight) == (32, 0.4, 0.6)
    assert s.source == "ConfigMap tensor-fusion-sys/tensor-fusion-config key scheduler-config.yaml"


def test_defaults_when_absent_and_zero_when_the_args_leave_a_field_out() -> None:
    """No ConfigMap: the chart's 256 / 0.7 / 0.3. Args without a field: the plugin's zero value."""
    assert scheduler_settings([]) == DEFAULT
    assert scheduler_settings([chart_config_map(None)]).max_worker_per_node == 256
    s = scheduler_settings([chart_config_map({"vramWeight": 1})])
    assert (s.max_worker_per_node, s.vram_weight, s.tflops_weight) == (0, 1.0, 0.0)


def test_a_broken_configuration_is_a_warning_and_the_defaults() -> None:
    st = build([pool(P), chart_config_map(None, text="profiles: [\n")])
    assert st.scheduler.max_worker_per_node == 256 and st.scheduler.problem
    assert any(w.ref == "scheduler configuration" for w in st.warnings)
    bad = scheduler_settings([chart_config_map({"maxWorkerPerNode": "many"})])
    assert bad.problem.endswith("GPUResourcesFit args maxWorkerPerNode must be numbers")


def cluster(cm: dict[str, object] | None = None) -> list[dict[str, object]]:
    """Two nodes: n-busy's GPU is half used in TFLOPS only, n-vram's a quarter used in VRAM only."""
    objs: list[dict[str, object]] = [pool(P)]
    for n in ("n-busy", "n-vram"):
        objs += [node(n, gpus=1), gpunode(n, P), gpu(f"{n}-gpu-0", n, tflops=100, vram="40Gi", pool=P)]
    objs += [
        worker("w1", ["n-busy-gpu-0"], node="n-busy", tflops=50, vram="1Gi"),
        worker("w2", ["n-vram-gpu-0"], node="n-vram", tflops=1, vram="10Gi"),
    ]
    return [*objs, cm] if cm else objs


def test_placement_weights_come_from_the_cluster() -> None:
    """Upstream normalizeScore: vram × vramWeight + tflops × tflopsWeight. CompactFirst prefers the
    node whose used share scores higher: VRAM-weighted, n-vram (25 % of VRAM used); TFLOPS-weighted,
    n-busy (50 % of TFLOPS used)."""
    r = Request(vram=GI, tflops=1)
    assert place(build(cluster()), P, r, mode="CompactFirst").node == "n-vram"  # chart 0.7 / 0.3
    tflops_heavy = chart_config_map({"maxWorkerPerNode": 256, "vramWeight": 0.1, "tflopsWeight": 0.9})
    st = build(cluster(tflops_heavy))
    assert scheduler_weights(st).tflops == 0.9
    assert place(st, P, r, mode="CompactFirst").node == "n-busy"


def test_max_worker_per_node_comes_from_the_cluster() -> None:
    """Upstream CheckQuotaAndFilter's maxWorkerPerNode: with a cap of 1 both nodes are full."""
    st = build(cluster(chart_config_map({"maxWorkerPerNode": 1, "vramWeight": 0.7, "tflopsWeight": 0.3})))
    p = place(st, P, Request(vram=GI, tflops=1))
    assert p.node is None and p.rejected == {"max-workers": 2}
    assert p.reason == "no node left in pool p: nodes with valid GPUs are at maxWorkerPerNode (1)"
