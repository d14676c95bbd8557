"""The DuckDB file: one read-write connection per server, numbered migrations, transactions.

DuckDB allows one read-write process per file; a second server on the same workspace fails at
`open` with DuckDB's lock error, which we turn into a message naming the holder. Inside the
process every statement goes through one connection guarded by a re-entrant lock: tool calls are
small and rare next to GPU hours, and one writer keeps ordering simple. Human SQL never runs on
that connection: it reads a snapshot on its own DuckDB instance (server/ledger/readonly.py).

Reads that many agents repeat (the lane table, the leaderboard, a review) are answered from memory
between writes (`cached`): every statement that writes names its table, and a committed write moves
that table's generation on; an answer is kept with the generations of the tables it read and is
used only while they are unchanged.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from amid.server.errors import Conflict
from amid.server.ledger import readonly


def utcnow() -> datetime:
    """Naive UTC timestamp (DuckDB TIMESTAMP has no zone; every stored time is UTC)."""
    return datetime.now(UTC).replace(tzinfo=None)


def _migrations() -> list[tuple[int, str]]:
    folder = resources.files("amid.server.ledger") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return sorted(found)


EVENT_BATCH = 64  # deferred events rows written in one statement at the latest
CACHED_ANSWERS = 512  # `cached` answers kept (least recently used go first)
EVERY_TABLE = "*"
# Many events rows in one statement, a list per column: binding one list costs far less than binding
# six parameters a row (64 rows: 7 ms instead of 27 ms on a loaded 2-core machine), and the rows keep
# their order (event ids follow it).
_INSERT_EVENTS = (
    "INSERT INTO events (occurred_at, agent_id, kind, subject_type, subject_id, payload) SELECT * FROM "
    "(SELECT unnest(?::TIMESTAMP[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
    "unnest(?::VARCHAR[]), unnest(?::VARCHAR[]))"
)
T = TypeVar("T")


def _base_tables(tree: Any) -> Iterator[str]:
    if isinstance(tree, dict):
        if tree.get("type") == "BASE_TABLE" and tree.get("table_name"):
            yield str(tree["table_name"])
        for value in tree.values():
            yield from _base_tables(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _base_tables(value)


# Statements that read (or change only the session): they move no generation. Anything else that is
# not an INSERT, UPDATE or DELETE of a table found below (a schema change, COPY, MERGE, ATTACH, a
# statement DuckDB cannot parse) moves every generation: a cache that forgets too much is only slower.
_READS = frozenset(
    {
        duckdb.StatementType.SELECT,
        duckdb.StatementType.EXPLAIN,
        duckdb.StatementType.PRAGMA,
        duckdb.StatementType.SET,
        duckdb.StatementType.VARIABLE_SET,
        duckdb.StatementType.TRANSACTION,
    }
)
_DML = frozenset({duckdb.StatementType.INSERT, duckdb.StatementType.UPDATE, duckdb.StatementType.DELETE})
_DML_VERBS = frozenset({"INSERT", "UPDATE", "DELETE"})
_CHECKPOINT = re.compile(r"(FORCE\s+)?CHECKPOINT", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)  # the ledger's statements are a few hundred constant texts
def written_tables(sql: str) -> frozenset[str]:
    """The tables a SQL text writes (`*`: it may write any, or change the schema), by DuckDB's own parser
    and tokenizer: a leading comment, a `WITH … INSERT` or several statements in one text are seen as
    what they are (a regex on the text's start missed them, and a missed write leaves stale answers)."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error:
        return frozenset({EVERY_TABLE})  # DuckDB refuses it too when it runs
    found = set()
    for statement in statements:
        if statement.type in _READS or _CHECKPOINT.fullmatch(statement.query.strip()):
            continue  # (a checkpoint moves committed rows into the file: no answer changes)
        target = _dml_target(statement.query) if statement.type in _DML else None
        found.add(target or EVERY_TABLE)
    return frozenset(found)


def _dml_target(query: str) -> str | None:
    """The table an INSERT, UPDATE or DELETE statement writes: the first name after its verb outside
    parentheses (a CTE's body is inside them), the last part of a qualified name, unquoted."""
    tokens = duckdb.tokenize(query)
    ends = [start for start, _ in tokens[1:]] + [len(query)]
    words = [(query[start:end].strip(), kind) for (start, kind), end in zip(tokens, ends, strict=True)]
    depth, verb, name = 0, False, None
    for i, (text, kind) in enumerate(words):
        if kind == duckdb.token_type.operator:
            depth += text.count("(") - text.count(")")
        elif depth == 0 and kind == duckdb.token_type.keyword and text.upper() in _DML_VERBS:
            verb = True
        elif depth == 0 and verb and kind == duckdb.token_type.identifier:
            name = text.strip('"').lower()
            if i + 1 < len(words) and words[i + 1][0] == ".":
                continue  # schema.table: the table follows
            return name
    return name


class Transaction:
    """The cursor of `Database.transaction`: statements run on the one connection; the tables they
    write are noted, and their generations move on when the transaction commits."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.written: set[str] = set()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> duckdb.DuckDBPyConnection:
        tables = written_tables(sql)
        self.written |= tables
        if self.db._batch is self:  # a read later in the batch must not be answered from before it
            for table in tables:
                self.db.touch(table)
        self.db._before(sql)
        return self.db._con.execute(sql, list(params))


class Database:
    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        try:
            self._con = duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            raise Conflict(f"ledger {path.name} is locked by another process: {exc}") from None
        if not read_only:
            # Statements here are small; DuckDB's worker threads cost more to wake than they save.
            self._con.execute("SET threads = 1")
        self._lock = threading.RLock()
        self._generations: dict[str, int] = {}
        self._answers: OrderedDict[Any, tuple[tuple[int, ...], Any]] = OrderedDict()
        self._in_transaction: list[tuple[Any, ...]] | None = None  # events flushed in the open one
        self.idempotency_known: set[tuple[str, str, str]] = set()  # server/ledger/idempotency.py
        self._tables_read: dict[str, frozenset[str]] = {}
        self._views: dict[str, str] | None = None  # name → definition, read once per schema
        self._deferred_events: list[tuple[Any, ...]] = []
        self._batch: Transaction | None = None  # the open `batch`, which every transaction joins
        if not read_only:
            self._migrate()
        self._human_reads = readonly.Snapshots(path, self.snapshot_to, path.parent / ".amid" / "snapshots")

    def close(self) -> None:
        self._human_reads.close()
        with self._lock:
            self._flush_events()
            self._con.close()

    def _migrate(self) -> None:
        with self._lock:
            self._con.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMP)"
            )
            applied = {row[0] for row in self._con.execute("SELECT version FROM schema_migrations").fetchall()}
            for version, sql in _migrations():
                if version in applied:
                    continue
                with self.transaction() as cur:
                    cur.execute(sql)
                    cur.execute("INSERT INTO schema_migrations VALUES (?, ?)", [version, utcnow()])

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """All statements inside commit together or not at all (nothing half-written). Deferred
        events flushed inside (a statement read events) go back to the queue on a rollback.
        Inside `batch`, the transaction is the batch's own (it commits with the batch)."""
        with self._lock:
            if self._batch is not None:
                yield self._batch
                return
            self._con.execute("BEGIN TRANSACTION")
            cursor = Transaction(self)
            self._in_transaction = []
            try:
                yield cursor
            except BaseException:
                self._con.execute("ROLLBACK")
                self._deferred_events[:0] = self._in_transaction
                raise
            finally:
                self._in_transaction = None
            self._con.execute("COMMIT")
            for table in cursor.written:
                self.touch(table)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Many ledger writes (each through its own method) committed as one transaction, for a
        bulk load (an import, a generated history): a commit per write costs more than the write.
        Every method's `transaction` joins it; an error anywhere rolls back the whole batch."""
        with self._lock:
            if self._batch is not None:
                yield
                return
            with self.transaction() as cursor:
                self._batch = cursor
                try:
                    yield
                except BaseException:
                    self.touch(EVERY_TABLE)  # answers computed inside saw writes that are rolled back
                    raise
                finally:
                    self._batch = None

    def defer_event(self, row: tuple[Any, ...]) -> None:
        """An events row (occurred_at, agent_id, kind, subject_type, subject_id, payload) written
        with the next statement that reads events, a snapshot or `close`, at the latest after
        `EVENT_BATCH` rows: one INSERT for many tool calls. Nothing read through this connection
        or a snapshot misses it; a killed process loses the batch."""
        with self._lock:
            self._deferred_events.append(row)
            if len(self._deferred_events) >= EVENT_BATCH:
                self._flush_events()

    def insert_events(self, rows: list[tuple[Any, ...]]) -> None:
        """Many events rows (as `defer_event` takes them) written now, in one statement (a bulk load);
        inside a transaction or `batch` they commit or roll back with it (deferred ones are re-queued)."""
        with self._lock:
            self._flush_events()  # deferred rows keep their place before these
            if rows:
                self._con.execute(_INSERT_EVENTS, [list(column) for column in zip(*rows, strict=True)])
                self.touch("events")

    def flush(self) -> None:
        """Write the deferred events now (a stopping server does, before anything that may outlast
        its client's patience)."""
        with self._lock:
            self._flush_events()

    def _flush_events(self) -> None:
        rows, self._deferred_events = self._deferred_events, []
        if rows:
            self._con.execute(_INSERT_EVENTS, [list(column) for column in zip(*rows, strict=True)])
            if self._in_transaction is not None:
                self._in_transaction.extend(rows)  # committed with it, or queued again
            self.touch("events")

    def _before(self, sql: str) -> None:
        if self._deferred_events and ("events" in sql or "v_agent_" in sql):
            self._flush_events()

    def touch(self, table: str) -> None:
        """`table` changed (every writing statement says so itself): in-memory answers derived from
        it (`generation`, `cached`) are stale. `*` moves every table on."""
        with self._lock:
            self._generations[table] = self._generations.get(table, 0) + 1
            if table == EVERY_TABLE:  # a view may be new or defined anew
                self._views = None
                self._tables_read.clear()

    def generation(self, table: str) -> int:
        return self._generations.get(table, 0) + self._generations.get(EVERY_TABLE, 0)

    def cached(self, key: Any, tables: Iterable[str], compute: Callable[[], T]) -> T:
        """`compute()`'s answer, kept while none of `tables` changes. The generations are read
        before computing: a write that lands meanwhile makes the kept answer stale at once."""
        names = tuple(tables)
        with self._lock:
            generations = tuple(self.generation(t) for t in names)
            found = self._answers.get(key)
            if found is not None and found[0] == generations:
                self._answers.move_to_end(key)
                return found[1]
        answer = compute()
        with self._lock:
            self._answers[key] = (generations, answer)
            self._answers.move_to_end(key)
            while len(self._answers) > CACHED_ANSWERS:
                self._answers.popitem(last=False)
        return answer

    def consistent(self) -> threading.RLock:
        """Hold it over several reads that must see one state: every write waits for it."""
        return self._lock

    def tables_read(self, sql: str) -> frozenset[str]:
        """The tables a SELECT reads, views followed down to their tables, by DuckDB's own parser
        (json_serialize_sql). Names of common table expressions come along; they never change."""
        found = self._tables_read.get(sql)
        if found is not None:
            return found
        with self._lock:
            tree = json.loads(self._con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])  # type: ignore[index]
            if tree.get("error"):
                raise ValueError(f"not a SELECT DuckDB can parse: {tree.get('error_message')}: {sql[:200]}")
            if self._views is None:
                self._views = dict(
                    self._con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall()
                )
            views = self._views
        names: set[str] = set()
        for name in _base_tables(tree):
            view = views.get(name)
            names |= self.tables_read(view.split(" AS ", 1)[1].rstrip().rstrip(";")) if view else {name.lower()}
        found = frozenset(names)
        self._tables_read[sql] = found
        return found

    def cached_fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """`fetchall` answered from memory while no table it reads has changed (rows are copies)."""
        if "now()" in sql.lower() or "current_" in sql.lower():
            raise ValueError("a cached read cannot depend on the clock: pass the time as a parameter")
        key = ("fetchall", sql, tuple(params))
        rows = self.cached(key, self.tables_read(sql), lambda: self.fetchall(sql, params))
        return [dict(row) for row in rows]

    def _run(self, sql: str, params: Sequence[Any]) -> duckdb.DuckDBPyConnection:
        """One statement outside a transaction (under the lock); a write moves its table on."""
        self._before(sql)
        result = self._con.execute(sql, list(params))
        for table in written_tables(sql):
            self.touch(table)
        return result

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self._lock:
            self._run(sql, params)

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._lock:
            cursor = self._run(sql, params)
            names = [d[0] for d in cursor.description or []]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def fetchone(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        rows = self.fetchall(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._lock:
            row = self._run(sql, params).fetchone()
        return row[0] if row else None

    def read_only_query(self, sql: str, limit: int = readonly.DEFAULT_LIMIT) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one SELECT for a human on the read path (see human_query); columns and rows."""
        page = self.human_query(sql, limit=limit)
        return page.columns, page.rows

    def human_query(self, sql: str, params: Sequence[Any] = (), **page: Any) -> readonly.QueryPage:
        """One SELECT on a fresh snapshot, never on this connection (limit, offset, time_limit_s)."""
        return self._human_reads.query(sql, params, **page)

    def snapshot_to(self, target: Path) -> readonly.ChangeKey:
        """Copy the ledger to `target` as of now; the file's change key at the copy."""
        with self._lock:
            self._flush_events()
            if not self.read_only:
                self._con.execute("CHECKPOINT")  # everything committed is in the main file
            shutil.copyfile(self.path, target)
            wal = self.path.with_name(self.path.name + ".wal")
            if wal.is_file():  # read-only: no CHECKPOINT; the copy replays the WAL when opened
                shutil.copyfile(wal, target.with_name(target.name + ".wal"))
            return readonly.change_key(self.path)
