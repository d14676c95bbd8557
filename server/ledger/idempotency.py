"""Idempotency keys: the first result of a keyed write call, by agent, tool and key."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from server.ledger.database import Database, utcnow


@dataclass(frozen=True)
class Receipt:
    """What a keyed call records: who, which tool, the key, and a digest of its arguments."""

    agent_id: str
    tool: str
    key: str
    request_digest: str


class IdempotencyKeys:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, agent_id: str, tool: str, key: str) -> dict[str, Any] | None:
        row = self.db.fetchone(
            "SELECT request_digest, result, created_at FROM idempotency_keys "
            "WHERE agent_id = ? AND tool = ? AND idempotency_key = ?",
            [agent_id, tool, key],
        )
        if row is not None:
            row["result"] = json.loads(row["result"])
        return row

    def record(self, receipt: Receipt, result: dict[str, Any]) -> None:
        with self.db.transaction() as cur:
            self.insert(cur, receipt, result)

    @staticmethod
    def insert(cur: Any, receipt: Receipt, result: dict[str, Any]) -> None:
        """Inside another transaction: the write and its key commit together. A key already
        recorded (by the write's own transaction) is left as it is."""
        cur.execute(
            "INSERT INTO idempotency_keys VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [receipt.agent_id, receipt.tool, receipt.key, receipt.request_digest, json.dumps(result), utcnow()],
        )
