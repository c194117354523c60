"""PostgreSQL wire protocol (v3) in front of `Engine`, answering as GreptimeDB's pgwire server does.

Start-up: SSL and GSS encryption requests are declined (`N`); the database is checked *before*
authentication, as GreptimeDB does (unknown: FATAL 3D000 `Database not found: <db>`); then a
cleartext password (GreptimeDB's default with a static user provider), FATAL 28P01 `password
authentication failed` when it is wrong; then GreptimeDB's five ParameterStatus values (no
`standard_conforming_strings`, no `TimeZone`) and ReadyForQuery.

Simple query (`Q`): the text is split into statements, each answered in turn; an empty query gets
EmptyQueryResponse (psycopg_pool's connection check sends one). Extended query (`P`/`B`/`D`/`E`/
`S`/`C`/`H`): parameters in text or binary format for the usual OIDs are bound to DataFusion's
`$n` placeholders; after an error the messages up to Sync are skipped. Results are sent in text
format only (binary result columns are refused). `BEGIN` puts the session "in a transaction"
(ReadyForQuery `T`) without any transaction semantics, as pgwire does for GreptimeDB.

One thread per connection (`socketserver.ThreadingTCPServer`); DataFusion releases the GIL while it
executes, so concurrent queries of a connection pool do run in parallel.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import struct
import threading
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, BinaryIO, Final

from tests.greptime_dialect.engine import DialectError, Engine, Result, Session

__all__ = ["WireServer"]

SSL_REQUEST, GSS_REQUEST, CANCEL_REQUEST, PROTOCOL_3 = 80877103, 80877104, 80877102, 196608
PG_EPOCH: Final = datetime(2000, 1, 1)
PARAMETERS: Final = {
    "server_version": "16.3-greptimedb-dialect",  # GreptimeDB: 16.3-<product>-<version>
    "server_encoding": "UTF8",
    "client_encoding": "UTF8",
    "DateStyle": "ISO YMD",
    "integer_datetimes": "on",
}
TYPE_LEN: Final = {16: 1, 20: 8, 21: 2, 23: 4, 700: 4, 701: 8, 1114: 8, 1082: 4}


class _Closed(Exception):
    """The client went away."""


def _cstr(data: bytes, at: int) -> tuple[str, int]:
    end = data.index(b"\0", at)
    return data[at:end].decode(), end + 1


def _message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _error_body(e: DialectError) -> bytes:
    parts = [
        b"S" + e.severity.encode(),
        b"V" + e.severity.encode(),
        b"C" + e.code.encode(),
        b"M" + e.message.encode(),
    ]
    return b"".join(p + b"\0" for p in parts) + b"\0"


def _decode_numeric(raw: bytes) -> Decimal:
    ndigits, weight, sign, dscale = struct.unpack("!hhHH", raw[:8])
    if sign == 0xC000:
        return Decimal("NaN")
    digits = struct.unpack(f"!{ndigits}H", raw[8 : 8 + 2 * ndigits])
    value = Decimal(0)
    for i, d in enumerate(digits):
        value += Decimal(d) * (Decimal(10000) ** (weight - i))
    value = value.quantize(Decimal(1).scaleb(-dscale)) if dscale else value
    return -value if sign == 0x4000 else value


def _param(raw: bytes | None, oid: int, binary: bool) -> Any:
    """A bound parameter as the Python value DataFusion's `param_values` takes."""
    if raw is None:
        return None
    if binary:
        if oid == 16:
            return raw != b"\0"
        if oid in (20, 21, 23):
            return int.from_bytes(raw, "big", signed=True)
        if oid == 700:
            return struct.unpack("!f", raw)[0]
        if oid == 701:
            return struct.unpack("!d", raw)[0]
        if oid in (1114, 1184):
            return PG_EPOCH + timedelta(microseconds=struct.unpack("!q", raw)[0])
        if oid == 1082:
            return date(2000, 1, 1) + timedelta(days=struct.unpack("!i", raw)[0])
        if oid == 1700:
            return _number(_decode_numeric(raw))
        if oid in (0, 25, 705, 1043, 1042):
            return raw.decode()
        raise DialectError(
            "0A000", f"binary parameters of type OID {oid} are not supported by this test server"
        )
    text = raw.decode()
    if oid == 16:
        return text.lower() in ("t", "true", "1", "on", "yes")
    if oid in (20, 21, 23):
        return int(text)
    if oid in (700, 701):
        return float(text)
    if oid == 1700:
        return _number(Decimal(text))
    if oid in (1114, 1184):
        dt = datetime.fromisoformat(text)
        return dt.astimezone(UTC).replace(tzinfo=None) if dt.tzinfo else dt
    if oid == 1082:
        return date.fromisoformat(text)
    return text


def _number(d: Decimal) -> int | float:
    return int(d) if d == d.to_integral_value() else float(d)


@dataclass
class _Statement:
    sql: str
    oids: list[int]


@dataclass
class _Portal:
    statement: _Statement
    params: list[Any]
    result: Result | None = None
    done: bool = False


@dataclass
class _Conn:
    rfile: BinaryIO
    sock: socket.socket
    session: Session
    out: bytearray = field(default_factory=bytearray)
    status: bytes = b"I"
    statements: dict[str, _Statement] = field(default_factory=dict)
    portals: dict[str, _Portal] = field(default_factory=dict)

    def send(self, kind: bytes, body: bytes = b"") -> None:
        self.out += _message(kind, body)
        if len(self.out) > 1 << 16:
            self.flush()

    def flush(self) -> None:
        if self.out:
            self.sock.sendall(self.out)
            self.out.clear()

    def read(self, n: int) -> bytes:
        data = self.rfile.read(n)
        if data is None or len(data) < n:
            raise _Closed
        return data


class WireServer:
    """The TCP server: `start()` binds 127.0.0.1 on a free port (or `port`), `stop()` closes it."""

    def __init__(self, engine: Engine, user: str, password: str, port: int = 0) -> None:
        self.engine = engine
        self.user = user
        self.password = password
        self._port = port
        self._server: socketserver.ThreadingTCPServer | None = None
        self._thread: threading.Thread | None = None
        self._socks: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.queries: list[str] = []  # every statement text received (a test can check what was sent)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def start(self) -> WireServer:
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", self._port), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="greptime-dialect", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self.kill_connections()
        self._server = None

    def kill_connections(self) -> int:
        """Cut every open connection (as `pg_terminate_backend` does); returns how many."""
        with self._lock:
            socks = list(self._socks)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        return len(socks)

    def connections(self) -> int:
        with self._lock:
            return len(self._socks)

    # -- one connection ---------------------------------------------------------------------------

    def _serve(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._socks.add(sock)
        try:
            with sock.makefile("rb") as rfile:
                conn = self._startup(sock, rfile)
                if conn is not None:
                    self._loop(conn)
        except (_Closed, OSError):
            pass
        finally:
            with self._lock:
                self._socks.discard(sock)

    def _startup(self, sock: socket.socket, rfile: BinaryIO) -> _Conn | None:
        probe = _Conn(rfile, sock, Session(""))
        while True:
            (length,) = struct.unpack("!i", probe.read(4))
            body = probe.read(length - 4)
            (code,) = struct.unpack("!i", body[:4])
            if code in (SSL_REQUEST, GSS_REQUEST):
                sock.sendall(b"N")
                continue
            if code == CANCEL_REQUEST:
                return None
            if code != PROTOCOL_3:
                self._fatal(
                    probe, DialectError("08P01", f"unsupported protocol {code >> 16}.{code & 0xFFFF}")
                )
                return None
            break
        params: dict[str, str] = {}
        at = 4
        while body[at : at + 1] not in (b"\0", b""):
            key, at = _cstr(body, at)
            params[key], at = _cstr(body, at)
        user = params.get("user", "")
        db = params.get("database") or user
        schema = db.split("-", 1)[1] if db.startswith("greptime-") else db  # `<catalog>-<schema>`
        if not self.engine.has_database(schema):
            self._fatal(probe, DialectError("3D000", f"Database not found: {db}", "FATAL"))
            return None
        probe.send(b"R", struct.pack("!i", 3))  # AuthenticationCleartextPassword
        probe.flush()
        kind = probe.read(1)
        (length,) = struct.unpack("!i", probe.read(4))
        password = probe.read(length - 4).rstrip(b"\0").decode(errors="replace")
        if kind != b"p" or user != self.user or password != self.password:
            self._fatal(probe, DialectError("28P01", "password authentication failed", "FATAL"))
            return None
        conn = _Conn(rfile, sock, Session(schema))
        conn.send(b"R", struct.pack("!i", 0))
        for key, value in PARAMETERS.items():
            conn.send(b"S", f"{key}\0{value}\0".encode())
        conn.send(b"K", struct.pack("!ii", 0, 0))  # GreptimeDB: no cancellation (0, 0)
        conn.send(b"Z", conn.status)
        conn.flush()
        return conn

    @staticmethod
    def _fatal(conn: _Conn, e: DialectError) -> None:
        conn.send(b"E", _error_body(e))
        conn.flush()

    def _loop(self, conn: _Conn) -> None:
        failed = False  # extended protocol: skip to Sync after an error
        while True:
            kind = conn.read(1)
            (length,) = struct.unpack("!i", conn.read(4))
            body = conn.read(length - 4)
            if kind == b"X":
                return
            if kind == b"S":
                failed = False
                conn.send(b"Z", conn.status)
                conn.flush()
                continue
            if kind == b"H":
                conn.flush()
                continue
            if kind == b"Q":
                self._simple(conn, _cstr(body, 0)[0])
                conn.send(b"Z", conn.status)
                conn.flush()
                continue
            if failed:
                continue
            try:
                self._extended(conn, kind, body)
            except DialectError as e:
                self._failed(conn, e)
                failed = True
            except (ValueError, struct.error, IndexError) as exc:
                self._failed(conn, DialectError("08P01", f"malformed message {kind!r}: {exc}"))
                failed = True

    def _failed(self, conn: _Conn, e: DialectError) -> None:
        if conn.status == b"T":
            conn.status = b"E"
        conn.send(b"E", _error_body(e))

    def _run(self, conn: _Conn, sql: str, params: list[Any]) -> Result:
        self.queries.append(sql)
        result = self.engine.execute(conn.session, sql, params)
        for notice in conn.session.notices:
            conn.send(b"N", _error_body(DialectError("01000", notice, "WARNING")))
        conn.session.notices.clear()
        tag = result.tag.split()[0]
        if tag in ("BEGIN", "START"):
            conn.status = b"T"
        elif tag in ("COMMIT", "ROLLBACK"):
            conn.status = b"I"
        return result

    def _simple(self, conn: _Conn, text: str) -> None:
        from tests.greptime_dialect.sqltext import split_statements

        statements = split_statements(text)
        if not statements:
            conn.send(b"I")
            return
        for sql in statements:
            try:
                result = self._run(conn, sql, [])
            except DialectError as e:
                self._failed(conn, e)
                return
            if result.fields is not None:
                self._describe(conn, result)
            self._rows(conn, result)

    @staticmethod
    def _describe(conn: _Conn, result: Result) -> None:
        assert result.fields is not None
        body = bytearray(struct.pack("!h", len(result.fields)))
        for name, oid in result.fields:
            body += name.encode() + b"\0" + struct.pack("!ihihih", 0, 0, oid, TYPE_LEN.get(oid, -1), -1, 0)
        conn.send(b"T", bytes(body))

    @staticmethod
    def _rows(conn: _Conn, result: Result) -> None:
        for row in result.rows:
            body = bytearray(struct.pack("!h", len(row)))
            for v in row:
                body += b"\xff\xff\xff\xff" if v is None else struct.pack("!i", len(v)) + v
            conn.send(b"D", bytes(body))
        conn.send(b"C", result.tag.encode() + b"\0")

    def _extended(self, conn: _Conn, kind: bytes, body: bytes) -> None:
        if kind == b"P":
            name, at = _cstr(body, 0)
            sql, at = _cstr(body, at)
            (n,) = struct.unpack("!h", body[at : at + 2])
            oids = list(struct.unpack(f"!{n}i", body[at + 2 : at + 2 + 4 * n]))
            conn.statements[name] = _Statement(sql, oids)
            conn.send(b"1")
        elif kind == b"B":
            self._bind(conn, body)
            conn.send(b"2")
        elif kind == b"D":
            what, name = body[:1], _cstr(body, 1)[0]
            if what == b"S":
                st = self._statement(conn, name)
                count = max(len(st.oids), _placeholders(st.sql))
                oids = [*st.oids, *([0] * (count - len(st.oids)))]
                conn.send(b"t", struct.pack(f"!h{len(oids)}i", len(oids), *oids))
                conn.send(b"n")  # the columns are described on the portal
            else:
                portal = self._portal(conn, name)
                if not portal.statement.sql.strip():
                    conn.send(b"n")
                    return
                portal.result = self._run(conn, portal.statement.sql, portal.params)
                if portal.result.fields is None:
                    conn.send(b"n")
                else:
                    self._describe(conn, portal.result)
        elif kind == b"E":
            name, _at = _cstr(body, 0)
            portal = self._portal(conn, name)
            if not portal.statement.sql.strip():
                conn.send(b"I")
                return
            if portal.result is None:
                portal.result = self._run(conn, portal.statement.sql, portal.params)
            if portal.done:
                conn.send(b"C", portal.result.tag.encode() + b"\0")
                return
            self._rows(conn, portal.result)
            portal.done = True
        elif kind == b"C":
            what, name = body[:1], _cstr(body, 1)[0]
            (conn.statements if what == b"S" else conn.portals).pop(name, None)
            conn.send(b"3")
        else:
            raise DialectError("08P01", f"unsupported message type {kind!r}")

    @staticmethod
    def _statement(conn: _Conn, name: str) -> _Statement:
        st = conn.statements.get(name)
        if st is None:
            raise DialectError("26000", f"prepared statement {name!r} does not exist")
        return st

    @staticmethod
    def _portal(conn: _Conn, name: str) -> _Portal:
        portal = conn.portals.get(name)
        if portal is None:
            raise DialectError("34000", f"portal {name!r} does not exist")
        return portal

    def _bind(self, conn: _Conn, body: bytes) -> None:
        portal, at = _cstr(body, 0)
        stmt, at = _cstr(body, at)
        st = self._statement(conn, stmt)
        (nf,) = struct.unpack("!h", body[at : at + 2])
        formats = list(struct.unpack(f"!{nf}h", body[at + 2 : at + 2 + 2 * nf]))
        at += 2 + 2 * nf
        (n,) = struct.unpack("!h", body[at : at + 2])
        at += 2
        params = []
        for i in range(n):
            (size,) = struct.unpack("!i", body[at : at + 4])
            at += 4
            raw = None if size < 0 else body[at : at + size]
            at += max(size, 0)
            fmt = formats[0] if nf == 1 else (formats[i] if i < nf else 0)
            oid = st.oids[i] if i < len(st.oids) else 0
            params.append(_param(raw, oid, fmt == 1))
        (nr,) = struct.unpack("!h", body[at : at + 2])
        results = struct.unpack(f"!{nr}h", body[at + 2 : at + 2 + 2 * nr])
        if any(results):
            raise DialectError("0A000", "binary result columns are not supported by this test server")
        conn.portals[portal] = _Portal(st, params)


def _placeholders(sql: str) -> int:
    import re

    found = [int(m) for m in re.findall(r"\$(\d+)", sql)]
    return max(found, default=0)
