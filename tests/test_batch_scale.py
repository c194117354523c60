"""The batch commands' shortcuts at scale give the same answers as the long way round.

`report`/`plan`/`recommend` read the demo as its generated objects (no acting simulator), the alert
replay renders templates from a pre-split form and memoises fingerprints, the report rounds and
encodes with per-type plans and sorted keys, quantities are parsed once per string and compare
their fractions directly, the autoscale checks reuse a workload's problems while its objects are
the very same dicts, and the autoscaler's history load goes from the simulator's columns to the
histograms. Each is compared here with the reference computation it replaces; the one-shot
commands' garbage collector and exit are checked too.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import math
import re
import subprocess
import sys
import types
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any, Union, get_args, get_origin

import pytest

from tftui import cli
from tftui.engine import alerts as alerts_mod
from tftui.engine import autoscale_checks, autoscale_config, autoscale_recommenders
from tftui.engine.alerts import RULES, format_value, render
from tftui.engine.autoscale_checks import problems
from tftui.engine.autoscale_config import effective_autoscaling
from tftui.engine.autoscale_usage import AutoscaleState
from tftui.engine.histogram import TFLOPS_OPTIONS, VRAM_OPTIONS, DecayingHistogram, Options, go_seconds
from tftui.engine.report import DIGITS, KIND, VERSION, _hints, build_report, parse_window, save, to_json
from tftui.engine.state import ClusterState
from tftui.model import dump as model_dump
from tftui.model import keys
from tftui.model.dump import validate_items
from tftui.model.quantity import Quantity, QuantityError, parse_quantity
from tftui.runtime.whatif import WhatIfCluster
from tftui.sources.sim.acting import ActingSimCluster
from tftui.sources.sim.cluster import DEFAULT_NOW, SimCluster, generate_objects
from tftui.sources.sim.step1 import SimStep1
from tftui.sources.sim.usage import SimMetrics

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("seed", "nodes"), [(7, 40), (3, 90)])
def test_light_demo_is_the_acting_demos_first_snapshot(seed: int, nodes: int) -> None:
    light = SimCluster(seed=seed, nodes=nodes, now=NOW).snapshot()
    acting = ActingSimCluster(seed=seed, nodes=nodes, now=NOW).snapshot()
    assert json.dumps(light) == json.dumps(acting)


@pytest.mark.parametrize("command", [["report", "--json"], ["plan", "--json"], ["recommend", "--json"]])
def test_batch_commands_print_the_same_on_the_acting_demo(
    command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = [command[0], "--demo", "--nodes", "60", *command[1:]]
    assert cli.main(argv) == 0
    light = capsys.readouterr().out
    real_open = cli.open_cluster
    # each subcommand's module looks `open_cluster` up in its own namespace (tftui/cli/<command>.py)
    monkeypatch.setattr(
        f"tftui.cli.{command[0]}.open_cluster", lambda args, acting=True: real_open(args, acting=True)
    )
    assert cli.main(argv) == 0
    acting = capsys.readouterr().out
    assert light and light == acting


def test_one_shot_commands_run_without_the_cyclic_gc_and_restore_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    real_plan = cli.cmd_plan

    def plan(args: Any) -> int:
        seen.append(gc.isenabled())
        return real_plan(args)

    monkeypatch.setattr(cli, "cmd_plan", plan)
    assert gc.isenabled()
    assert cli.main(["plan", "--demo", "--nodes", "4", "--json"]) == 0
    assert seen == [False] and gc.isenabled()
    assert json.loads(capsys.readouterr().out)["pools"]
    assert cli.main(["plan", "--demo", "--nodes", "0"]) == 2  # a user error restores it too
    assert gc.isenabled()


def test_the_executable_prints_what_main_prints_and_ends_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--demo", "--nodes", "4", "--json"]
    assert cli.main(argv) == 0
    expected = capsys.readouterr().out
    done = subprocess.run([sys.executable, "-m", "tftui", *argv], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == expected  # flushed whole before the process ended (errors: test_cli.py)


# -- alerts --------------------------------------------------------------------------------------

_FIELD = re.compile(r"\{\{-?\s*\.([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}")


def _render_by_regex(template: str, row: dict[str, Any]) -> str:
    return _FIELD.sub(lambda m: format_value(row.get(m.group(1))), template)


def test_render_is_the_regex_substitution() -> None:
    templates = [t for r in RULES for t in (r.instance, r.summary, r.description)]
    templates += ["", "no fields", "{{.a}}", "x{{- .a -}}y{{ .b }}{{.a}}", "{{ .missing }} at end {{.b}}"]
    rows: list[dict[str, Any]] = [
        {"a": 1.23456, "b": "text", "node": "n1", "uuid": "g", "Threshold": 90.0},
        {"a": None, "b": 3, "compute": 0.0, "vram": -0.0001},
        {},
    ]
    for r in RULES:  # every column a rule's templates name, with a float value
        rows.append({name: 12.5 for name in _FIELD.findall(r.summary + r.description + r.instance)})
    for template in templates:
        for row in rows:
            assert render(template, row) == _render_by_regex(template, row), template


# -- report rounding and encoding ------------------------------------------------------------------


def _round_reference(value: Any, tp: Any = None) -> Any:
    """The report's rounding as it was written first (typing introspection per value)."""
    if tp is not None and get_origin(tp) in (Union, types.UnionType):
        inner = [a for a in get_args(tp) if a is not type(None)]
        tp = inner[0] if len(inner) == 1 else None
    if tp is float and value is not None and not isinstance(value, bool):
        return round(float(value), DIGITS) + 0.0
    if isinstance(value, float):
        return round(value, DIGITS) + 0.0
    if isinstance(value, tuple):
        args = get_args(tp) if tp is not None and get_origin(tp) is tuple else ()
        return tuple(_round_reference(v, args[0] if args else None) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(
            value,
            **{name: _round_reference(getattr(value, name), hint) for name, hint in _hints(type(value))},
        )
    return value


def _encode_reference(value: Any) -> Any:
    from tftui.model.duration import format_duration

    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, tuple):
        return [_encode_reference(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode_reference(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def test_report_rounding_and_encoding_match_the_reference() -> None:
    objects = generate_objects(7, 60, DEFAULT_NOW)
    state = ClusterState.build(validate_items(objects, "demo"))
    port = SimStep1(SimMetrics(objects, seed=7, now=DEFAULT_NOW))
    report = build_report(port, state, window=parse_window("2h"), now=DEFAULT_NOW, cluster="demo")
    assert report.nodes and report.workloads
    # unrounded values (ints and long floats where floats belong) must come out as the reference says
    third: dict[str, Any] = {f.name: 1 / 3 for f in dataclasses.fields(report.nodes[0]) if f.type == "float"}
    assert third
    raw = dataclasses.replace(report, nodes=tuple(dataclasses.replace(n, **third) for n in report.nodes))
    from tftui.engine.report import _round

    for value in (report, raw):
        assert _round(value) == _round_reference(value)
        assert to_json(value) == _encode_reference(value)
        # the saved text: built with sorted keys and written by pydantic-core, json.dumps's bytes
        doc = {"kind": KIND, "version": VERSION, **_encode_reference(value)}
        assert save(value) == json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# -- quantities and the autoscale checks -----------------------------------------------------------


def test_memoised_quantity_parsing_still_refuses_bad_strings_every_time() -> None:
    assert parse_quantity("1500m") == parse_quantity("1500m") == parse_quantity("1.5")
    for _ in range(2):
        with pytest.raises(QuantityError):
            parse_quantity("lots")


def test_autoscale_checks_reuse_only_unchanged_objects() -> None:
    """A workload's problems follow a change of its worker's annotation (a new dict) and go away
    when it is fixed; every other workload's are what a fresh check gives."""
    sim = WhatIfCluster(generate_objects(7, 40, DEFAULT_NOW), DEFAULT_NOW, seed=7)
    before = sim.state()
    clean = {k: problems(before, k) for k in before.workloads}
    worker = next(w for w in before.workers.values() if w.workload and w.phase == "Running")
    key = f"{worker.namespace}/{worker.workload}"
    assert clean[key] == []
    good = (worker.obj["metadata"].get("annotations") or {})[keys.TFLOPS_REQUEST]

    def patched(value: str) -> ClusterState:
        sim.patch(
            "Pod", worker.name, {"metadata": {"annotations": {keys.TFLOPS_REQUEST: value}}}, worker.namespace
        )
        return sim.state()

    broken = patched("lots")
    assert broken is not before and broken.workloads[key] is not None
    found = problems(broken, key)
    assert found and f"Pod {worker.namespace}/{worker.name}" in found[0] and "lots" in found[0]
    for state in (broken, patched(good)):
        memoised = {k: problems(state, k) for k in state.workloads}
        autoscale_checks._MEMO.clear()
        fresh = {k: autoscale_checks._all(state).get(k, []) for k in state.workloads}
        assert memoised == fresh
    assert problems(sim.state(), key) == []


# -- the generated demo without a second validation ------------------------------------------------


@pytest.mark.parametrize(("seed", "nodes"), [(7, 40), (3, 90), (11, 300)])
def test_the_generated_demo_is_valid_as_it_comes(seed: int, nodes: int) -> None:
    """What lets the batch commands skip validating the demo: the generator's objects pass it."""
    objects = SimCluster(seed=seed, nodes=nodes, now=NOW).snapshot()
    assert SimCluster.generated is True
    assert len(validate_items(objects, "demo").objects) == len(objects)


@pytest.mark.parametrize("command", [["report", "--json"], ["plan", "--json"], ["recommend", "--json"]])
def test_batch_commands_print_the_same_with_the_demo_validated(
    command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = model_dump.validate_items

    def counted(items: Any, source: str = "<objects>") -> Any:
        calls.append(source)
        return real(items, source)

    monkeypatch.setattr(model_dump, "validate_items", counted)  # what `_state` imports when it validates
    argv = [command[0], "--demo", "--nodes", "60", *command[1:]]
    assert cli.main(argv) == 0
    light = capsys.readouterr().out
    assert calls == []  # the generated demo is indexed as it is
    monkeypatch.setattr(SimCluster, "generated", False)
    assert cli.main(argv) == 0
    validated = capsys.readouterr().out
    assert calls == ["demo"]
    assert light and light == validated


# -- effective autoscaling, once per state and workload --------------------------------------------


def test_effective_autoscaling_is_computed_once_per_state_and_view() -> None:
    objects = generate_objects(7, 60, DEFAULT_NOW)
    state = ClusterState.build(validate_items(objects, "demo"))
    assert state.workloads
    for wv in state.workloads.values():
        got = effective_autoscaling(state, wv)
        assert got == autoscale_config._effective(state, wv)
        assert effective_autoscaling(state, wv) is got
    # another state or another view of the same key gives the same; over the very same dicts it is
    # reused (the autoscale loop's states share the unchanged objects), over copies computed afresh
    other = ClusterState.build(validate_items(objects, "demo"))
    key, wv = next(iter(state.workloads.items()))
    first = effective_autoscaling(state, wv)
    assert effective_autoscaling(other, other.workloads[key]) == first
    again = effective_autoscaling(state, dataclasses.replace(wv))
    assert again == first
    copied = ClusterState.build(validate_items(copy.deepcopy(objects), "demo"))
    fresh = effective_autoscaling(copied, copied.workloads[key])
    assert fresh is not first and fresh == first


# -- histograms: moving the reference of an empty histogram ----------------------------------------


@pytest.mark.parametrize("options", [TFLOPS_OPTIONS, VRAM_OPTIONS])
def test_an_empty_histogram_moves_its_reference_as_scaling_its_zeros_would(options: Options) -> None:
    t = go_seconds(NOW)
    for weights in ([0.0] * options.num_buckets, [-0.0] * options.num_buckets):
        fast, slow = DecayingHistogram(options, 86400.0), DecayingHistogram(options, 86400.0)
        fast.weights, slow.weights = list(weights), list(weights)
        fast.min_bucket, fast.max_bucket = slow.min_bucket, slow.max_bucket = 3, options.num_buckets - 2
        fast._shift(t)
        # the reference: `_shift` with the scaling spelled out (every weight times the factor)
        new_ref = math.floor(t / 86400.0 + 0.5) * 86400.0
        factor = 2.0 ** round((slow.ref - new_ref) / 86400.0)
        slow.weights = [w * factor for w in slow.weights]
        slow.total *= factor
        slow._update_min_max()
        slow.ref = new_ref
        assert [math.copysign(1, w) for w in fast.weights] == [math.copysign(1, w) for w in slow.weights]
        assert (fast.weights, fast.total, fast.ref) == (slow.weights, slow.total, slow.ref)
        assert (fast.min_bucket, fast.max_bucket) == (slow.min_bucket, slow.max_bucket)
    one = DecayingHistogram(TFLOPS_OPTIONS, 3600.0)
    one.add(5.0, 1.0, go_seconds(NOW))
    one.add(500.0, 1.0, go_seconds(NOW) + 200 * 3600.0)  # a shift with a weight to scale: not empty
    old = one.weights[TFLOPS_OPTIONS.find_bucket(5.0)]
    assert 0.0 < old < 1e-20 and one.weights[TFLOPS_OPTIONS.find_bucket(500.0)] == 1.0


# -- alert texts: rendered again only when the row changed ------------------------------------------


def test_alert_texts_are_reused_only_for_the_very_same_row(monkeypatch: pytest.MonkeyPatch) -> None:
    rule = next(r for r in RULES if "{{" in r.summary)
    field_ = _FIELD.search(rule.summary)
    assert field_ is not None
    column = field_.group(1)
    base: dict[str, Any] = {c: "x" for c in ("node", "pool", "uuid", "workload", "worker")}
    rows = [1, 1, 1.0, 1.0, 0.0, -0.0, -0.0, True, 2.5, 2.5]  # equal values of other types re-render
    renders: list[Any] = []
    real = alerts_mod.render

    def counted(template: str, row: Any) -> str:
        if template == rule.summary:
            renders.append(row[column])
        return real(template, row)

    monkeypatch.setattr(alerts_mod, "render", counted)
    ev = alerts_mod.AlertEvaluator(RULES)
    start = NOW
    for i, value in enumerate(rows):
        row = {**base, column: value}
        ev.observe(rule.name, start + timedelta(minutes=i), [row])
        (alert,) = ev._tracks[rule.name].alerts.values()
        assert alert.summary == real(rule.summary, {**row, "Threshold": rule.threshold})
    assert [type(v) for v in renders] == [int, float, float, float, bool, float]
    assert renders == [1, 1.0, 0.0, -0.0, True, 2.5]


def test_alert_history_is_the_same_with_every_text_rendered(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = generate_objects(7, 60, DEFAULT_NOW)
    state = ClusterState.build(validate_items(objects, "demo"))

    def run() -> str:
        port = SimStep1(SimMetrics(objects, seed=7, now=DEFAULT_NOW))
        report = build_report(port, state, window=parse_window("1d"), now=DEFAULT_NOW, cluster="demo")
        assert report.alerts
        return json.dumps(to_json(report), sort_keys=True)

    reused = run()
    monkeypatch.setattr(alerts_mod, "_same_row", lambda a, b: False)
    assert run() == reused


# -- the autoscaler's history load from columns ----------------------------------------------------


def _histograms(a: AutoscaleState) -> list[Any]:
    """Everything a history load sets, in the dicts' order."""

    def h(x: DecayingHistogram) -> tuple[Any, ...]:
        return (x.weights, x.total, x.ref, x.min_bucket, x.max_bucket, x.half_life)

    return [
        (key, w.samples, w.tf_first, w.vram_first, w.vram_samples, h(w.tf), h(w.vram),
         [(pod, s.last_tf, s.last_vram, s.window_end, s.peak) for pod, s in w.samplers.items()])
        for key, w in a.workloads.items()
    ]  # fmt: skip


@pytest.mark.parametrize("hours", [2, 20])
def test_history_load_from_columns_is_the_loop_over_groups(hours: int) -> None:
    objects = generate_objects(7, 60, DEFAULT_NOW)
    state = ClusterState.build(validate_items(objects, "demo"))
    metrics = SimMetrics(objects, seed=7, now=DEFAULT_NOW)
    got = []
    for columns in (False, True):
        a = AutoscaleState()
        a.configure(state)
        q = a.history_query(DEFAULT_NOW - timedelta(hours=hours), DEFAULT_NOW)
        assert q is not None
        if columns:
            n = a.add_pod_bucket_arrays(q, metrics.usage_histogram_arrays(q))
        else:
            n = a.add_pod_buckets(q, metrics.usage_histograms(q))
        got.append((n, _histograms(a)))
    assert got[0][0] > 0 and len(got[0][1]) > 100
    assert repr(got[0]) == repr(got[1])  # the same values of the same types (a count stays an int)


def test_quantity_comparisons_are_the_fractions_comparisons() -> None:
    import operator
    import random

    rng = random.Random(5)
    texts = ["0", "1n", "-1n", "100m", "1", "1.5", "1500m", "1Gi", "1073741824", "1G", "-2Ki", "999999999n",
             "1e3", "1k", "12345678901234567890", "0.5Ei"]  # fmt: skip
    qs = [parse_quantity(t) for t in texts]
    qs += [
        Quantity(Fraction(rng.randrange(-(10**12), 10**12), rng.choice((1, 2, 5, 1000, 10**9))))
        for _ in range(60)
    ]
    for a in qs:
        for b in qs:
            for op in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge):
                assert op(a, b) == op(a.amount, b.amount), (op, a, b)


def test_memoised_scaling_is_the_computation_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_scale` answers from its memo what `_scale_once` computes, text included: quantities of one
    value in two formats are two keys (their messages differ), an unchanged answer is the caller's
    own quantities, and a full memo starts again."""
    monkeypatch.setattr(autoscale_recommenders, "_SCALED", {})
    monkeypatch.setattr(autoscale_recommenders, "_SCALED_MAX", 64)
    gi = 1 << 30
    tfs = [parse_quantity(x) for x in ("10", "10000m", "0", "250", "1500m")]
    vrs = [parse_quantity(x) for x in ("16Gi", str(16 * gi), "0", "1Gi", "80Gi")]
    cases: list[tuple[Any, ...]] = []
    for est, qos in (
        ((3, 12, 40), "low"),
        ((9, 10, 11), "high"),
        ((0, 0, 0), "critical"),
        ((12, 12, 900), "medium"),
    ):
        for cur in ((tfs[0], tfs[3]), (tfs[1], tfs[3]), (tfs[2], tfs[2]), (tfs[4], tfs[0])):
            for orig in ((tfs[0], tfs[3]), (tfs[1], tfs[1])):
                for ratios in ((0.1, 10.0), (0.5, 1.0), (0.0, 0.0)):
                    cases.append(("Compute", est, qos, cur, orig, ratios))
        vest = (est[0] * gi, est[1] * gi, est[2] * gi)
        for cur in ((vrs[0], vrs[4]), (vrs[1], vrs[4]), (vrs[3], vrs[3]), (vrs[2], vrs[0])):
            cases.append(("VRAM", vest, qos, cur, (vrs[0], vrs[4]), (0.2, 5.0)))
    for _ in range(2):  # computed, then (mostly) from the memo
        for case in cases:
            got = autoscale_recommenders._scale(*case)
            want = autoscale_recommenders._scale_once(*case)
            assert (str(got[0]), got[0].format, str(got[1]), got[1].format, got[2]) == (
                str(want[0]), want[0].format, str(want[1]), want[1].format, want[2]
            )  # fmt: skip
            assert (got[0] is case[3][0] and got[1] is case[3][1]) == (
                want[0] is case[3][0] and want[1] is case[3][1]
            )
    assert any(autoscale_recommenders._scale_once(*c)[2] for c in cases)  # some scale, some do not
    assert any(not autoscale_recommenders._scale_once(*c)[2] for c in cases)


def test_absent_configs_parse_to_the_defaults() -> None:
    """No `autoSetResources` / `externalScaler` parses to one shared instance equal to the defaults."""
    from tftui.engine.autoscale_config import AutoConfig
    from tftui.engine.autoscale_external import ExternalScalerConfig

    for raw in (None, "text", 3):
        assert AutoConfig.parse(raw) == AutoConfig() and AutoConfig.parse(raw) is AutoConfig.parse(None)  # type: ignore[arg-type]
    assert AutoConfig.parse({}) == AutoConfig(present=True)
    nothing: list[dict[str, Any] | None] = [None, {}]
    for empty in nothing:
        got = ExternalScalerConfig.parse(empty, "ns")
        assert got == ExternalScalerConfig() and got is ExternalScalerConfig.parse(None, "other")
    assert ExternalScalerConfig.parse({"enable": True, "url": "http://x"}, "ns").enable


def _max_allowed_reference(state: ClusterState, wv: Any) -> tuple[int, int] | None:
    """`max_allowed` as it was written before its one-worker shortcut."""
    per_gpu: dict[str, list[Any]] = {}
    for key in wv.workers:
        w = state.workers.get(key)
        if w is None or w.terminating:
            continue
        for g in w.gpu_ids:
            if g in state.gpus:
                per_gpu.setdefault(g, []).append(w)
    if not per_gpu:
        return None
    best: tuple[int, int] | None = None
    for g, ws in per_gpu.items():
        avail = state.gpus[g].available
        t = int(avail.tflops + sum(w.request.tflops for w in ws)) // len(ws)
        v = int(avail.vram + sum(w.request.vram for w in ws)) // len(ws)
        best = (t, v) if best is None else (min(best[0], t), min(best[1], v))
    return best


@pytest.mark.parametrize("seed", [7, 8, 11])
def test_max_allowed_is_the_reference_on_every_workload(seed: int) -> None:
    state = ClusterState.build(generate_objects(seed, 120, DEFAULT_NOW))
    shared = 0
    for wv in state.workloads.values():
        assert autoscale_recommenders.max_allowed(state, wv) == _max_allowed_reference(state, wv), wv.key
        on_gpu = [g for k in wv.workers if k in state.workers for g in state.workers[k].gpu_ids]
        shared += len(on_gpu) != len(set(on_gpu))
    assert shared  # a GPU with several workers of one workload is covered too
