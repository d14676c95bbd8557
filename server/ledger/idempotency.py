"""Idempotency keys: the first result of a keyed write call, by agent, tool and key."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from amid.server.ledger.database import Database, Transaction, utcnow


@dataclass(frozen=True)
class Receipt:
    """What a keyed call records: who, which tool, the key, and a digest of its arguments."""

    agent_id: str
    tool: str
    key: str
    request_digest: str


class IdempotencyKeys:
    """Keys are looked up in memory first: the set of every recorded (agent, tool, key), read at
    first use and grown by each insert (before its commit, so a rolled-back one stays in the set and
    is merely looked up in vain). A first call, the usual case, costs no statement."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._loaded = False

    def _known(self) -> set[tuple[str, str, str]]:
        if not self._loaded:
            rows = self.db.fetchall("SELECT agent_id, tool, idempotency_key FROM idempotency_keys")
            self.db.idempotency_known.update((r["agent_id"], r["tool"], r["idempotency_key"]) for r in rows)
            self._loaded = True
        return self.db.idempotency_known

    def get(self, agent_id: str, tool: str, key: str) -> dict[str, Any] | None:
        if (agent_id, tool, key) not in self._known():
            return None
        row = self.db.fetchone(
            "SELECT request_digest, result, created_at FROM idempotency_keys "
            "WHERE agent_id = ? AND tool = ? AND idempotency_key = ?",
            [agent_id, tool, key],
        )
        if row is not None:
            row["result"] = json.loads(row["result"])
        return row

    def record(self, receipt: Receipt, result: dict[str, Any]) -> None:
        """After the work: a key the work's own transaction recorded (post_note) is left as it is."""
        if (receipt.agent_id, receipt.tool, receipt.key) in self._known():
            return
        with self.db.transaction() as cur:
            self.insert(cur, receipt, result)

    @staticmethod
    def insert(cur: Transaction, receipt: Receipt, result: dict[str, Any]) -> None:
        """Inside another transaction: the write and its key commit together. Called for a key not
        recorded yet (the caller holds the key's lock and looked it up): a plain INSERT, since
        DuckDB's ON CONFLICT costs about three plain ones."""
        cur.execute(
            "INSERT INTO idempotency_keys VALUES (?, ?, ?, ?, ?, ?)",
            [receipt.agent_id, receipt.tool, receipt.key, receipt.request_digest, json.dumps(result), utcnow()],
        )
        cur.db.idempotency_known.add((receipt.agent_id, receipt.tool, receipt.key))
