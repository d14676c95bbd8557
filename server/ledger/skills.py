"""Skill versions: every save of an agent's skill is a numbered, attributed, hashed row (issue 12).

A version is recorded in one transaction with the write of its file, which runs inside it: a failed
write leaves no row, and the caller removes a written file when the commit fails. Seeded skills have
no rows. The rules that need the whole table in one place live here: names are owned by their first
author, a name that folds (case, dashes) onto another skill's name is refused, and a repeated
idempotency key of the same author returns the first version if the content is the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from amid.server.errors import Conflict
from amid.server.ledger.database import Database, utcnow

COLUMNS = "name, version, author, description, sha256, path, created_at"


@dataclass(frozen=True)
class NewSkillVersion:
    name: str
    name_key: str
    author: str
    description: str
    idempotency_key: str | None
    content: dict[str, str]  # field → digest of what the caller sent (name, description, body)


@dataclass(frozen=True)
class SkillVersion:
    name: str
    version: int
    author: str
    description: str
    sha256: str
    path: str
    created_at: datetime


class Skills:
    def __init__(self, db: Database) -> None:
        self.db = db

    def latest(self, name: str) -> SkillVersion | None:
        row = self.db.fetchone(
            f"SELECT {COLUMNS} FROM skill_versions WHERE name = ? ORDER BY version DESC LIMIT 1", [name]
        )
        return SkillVersion(**row) if row else None

    def get(self, name: str, version: int) -> SkillVersion | None:
        row = self.db.fetchone(f"SELECT {COLUMNS} FROM skill_versions WHERE name = ? AND version = ?", [name, version])
        return SkillVersion(**row) if row else None

    def versions(self, name: str) -> list[int]:
        rows = self.db.fetchall("SELECT version FROM skill_versions WHERE name = ? ORDER BY version", [name])
        return [int(r["version"]) for r in rows]

    def all_latest(self) -> dict[str, SkillVersion]:
        rows = self.db.fetchall(
            f"SELECT {COLUMNS} FROM skill_versions "
            "QUALIFY row_number() OVER (PARTITION BY name ORDER BY version DESC) = 1"
        )
        return {r["name"]: SkillVersion(**r) for r in rows}

    def add(self, new: NewSkillVersion, write: Callable[[int], tuple[str, str]]) -> tuple[SkillVersion, bool]:
        """Record the next version of `new.name`; returns (version, created).

        `write(version)` writes the version's files and returns (workspace-relative path, sha256); it
        runs inside the transaction, so if it raises nothing is recorded. Unchanged content returns
        the latest version with created False, as does a repeated idempotency key with the same content.
        """
        with self.db.transaction() as cur:
            if new.idempotency_key and (known := self._by_key(cur, new)):
                return known, False
            self._check_owner(cur, new)
            latest = self._latest(cur, new.name)
            if latest is not None and self._same_content(cur, latest, new):
                return latest, False
            version = latest.version + 1 if latest else 1
            path, sha = write(version)
            now = utcnow()
            cur.execute(
                "INSERT INTO skill_versions (name, name_key, version, author, description, sha256, path, "
                "idempotency_key, content_digests, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    new.name,
                    new.name_key,
                    version,
                    new.author,
                    new.description,
                    sha,
                    path,
                    new.idempotency_key,
                    json.dumps(new.content),
                    now,
                ],
            )
        return SkillVersion(new.name, version, new.author, new.description, sha, path, now), True

    @staticmethod
    def _latest(cur: Any, name: str) -> SkillVersion | None:
        row = cur.execute(
            f"SELECT {COLUMNS} FROM skill_versions WHERE name = ? ORDER BY version DESC LIMIT 1", [name]
        ).fetchone()
        return SkillVersion(*row) if row else None

    @staticmethod
    def _check_owner(cur: Any, new: NewSkillVersion) -> None:
        rows = cur.execute(
            "SELECT DISTINCT name, author FROM skill_versions WHERE name_key = ? ORDER BY name", [new.name_key]
        ).fetchall()
        for name, author in rows:
            if name != new.name:
                raise Conflict(
                    f"name: {new.name!r} is too close to the skill {name!r} by {author}; "
                    + ("update that one" if author == new.author else "choose a distinct name"),
                    field="name",
                )
            if author != new.author:
                raise Conflict(
                    f"name: skill {new.name!r} exists and is not yours (author {author}); choose another name",
                    field="name",
                )

    @staticmethod
    def _same_content(cur: Any, latest: SkillVersion, new: NewSkillVersion) -> bool:
        row = cur.execute(
            "SELECT content_digests FROM skill_versions WHERE name = ? AND version = ?", [latest.name, latest.version]
        ).fetchone()
        return row is not None and json.loads(row[0]) == new.content

    @staticmethod
    def _by_key(cur: Any, new: NewSkillVersion) -> SkillVersion | None:
        row = cur.execute(
            f"SELECT {COLUMNS}, content_digests FROM skill_versions WHERE author = ? AND idempotency_key = ?",
            [new.author, new.idempotency_key],
        ).fetchone()
        if row is None:
            return None
        known = json.loads(row[-1])
        differing = sorted(field for field in new.content if known.get(field) != new.content[field])
        if differing:
            raise Conflict(
                f"idempotency_key: {new.idempotency_key!r} was used for {row[0]} version {row[1]} with a different "
                f"{', '.join(differing)}; resend the same content to get that version, or use a new key",
                field="idempotency_key",
            )
        return SkillVersion(*row[:-1])
