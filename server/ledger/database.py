"""The DuckDB file: one read-write connection per server, numbered migrations, transactions.

DuckDB allows one read-write process per file; a second server on the same workspace fails at
`open` with DuckDB's lock error, which we turn into a message naming the holder. Inside the
process every statement goes through one connection guarded by a re-entrant lock: tool calls are
small and rare next to GPU hours, and one writer keeps ordering simple. Human SQL never runs on
that connection: it reads a snapshot on its own DuckDB instance (server/ledger/readonly.py).
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

from server.errors import Conflict
from server.ledger import readonly


def utcnow() -> datetime:
    """Naive UTC timestamp (DuckDB TIMESTAMP has no zone; every stored time is UTC)."""
    return datetime.now(UTC).replace(tzinfo=None)


def _migrations() -> list[tuple[int, str]]:
    folder = resources.files("server.ledger") / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return sorted(found)


EVENT_BATCH = 64  # deferred events rows written in one statement at the latest


class Database:
    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        try:
            self._con = duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            raise Conflict(f"ledger {path.name} is locked by another process: {exc}") from None
        self._lock = threading.RLock()
        self._generations: dict[str, int] = {}
        self._deferred_events: list[tuple[Any, ...]] = []
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
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """All statements inside commit together or not at all (nothing half-written)."""
        with self._lock:
            self._flush_events()
            self._con.execute("BEGIN TRANSACTION")
            try:
                yield self._con
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            self._con.execute("COMMIT")

    def defer_event(self, row: tuple[Any, ...]) -> None:
        """An events row (occurred_at, agent_id, kind, subject_type, subject_id, payload) written
        with the next statement that reads events, the next transaction, a snapshot or `close`,
        at the latest after `EVENT_BATCH` rows: one INSERT for many tool calls. Nothing read
        through this connection or a snapshot misses it; a killed process loses the batch."""
        with self._lock:
            self._deferred_events.append(row)
            if len(self._deferred_events) >= EVENT_BATCH:
                self._flush_events()

    def _flush_events(self) -> None:
        rows, self._deferred_events = self._deferred_events, []
        if rows:
            values = ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(rows))
            sql = f"INSERT INTO events (occurred_at, agent_id, kind, subject_type, subject_id, payload) VALUES {values}"
            self._con.execute(sql, [value for row in rows for value in row])

    def _before(self, sql: str) -> None:
        if self._deferred_events and ("events" in sql or "v_agent_" in sql):
            self._flush_events()

    def touch(self, table: str) -> None:
        """A writer of `table` says so: in-memory answers derived from it (`generation`) are stale."""
        self._generations[table] = self._generations.get(table, 0) + 1

    def generation(self, table: str) -> int:
        return self._generations.get(table, 0)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        with self._lock:
            self._before(sql)
            self._con.execute(sql, list(params))

    def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._lock:
            self._before(sql)
            cursor = self._con.execute(sql, list(params))
            names = [d[0] for d in cursor.description or []]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def fetchone(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        rows = self.fetchall(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._lock:
            self._before(sql)
            row = self._con.execute(sql, list(params)).fetchone()
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
