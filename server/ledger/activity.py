"""The append-only events log, run state, heartbeats (the inbox) and notes."""

from __future__ import annotations

import json
from typing import Any

from amid.server.ledger.database import Database, utcnow


class Activity:
    """Run state and "no pending heartbeats" are answered from memory between writes (each tool
    call reads both): every writer of those tables calls `db.touch`, which makes them stale."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._state: tuple[int, dict[str, Any]] | None = None  # (generation, key -> value)
        self._no_inbox: tuple[int, set[str]] = (-1, set())  # (generation, agents with none pending)

    def log(
        self,
        kind: str,
        *,
        agent_id: str | None,
        subject_type: str | None = None,
        subject_id: str | None = None,
        payload: dict[str, Any] | None = None,
        deferred: bool = False,
    ) -> None:
        """Append an event; `deferred`: batched with others (`Database.defer_event`), for one per call."""
        row = (utcnow(), agent_id, kind, subject_type, subject_id, json.dumps(payload or {}, default=str))
        if deferred:
            self.db.defer_event(row)
            return
        self.db.execute(
            "INSERT INTO events (occurred_at, agent_id, kind, subject_type, subject_id, payload) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            list(row),
        )

    def log_many(self, events: list[tuple[str, str | None, str | None, str | None, dict[str, Any] | None]]) -> None:
        """Append many events (kind, agent_id, subject_type, subject_id, payload) in one statement (a bulk load)."""
        now = utcnow()
        self.db.insert_events(
            [
                (now, agent, kind, s_type, s_id, json.dumps(payload or {}, default=str))
                for kind, agent, s_type, s_id, payload in events
            ]
        )

    def events(self, *, agent_id: str | None = None, kind: str | None = None, limit: int = 100) -> list[dict]:
        return self.db.fetchall(
            "SELECT * FROM events WHERE (? IS NULL OR agent_id = ?) AND (? IS NULL OR kind = ?) "
            "ORDER BY event_id DESC LIMIT ?",
            [agent_id, agent_id, kind, kind, limit],
        )

    # run state: small JSON values (stage, contract hash, primary metric, started_at)
    def set_state(self, key: str, value: Any) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO run_state VALUES (?, ?, ?)", [key, json.dumps(value, default=str), utcnow()]
        )

    def get_state(self, key: str, default: Any = None) -> Any:
        generation = self.db.generation("run_state")
        if self._state is None or self._state[0] != generation:
            rows = self.db.fetchall("SELECT key, value FROM run_state")
            self._state = (generation, {row["key"]: row["value"] for row in rows})
        raw = self._state[1].get(key)
        return json.loads(raw) if raw is not None else default

    def add_heartbeat(self, agent_id: str, kind: str, prompt: str, sent_by: str, trigger: dict | None) -> int:
        with self.db.transaction() as cur:
            row = cur.execute(
                "INSERT INTO heartbeats (agent_id, kind, prompt, sent_by, trigger, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING heartbeat_id",
                [agent_id, kind, prompt, sent_by, json.dumps(trigger or {}), utcnow()],
            ).fetchone()
        assert row is not None
        return int(row[0])

    def take_inbox(self, agent_id: str) -> list[dict[str, Any]]:
        """Pending heartbeats of one agent, marked delivered in the same transaction. Most calls
        find none, and are answered from memory until a heartbeat is queued."""
        generation, none_pending = self._no_inbox
        if generation != self.db.generation("heartbeats"):
            generation, none_pending = self._no_inbox = (self.db.generation("heartbeats"), set())
        if agent_id in none_pending:
            return []
        if not self.db.scalar(
            "SELECT 1 FROM heartbeats WHERE agent_id = ? AND delivered_at IS NULL LIMIT 1", [agent_id]
        ):
            none_pending.add(agent_id)
            return []
        with self.db.transaction() as cur:
            cursor = cur.execute(
                "SELECT heartbeat_id, kind, prompt, created_at FROM heartbeats "
                "WHERE agent_id = ? AND delivered_at IS NULL ORDER BY heartbeat_id",
                [agent_id],
            )
            names = [d[0] for d in cursor.description or []]
            rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
            if rows:
                cur.execute(
                    "UPDATE heartbeats SET delivered_at = ? WHERE agent_id = ? AND delivered_at IS NULL",
                    [utcnow(), agent_id],
                )
        return rows

    def pending_heartbeats(self) -> int:
        return int(self.db.scalar("SELECT count(*) FROM heartbeats WHERE delivered_at IS NULL") or 0)
