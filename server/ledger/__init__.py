"""The ledger: the only package that writes SQL. One `Ledger` per server process."""

from __future__ import annotations

from pathlib import Path

from amid.server.ledger.activity import Activity
from amid.server.ledger.attempts import Attempts
from amid.server.ledger.audits import Audits
from amid.server.ledger.database import Database, utcnow
from amid.server.ledger.idempotency import IdempotencyKeys
from amid.server.ledger.identity import Identities, Identity, Role
from amid.server.ledger.jobs import Jobs
from amid.server.ledger.lanes import Lanes
from amid.server.ledger.notes import Notes
from amid.server.ledger.reviews import Reviews
from amid.server.ledger.roles import Roles
from amid.server.ledger.skills import Skills
from amid.server.ledger.supervision import Supervision
from amid.server.ledger.workers import Workers

__all__ = ["Database", "Identity", "Ledger", "Role", "utcnow"]


STATUS_TABLES = frozenset({"attempts", "lanes", "jobs", "reviews"})


class Ledger:
    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.db = Database(path, read_only=read_only)
        self.identities = Identities(self.db)
        self.activity = Activity(self.db)
        self.jobs = Jobs(self.db)
        self.lanes = Lanes(self.db)
        self.notes = Notes(self.db)
        self.attempts = Attempts(self.db)
        self.reviews = Reviews(self.db)
        self.audits = Audits(self.db)
        self.workers = Workers(self.db)
        self.supervision = Supervision(self.db)
        self.roles = Roles(self.db)
        self.skills = Skills(self.db)
        self.idempotency = IdempotencyKeys(self.db)

    def counts_by_status(self, table: str) -> dict[str, int]:
        if table not in STATUS_TABLES:
            raise ValueError(f"table {table!r} has no status column")
        rows = self.db.fetchall(f"SELECT status, count(*) AS n FROM {table} GROUP BY status ORDER BY status")
        return {row["status"]: int(row["n"]) for row in rows}

    def close(self) -> None:
        self.db.close()
