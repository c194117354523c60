"""The TensorFusion scheduler's settings, read where the controller reads them.

The controller runs the scheduler with `--scheduler-config /etc/tensor-fusion/scheduler-config.yaml`,
a `KubeSchedulerConfiguration` the Helm chart writes into the key `scheduler-config.yaml` of its
ConfigMap `<release>-config` (label `tensor-fusion.ai/component: config`, in the release's
namespace). The `GPUResourcesFit` plugin's args in the `tensor-fusion-scheduler` profile carry the
three settings placement needs: `maxWorkerPerNode`, `vramWeight` and `tflopsWeight`.

Defaults: with no such ConfigMap (a dump without it, a cluster installed without the chart) the
chart's values, 256 / 0.7 / 0.3. When the plugin's args are present, a field they leave out is 0,
as the plugin decodes it (a weight of 0 drops that resource from the score; `maxWorkerPerNode` 0 is
no cap). Several config ConfigMaps: the first by namespace and name is used, and that is reported.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

SCHEDULER_KEY = "scheduler-config.yaml"
PROFILE = "tensor-fusion-scheduler"
PLUGIN = "GPUResourcesFit"
CHART_MAX_WORKERS = 256
CHART_VRAM_WEIGHT = 0.7
CHART_TFLOPS_WEIGHT = 0.3


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    """`GPUResourcesFit` args; `source` says where they came from (for the console and `describe`)."""

    max_worker_per_node: int = CHART_MAX_WORKERS
    vram_weight: float = CHART_VRAM_WEIGHT
    tflops_weight: float = CHART_TFLOPS_WEIGHT
    source: str = "chart defaults (no scheduler configuration found)"
    problem: str = ""  # why the configuration found could not be used ("" when it could)


DEFAULT = SchedulerSettings()


def _number(args: Mapping[str, Any], key: str) -> float | None:
    v = args.get(key, 0)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _plugin_args(doc: Any) -> Mapping[str, Any] | None:
    """The GPUResourcesFit args of the TensorFusion profile (else of the first profile that has
    them); None when no profile configures the plugin."""
    if not isinstance(doc, Mapping):
        return None
    profiles = [p for p in doc.get("profiles") or () if isinstance(p, Mapping)]
    profiles.sort(key=lambda p: p.get("schedulerName") != PROFILE)
    for p in profiles:
        for pc in p.get("pluginConfig") or ():
            if isinstance(pc, Mapping) and pc.get("name") == PLUGIN:
                args = pc.get("args")
                return args if isinstance(args, Mapping) else {}
    return None


def scheduler_settings(config_maps: Iterable[Mapping[str, Any]]) -> SchedulerSettings:
    """The settings from the first config ConfigMap that carries a scheduler configuration."""
    found = []
    for cm in config_maps:
        data = cm.get("data") or {}
        if isinstance(data, Mapping) and isinstance(data.get(SCHEDULER_KEY), str):
            meta = cm.get("metadata") or {}
            found.append((str(meta.get("namespace", "")), str(meta.get("name", "")), data[SCHEDULER_KEY]))
    if not found:
        return DEFAULT
    found.sort()
    ns, name, text = found[0]
    where = f"ConfigMap {ns}/{name} key {SCHEDULER_KEY}"
    more = f" ({len(found) - 1} more config ConfigMap(s) ignored)" if len(found) > 1 else ""
    return _settings(where, more, text)


@functools.lru_cache(maxsize=16)
def _settings(where: str, more: str, text: str) -> SchedulerSettings:
    """The settings of one configuration text (kept: every refresh builds a state from the same
    ConfigMap, and parsing its YAML cost more than the rest of an unchanged refresh)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return SchedulerSettings(source=f"chart defaults: {where} is not YAML", problem=f"{where}: {exc}")
    args = _plugin_args(doc)
    if args is None:
        return SchedulerSettings(source=f"chart defaults: {where} does not configure {PLUGIN}{more}")
    values = {k: _number(args, k) for k in ("maxWorkerPerNode", "vramWeight", "tflopsWeight")}
    bad = sorted(k for k, v in values.items() if v is None)
    if bad:
        return SchedulerSettings(
            source=f"chart defaults: {where} is not usable",
            problem=f"{where}: {PLUGIN} args {', '.join(bad)} must be numbers",
        )
    return SchedulerSettings(
        max_worker_per_node=int(values["maxWorkerPerNode"] or 0),
        vram_weight=values["vramWeight"] or 0.0,
        tflops_weight=values["tflopsWeight"] or 0.0,
        source=where + more,
    )
