"""A throwaway PostgreSQL 15 server with GreptimeDB-shaped `tf_*` tables (tests and bench/report.py).

Why a real server: the GreptimeDB adapter must be tested on the wire protocol, with real
authentication (the "wrong password" case), real SQL errors and real COPY loading. PostgreSQL is
one of the two metrics stores of the tests (tests/stores.py); the other, the GreptimeDB-dialect
server (tests/greptime_dialect), refuses what GreptimeDB refuses and PostgreSQL accepts.

One server per process (one per xdist worker), in a fresh temp directory, on a free localhost port
with its unix socket in that directory; durability is switched off (fsync, synchronous_commit,
full_page_writes) because the data is thrown away, and JIT is off (compiling the step-1 aggregates
took longer than running them). As root, `initdb`/`pg_ctl` run as `postgres`
(PostgreSQL refuses to run as root). Local (socket) connections are trusted for set-up; TCP
connections need the password of the role `tftui` (scram-sha-256), which is what the code under
test uses. Start-up is about a second.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import psycopg
from psycopg import sql

PG_BIN: Final = Path(os.environ.get("TFTUI_PG_BIN", "/usr/lib/postgresql/15/bin"))
USER: Final = "tftui"
PASSWORD: Final = "tf-pw-7Qx"  # the role's password; the tests check it never appears in errors
SUPERUSER: Final = "postgres"

#: TensorFusion's table DDL (M12) in PostgreSQL types (STRING→text, DOUBLE→double precision, …), columns in
#: the DDL's order; the time column is appended with the requested name.
TABLES: Final[Mapping[str, tuple[tuple[str, str], ...]]] = {
    "tf_node_metrics": (
        ("node", "text"), ("pool", "text"), ("phase", "text"),
        ("allocated_tflops", "double precision"), ("allocated_tflops_percent", "double precision"),
        ("allocated_vram_bytes", "double precision"), ("allocated_vram_percent", "double precision"),
        ("allocated_tflops_percent_virtual", "double precision"),
        ("allocated_vram_percent_virtual", "double precision"), ("raw_cost", "double precision"),
        ("gpu_count", "bigint"),
    ),
    "tf_gpu_usage": (
        ("node", "text"), ("pool", "text"), ("uuid", "text"),
        ("compute_percentage", "double precision"), ("memory_percentage", "double precision"),
        ("memory_bytes", "bigint"), ("compute_tflops", "double precision"),
        ("rx", "double precision"), ("tx", "double precision"), ("temperature", "double precision"),
        ("power_usage", "double precision"), ("graphics_clock_mhz", "double precision"),
        ("sm_clock_mhz", "double precision"), ("memory_clock_mhz", "double precision"),
        ("video_clock_mhz", "double precision"), ("nvlink_rx", "double precision"),
        ("nvlink_tx", "double precision"),
    ),
    "tf_worker_resources": (
        ("worker", "text"), ("workload", "text"), ("pool", "text"), ("namespace", "text"), ("qos", "text"),
        ("tflops_request", "double precision"), ("tflops_limit", "double precision"),
        ("vram_bytes_request", "double precision"), ("vram_bytes_limit", "double precision"),
        ("gpu_count", "bigint"), ("raw_cost", "double precision"), ("ready", "boolean"),
    ),
    "tf_worker_usage": (
        ("workload", "text"), ("worker", "text"), ("pod_name", "text"), ("namespace", "text"),
        ("pool", "text"), ("node", "text"), ("uuid", "text"),
        ("compute_tflops", "double precision"), ("compute_percentage", "double precision"),
        ("memory_bytes", "bigint"), ("memory_percentage", "double precision"),
        ("compute_throttled_cnt", "bigint"), ("vram_freezed_cnt", "bigint"), ("vram_resumed_cnt", "bigint"),
    ),
    "tf_gpu_metrics": (
        ("gpu", "text"), ("node", "text"), ("pool", "text"), ("gpu_model", "text"), ("phase", "text"),
        ("capacity_tflops", "double precision"), ("available_tflops", "double precision"),
        ("allocated_tflops", "double precision"), ("allocated_tflops_percent", "double precision"),
        ("capacity_vram_bytes", "double precision"), ("available_vram_bytes", "double precision"),
        ("allocated_vram_bytes", "double precision"), ("allocated_vram_percent", "double precision"),
    ),
    "tf_system_metrics": (
        ("pool", "text"), ("total_workers_cnt", "bigint"), ("total_nodes_cnt", "bigint"),
        ("total_allocation_fail_cnt", "bigint"), ("total_allocation_success_cnt", "bigint"),
        ("total_scale_up_cnt", "bigint"), ("total_scale_down_cnt", "bigint"),
        ("total_topo_satisfied_cnt", "bigint"), ("total_topo_unsatisfied_cnt", "bigint"),
        ("total_topo_fallback_cnt", "bigint"), ("total_topo_search_degraded_cnt", "bigint"),
    ),
}  # fmt: skip
SIM_TABLES: Final = ("tf_gpu_usage", "tf_worker_usage", "tf_node_metrics", "tf_worker_resources")


class PgUnavailable(RuntimeError):
    """The server could not be started (binaries missing, initdb/pg_ctl failed)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running throwaway server; `stop()` removes it (also registered at exit)."""

    root: Path
    port: int
    as_postgres: bool
    _stopped: bool = field(default=False, repr=False)

    @property
    def sockdir(self) -> Path:
        return self.root

    def dsn(self, dbname: str, *, user: str = USER, password: str = PASSWORD, port: int | None = None) -> str:
        """TCP DSN with password auth, as a user would give it to `--metrics-dsn`."""
        return (
            f"host=127.0.0.1 port={port or self.port} dbname={dbname} user={user} "
            f"password={password} connect_timeout=5"
        )

    def connect(self, dbname: str = "postgres", *, user: str = SUPERUSER) -> psycopg.Connection[Any]:
        """Set-up connection over the unix socket (trusted), autocommit."""
        return psycopg.connect(
            host=str(self.sockdir), port=self.port, dbname=dbname, user=user, autocommit=True
        )

    def create_database(self, name: str) -> None:
        """A fresh database owned by `tftui` (dropped first if it exists)."""
        with self.connect() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name), sql.Identifier(USER))
            )

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        _run(
            [str(PG_BIN / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop"],
            self.as_postgres,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def _run(cmd: Sequence[str], as_postgres: bool, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    full = ["runuser", "-u", SUPERUSER, "--", *cmd] if as_postgres else list(cmd)
    proc = subprocess.run(full, capture_output=True, text=True, cwd="/")
    if check and proc.returncode != 0:
        raise PgUnavailable(f"{' '.join(cmd[:2])} failed: {(proc.stderr or proc.stdout).strip()[-800:]}")
    return proc


def start_server() -> PgServer:
    """initdb + pg_ctl start on a free port; fails (never skips) with the install hint."""
    if not (PG_BIN / "initdb").exists() or not (PG_BIN / "pg_ctl").exists():
        raise PgUnavailable(
            f"PostgreSQL 15 server binaries not found in {PG_BIN} — the metrics tests start a real "
            "server: apt-get install postgresql-15"
        )
    as_postgres = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="tftui-pg-", dir="/tmp"))
    try:
        if as_postgres:
            shutil.chown(root, user=SUPERUSER)
        _run(
            [str(PG_BIN / "initdb"), "-D", str(root / "data"), "-U", SUPERUSER, "--auth-local=trust",
             "--auth-host=scram-sha-256", "--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C"],
            as_postgres,
        )  # fmt: skip
        server = None
        for _attempt in range(5):  # another worker may grab the port between probe and bind
            port = free_port()
            options = (
                f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=60 "
                "-c shared_buffers=256MB -c work_mem=64MB -c jit=off -c log_min_messages=fatal"
            )
            proc = _run(
                [str(PG_BIN / "pg_ctl"), "-D", str(root / "data"), "-l", str(root / "log"), "-w",
                 "-t", "30", "-o", options, "start"],
                as_postgres,
                check=False,
            )  # fmt: skip
            if proc.returncode == 0:
                server = PgServer(root, port, as_postgres)
                break
            time.sleep(0.1)
        if server is None:
            log = (root / "log").read_text(errors="replace")[-800:] if (root / "log").exists() else ""
            raise PgUnavailable(f"pg_ctl start failed: {log.strip()}")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    atexit.register(server.stop)
    with server.connect() as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(USER), sql.Literal(PASSWORD))
        )
    return server


# -- schema and data -------------------------------------------------------------------------------


def create_tables(
    conn: psycopg.Connection[Any],
    time_column: str = "ts",
    tables: Iterable[str] = TABLES,
    *,
    overrides: Mapping[str, Mapping[str, str | None]] | None = None,
) -> None:
    """`CREATE TABLE` for `tables` with the time column named `time_column`, and its BRIN index.

    `overrides` maps table → {column: type or None (drop the column)}, to build broken schemas.

    The BRIN index on the time column stands in for GreptimeDB's time index (SST files pruned by
    time range): rows arrive in time order, so a short alert window reads a few block ranges
    instead of the whole table.
    """
    for name in tables:
        change = (overrides or {}).get(name, {})
        cols: list[sql.Composable] = []
        for col, typ in TABLES[name]:
            new = change.get(col, typ)
            if new is not None:
                cols.append(sql.SQL("{} {}").format(sql.Identifier(col), sql.SQL(new)))
        cols.append(sql.SQL("{} timestamp(3) NOT NULL").format(sql.Identifier(time_column)))
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(name), sql.SQL(", ").join(cols)))
        conn.execute(
            sql.SQL("CREATE INDEX {} ON {} USING brin ({})").format(
                sql.Identifier(f"{name}_time"), sql.Identifier(name), sql.Identifier(time_column)
            )
        )


def naive_utc(dt: datetime) -> datetime:
    return dt.replace(tzinfo=None) if dt.tzinfo is None else dt.astimezone(UTC).replace(tzinfo=None)


def copy_rows(
    conn: psycopg.Connection[Any], table: str, rows: Iterable[Mapping[str, Any]], time_column: str = "ts"
) -> int:
    """COPY dict rows (keys as the simulator writes them, `ts` aware or naive UTC) into `table`."""
    it = iter(rows)
    first = next(it, None)
    if first is None:
        return 0
    keys = list(first)
    cols = [time_column if k == "ts" else k for k in keys]
    stmt = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, cols))
    )
    n = 0
    with conn.cursor() as cur, cur.copy(stmt) as copy:
        for r in itertools.chain((first,), it):
            copy.write_row([naive_utc(r[k]) if k == "ts" else r[k] for k in keys])
            n += 1
    return n


def load_sim(
    conn: psycopg.Connection[Any],
    metrics: Any,
    start: datetime,
    end: datetime,
    time_column: str = "ts",
) -> dict[str, int]:
    """The simulator's rows of the four tables in [start, end) → table → rows loaded."""
    return {t: copy_rows(conn, t, metrics.rows(t, start, end), time_column) for t in SIM_TABLES}


@contextlib.contextmanager
def database(server: PgServer, name: str, time_column: str = "ts", **kw: Any) -> Any:
    """Create `name` with the tf_* tables and yield a set-up connection to it (as `tftui`)."""
    server.create_database(name)
    with server.connect(name, user=USER) as conn:
        create_tables(conn, time_column, **kw)
        yield conn


# -- hand-made datasets (the same rows go to PostgreSQL and to the simulator's Step1Port) -----------

NOW: Final = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
GI: Final = 1 << 30
MI: Final = 1 << 20
A100_1, A100_2 = "gpu-3e8a1f52-6b1d-4c2e-9f0a-7d1c00000001", "gpu-3e8a1f52-6b1d-4c2e-9f0a-7d1c00000002"
A100_3 = "gpu-8b27c4d9-0e5a-4f73-b1c6-2a9e00000003"
H100_5, H100_6 = "gpu-c41d7e0b-93a2-4d58-8e7f-5b3f00000005", "gpu-c41d7e0b-93a2-4d58-8e7f-5b3f00000006"
UNKNOWN_GPU: Final = "gpu-unknown-0000"
#: GPU → (TFLOPS, VRAM bytes) of the demo seed (UNKNOWN_GPU deliberately absent)
CAPACITY: Final[Mapping[str, tuple[float, float]]] = {
    A100_1: (312.0, 80.0 * GI), A100_2: (312.0, 80.0 * GI), A100_3: (312.0, 80.0 * GI),
    H100_5: (989.0, 81559.0 * MI), H100_6: (989.0, 81559.0 * MI),
}  # fmt: skip
INJECTION: Final = "'; DROP TABLE tf_worker_usage; --"


def _at(minutes: float) -> datetime:
    return NOW - timedelta(minutes=minutes)


def full_rows(table: str, rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with every column of `table` (None where not given), as a table would return them."""
    return [{**{c: None for c, _t in TABLES[table]}, **r} for r in rows]


def step1_rows() -> dict[str, list[dict[str, Any]]]:
    """The demo seed's example rows at fixed times, plus a few more (exact figures in tests).

    Window for the tests: [NOW − 1 h, NOW). Rows at NOW − 2 h and at NOW fall outside it.
    """
    pool = "demo-shared"
    node = [
        ("gpu-a100-1", 19.23, 23.75, 30), ("gpu-a100-1", 21.23, 25.75, 20), ("gpu-a100-2", 16.03, 18.75, 30),
        ("gpu-h100-1", 40.44, 87.89, 30), ("gpu-h100-1", 99.0, 99.0, 120), ("gpu-h100-1", 0.0, 0.0, 0),
    ]  # fmt: skip
    gpu = [  # node, uuid, compute %, memory_percentage, memory_bytes, minutes ago
        ("gpu-a100-1", A100_1, 6.0, 0.0, 9663676416, 30), ("gpu-a100-1", A100_1, 10.0, 0.0, 12 * GI, 20),
        ("gpu-a100-1", A100_2, 0.0, 40.0, 1 * GI, 30), ("gpu-h100-1", H100_5, 78.0, 0.0, 73014444032, 30),
        ("gpu-h100-1", UNKNOWN_GPU, 1.0, 0.0, 2 * GI, 30), ("gpu-h100-1", H100_5, 100.0, 0.0, 80 * GI, 120),
    ]  # fmt: skip
    req = [  # worker, workload, namespace, tflops, vram, gpu_count, minutes ago
        ("llama3-8b-infer-tf-worker-7xk2p", "llama3-8b-infer", "ml-serving", 60.0, 20 * GI, 1, 30),
        ("llama3-8b-infer-tf-worker-7xk2p", "llama3-8b-infer", "ml-serving", 90.0, 20 * GI, 1, 20),
        ("llama3-8b-infer-tf-worker-m4q9z", "llama3-8b-infer", "ml-serving", 60.0, 20 * GI, 1, 30),
        ("qwen2-72b-infer-tf-worker-h8c3d", "qwen2-72b-infer", "ml-serving", 400.0, 70 * GI, 2, 30),
        ("llama3-8b-infer-tf-worker-zz1aa", "llama3-8b-infer", "research", 10.0, 1 * GI, 1, 30),
        ("qwen2-72b-infer-tf-worker-h8c3d", "qwen2-72b-infer", "ml-serving", 999.0, 99 * GI, 9, 120),
    ]
    use = [  # workload, worker uid, pod, namespace, node, uuid, compute %, memory bytes, minutes ago
        ("llama3-8b-infer", "uid-1", "llama3-8b-infer-tf-worker-7xk2p", "ml-serving", "gpu-a100-1", A100_1, 4.0, 6 * GI, 30),
        ("llama3-8b-infer", "uid-1", "llama3-8b-infer-tf-worker-7xk2p", "ml-serving", "gpu-a100-1", A100_1, 8.0, 7 * GI, 20),
        ("llama3-8b-infer", "uid-2", "llama3-8b-infer-tf-worker-m4q9z", "ml-serving", "gpu-a100-2", A100_3, 2.0, 5 * GI, 30),
        ("qwen2-72b-infer", "uid-3", "qwen2-72b-infer-tf-worker-h8c3d", "ml-serving", "gpu-h100-1", H100_5, 39.0, 68 * GI, 30),
        ("qwen2-72b-infer", "uid-3", "qwen2-72b-infer-tf-worker-h8c3d", "ml-serving", "gpu-h100-1", H100_6, 39.0, 68 * GI, 30),
        ("llama3-8b-infer", "uid-9", "llama3-8b-infer-tf-worker-zz1aa", "research", "gpu-h100-1", UNKNOWN_GPU, 1.0, 1 * GI, 30),
        ("qwen2-72b-infer", "uid-3", "qwen2-72b-infer-tf-worker-h8c3d", "ml-serving", "gpu-h100-1", H100_5, 100.0, 80 * GI, 120),
    ]  # fmt: skip
    return {
        "tf_node_metrics": full_rows("tf_node_metrics", (
            {"node": n, "pool": pool, "phase": "Running", "allocated_tflops_percent": t,
             "allocated_vram_percent": v, "gpu_count": 2, "ts": _at(m)}
            for n, t, v, m in node
        )),
        "tf_gpu_usage": full_rows("tf_gpu_usage", (
            {"node": n, "pool": pool, "uuid": u, "compute_percentage": c, "memory_percentage": mp,
             "memory_bytes": mb, "compute_tflops": 0.0, "temperature": 50.0, "ts": _at(m)}
            for n, u, c, mp, mb, m in gpu
        )),
        "tf_worker_resources": full_rows("tf_worker_resources", (
            {"worker": w, "workload": wl, "pool": pool, "namespace": ns, "qos": "medium", "tflops_request": t,
             "vram_bytes_request": float(v), "gpu_count": g, "ready": True, "ts": _at(m)}
            for w, wl, ns, t, v, g, m in req
        )),
        "tf_worker_usage": full_rows("tf_worker_usage", (
            {"workload": wl, "worker": uid, "pod_name": pod, "namespace": ns, "pool": pool, "node": n,
             "uuid": u, "compute_percentage": c, "memory_bytes": mb, "memory_percentage": 10.0,
             "compute_tflops": 0.0, "ts": _at(m)}
            for wl, uid, pod, ns, n, u, c, mb, m in use
        )),
    }  # fmt: skip


def alert_rows_data() -> dict[str, list[dict[str, Any]]]:
    """Rows around NOW that fire some entities of every rule and leave others healthy.

    Firing: worker A throttled (+3) and VRAM-switching (+3); pool p1 allocation failures (+2);
    GPU g1 VRAM full, TFLOPS full and hot; g2 TFLOPS full on its one sample above 97 (upstream
    filters before averaging); nodes n1 (TFLOPS 97 %, VRAM 96 %) and n2 (92 %, 91 %) short of
    capacity, n4 (99 %) critical; pools p1 (warning) and p3 (critical); n3 and n4 empty; g3 idle.
    """

    def s(seconds: float) -> datetime:
        return NOW - timedelta(seconds=seconds)

    wu = [  # worker, node, uuid, throttled, resumed, seconds ago
        ("A", "n1", "g1", 5, 1, 10), ("A", "n1", "g1", 8, 4, 0), ("B", "n2", "g2", 2, 0, 10), ("B", "n2", "g2", 2, 0, 0),
    ]  # fmt: skip
    gu = [  # node, pool, uuid, compute %, memory %, temperature, seconds ago
        ("n1", "p1", "g1", 99.0, 98.0, 95.0, 20), ("n1", "p1", "g1", 98.0, 99.0, 93.0, 0),
        ("n2", "p1", "g2", 99.0, 50.0, 60.0, 20), ("n2", "p1", "g2", 50.0, 50.0, 60.0, 0),
        ("n3", "p2", "g3", 0.5, 2.0, 40.0, 300), ("n3", "p2", "g3", 0.5, 2.0, 40.0, 0),
        ("n4", "p3", "g4", 0.2, 50.0, 40.0, 0), ("n4", "p3", "g4", 0.2, 50.0, 40.0, 900),
    ]  # fmt: skip
    nm = [  # node, pool, tflops %, vram %, seconds ago
        ("n1", "p1", 97.0, 96.0, 30), ("n1", "p1", 97.0, 96.0, 0), ("n2", "p1", 92.0, 91.0, 30),
        ("n2", "p1", 92.0, 91.0, 0),
        ("n3", "p2", 50.0, 50.0, 0), ("n4", "p3", 99.0, 20.0, 0), ("n3", "p2", 99.0, 99.0, 3600),
    ]  # fmt: skip
    sm = [("p1", 10, 20), ("p1", 12, 0), ("p2", 5, 20), ("p2", 5, 0)]  # pool, failures, seconds ago
    return {
        "tf_worker_usage": full_rows("tf_worker_usage", (
            {"workload": "wl", "worker": w, "pod_name": f"pod-{w}", "namespace": "ns", "pool": "p1", "node": n,
             "uuid": u, "compute_percentage": 10.0, "memory_bytes": GI, "memory_percentage": 10.0,
             "compute_tflops": 0.0, "compute_throttled_cnt": th, "vram_resumed_cnt": rs, "ts": s(sec)}
            for w, n, u, th, rs, sec in wu
        )),
        "tf_gpu_usage": full_rows("tf_gpu_usage", (
            {"node": n, "pool": p, "uuid": u, "compute_percentage": c, "memory_percentage": mp,
             "memory_bytes": 10 * GI, "compute_tflops": 0.0, "temperature": t, "ts": s(sec)}
            for n, p, u, c, mp, t, sec in gu
        )),
        "tf_node_metrics": full_rows("tf_node_metrics", (
            {"node": n, "pool": p, "phase": "Running", "allocated_tflops_percent": t,
             "allocated_vram_percent": v, "ts": s(sec)}
            for n, p, t, v, sec in nm
        )),
        "tf_system_metrics": full_rows("tf_system_metrics", (
            {"pool": p, "total_allocation_fail_cnt": f, "ts": s(sec)} for p, f, sec in sm
        )),
    }  # fmt: skip


class DictRows:
    """A `rows(table, start, end)` source over in-memory rows: the simulator side of a dataset."""

    def __init__(self, data: Mapping[str, list[dict[str, Any]]]) -> None:
        self.data = data

    def rows(self, table: str, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        if table not in self.data:
            raise ValueError(f"unknown metrics table {table!r}")
        yield from sorted((r for r in self.data[table] if start <= r["ts"] < end), key=lambda r: r["ts"])


def load_rows(
    conn: psycopg.Connection[Any], data: Mapping[str, list[dict[str, Any]]], time_column: str
) -> None:
    for table, rows in data.items():
        copy_rows(conn, table, rows, time_column)


#: What each rule returns at NOW on `alert_rows_data()` (values rounded to 9 places by the tests).
EXPECTED_ALERTS: Final[Mapping[str, list[dict[str, Any]]]] = {
    "WorkerTFlopsThrottled": [{"workload": "wl", "worker": "A", "uuid": "g1", "node": "n1", "throttled_increase": 3}],
    "WorkerVRAMSwitchCountIncreasing": [{"workload": "wl", "worker": "A", "uuid": "g1", "node": "n1", "switch_increase": 3}],
    "WorkerAllocationFailed": [{"pool": "p1", "failure_increase": 2}],
    "GPUVRAMFull": [{"node": "n1", "pool": "p1", "uuid": "g1", "memory_used": 98.5}],
    "GPUTFlopsFull": [
        {"node": "n1", "pool": "p1", "uuid": "g1", "compute_used": 98.5},
        {"node": "n2", "pool": "p1", "uuid": "g2", "compute_used": 99.0},
    ],
    "GPUTemperatureHigh": [{"node": "n1", "pool": "p1", "uuid": "g1", "avg_temperature": 94.0}],
    "NodeTFlopsAllocationCritical": [
        {"node": "n1", "pool": "p1", "tflops_available": 3.0},
        {"node": "n4", "pool": "p3", "tflops_available": 1.0},
    ],
    "NodeTFlopsAllocationWarning": [
        {"node": "n1", "pool": "p1", "tflops_available": 3.0},
        {"node": "n2", "pool": "p1", "tflops_available": 8.0},
        {"node": "n4", "pool": "p3", "tflops_available": 1.0},
    ],
    "PoolTotalTFlopsAllocationCritical": [{"pool": "p3", "tflops_available": 1.0}],
    "PoolTotalTFlopsAllocationWarning": [{"pool": "p1", "tflops_available": 5.5}, {"pool": "p3", "tflops_available": 1.0}],
    "NodeVRAMAllocationCritical": [{"node": "n1", "pool": "p1", "vram_available": 4.0}],
    "NodeVRAMAllocationWarning": [
        {"node": "n1", "pool": "p1", "vram_available": 4.0},
        {"node": "n2", "pool": "p1", "vram_available": 9.0},
    ],
    "PoolVRAMAllocationWarning": [{"pool": "p1", "vram_available": 6.5}],
    "EmptyGPU": [{"node": "n3"}, {"node": "n4"}],
    "IdleGPU": [{"node": "n3", "pool": "p2", "uuid": "g3", "compute": 0.5, "vram": 2.0, "memory_bytes": 10 * GI}],
}  # fmt: skip


def rounded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: round(v, 9) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def check_step1(result: Any) -> None:
    """Exact figures of `step1_rows()` over [NOW − 1 h, NOW) (any Step1Port)."""
    import pytest  # only the tests call this; bench/report.py imports this module without pytest

    approx = pytest.approx
    nodes = {
        (n.node, n.pool): (n.tflops_allocated_pct, n.vram_allocated_pct, n.samples) for n in result.nodes
    }
    assert nodes == {
        ("gpu-a100-1", "demo-shared"): (approx(20.23), approx(24.75), 2),
        ("gpu-a100-2", "demo-shared"): (approx(16.03), approx(18.75), 1),
        ("gpu-h100-1", "demo-shared"): (approx(40.44), approx(87.89), 1),
    }
    assert [n.node for n in result.nodes] == ["gpu-a100-2", "gpu-a100-1", "gpu-h100-1"]  # page order
    gpus = {
        g.uuid: (g.node, g.compute_used_pct, g.vram_peak_pct, g.vram_peak_bytes, g.samples)
        for g in result.gpus
    }
    assert gpus == {
        A100_1: ("gpu-a100-1", approx(8.0), approx(15.0), 12 * GI, 2),  # M3: 12 GiB of 80 GiB
        A100_2: ("gpu-a100-1", approx(0.0), approx(40.0), 1 * GI, 1),  # memory_percentage written
        H100_5: ("gpu-h100-1", approx(78.0), approx(73014444032 / (81559 * MI) * 100), 73014444032, 1),
        UNKNOWN_GPU: ("gpu-h100-1", approx(1.0), None, 2 * GI, 1),  # no capacity, no %: None
    }
    reqs = {(r.namespace, r.workload): (r.tflops_request, r.vram_request_bytes, r.gpu_count, r.workers, r.samples)
            for r in result.workload_requests}  # fmt: skip
    assert reqs == {
        ("ml-serving", "llama3-8b-infer"): (approx(70.0), approx(20 * GI), approx(1.0), 2, 3),
        ("ml-serving", "qwen2-72b-infer"): (approx(400.0), approx(70 * GI), approx(2.0), 1, 1),
        ("research", "llama3-8b-infer"): (approx(10.0), approx(1 * GI), approx(1.0), 1, 1),
    }
    use = {(u.namespace, u.workload): (u.tflops_avg, u.tflops_peak, u.vram_peak_bytes, u.samples)
           for u in result.workload_usage}  # fmt: skip
    assert use == {
        ("ml-serving", "llama3-8b-infer"): (approx(14.56), approx(24.96), 7 * GI, 3),
        ("ml-serving", "qwen2-72b-infer"): (approx(385.71), approx(385.71), 68 * GI, 2),
        ("research", "llama3-8b-infer"): (None, None, 1 * GI, 1),  # its GPU is unknown: no TFLOPS sample
    }
    assert result.missing == (f"capacity of {UNKNOWN_GPU}",)
    assert result.now == NOW and result.window == timedelta(hours=1)
