"""Agents and their bearer tokens. Only a sha256 of each token is stored."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from typing import Any, Literal

from pydantic import BaseModel

from amid.server.errors import Conflict, NotFound, invalid
from amid.server.ledger.database import Database, utcnow

Role = Literal["agent", "supervisor", "human"]
ROLES: tuple[Role, ...] = ("agent", "supervisor", "human")
AGENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")


class Identity(BaseModel):
    agent_id: str
    role: Role


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_agent_name(name: str) -> str:
    if not AGENT_NAME.match(name):
        raise invalid("name", name, "1-48 characters of a-z, 0-9, '_' or '-', starting with a letter or digit")
    return name


class Identities:
    """Verified tokens are remembered in memory (every HTTP request is verified): this process is
    the ledger's only writer, and `revoke` forgets them, so a revoked token is refused at once."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._verified: dict[str, Identity] = {}

    def create_token(self, name: str, role: Role, metadata: dict[str, Any] | None = None) -> str:
        """Register the agent if new and issue a fresh token; an agent keeps one role for life."""
        check_agent_name(name)
        if role not in ROLES:
            raise invalid("role", role, f"one of {', '.join(ROLES)}")
        token = "amid_" + secrets.token_urlsafe(32)
        now = utcnow()
        with self.db.transaction() as cur:
            row = cur.execute("SELECT role FROM agents WHERE agent_id = ?", [name]).fetchone()
            if row and row[0] != role:
                raise Conflict(f"name: agent {name!r} already exists with role {row[0]!r}, not {role!r}")
            if not row:
                cur.execute("INSERT INTO agents VALUES (?, ?, ?, ?)", [name, role, now, json.dumps(metadata or {})])
            cur.execute(
                "INSERT INTO tokens VALUES (?, ?, ?, ?, ?, NULL)",
                [hash_token(token), token[:9] + "…", name, role, now],
            )
        return token

    def verify(self, token: str) -> Identity | None:
        digest = hash_token(token)
        known = self._verified.get(digest)
        if known is not None:
            return known
        row = self.db.fetchone(
            "SELECT agent_id, role FROM tokens WHERE token_hash = ? AND revoked_at IS NULL", [digest]
        )
        if row is None:
            return None
        self._verified[digest] = identity = Identity(**row)
        return identity

    def revoke(self, name: str) -> int:
        """Revoke every live token of an agent; returns how many."""
        with self.db.transaction() as cur:
            count = cur.execute(
                "SELECT count(*) FROM tokens WHERE agent_id = ? AND revoked_at IS NULL", [name]
            ).fetchone()
            if not count or count[0] == 0:
                raise NotFound(f"name: no live token for agent {name!r}; see `amid token list`", field="name")
            cur.execute("UPDATE tokens SET revoked_at = ? WHERE agent_id = ? AND revoked_at IS NULL", [utcnow(), name])
            self._verified = {d: i for d, i in self._verified.items() if i.agent_id != name}
        return int(count[0])

    def list(self) -> list[dict[str, Any]]:
        return self.db.fetchall(
            "SELECT agent_id, role, token_hint, created_at, revoked_at FROM tokens ORDER BY created_at"
        )

    def role_of(self, agent_id: str) -> Role | None:
        value = self.db.scalar("SELECT role FROM agents WHERE agent_id = ?", [agent_id])
        return value if value in ROLES else None
