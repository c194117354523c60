"""The step-1 report: assembly, canonical JSON (save/load), the verify step (M6), and `tftui report`.

Pure tests use a small in-test double of `Step1Port` (hand-made `Step1`, alert rows from a function);
the CLI tests run the real command on the embedded demo (8 nodes, to stay quick).
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import upstream_demo as demo
from tests.fixtures.engine_builders import GI, MI, NOW, build, host, pool, worker, workload
from tftui.engine.report import (
    Report,
    ReportError,
    assemble,
    build_report,
    load,
    parse_window,
    save,
)
from tftui.engine.reportverify import compare
from tftui.engine.state import ClusterState
from tftui.model.metrics import (
    AlertResult,
    AlertRow,
    GPUUsageSummary,
    NoData,
    NodeAllocation,
    Step1,
    WorkloadRequest,
    WorkloadUsage,
    history_by_step,
)
from tftui.reportout import render_csv, render_report, render_verification

DAY = timedelta(days=1)
G = demo.G
Answer = Callable[[str, datetime], "list[AlertRow] | NoData"]


class FakeStep1Port:
    """A test double of `Step1Port`: a fixed `Step1`, alert rows from `answer(rule, now)`."""

    def __init__(self, s: Step1, answer: Answer | None = None) -> None:
        self.s = s
        self.answer = answer or (lambda rule, now: [])

    def describe(self) -> str:
        return "fake"

    def step1(
        self, window: timedelta, now: datetime, gpu_capacity: Mapping[str, tuple[float, float]]
    ) -> Step1:
        assert (window, now) == (self.s.window, self.s.now)
        return self.s

    def alert_rows(self, rule: str, now: datetime) -> list[AlertRow]:
        result = self.answer(rule, now)
        if isinstance(result, NoData):
            raise result
        return result

    def alert_history(self, rule: str, times: Sequence[datetime]) -> list[AlertResult]:
        return history_by_step(self.alert_rows, rule, times)


def throttle_no_data(rule: str, now: datetime) -> list[AlertRow] | NoData:
    if rule in ("WorkerTFlopsThrottled", "WorkerVRAMSwitchCountIncreasing"):
        return NoData(f"{rule}: column never written")
    if rule == "EmptyGPU":
        return [{"node": "gpu-a100-2"}]
    return []


def demo_step1() -> Step1:
    return Step1(
        now=NOW,
        window=DAY,
        nodes=(
            NodeAllocation("gpu-a100-1", demo.POOL, 19.23, 23.75, 1440),
            NodeAllocation("gpu-a100-2", demo.POOL, 16.03, 18.75, 1440),
            NodeAllocation("gpu-h100-1", demo.POOL, 40.44, 87.89, 1440),
        ),
        gpus=(
            GPUUsageSummary("gpu-a100-1", G[0], 6.0, None, 9663676416, 1440),
            GPUUsageSummary("gpu-h100-1", G[4], 78.0, None, 73014444032, 1440),
        ),
        workload_requests=(WorkloadRequest("ml-serving", "llama3-8b-infer", 60.0, 20 * GI, 1.0, 2, 2880),),
        workload_usage=(WorkloadUsage("ml-serving", "llama3-8b-infer", 12.48, 12.48, 6442450944, 2880),),
        missing=("tf_worker_usage.compute_tflops", "tf_gpu_usage.memory_percentage"),
    )


def demo_report() -> Report:
    port = FakeStep1Port(demo_step1(), throttle_no_data)
    return build_report(port, build(demo.objects()), window=DAY, now=NOW, cluster="upstream demo")


# -- assembly ------------------------------------------------------------------------------------


def test_pool_row_of_the_upstream_demo() -> None:
    r = demo_report()
    (p,) = r.pools
    assert (p.name, p.nodes, p.gpus, p.placement_mode) == (demo.POOL, 3, 6, "NodeCompactGPULowLoad")
    assert p.tflops_capacity == 3226.0 and p.vram_capacity_bytes == 490798 * MI
    # window allocation weighted by node capacity; the snapshot's as published (31.62 % / 43.40 %)
    assert p.tflops_allocated_pct == round((19.23 * 624 + 16.03 * 624 + 40.44 * 1978) / 3226, 4)
    vram_caps = (160 * 1024, 160 * 1024, 163118)
    assert p.vram_allocated_pct == round(
        sum(v * c for v, c in zip((23.75, 18.75, 87.89), vram_caps, strict=True)) / sum(vram_caps), 4
    )
    assert p.tflops_allocated_now_pct == round(1020 / 3226 * 100, 4) == 31.6181
    assert round(p.vram_allocated_now_pct or 0, 2) == 43.40
    assert p.compute_used_pct == round((6.0 * 312 + 78.0 * 989) / (312 + 989), 4)
    assert p.wasted_gpu_hours == round(8.4 + 1.575 * 48, 4)  # llama + the two fragmented A100 nodes


def test_alerts_and_rules_in_the_report() -> None:
    r = demo_report()
    assert [(a.rule, a.instance, a.node, a.pool, a.open_start) for a in r.alerts] == [
        ("EmptyGPU", "gpu-a100-2", "gpu-a100-2", demo.POOL, True)
    ]
    (empty,) = r.alerts
    assert (empty.starts_at, empty.fired_at) == (NOW - timedelta(hours=1), NOW - timedelta(minutes=55))
    states = {x.rule: x.state for x in r.rules}
    assert states["WorkerTFlopsThrottled"] == "no-data" and states["IdleGPU"] == "ok"
    assert r.missing == ("tf_gpu_usage.memory_percentage", "tf_worker_usage.compute_tflops")
    assert (r.source, r.cluster, r.window, r.alert_span) == ("fake", "upstream demo", DAY, timedelta(hours=1))


def test_save_load_round_trip_is_exact_and_canonical() -> None:
    r = demo_report()
    text = save(r)
    assert load(text) == r
    assert save(load(text)) == text
    doc = json.loads(text)
    assert (doc["kind"], doc["version"], doc["now"], doc["window"]) == (
        "tftui.step1-report",
        1,
        "2026-11-30T12:00:00Z",
        "24h0m0s",
    )
    assert list(doc) == sorted(doc) and text.endswith("}\n")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: "not json {", "not JSON (Expecting value at line 1)"),
        (
            lambda d: json.dumps({**d, "kind": "List"}),
            "not a tftui report (expected kind 'tftui.step1-report'",
        ),
        (lambda d: json.dumps({**d, "version": 2}), "report format version 2 is not supported (expected 1)"),
        (
            lambda d: json.dumps({**d, "nodes": [{k: v for k, v in d["nodes"][0].items() if k != "name"}]}),
            "report.nodes[0].name: required field is missing",
        ),
        (lambda d: json.dumps({**d, "now": "yesterday"}), "report.now: not an RFC 3339 time: 'yesterday'"),
        (lambda d: json.dumps({**d, "window": "1d"}), "report.window: invalid duration '1d'"),
        (
            lambda d: json.dumps({**d, "pools": [{**d["pools"][0], "nodes": "3"}]}),
            "report.pools[0].nodes: expected an integer, got '3'",
        ),
        (
            lambda d: json.dumps({**d, "findings": [{**d["findings"][0], "cls": "bogus"}]}),
            "report.findings[0].cls: 'bogus' is not one of over-request",
        ),
    ],
)
def test_load_names_the_bad_field(mutate: Callable[[dict[str, Any]], str], message: str) -> None:
    doc = json.loads(save(demo_report()))
    with pytest.raises(ReportError) as exc:
        load(mutate(doc))
    assert str(exc.value).startswith(message)


# -- verify --------------------------------------------------------------------------------------


def two_node_cluster(with_n2: bool) -> ClusterState:
    objs = [
        pool("c-gpu", cluster="c"),
        *host("n1", "c-gpu"),
        workload("app", pool="c-gpu", tflops=100, vram="20Gi"),
        worker("app-w", ["n1-gpu-0"], workload="app", pool="c-gpu", tflops=100, vram="20Gi"),
    ]
    if with_n2:
        objs += host("n2", "c-gpu")
    return build(objs)


def throttled(rule: str, now: datetime) -> list[AlertRow] | NoData:
    if rule == "WorkerTFlopsThrottled":
        return [
            {"workload": "app", "worker": "uid-1", "uuid": "n1-gpu-0", "node": "n1", "throttled_increase": 2}
        ]
    return []


def verify_reports(after_alerts: Answer) -> tuple[Report, Report]:
    before = build_report(
        FakeStep1Port(
            Step1(NOW - DAY, DAY, nodes=(NodeAllocation("n1", "c-gpu", 50.0, 40.0, 1440),
                                         NodeAllocation("n2", "c-gpu", 0.0, 0.0, 1440))),
            throttle_no_data,
        ),
        two_node_cluster(True), window=DAY, now=NOW - DAY, cluster="c",
    )  # fmt: skip
    after = build_report(
        FakeStep1Port(
            Step1(NOW, DAY, nodes=(NodeAllocation("n1", "c-gpu", 60.0, 50.0, 1440),)), after_alerts
        ),
        two_node_cluster(False),
        window=DAY,
        now=NOW,
        cluster="c",
    )
    return before, after


def test_compare_node_count_down_allocation_up_throttling_quiet() -> None:
    before, after = verify_reports(lambda rule, now: [])
    v = compare(before, after)
    assert [(c.name, c.result, c.detail) for c in v.checks] == [
        ("allocation ratio of remaining nodes up", "pass", "TFLOPS 25.0% → 60.0%, VRAM 20.0% → 50.0%"),
        ("node count down", "pass", "2 → 1 GPU nodes"),
        ("WorkerTFlopsThrottled not firing", "pass", "not firing"),
    ]
    (p,) = v.pools
    assert (p.nodes_before, p.nodes_after, p.tflops_before, p.tflops_after) == (2, 1, 25.0, 60.0)
    assert (p.throttled_before, p.throttled_after) == (None, 0)  # before: no data, after: none firing
    assert [(n.node, n.change, n.tflops_before, n.tflops_after) for n in v.nodes] == [
        ("n1", "kept", 50.0, 60.0),
        ("n2", "removed", 0.0, None),
    ]
    text = render_verification(v)
    assert text.splitlines()[0] == (
        "== verify: before 2026-11-29T12:00:00Z (window 1d) → after 2026-11-30T12:00:00Z (window 1d)"
    )
    assert "n2    c-gpu  removed  0.0% → —" in text


def test_compare_fails_when_throttling_fires_and_is_unknown_without_data() -> None:
    before, after = verify_reports(throttled)
    v = compare(before, after)
    check = v.checks[2]
    assert (check.result, check.detail) == (
        "fail",
        "firing for 1 worker(s) (uid-1-n1-gpu-0): requests or limits were lowered too far",
    )
    assert v.pools[0].throttled_after == 1
    unknown = compare(after, before).checks
    assert [c.result for c in unknown] == ["fail", "fail", "unknown"]
    assert unknown[2].detail == "no data: WorkerTFlopsThrottled: column never written"


def test_compare_survives_a_save_load_cycle() -> None:
    before, after = verify_reports(lambda rule, now: [])
    assert compare(load(save(before)), load(save(after))) == compare(before, after)


# -- rendering -----------------------------------------------------------------------------------


def test_text_report_sections_and_figures() -> None:
    text = render_report(demo_report())
    lines = text.splitlines()
    assert lines[0] == "Step-1 report — metrics fake, cluster upstream demo"
    assert lines[1] == (
        "window 1d: 2026-11-29T12:00:00Z → 2026-11-30T12:00:00Z; alerts replayed over the last 1h0m0s"
    )
    assert lines[2] == "no data in: tf_gpu_usage.memory_percentage, tf_worker_usage.compute_tflops"
    assert lines[4] == (
        "wasted over 1d: 84.0 GPU-h ($158.76) = requests above usage 8.4 GPU-h ($15.88) + capacity nobody "
        "requested 75.6 GPU-h ($142.88)"
    )
    heads = [line for line in lines if line.startswith("== ")]
    assert [h.split(" (")[0] for h in heads] == [
        "== pools",
        "== nodes",
        "== GPUs",
        "== workloads",
        "== diagnosis",
        "== alerts firing at 2026-11-30T12:00:00Z",
        "== alert rules",
    ]
    assert "  1. node gpu-a100-2 — fragmentation — 39.0 GPU-h ($73.71)" in lines
    assert any(
        line.startswith(
            "ml-serving/llama3-8b-infer  demo-shared  2×1      60.0        12.5  12.5  20.8%  20.0Gi"
        )
        for line in lines
    )
    assert any("≤ 2026-11-30T11:05:00Z  Empty GPU without any workload, Node gpu-a100-2" in x for x in lines)


def test_csv_has_one_table_per_section() -> None:
    before, after = verify_reports(lambda rule, now: [])
    text = render_csv(before, compare(before, after))
    blocks = text.split("\n\n")
    names = []
    for block in blocks:
        rows = list(csv.reader(io.StringIO(block)))
        assert rows[0][0] == "section"
        body = {r[0] for r in rows[1:]}
        assert len(body) <= 1
        names.append(next(iter(body), None))
    assert names == ["report", "pool", "node", "gpu", "workload", "finding", "alert", "rule", "check",
                     "pool_change", "node_change"]  # fmt: skip
    node_rows = [r for r in csv.reader(io.StringIO(text)) if r and r[0] == "node"]
    assert node_rows[0][:7] == ["node", "n1", "c-gpu", "2", "0", "true", "50.0"]
    (finding,) = [r for r in csv.reader(io.StringIO(text)) if r and r[0] == "finding"]
    assert finding[1:7] == ["1", "node", "n2", "c-gpu", "empty-node", "48.0"]


def test_parse_window_accepts_go_durations_and_days() -> None:
    assert parse_window("1d") == DAY
    assert parse_window("7d") == 7 * DAY
    assert parse_window(" 1d12h ") == timedelta(hours=36)
    assert parse_window("90m") == timedelta(minutes=90)
    for bad in ("0", "-1h", "1x", "d", "1.5d", "", "1d-25h"):
        with pytest.raises(ValueError):
            parse_window(bad)


# -- the command ---------------------------------------------------------------------------------


def tftui(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tftui", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


DEMO = ("report", "--demo", "--nodes", "8")


def test_cli_report_json_is_byte_identical_and_save_writes_the_same(tmp_path: Path) -> None:
    saved = tmp_path / "before.json"
    a = tftui(*DEMO, "--json", "--save", str(saved))
    assert a.returncode == 0, a.stderr
    b = tftui(*DEMO, "--json")
    assert b.returncode == 0, b.stderr
    assert a.stdout == b.stdout == saved.read_text()
    r = load(a.stdout)
    assert r.source == "demo (simulated metrics)" and r.cluster == "demo"
    assert {p.name for p in r.pools} == {"demo-inference", "demo-training", "demo-dev", "demo-isolation"}
    assert r.rule("WorkerTFlopsThrottled") is not None and r.rule("WorkerTFlopsThrottled").state == "no-data"  # type: ignore[union-attr]


def test_cli_report_text_then_compare(tmp_path: Path) -> None:
    saved = tmp_path / "before.json"
    first = tftui(*DEMO, "--save", str(saved))
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0] == "Step-1 report — metrics demo (simulated metrics), cluster demo"
    for head in (
        "== pools",
        "== nodes",
        "== GPUs",
        "== workloads",
        "== diagnosis",
        "== alerts firing at",
        "== alert rules",
    ):
        assert any(line.startswith(head) for line in lines), head
    assert "no data: WorkerTFlopsThrottled" in first.stdout
    again = tftui(*DEMO, "--window", "12h", "--compare", str(saved))
    assert again.returncode == 0, again.stderr
    verify = again.stdout[again.stdout.index("== verify") :].splitlines()
    assert verify[0] == (
        "== verify: before 2026-11-30T12:00:00Z (window 1d) → after 2026-11-30T12:00:00Z (window 12h0m0s)"
    )
    assert verify[3].startswith("node count down") and "11 → 11 GPU nodes" in verify[3]
    assert " ".join(verify[4].split()).startswith("WorkerTFlopsThrottled not firing unknown no data:")
    as_json = tftui(*DEMO, "--json", "--compare", str(saved))
    doc = json.loads(as_json.stdout)
    assert set(doc) == {"report", "verify"} and len(doc["verify"]["checks"]) == 3
    assert doc["report"]["kind"] == "tftui.step1-report"


def dump_file(tmp_path: Path) -> Path:
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": demo.objects()}))
    return path


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (("--window", "1x"), {}, "tftui: --window: invalid duration '1x': unknown unit \"x\""),
        (("--window", "0s"), {}, "tftui: --window: must be positive, got '0s'"),
        (
            ("--compare", "/nonexistent/before.json"),
            {},
            "tftui: --compare /nonexistent/before.json: cannot read",
        ),
        (("--compare", "DUMP"), {}, "tftui: --compare DUMP: not a tftui report"),
        (("--from", "DUMP"), {"TFTUI_METRICS_DSN": ""}, "tftui: no metrics source: give --metrics-dsn DSN"),
        (
            (
                "--from",
                "DUMP",
                "--metrics-dsn",
                "host=127.0.0.1 port=1 dbname=public user=x connect_timeout=2",
            ),
            {},
            "tftui: ",
        ),
    ],
)
def test_cli_report_bad_input_exits_2_with_one_line(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], expected: str
) -> None:
    dump = str(dump_file(tmp_path))
    args = tuple(dump if a == "DUMP" else a for a in args)
    out = tftui("report", *args, env=env)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(expected.replace("DUMP", dump)), lines[0]


def test_a_report_without_alert_evaluation_says_so() -> None:
    r = assemble(demo_step1(), build(demo.objects()), None, source="s", cluster="c")
    assert {x.state for x in r.rules} == {"not-evaluated"} and len(r.rules) == 15
    assert r.alerts == () and r.alert_span == timedelta(0)
    check = compare(r, r).checks[2]
    assert (check.result, check.detail) == ("unknown", "alerts were not evaluated")
    assert "alerts replayed" not in render_report(r).splitlines()[1]
