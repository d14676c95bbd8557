"""Managed workers: their current state and every transition, and the live facts the stall watchdog needs."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from amid.server.ledger.database import Database, utcnow


class Workers:
    def __init__(self, db: Database) -> None:
        self.db = db

    def transition(
        self,
        agent_id: str,
        backend: str,
        to_state: str,
        event: str,
        session_id: str | None,
        detail: dict[str, Any],
        recorded_by: str,
    ) -> str | None:
        """Record one transition and the worker's new state together; returns the state it left."""
        now = utcnow()
        with self.db.transaction() as cur:
            row = cur.execute("SELECT state FROM workers WHERE agent_id = ?", [agent_id]).fetchone()
            from_state = row[0] if row else None
            cur.execute(
                "INSERT OR REPLACE INTO workers VALUES (?, ?, ?, ?, ?)", [agent_id, backend, to_state, session_id, now]
            )
            cur.execute(
                "INSERT INTO worker_transitions (agent_id, event, from_state, to_state, session_id, detail, "
                "recorded_by, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [agent_id, event, from_state, to_state, session_id, json.dumps(detail, default=str), recorded_by, now],
            )
            given = [int(i) for i in detail.get("heartbeat_ids") or []]
            if given:  # a heartbeat given as the CLI's prompt is delivered: no tool result gives it again
                marks = ", ".join("?" * len(given))
                cur.execute(
                    f"UPDATE heartbeats SET delivered_at = ? WHERE agent_id = ? AND delivered_at IS NULL "
                    f"AND heartbeat_id IN ({marks})",
                    [now, agent_id, *given],
                )
        return from_state

    def state(self, agent_id: str) -> dict[str, Any] | None:
        return self.db.fetchone("SELECT * FROM workers WHERE agent_id = ?", [agent_id])

    def transitions(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        return self.db.fetchall(
            "SELECT * FROM worker_transitions WHERE (? IS NULL OR agent_id = ?) ORDER BY transition_id",
            [agent_id, agent_id],
        )

    def pending_work(self, agent_id: str) -> dict[str, int]:
        """The agent's jobs and reviews still queued or running (the watchdog leaves such a worker alone)."""
        jobs = self.db.scalar(
            "SELECT count(*) FROM jobs WHERE agent_id = ? AND status IN ('queued', 'running')", [agent_id]
        )
        reviews = self.db.scalar(
            "SELECT count(*) FROM reviews r JOIN attempts a USING (attempt_id) "
            "WHERE a.agent_id = ? AND r.status IN ('queued', 'running')",
            [agent_id],
        )
        return {"jobs": int(jobs or 0), "reviews": int(reviews or 0)}

    def last_tool_call(self, agent_id: str) -> datetime | None:
        value = self.db.scalar(
            "SELECT max(occurred_at) FROM events WHERE agent_id = ? AND kind = 'tool_call'", [agent_id]
        )
        return value if isinstance(value, datetime) else None

    def delivered_heartbeat_ids(self, agent_id: str) -> set[int]:
        """Heartbeats a managed worker's CLI was started or resumed with (named in the transition's detail)."""
        rows = self.db.fetchall(
            "SELECT detail FROM worker_transitions WHERE agent_id = ? AND detail LIKE '%heartbeat_ids%'", [agent_id]
        )
        return {int(i) for row in rows for i in json.loads(row["detail"] or "{}").get("heartbeat_ids", [])}

    def undelivered_heartbeats(self, agent_id: str) -> list[dict[str, Any]]:
        """The agent's heartbeats neither read in a tool result (delivered_at) nor given to its CLI in a resume."""
        rows = self.db.fetchall(
            "SELECT heartbeat_id, kind, prompt FROM heartbeats WHERE agent_id = ? AND delivered_at IS NULL "
            "ORDER BY heartbeat_id",
            [agent_id],
        )
        given = self.delivered_heartbeat_ids(agent_id)
        return [row for row in rows if row["heartbeat_id"] not in given]

    def summary(self) -> list[dict[str, Any]]:
        """Every managed worker: backend, state, session, the sandbox of its last start and why it failed since."""
        rows = self.db.fetchall("SELECT agent_id, backend, state, session_id FROM workers ORDER BY agent_id")
        for row in rows:
            started = self.db.fetchone(
                "SELECT detail FROM worker_transitions WHERE agent_id = ? AND detail LIKE '%\"sandbox\"%' "
                "ORDER BY transition_id DESC LIMIT 1",
                [row["agent_id"]],
            )
            row["sandbox"] = json.loads(started["detail"]).get("sandbox") if started else None
            row["reason"] = self._reason_since_launch(row["agent_id"])
        return rows

    def _reason_since_launch(self, agent_id: str) -> str | None:
        """Why the worker's last launch failed or paused (None while it runs, or after a clean turn)."""
        failed = self.db.fetchone(
            "SELECT detail FROM worker_transitions WHERE agent_id = ? AND detail LIKE '%\"reason\"%' AND "
            "transition_id > coalesce((SELECT max(transition_id) FROM worker_transitions WHERE agent_id = ? AND "
            "event IN ('started', 'restarted', 'resumed', 'delivered')), -1) ORDER BY transition_id DESC LIMIT 1",
            [agent_id, agent_id],
        )
        reason = json.loads(failed["detail"]).get("reason") if failed else None
        return None if reason is None else str(reason)
