"""Re-audits of accepted attempts (docs/ARCHITECTURE.md §7) and the revocations they cause.

An audit is recorded in one transaction: the audit row, every check it ran (passed or not) and,
for each attempt whose evidence failed, `accepted → revoked` — only if the attempt is still
accepted, so a review that judged it again meanwhile is not overwritten.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from amid.server.ledger.database import Database, utcnow


@dataclass(frozen=True)
class AuditCheckRow:
    attempt_id: str
    code: str
    passed: bool
    message: str
    evidence: dict[str, Any]


class Audits:
    def __init__(self, db: Database) -> None:
        self.db = db

    def accepted(self) -> list[dict[str, Any]]:
        """The attempts an audit re-checks: every accepted one."""
        return self.db.fetchall(
            "SELECT attempt_id, agent_id, lane_id, commit_sha FROM attempts WHERE status = 'accepted' "
            "ORDER BY attempt_id"
        )

    def record(
        self, requested_by: str, started_at: datetime, n_attempts: int, checks: list[AuditCheckRow]
    ) -> tuple[str, list[str]]:
        """Store the audit and revoke every still-accepted attempt with a failed check; returns
        (audit_id, the attempts it revoked)."""
        failed = sorted({c.attempt_id for c in checks if not c.passed})
        with self.db.transaction() as cur:
            number = cur.execute("SELECT nextval('audit_seq')").fetchone()
            assert number is not None
            audit_id, now = f"aud-{int(number[0]):05d}", utcnow()
            revoked = [attempt_id for attempt_id in failed if self._revoke(cur, attempt_id, now)]
            cur.execute(
                "INSERT INTO audits VALUES (?, ?, ?, ?, ?, ?)",
                [audit_id, requested_by, started_at, now, n_attempts, len(revoked)],
            )
            for c in checks:
                cur.execute(
                    "INSERT INTO audit_checks VALUES (?, ?, ?, ?, ?, ?)",
                    [audit_id, c.attempt_id, c.code, c.passed, c.message, json.dumps(c.evidence, default=str)],
                )
        return audit_id, revoked

    @staticmethod
    def _revoke(cur: Any, attempt_id: str, now: datetime) -> bool:
        row = cur.execute(
            "UPDATE attempts SET status = 'revoked', updated_at = ?, change_seq = nextval('attempt_changes') "
            "WHERE attempt_id = ? AND status = 'accepted' "
            "RETURNING attempt_id",
            [now, attempt_id],
        ).fetchone()
        return row is not None

    def revocations(self, attempt_id: str) -> list[dict[str, Any]]:
        """The failed audit checks of an attempt, latest audit first."""
        rows = self.db.fetchall(
            "SELECT c.audit_id, au.finished_at, c.code, c.message, c.evidence FROM audit_checks c "
            "JOIN audits au USING (audit_id) WHERE c.attempt_id = ? AND NOT c.passed "
            "ORDER BY au.finished_at DESC, c.code",
            [attempt_id],
        )
        for row in rows:
            row["evidence"] = json.loads(row["evidence"]) if row["evidence"] else {}
        return rows
