"""The `tf_*` tables as GreptimeDB holds them: two layouts, GreptimeDB's column types and semantics.

- `LINE_PROTOCOL`: what GreptimeDB's InfluxDB line-protocol ingestion creates when the TensorFusion
  writers' lines arrive (src/servers/src/influxdb.rs): time index `greptime_timestamp`
  TIMESTAMP(9) (nanoseconds, whatever the writer's precision), every tag a nullable `String` in the
  primary key, `i`-suffixed integers `Int64` (so `memory_bytes` is `Int64`), floats `Float64`,
  booleans `Boolean`; and only the columns the writers emit (the hypervisor's
  pkg/hypervisor/metrics/metrics.go and the controller's internal/metrics/recorder.go): no
  `compute_throttled_cnt`/`vram_freezed_cnt`/`vram_resumed_cnt` in `tf_worker_usage`, no clock or
  NVLink columns in `tf_gpu_usage`. Rows with the same tags and time replace each other
  (`last_row`).
- `MIGRATION_DDL`: the tables upstream's internal/metrics/migrate.go creates: time index `ts`
  `Timestamp_ms` (milliseconds), `memory_bytes` `BigInt UNSIGNED` (`UInt64`), `ready` a string,
  the counters present, no `pod_name`; `merge_mode = 'last_non_null'` (a later row with the same
  key and time fills only its non-null fields in).

Column order is the DDL's, or the writer's (tags, then fields) for line protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

import pyarrow as pa

__all__ = ["LAYOUTS", "LINE_PROTOCOL", "MIGRATION_DDL", "SQL_TYPES", "Column", "Layout", "TableSchema"]

Semantic = Literal["TAG", "FIELD", "TIMESTAMP"]
Merge = Literal["last_row", "last_non_null"]

#: GreptimeDB SQL type (as `information_schema.columns.data_type` shows it) → (Arrow type,
#: `greptime_data_type`).
SQL_TYPES: Final[Mapping[str, tuple[pa.DataType, str]]] = {
    "string": (pa.string(), "String"),
    "double": (pa.float64(), "Float64"),
    "float": (pa.float32(), "Float32"),
    "bigint": (pa.int64(), "Int64"),
    "bigint unsigned": (pa.uint64(), "UInt64"),
    "int": (pa.int32(), "Int32"),
    "boolean": (pa.bool_(), "Boolean"),
    "timestamp(3)": (pa.timestamp("ms"), "TimestampMillisecond"),
    "timestamp(6)": (pa.timestamp("us"), "TimestampMicrosecond"),
    "timestamp(9)": (pa.timestamp("ns"), "TimestampNanosecond"),
}


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    sql_type: str  # a key of SQL_TYPES
    semantic: Semantic

    @property
    def arrow(self) -> pa.DataType:
        return SQL_TYPES[self.sql_type][0]


@dataclass(frozen=True, slots=True)
class TableSchema:
    name: str
    columns: tuple[Column, ...]
    merge: Merge

    @property
    def time_index(self) -> str:
        return next(c.name for c in self.columns if c.semantic == "TIMESTAMP")

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.semantic == "TAG")

    def arrow_schema(self) -> pa.Schema:
        return pa.schema(
            [pa.field(c.name, c.arrow, nullable=c.semantic != "TIMESTAMP") for c in self.columns]
        )

    def altered(self, changes: Mapping[str, str | None]) -> TableSchema:
        """A copy with columns retyped (`{column: sql type}`) or dropped (`{column: None}`)."""
        cols = []
        for c in self.columns:
            if c.name not in changes:
                cols.append(c)
            elif (new := changes[c.name]) is not None:
                if new not in SQL_TYPES:
                    raise ValueError(f"{self.name}.{c.name}: unknown GreptimeDB type {new!r}")
                cols.append(Column(c.name, new, c.semantic))
        return TableSchema(self.name, tuple(cols), self.merge)

    def renamed_time_index(self, name: str) -> TableSchema:
        cols = tuple(
            Column(name, c.sql_type, c.semantic) if c.semantic == "TIMESTAMP" else c for c in self.columns
        )
        return TableSchema(self.name, cols, self.merge)


@dataclass(frozen=True, slots=True)
class Layout:
    """A set of table schemas; `time_column` is the name of every table's time index."""

    name: str
    time_column: str
    tables: Mapping[str, TableSchema]


def _table(
    name: str, merge: Merge, tags: Iterable[str], fields: Iterable[tuple[str, str]], ts: tuple[str, str]
) -> TableSchema:
    cols = [Column(t, "string", "TAG") for t in tags]
    cols += [Column(f, typ, "FIELD") for f, typ in fields]
    cols.append(Column(ts[0], ts[1], "TIMESTAMP"))
    return TableSchema(name, tuple(cols), merge)


def _line(name: str, tags: Iterable[str], fields: Iterable[tuple[str, str]]) -> TableSchema:
    return _table(name, "last_row", tags, fields, ("greptime_timestamp", "timestamp(9)"))


D, INT, B = "double", "bigint", "boolean"

#: Tags and fields in the order the writers add them (tags first: line protocol puts them first).
LINE_PROTOCOL: Final = Layout("line-protocol", "greptime_timestamp", {
    "tf_gpu_usage": _line("tf_gpu_usage", ("uuid", "node", "pool"), (
        ("rx", D), ("tx", D), ("temperature", D), ("memory_bytes", INT), ("memory_percentage", D),
        ("compute_percentage", D), ("compute_tflops", D), ("power_usage", D))),
    "tf_worker_usage": _line("tf_worker_usage", ("uuid", "node", "pool", "pod_name", "namespace", "workload", "worker"), (
        ("memory_bytes", INT), ("compute_percentage", D), ("compute_tflops", D), ("memory_percentage", D))),
    "tf_worker_resources": _line("tf_worker_resources", ("namespace", "pool", "qos", "worker", "workload"), (
        ("gpu_count", INT), ("tflops_limit", D), ("tflops_request", D), ("raw_cost", D), ("vram_bytes_limit", D),
        ("vram_bytes_request", D), ("ready", B))),
    "tf_node_metrics": _line("tf_node_metrics", ("node", "pool", "phase"), (
        ("allocated_tflops", D), ("allocated_tflops_percent", D), ("allocated_tflops_percent_virtual", D),
        ("allocated_vram_bytes", D), ("allocated_vram_percent", D), ("allocated_vram_percent_virtual", D),
        ("gpu_count", INT), ("raw_cost", D))),
    "tf_system_metrics": _line("tf_system_metrics", ("pool",), (
        ("total_workers_cnt", INT), ("total_nodes_cnt", INT), ("total_allocation_fail_cnt", INT),
        ("total_allocation_success_cnt", INT), ("total_scale_up_cnt", INT), ("total_scale_down_cnt", INT),
        ("total_topo_satisfied_cnt", INT), ("total_topo_unsatisfied_cnt", INT), ("total_topo_fallback_cnt", INT),
        ("total_topo_search_degraded_cnt", INT))),
    "tf_gpu_metrics": _line("tf_gpu_metrics", ("gpu", "node", "pool", "gpu_model", "phase"), (
        ("capacity_tflops", D), ("available_tflops", D), ("allocated_tflops", D), ("allocated_tflops_percent", D),
        ("capacity_vram_bytes", D), ("available_vram_bytes", D), ("allocated_vram_bytes", D),
        ("allocated_vram_percent", D))),
})  # fmt: skip


def _ddl(name: str, tags: Iterable[str], fields: Iterable[tuple[str, str]]) -> TableSchema:
    return _table(name, "last_non_null", tags, fields, ("ts", "timestamp(3)"))


U = "bigint unsigned"

#: The migration's CREATE TABLE statements, columns in their order (tags are the PRIMARY KEY).
MIGRATION_DDL: Final = Layout("migration-ddl", "ts", {
    "tf_worker_resources": _ddl("tf_worker_resources", ("worker", "workload", "pool", "namespace"), (
        ("qos", "string"), ("tflops_request", D), ("tflops_limit", D), ("vram_bytes_request", D),
        ("vram_bytes_limit", D), ("gpu_count", INT), ("raw_cost", D), ("ready", "string"))),
    "tf_node_metrics": _ddl("tf_node_metrics", ("node", "pool", "phase"), (
        ("allocated_tflops", D), ("allocated_tflops_percent", D), ("allocated_vram_bytes", D),
        ("allocated_vram_percent", D), ("allocated_tflops_percent_virtual", D),
        ("allocated_vram_percent_virtual", D), ("raw_cost", D), ("gpu_count", INT))),
    "tf_system_metrics": _ddl("tf_system_metrics", ("pool",), (
        ("total_workers_cnt", INT), ("total_nodes_cnt", INT), ("total_allocation_fail_cnt", INT),
        ("total_allocation_success_cnt", INT), ("total_scale_up_cnt", INT), ("total_scale_down_cnt", INT))),
    "tf_worker_usage": _ddl("tf_worker_usage", ("workload", "worker", "namespace", "pool", "node", "uuid"), (
        ("compute_tflops", D), ("compute_percentage", D), ("memory_bytes", U), ("memory_percentage", D),
        ("compute_throttled_cnt", INT), ("vram_freezed_cnt", INT), ("vram_resumed_cnt", INT))),
    "tf_gpu_usage": _ddl("tf_gpu_usage", ("node", "pool", "uuid"), (
        ("compute_percentage", D), ("memory_percentage", D), ("memory_bytes", U), ("compute_tflops", D),
        ("rx", D), ("tx", D), ("temperature", D), ("graphics_clock_mhz", D), ("sm_clock_mhz", D),
        ("memory_clock_mhz", D), ("video_clock_mhz", D), ("power_usage", D), ("nvlink_rx", D), ("nvlink_tx", D))),
    "tf_gpu_metrics": _ddl("tf_gpu_metrics", ("gpu", "node", "pool", "gpu_model"), (
        ("phase", "string"), ("capacity_tflops", D), ("available_tflops", D), ("allocated_tflops", D),
        ("allocated_tflops_percent", D), ("capacity_vram_bytes", D), ("available_vram_bytes", D),
        ("allocated_vram_bytes", D), ("allocated_vram_percent", D))),
})  # fmt: skip

LAYOUTS: Final[Mapping[str, Layout]] = {
    LINE_PROTOCOL.time_column: LINE_PROTOCOL,
    MIGRATION_DDL.time_column: MIGRATION_DDL,
}
