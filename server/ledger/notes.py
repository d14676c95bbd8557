"""Notes: the shared memory agents write (observations, reflections, focus notes, decisions), and the
ledger's status of the attempts and reviews a note names (what readers are shown beside it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from amid.server.ledger.database import Database, utcnow
from amid.server.ledger.idempotency import IdempotencyKeys, Receipt


class Notes:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(
        self,
        agent_id: str,
        kind: str,
        lane_id: str | None,
        title: str,
        body: str,
        data: dict[str, Any],
        *,
        receipt: Receipt | None = None,
        result_of: Callable[[int], dict[str, Any]] | None = None,
    ) -> int:
        """Insert a note; with a receipt, its idempotency key commits in the same transaction (a
        retried post after a lost answer finds it, whenever the server died)."""
        with self.db.transaction() as cur:
            row = cur.execute(
                "INSERT INTO notes (agent_id, kind, lane_id, title, body, data, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING note_id",
                [agent_id, kind, lane_id, title, body, json.dumps(data), utcnow()],
            ).fetchone()
            assert row is not None
            if receipt is not None and result_of is not None:
                IdempotencyKeys.insert(cur, receipt, result_of(int(row[0])))
        return int(row[0])

    def list(
        self,
        *,
        lane_id: str | None = None,
        kind: str | None = None,
        agent_id: str | None = None,
        before_id: int | None = None,
        limit: int = 20,
    ) -> list[dict[str, Any]]:
        return self.db.cached_fetchall(
            "SELECT * FROM notes WHERE (? IS NULL OR lane_id = ?) AND (? IS NULL OR kind = ?) "
            "AND (? IS NULL OR agent_id = ?) AND (? IS NULL OR note_id < ?) ORDER BY note_id DESC LIMIT ?",
            [lane_id, lane_id, kind, kind, agent_id, agent_id, before_id, before_id, limit],
        )

    def cited(self, refs: set[str]) -> dict[str, tuple[str, str]]:
        """ref → (attempt id, the attempt's status now) for attempt ids and review ids; unknown ids are absent."""
        if not refs:
            return {}
        rows = self.db.fetchall(
            "SELECT attempt_id AS ref, attempt_id, status FROM attempts WHERE list_contains(?, attempt_id) "
            "UNION ALL SELECT r.review_id, a.attempt_id, a.status FROM reviews r JOIN attempts a USING (attempt_id) "
            "WHERE list_contains(?, r.review_id)",
            [sorted(refs), sorted(refs)],
        )
        return {str(r["ref"]): (str(r["attempt_id"]), str(r["status"])) for r in rows}
