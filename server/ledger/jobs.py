"""The ledger's mirror of job states. The job runner's files (jobs/<id>/state.json) are the
durable truth for the scheduler; this table is what humans and the views query."""

from __future__ import annotations

import json
from typing import Any

from amid.server.ledger.database import Database

JSON_COLUMNS = ("command", "gpu_uuids", "tags")
COLUMNS = (
    "job_id",
    "agent_id",
    "status",
    "backend",
    "backend_job_id",
    "command",
    "cwd",
    "gpus",
    "gpu_uuids",
    "tags",
    "created_at",
    "started_at",
    "ended_at",
    "exit_code",
    "wall_s",
    "peak_gpu_mem_mb",
    "reason",
)


class Jobs:
    def __init__(self, db: Database) -> None:
        self.db = db

    def upsert(self, row: dict[str, Any]) -> None:
        values = [json.dumps(row[c]) if c in JSON_COLUMNS else row[c] for c in COLUMNS]
        placeholders = ", ".join("?" for _ in COLUMNS)
        self.db.execute(f"INSERT OR REPLACE INTO jobs ({', '.join(COLUMNS)}) VALUES ({placeholders})", values)

    def get(self, job_id: str) -> dict[str, Any] | None:
        return self.db.fetchone("SELECT * FROM jobs WHERE job_id = ?", [job_id])

    def count_active(self, agent_id: str) -> int:
        return int(
            self.db.scalar(
                "SELECT count(*) FROM jobs WHERE agent_id = ? AND status IN ('queued', 'running')", [agent_id]
            )
            or 0
        )

    def page(self, agent_id: str | None, status: str | None, limit: int) -> tuple[list[dict[str, Any]], int]:
        """The newest `limit` jobs (of one agent, in one status, when given) and how many there are: read
        here rather than from the scheduler, which holds only the unfinished and the recently ended."""
        where = "WHERE (? IS NULL OR agent_id = ?) AND (? IS NULL OR status = ?)"
        params = [agent_id, agent_id, status, status]
        rows = self.db.fetchall(
            f"SELECT * FROM jobs {where} ORDER BY created_at DESC, job_id DESC LIMIT ?", [*params, limit]
        )
        total = int(self.db.scalar(f"SELECT count(*) FROM jobs {where}", params) or 0)
        for row in rows:
            for column in JSON_COLUMNS:
                row[column] = json.loads(row[column]) if isinstance(row[column], str) else row[column]
        return rows, total
