"""Property: whatever one edits into a valid dump, every command answers exit 0, or exit 2 with one line.

Hypothesis mutates a small demo dump (`tftui dump --demo --nodes 2`): values of the wrong type,
hostile quantities (`1e999`, `NaN`, `10Ei`), durations, cron expressions, time zones, times at the
ends of the calendar, TensorFusion annotations and nested structures, at fields chosen at random
and at the fields the engine reads. For each mutated dump `plan` (with autoscale from the suite's
PostgreSQL), `place`, `report`, `simulate --duration 1h`, `dump` and the console's first load
(`DumpCluster` + `ui.load.data.load` + the main tables) must either succeed, or exit 2 with exactly one
stderr line that names the object and the field; never a traceback, and never more than a bounded
amount of memory (the address space is limited while the examples run, so a blow-up fails the
test with MemoryError instead of taking the host down).

The daemon reads no dump: a live cluster hands it the objects the API server stored, never
validated by tftui. Its property takes the mutated objects a cluster could store — each valid, or
refused only for values of the right types (`dump.value_problem`: `1e999`, year 1, `"NaN"`; a
wrong type or a coerced value is a shape no schema would store) — as they are, and one
tick of its loop (`Runtime.tick_due`: every pool and an autoscale run against the suite's
PostgreSQL, dry-run) must neither raise nor fail a pool or the autoscale run as a whole: a bad
value is a warning on its object, never an exception that stops every pool's reconcile.

The console on a live cluster reads the objects as stored too: an object our schema refuses only
for its values is kept as stored and listed with the warnings. Its property: every mutated set of
objects either loads and renders the main tables (the operations planned without error), or the
refresh fails with the one-line message of a wrongly shaped object, as it did for every refusal.

The profile is small and derandomized so the suite stays fast and the same examples run on every
machine; `TFTUI_PROPERTY_EXAMPLES=1000` searches longer with random examples.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import resource
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from tests.pg import PgServer, database, load_sim
from tftui.cli import main
from tftui.model.dump import DumpError, value_problem
from tftui.runtime.loops import Runtime
from tftui.sources.dumpfile import DumpCluster
from tftui.sources.sim.cluster import generate_objects
from tftui.sources.sim.usage import SimMetrics
from tftui.ui.load.data import ClusterLoadError, load
from tftui.ui.render.nodeviews import gpus_table, nodes_table
from tftui.ui.render.views import Gauges, layout_for, pools_table
from tftui.ui.render.workviews import workloads_table

JSON = dict[str, Any]
NOW = datetime.now(UTC).replace(microsecond=0)
STAMP = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
BASE: list[JSON] = generate_objects(7, 2, NOW)
MEMORY_HEADROOM = 3 << 30  # address space the examples may add to the process
EXAMPLES_ENV = "TFTUI_PROPERTY_EXAMPLES"  # set (e.g. 1000) to search longer, with random examples
EXAMPLES = int(os.environ.get(EXAMPLES_ENV) or 30)

#: a one-line answer naming the object and field: `… Kind ns/name (item N): field: why` or
#: `… GPUPool name: field: why` (simulate's zone check); the field is a dotted/indexed path
NAMES_FIELD = re.compile(r"^tftui: .*(\(item \d+\)|GPUPool [^ :]+): ([A-Za-z][\w.\[\]/-]*|<object>): .+")

QUANTITIES = [
    "1e999",
    "-1e999",
    "10Ei",
    "1e19",
    "9E",
    "NaN",
    "Inf",
    "-1",
    "0",
    "",
    "12Gx",
    "0.0000000001",
    "1.5Gi",
]
DURATIONS = ["0s", "-5m", "1000000h", "5x", "1d", "PT5M", "9223372036854775807ns"]
CRONS = ["0 0 30 2 *", "CRON_TZ=America 0 9 * * *", "TZ=../../etc/passwd 0 * * * *", "* * * * * *", "@daily",
         "61 25 * * *", "CRON_TZ=Mars/Base 0 1 * * *", "0 3 * * *"]  # fmt: skip
ZONES = ["America", "Mars/Base", "../../etc/passwd", "/etc/localtime", "UTC\x00", "", " ", "Asia/Shanghai"]
TIMES = ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "yesterday", "2026-02-30T00:00:00Z",
         "0001-01-01T00:00:00+14:00", "1970-01-01T00:00:00Z", ""]  # fmt: skip
SCALARS: list[Any] = [
    True,
    False,
    None,
    0,
    -1,
    2**63,
    10**400,
    1e308,
    float("nan"),
    float("inf"),
    [],
    {},
    "[/]",
    "\x1b]0;x\x07",
]
TF = "tensor-fusion.ai"
Q, D, C, Z, T, A = "quantity", "duration", "cron", "zone", "time", "any"
#: (kind, path, what it holds) the engine reads; the mutation sets a hostile value of that sort there
TARGETS: list[tuple[str, tuple[str, ...], str]] = [
    ("Pod", ("metadata", "annotations", f"{TF}/tflops-request"), Q),
    ("Pod", ("metadata", "annotations", f"{TF}/vram-limit"), Q),
    ("Pod", ("metadata", "annotations", f"{TF}/compute-percent-request"), Q),
    ("Pod", ("metadata", "annotations", f"{TF}/gpu-ids"), A),
    ("Pod", ("metadata", "annotations", f"{TF}/defrag-evicted"), T),
    ("Pod", ("metadata", "deletionTimestamp"), T),
    ("Pod", ("metadata", "creationTimestamp"), T),
    ("GPU", ("status", "capacity", "tflops"), Q),
    ("GPU", ("status", "available", "vram"), Q),
    ("GPUNode", ("spec", "costPerHour"), Q),
    ("GPUNode", ("metadata", "labels", f"{TF}/do-not-disrupt"), A),
    ("GPUPool", ("spec", "nodeManagerConfig", "nodeCompaction", "period"), D),
    ("GPUPool", ("spec", "nodeManagerConfig", "nodeCompaction", "defrag", "timezone"), Z),
    ("GPUPool", ("spec", "nodeManagerConfig", "nodeCompaction", "defrag", "schedule"), C),
    ("GPUPool", ("spec", "nodeManagerConfig", "nodeCompaction", "defrag", "maxDuration"), D),
    ("GPUPool", ("spec", "capacityConfig", "warmResources", "tflops"), Q),
    ("GPUPool", ("status", "lastDefragTime"), T),
    ("GPUPool", ("metadata", "annotations", f"{TF}/manual-compaction"), T),
    ("TensorFusionWorkload", ("spec", "resources", "requests", "tflops"), Q),
    ("TensorFusionWorkload", ("spec", "autoScalingConfig", "autoSetResources", "targetComputePercentile"), Q),
    ("TensorFusionWorkload", ("spec", "autoScalingConfig", "autoSetResources", "interval"), D),
    ("TensorFusionWorkload", ("spec", "autoScalingConfig", "cronScalingRules"), C),
    ("TensorFusionWorkload", ("status", "recommendation", "requests", "vram"), Q),
    ("TensorFusionWorkload", ("kind",), A),
    ("SchedulingConfigTemplate", ("spec", "verticalScalingRules"), A),
    ("SchedulingConfigTemplate", ("spec", "placement", "mode"), A),
    ("PodDisruptionBudget", ("spec", "maxUnavailable"), A),
    ("Node", ("spec", "unschedulable"), A),
]


def _cron_rules(start: str) -> list[JSON]:
    return [{"enable": True, "name": "r", "start": start, "end": "0 17 * * *",
             "desiredResources": {"requests": {"tflops": "1e999", "vram": "1Gi"}}}]  # fmt: skip


leaf = st.one_of(
    st.sampled_from(QUANTITIES),
    st.sampled_from(DURATIONS),
    st.sampled_from(CRONS),
    st.sampled_from(ZONES),
    st.sampled_from(TIMES),
    st.sampled_from(SCALARS),
    st.sampled_from(CRONS).map(_cron_rules),
    st.text(max_size=12),
    st.integers(-(2**70), 2**70),
)
values = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "kind", "tflops"]), inner, max_size=3),
    ),
    max_leaves=6,
) | st.integers(30, 400).map(lambda depth: json.loads("[" * depth + "]" * depth))  # nesting


texts = st.one_of(
    st.sampled_from(
        QUANTITIES + DURATIONS + CRONS + ZONES + TIMES + ["[/]", "\x1b]0;x\x07", "true", "CompactFirst"]
    ),
    st.text(max_size=12),
)
ints = st.one_of(st.sampled_from([-1, 0, 1, 101, 2**31, 2**63 - 1, -(2**63)]), st.integers(-(10**20), 10**20))


def _like(old: Any) -> st.SearchStrategy[Any]:
    """Hostile values of the type already there (they pass the schema and reach the engine)."""
    if isinstance(old, bool):
        return st.booleans()
    if isinstance(old, int):
        return ints
    if isinstance(old, float):
        return st.floats(allow_nan=False, allow_infinity=False) | ints
    if isinstance(old, list):
        return st.lists(texts | ints, max_size=3) if not old or not isinstance(old[0], dict) else st.just([])
    if isinstance(old, dict):
        return st.dictionaries(st.sampled_from(sorted(old) or ["a"]), texts, max_size=3)
    return texts


def _at(index: int, path: tuple[str | int, ...]) -> Any:
    node: Any = BASE[index]
    for key in path:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return None
    return node


SORTS: dict[str, st.SearchStrategy[Any]] = {
    Q: st.sampled_from(QUANTITIES),
    D: st.sampled_from(DURATIONS),
    C: st.sampled_from(CRONS) | st.sampled_from(CRONS).map(_cron_rules),
    Z: st.sampled_from(ZONES),
    T: st.sampled_from(TIMES),
    A: st.sampled_from(SCALARS) | texts,
}
BY_KIND: dict[str, list[int]] = {}
for _i, _o in enumerate(BASE):
    BY_KIND.setdefault(_o["kind"], []).append(_i)


@st.composite
def mutation(draw: st.DrawFn) -> tuple[int, tuple[str | int, ...], Any]:
    """(item, path, value): at a field the engine reads, or at a random point of a random object
    (the path is walked in the unmutated base dump; `_apply` creates or skips what is missing)."""
    same_type = draw(st.integers(0, 9)) < 7  # mostly values the schema lets through

    def value(index: int, path: tuple[str | int, ...]) -> Any:
        return draw(_like(_at(index, path)) if same_type else values)

    if draw(st.booleans()):
        kind, target, sort = draw(st.sampled_from(TARGETS))
        index = draw(st.sampled_from(BY_KIND[kind]))
        return (index, target, draw(SORTS[sort]) if same_type else draw(values))
    index = draw(st.integers(0, len(BASE) - 1))
    node: Any = BASE[index]
    path: list[str | int] = []
    while isinstance(node, dict | list) and node and draw(st.integers(0, 4)) > 0:
        key: str | int = (
            draw(st.sampled_from(sorted(node)))
            if isinstance(node, dict)
            else draw(st.integers(0, len(node) - 1))
        )
        path.append(key)
        node = node[key]  # type: ignore[index]  # key is a dict key or a list index as drawn
    return (index, tuple(path), value(index, tuple(path)))


def _apply(doc: list[JSON], index: int, path: tuple[str | int, ...], value: Any) -> None:
    if not path:
        doc[index] = value
        return
    node: Any = doc[index]
    for key in path[:-1]:
        if isinstance(node, dict):
            if not isinstance(node.get(key), dict | list):
                node[key] = {}
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            return
    if isinstance(node, dict) or (
        isinstance(node, list) and isinstance(path[-1], int) and path[-1] < len(node)
    ):
        node[path[-1]] = value  # type: ignore[index]


@pytest.fixture(scope="module")
def dsn(pg_server: PgServer) -> str:
    with database(pg_server, "propinputs", "ts") as conn:
        load_sim(
            conn, SimMetrics(BASE, seed=7, now=NOW, history=timedelta(hours=3)), NOW - timedelta(hours=3), NOW
        )
    return pg_server.dsn("propinputs")


Mutation = tuple[int, tuple[str | int, ...], Any]


def _first(kind: str) -> int:
    return BY_KIND[kind][0]


def _worker() -> int:
    return next(
        i for i in BY_KIND["Pod"] if f"{TF}/tflops-request" in BASE[i]["metadata"].get("annotations", {})
    )


DEFRAG = ("spec", "nodeManagerConfig", "nodeCompaction", "defrag")
#: Inputs that once crashed a command: always run first (explicit examples), then the random ones.
KNOWN: list[list[Mutation]] = [
    [(_worker(), ("metadata", "annotations", f"{TF}/tflops-request"), "1e999")],
    [(_first("GPU"), ("status", "capacity", "tflops"), "1e999")],
    [(_first("TensorFusionWorkload"), ("status", "recommendation"), {"requests": {"tflops": "1e999"}})],
    [(_first("TensorFusionWorkload"), ("kind",), {"name": "GPU"})],
    [(_first("GPU"), ("kind",), ["GPU"])],
    [(_first("GPUPool"), ("status", "lastDefragTime"), "0001-01-01T00:00:00Z")],
    [(_first("GPUPool"), (*DEFRAG, "enabled"), True), (_first("GPUPool"), (*DEFRAG, "timezone"), "America")],
    [(_first("TensorFusionWorkload"), ("spec", "autoScalingConfig"),
      {"autoSetResources": {"enable": True}, "cronScalingRules": _cron_rules("CRON_TZ=America 0 9 * * *")})],
    [(_first("TensorFusionWorkload"), ("spec", "autoScalingConfig", "autoSetResources"),
      {"enable": True, "targetComputePercentile": float("nan")})],
    [(_first("SchedulingConfigTemplate"), ("spec", "verticalScalingRules"), [{"name": "r", "autoScaling": "on"}])],
    [(_first("GPUNode"), ("status",), json.loads("[" * 400 + "]" * 400))],
    [(_first("GPU"), ("kind",), "\x84\x85Pod")],  # NEL is a line break to str.splitlines
    [(_first("GPU"), ("metadata", "name"), "g\nx"), (_first("GPU"), ("status", "capacity", "tflops"), "1e999")],
]  # fmt: skip


def _known_cases(test: Any) -> Any:
    for case in reversed(KNOWN):
        test = example(mutations=case)(test)
    return test


@contextlib.contextmanager
def _bounded_memory() -> Iterator[None]:
    """Lower the soft address-space limit to what the process has plus MEMORY_HEADROOM, then restore."""
    with open("/proc/self/status") as fh:
        vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm + MEMORY_HEADROOM, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _run(args: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, err.getvalue()


def _check(what: str, code: int, err: str) -> None:
    assert "Traceback" not in err, f"{what}: {err}"
    if code == 0:
        return
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1, f"{what}: exit {code}: {err!r}"
    assert NAMES_FIELD.match(lines[0]), f"{what}: the line does not name object and field: {lines[0]!r}"


def _console_first_load(path: Path, dsn: str) -> None:
    from tftui.sources.greptime import GreptimeMetrics

    try:
        cluster = DumpCluster(path)
    except Exception as exc:  # the console's `--from` fails exactly as `dump` does (checked there)
        assert type(exc).__name__ == "DumpError", exc
        return
    with GreptimeMetrics(dsn, connect_timeout=3) as metrics:
        _render_tables(load(cluster, metrics, NOW))


def _render_tables(data: Any) -> None:
    """Every cell of the main tables as text, and the operations planned without error."""
    gauges = Gauges(layout_for(160))
    for table in (pools_table(data, gauges), nodes_table(data, gauges), gpus_table(data, gauges)):
        for row in table.rows:
            for cell in row.cells.values():
                str(cell)
    workloads_table(data, gauges)
    assert data.ops.plan_error is None, data.ops.plan_error


#: One profile for the properties: no shrinking (a failing example is printed as drawn).
PROFILE: dict[str, Any] = {
    "max_examples": EXAMPLES,
    "derandomize": not os.environ.get(EXAMPLES_ENV),
    "deadline": None,
    "database": None,
    "phases": [Phase.explicit, Phase.generate],
    "report_multiple_bugs": False,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
}


def _mutated(mutations: list[Mutation]) -> list[JSON]:
    doc = copy.deepcopy(BASE)
    for index, where, value in mutations:
        _apply(doc, index, where, value)
    return doc


@settings(**PROFILE)
@given(mutations=st.lists(mutation(), min_size=1, max_size=3))
@_known_cases
def test_every_command_answers_a_mutated_dump(
    mutations: list[Mutation], dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    doc = _mutated(mutations)
    path = tmp_path_factory.mktemp("prop") / "dump.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": doc}), encoding="utf-8")
    dump = ["--from", str(path)]
    commands = {
        "plan": ["plan", *dump, "--now", STAMP, "--metrics-dsn", dsn],
        "place": ["place", *dump, "--tflops", "10", "--vram", "1Gi"],
        "report": ["report", *dump, "--metrics-dsn", dsn, "--window", "1h"],
        "simulate": ["simulate", *dump, "--duration", "1h", "--policy", "configured", "--start", STAMP],
        "dump": ["dump", *dump],
    }
    with _bounded_memory():
        for name, args in commands.items():
            _check(name, *_run(args))
        _console_first_load(path, dsn)


class _Objects:
    """A cluster port over raw objects, as a live cluster's watch cache hands them; writes refused."""

    def __init__(self, objects: list[JSON]) -> None:
        self.objects = objects

    def describe(self) -> str:
        return "mutated objects"

    def snapshot(self) -> list[JSON]:
        return list(self.objects)

    def apply(self, action: Any) -> None:
        raise AssertionError(f"a dry-run tick wrote {action!r}")

    def events(self) -> list[JSON]:
        return []


@settings(**PROFILE)
@given(mutations=st.lists(mutation(), min_size=1, max_size=3))
@_known_cases
def test_the_daemon_loop_goes_on_over_stored_objects(mutations: list[Mutation], dsn: str) -> None:
    from tftui.sources.greptime import GreptimeMetrics

    doc = _mutated(mutations)
    try:  # what a cluster could store: valid, or refused only for values of the right types
        for obj in doc:
            value_problem(obj)
    except DumpError:
        return
    with GreptimeMetrics(dsn, connect_timeout=3) as metrics, _bounded_memory():
        rt = Runtime(_Objects(doc), clock=lambda: NOW, dry_run=True, metrics=metrics)
        plan = rt.tick_due()
    assert plan is not None and rt.last_autoscale is not None
    failed = [e.message for e in rt.journal.entries() if not e.ok and " failed: " in e.message]
    assert not failed, failed


@settings(**PROFILE)
@given(mutations=st.lists(mutation(), min_size=1, max_size=3))
@_known_cases
def test_the_console_reads_stored_objects_or_names_a_wrong_shape(mutations: list[Mutation]) -> None:
    doc = _mutated(mutations)
    with _bounded_memory():
        try:
            data = load(_Objects(doc), None, NOW)
        except ClusterLoadError as exc:
            assert type(exc.__cause__).__name__ == "DumpError", exc  # a shape: refused as before
            assert NAMES_FIELD.match(f"tftui: {exc}"), exc
            return
        _render_tables(data)
    assert all(w.ref and w.message for w in data.warnings)
