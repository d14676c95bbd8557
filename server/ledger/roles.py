"""Exploitation roles (docs/ARCHITECTURE.md §9): the supervisor's assignment of a role to each agent per stage."""

from __future__ import annotations

from typing import Any

from amid.server.ledger.database import Database, utcnow

ROLES = ("explorer", "optimizer", "challenger", "repair", "support", "finalizer")


class Roles:
    def __init__(self, db: Database) -> None:
        self.db = db

    def assign(
        self, agent_id: str, stage: str, role: str, lane_id: str | None, reason: str, assigned_by: str
    ) -> tuple[int, bool]:
        """Record `role` for the agent in `stage`; a repeat of its current assignment is a no-op
        (returns that assignment's id and False), so a restarted supervisor never duplicates one."""
        with self.db.transaction() as cur:
            row = cur.execute(
                "SELECT assignment_id, stage, role, lane_id FROM role_assignments WHERE agent_id = ? "
                "ORDER BY assignment_id DESC LIMIT 1",
                [agent_id],
            ).fetchone()
            if row is not None and tuple(row[1:]) == (stage, role, lane_id):
                return int(row[0]), False
            created = cur.execute(
                "INSERT INTO role_assignments (agent_id, stage, role, lane_id, reason, assigned_by, assigned_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING assignment_id",
                [agent_id, stage, role, lane_id, reason, assigned_by, utcnow()],
            ).fetchone()
        assert created is not None
        return int(created[0]), True

    def current(self, agent_id: str) -> dict[str, Any] | None:
        rows = self.db.cached_fetchall(
            "SELECT stage, role, lane_id, reason FROM role_assignments WHERE agent_id = ? "
            "ORDER BY assignment_id DESC LIMIT 1",
            [agent_id],
        )
        return rows[0] if rows else None
