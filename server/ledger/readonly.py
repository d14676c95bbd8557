"""Human SQL: a read path apart from the agents' connection.

The server's one read-write connection belongs to the agents' tool calls. A human query runs on
its own DuckDB instance over a snapshot of the ledger: a copy taken right after CHECKPOINT while
the ledger lock is held for a few milliseconds, taken again only when the ledger changed. The copy
is opened read-only, with file access disabled and the configuration locked, on one thread and a
memory cap, so a query cannot read or write a file, advance a sequence, change a setting, or stall
the agents by holding their lock. A statement runs only if DuckDB's own parser says it is one
SELECT; it is interrupted after a time limit and returns one page of rows.

    SqlRefused (InvalidInput), its code naming the case:
    SQL_PARSE, SQL_STATEMENTS, SQL_NOT_SELECT, SQL_SIDE_EFFECT, SQL_FILE_ACCESS, SQL_READ_ONLY,
    SQL_TIMEOUT, SQL_MEMORY, SQL_ERROR, SQL_PAGE
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from amid.server.errors import InvalidInput
from amid.server.processes import pid_alive

DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
DEFAULT_TIME_LIMIT_S = 10.0
MAX_TIME_LIMIT_S = 120.0
MAX_SNAPSHOT_AGE_S = 5.0  # refresh at least this often even if the files look unchanged
READER_CONFIG: dict[str, str | bool | int] = {
    "enable_external_access": False,  # no file readers, no ATTACH of files, no extension installs
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "threads": 1,  # a heavy query takes one core, never the agents' share
    "memory_limit": "2GB",
    "lock_configuration": True,  # last: nothing can SET these back
}
SIDE_EFFECT_FUNCTIONS = frozenset({"nextval", "setval"})
VIEWS_HINT = "list the views with: SELECT view_name FROM duckdb_views() WHERE NOT internal"

ChangeKey = tuple[Any, ...]


class SqlRefused(InvalidInput):
    """A human query that the read path will not run; `code` names the case."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"sql: {message}", field="sql")
        self.code = code


@dataclass(frozen=True)
class QueryPage:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    offset: int
    has_more: bool


def open_reader(path: Path) -> duckdb.DuckDBPyConnection:
    """Open a ledger file (a snapshot) the way human queries see it."""
    return duckdb.connect(str(path), read_only=True, config=dict(READER_CONFIG))


def check_page(limit: int, offset: int, time_limit_s: float) -> None:
    if not 1 <= limit <= MAX_LIMIT:
        raise SqlRefused("SQL_PAGE", f"limit: got {limit}; expected 1 to {MAX_LIMIT} rows (page on with --offset)")
    if offset < 0:
        raise SqlRefused("SQL_PAGE", f"offset: got {offset}; expected 0 or more rows to skip")
    if not 0 < time_limit_s <= MAX_TIME_LIMIT_S:
        limits = f"expected more than 0, at most {MAX_TIME_LIMIT_S:g}"
        raise SqlRefused("SQL_PAGE", f"time limit: got {time_limit_s} s; {limits}")


def check_statement(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse all but one SELECT, judged by DuckDB's parser, and SELECTs that call side effects."""
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise SqlRefused("SQL_PARSE", f"does not parse ({_first_line(exc)}); fix the SQL text") from None
    if len(statements) != 1:
        raise SqlRefused(
            "SQL_STATEMENTS", f"got {len(statements)} statements; send exactly one SELECT (no ';'-separated list)"
        )
    kind = statements[0].type.name
    if kind != "SELECT":  # not EXPLAIN: EXPLAIN ANALYZE runs its statement
        raise SqlRefused("SQL_NOT_SELECT", f"{kind} statements are refused; only one SELECT is allowed (read-only)")
    for node in _syntax_nodes(con, sql):
        name = node.get("function_name")
        if isinstance(name, str) and name.lower() in SIDE_EFFECT_FUNCTIONS:
            raise SqlRefused("SQL_SIDE_EFFECT", f"{name}() changes a sequence; read sequences in duckdb_sequences()")
        table = node.get("table_name") if node.get("type") == "BASE_TABLE" else None
        if isinstance(table, str) and any(mark in table for mark in "/\\."):
            raise SqlRefused("SQL_FILE_ACCESS", f"{table!r} is a file; human SQL reads ledger tables ({VIEWS_HINT})")


def _syntax_nodes(con: duckdb.DuckDBPyConnection, sql: str) -> Iterator[dict[str, Any]]:
    row = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    tree = json.loads(row[0]) if row else {}
    stack: list[Any] = [tree.get("statements", [])]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def run_query(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: Sequence[Any] = (),
    *,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> QueryPage:
    """One checked SELECT on its own cursor of `con`, interrupted after `time_limit_s`."""
    check_page(limit, offset, time_limit_s)
    cursor = con.cursor()
    timer = threading.Timer(time_limit_s, cursor.interrupt)
    try:
        check_statement(cursor, sql)
        timer.start()
        result = cursor.execute(sql, list(params))
        columns = [d[0] for d in result.description or []]
        _skip(result, offset)
        rows = result.fetchmany(limit + 1)
    except duckdb.Error as exc:
        raise translate(exc, time_limit_s) from None
    finally:
        timer.cancel()
        cursor.close()
    return QueryPage(columns, rows[:limit], offset, len(rows) > limit)


def _skip(result: duckdb.DuckDBPyConnection, n: int) -> None:
    while n > 0:
        got = len(result.fetchmany(min(n, 10_000)))
        if not got:
            return
        n -= got


def translate(exc: duckdb.Error, time_limit_s: float) -> SqlRefused:
    """DuckDB's errors on the read path, each as the coded refusal that names the fix."""
    text = _first_line(exc)
    if isinstance(exc, duckdb.InterruptException):
        return SqlRefused(
            "SQL_TIMEOUT", f"stopped after the time limit of {time_limit_s:g} s; narrow the query or raise --time-limit"
        )
    if isinstance(exc, duckdb.PermissionException):
        return SqlRefused("SQL_FILE_ACCESS", f"file access is disabled for human SQL ({text}); {VIEWS_HINT}")
    if isinstance(exc, duckdb.OutOfMemoryException):
        cap = READER_CONFIG["memory_limit"]
        return SqlRefused("SQL_MEMORY", f"the query needs more than {cap} ({text}); aggregate or page it")
    if "read-only" in text:
        return SqlRefused("SQL_READ_ONLY", f"the ledger is read-only here ({text}); only reads are allowed")
    if isinstance(exc, duckdb.ParserException):
        return SqlRefused("SQL_PARSE", f"does not parse ({text}); fix the SQL text")
    return SqlRefused("SQL_ERROR", f"{text} ({VIEWS_HINT})")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def change_key(ledger_path: Path) -> ChangeKey:
    """What changes whenever DuckDB commits to the file: the file's and its WAL's stat."""
    key: list[Any] = []
    for path in (ledger_path, ledger_path.with_name(ledger_path.name + ".wal")):
        try:
            st = path.stat()
            key.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            key.append(None)
    return tuple(key)


@dataclass
class _Reader:
    con: duckdb.DuckDBPyConnection
    path: Path
    key: ChangeKey
    taken_at: float
    users: int = 0
    retired: bool = False


class Snapshots:
    """The human read path of one open ledger: snapshots refreshed when the ledger changed.

    `take(target)` copies the ledger to `target` consistently and returns its change key as of the
    copy (the Database does this under its lock). Files are named by process id, so CLI processes
    and the server never share one; a reader still in use when a newer one arrives is closed (and its
    file removed) by its last query.
    """

    def __init__(self, ledger_path: Path, take: Callable[[Path], ChangeKey], folder: Path) -> None:
        self._ledger_path = ledger_path
        self._take = take
        self._folder = folder
        self._lock = threading.Lock()  # guards _current and the readers' use counts
        self._refreshing = threading.Lock()
        self._current: _Reader | None = None
        self._generation = 0
        _remove_orphans(folder)

    def query(self, sql: str, params: Sequence[Any] = (), **page: Any) -> QueryPage:
        reader = self._acquire()
        try:
            return run_query(reader.con, sql, params, **page)
        finally:
            self._release(reader)

    def close(self) -> None:
        with self._lock:
            reader, self._current = self._current, None
        if reader is not None:
            self._retire(reader)

    def _acquire(self) -> _Reader:
        with self._refreshing:
            current = self._current
            fresh = current is not None and current.key == change_key(self._ledger_path)
            if not fresh or time.monotonic() - current.taken_at > MAX_SNAPSHOT_AGE_S:  # type: ignore[union-attr]
                self._swap(self._open_new())
            with self._lock:
                reader = self._current
                assert reader is not None
                reader.users += 1
                return reader

    def _open_new(self) -> _Reader:
        self._generation += 1
        self._folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        target = self._folder / f"ledger-{os.getpid()}-{self._generation}.duckdb"
        _unlink(target)
        key = self._take(target)
        target.chmod(0o600)
        return _Reader(open_reader(target), target, key, time.monotonic())

    def _swap(self, reader: _Reader) -> None:
        with self._lock:
            old, self._current = self._current, reader
        if old is not None:
            self._retire(old)

    def _retire(self, reader: _Reader) -> None:
        with self._lock:
            reader.retired = True
            idle = reader.users == 0
        if idle:
            _close(reader)

    def _release(self, reader: _Reader) -> None:
        with self._lock:
            reader.users -= 1
            idle = reader.retired and reader.users == 0
        if idle:
            _close(reader)


def _close(reader: _Reader) -> None:
    reader.con.close()
    _unlink(reader.path)


def _unlink(path: Path) -> None:
    for stale in (path, path.with_name(path.name + ".wal")):
        stale.unlink(missing_ok=True)


def _remove_orphans(folder: Path) -> None:
    """Snapshots left by processes that died (their pid is the second part of the name)."""
    for path in folder.glob("ledger-*-*.duckdb*") if folder.is_dir() else ():
        pid = path.name.split("-")[1]
        if pid.isdigit() and not pid_alive(int(pid)):
            path.unlink(missing_ok=True)
