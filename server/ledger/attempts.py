"""Attempts, their frozen artifacts and their declared scores (docs/ARCHITECTURE.md §7).

An attempt is recorded in one transaction with every artifact row and every declared (`agent`)
metric row, so a failed submission leaves nothing behind. Reviewer rows are written by
`amid.server.ledger.reviews`; declared and verified rows never overwrite each other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amid.server.errors import Conflict, Forbidden, NotFound
from amid.server.ledger.database import Database, utcnow

ATTEMPT_STATUSES = ("pending", "in_review", "accepted", "rejected", "withdrawn", "revoked")


@dataclass(frozen=True)
class ArtifactRow:
    role: str
    declared_path: str
    sha256: str
    size_bytes: int
    frozen_path: str
    fold: int | None = None
    member: str | None = None


@dataclass
class NewAttempt:
    agent_id: str
    lane_id: str | None
    commit_sha: str
    folds: list[int]
    budget_class: str | None
    parent_attempt_id: str | None
    inference_command: list[str] | None
    idempotency_key: str | None
    summary: str | None
    claims: list[str] = field(default_factory=list)
    artifacts: list[ArtifactRow] = field(default_factory=list)
    declared: dict[int, dict[str, float]] = field(default_factory=dict)

    def content_digests(self) -> dict[str, str]:
        """One digest per submit_attempt field of what the attempt claims (all but the key itself),
        so that a retried submission can be told from a different one, field by field."""
        artifacts = sorted(
            json.dumps([a.role, a.fold, a.member, a.declared_path, a.sha256, a.size_bytes]) for a in self.artifacts
        )
        fields: dict[str, object] = {
            "commit": self.commit_sha,
            "folds": self.folds,
            "declared_scores": self.declared,
            "artifacts": artifacts,
            "lane_id": self.lane_id,
            "budget_class": self.budget_class,
            "parent_attempt_id": self.parent_attempt_id,
            "claims_improvement": self.claims,
            "inference_command": self.inference_command,
            "summary": self.summary,
        }
        return {name: _digest(value) for name, value in fields.items()}


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def attempt_id_for(number: int) -> str:
    return f"att-{number:05d}"


def _row(attempt_id: str, new: NewAttempt, content: dict[str, str], now: Any) -> list[Any]:
    """An attempts row's values, in the INSERT's column order (status is the literal 'pending')."""
    return [
        attempt_id,
        new.agent_id,
        new.lane_id,
        new.commit_sha,
        json.dumps(new.folds),
        new.budget_class,
        new.parent_attempt_id,
        json.dumps(new.inference_command) if new.inference_command else None,
        new.idempotency_key,
        new.summary,
        now,
        now,
        json.dumps(new.claims),
        json.dumps(content),
    ]


class Attempts:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, new: NewAttempt, on_created: Callable[[str], str] | None = None) -> tuple[str, bool]:
        """Insert the attempt with its artifacts and declared scores; returns (attempt_id, created).

        A repeated idempotency key of the same agent returns the first attempt if the content is
        the same, and is a Conflict naming the key and the differing fields if not. `on_created`
        runs inside the transaction (it writes the manifest and pins the commit) and returns the
        manifest path; if it raises, nothing is recorded.
        """
        content = new.content_digests()
        with self.db.transaction() as cur:
            if new.idempotency_key and (known := self._by_key(cur, new, content)):
                return known, False
            number = cur.execute("SELECT nextval('attempt_seq')").fetchone()
            assert number is not None
            attempt_id = attempt_id_for(int(number[0]))
            now = utcnow()
            cur.execute(
                "INSERT INTO attempts (attempt_id, agent_id, lane_id, commit_sha, folds, status, budget_class, "
                "parent_attempt_id, inference_command, idempotency_key, summary, created_at, updated_at, claims, "
                "content_digests) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                _row(attempt_id, new, content, now),
            )
            self._insert_artifacts(cur, attempt_id, new.artifacts)
            for fold, scores in sorted(new.declared.items()):
                for metric, value in sorted(scores.items()):
                    cur.execute(
                        "INSERT INTO metrics (attempt_id, source, scope, fold, metric, value, recorded_at) "
                        "VALUES (?, 'agent', 'fold', ?, ?, ?, ?)",
                        [attempt_id, fold, metric, value, now],
                    )
            if on_created is not None:
                manifest = on_created(attempt_id)
                cur.execute("UPDATE attempts SET manifest_path = ? WHERE attempt_id = ?", [manifest, attempt_id])
        return attempt_id, True

    def create_many(self, news: list[NewAttempt]) -> list[tuple[str, bool]]:
        """`create` for many attempts in one transaction and a few statements whatever their number
        (a bulk load: an imported or generated history); (attempt_id, created) for each, in order.
        The same rules: a known key of the same agent with the same content returns its attempt, with
        other content it is a Conflict (and nothing is recorded). No `on_created` (no manifest)."""
        contents = [new.content_digests() for new in news]
        keys = sorted({new.idempotency_key for new in news if new.idempotency_key})
        out: list[tuple[str, bool]] = []
        with self.db.transaction() as cur:
            known: dict[tuple[str, str], tuple[str, str | None]] = {}
            if keys:
                rows = cur.execute(
                    "SELECT agent_id, idempotency_key, attempt_id, content_digests FROM attempts "
                    "WHERE list_contains(?, idempotency_key)",
                    [keys],
                ).fetchall()
                known = {(r[0], r[1]): (str(r[2]), r[3]) for r in rows}
            first_of: dict[int, int] = {}  # a key repeated in the list: its first occurrence
            seen: dict[tuple[str, str], int] = {}
            for i, new in enumerate(news):
                key = (new.agent_id, new.idempotency_key or "")
                if new.idempotency_key and key not in known:
                    first_of[i] = seen.setdefault(key, i)
            fresh = [i for i, new in enumerate(news) if not new.idempotency_key or first_of.get(i) == i]
            numbers = cur.execute("SELECT nextval('attempt_seq') FROM range(?)", [len(fresh)]).fetchall()
            ids = dict(zip(fresh, (attempt_id_for(n) for n in sorted(int(r[0]) for r in numbers)), strict=True))
            now = utcnow()
            rows_in: list[list[Any]] = []
            for i, (new, content) in enumerate(zip(news, contents, strict=True)):
                if i not in ids:
                    earlier = first_of.get(i)
                    digests: str | None
                    if earlier is not None:
                        attempt_id, digests = ids[earlier], json.dumps(contents[earlier])
                    else:
                        attempt_id, digests = known[(new.agent_id, new.idempotency_key or "")]
                    out.append((self._known(new, content, attempt_id, digests), False))
                    continue
                out.append((ids[i], True))
                rows_in.append(_row(ids[i], new, content, now))
            if not rows_in:
                return out
            columns = [list(c) for c in zip(*rows_in, strict=True)]
            types = ["VARCHAR"] * 10 + ["TIMESTAMP"] * 2 + ["VARCHAR"] * 2
            cur.execute(
                "INSERT INTO attempts (attempt_id, agent_id, lane_id, commit_sha, folds, status, budget_class, "
                "parent_attempt_id, inference_command, idempotency_key, summary, created_at, updated_at, claims, "
                "content_digests) SELECT c0, c1, c2, c3, c4, 'pending', c5, c6, c7, c8, c9, c10, c11, c12, c13 FROM "
                f"(SELECT {', '.join(f'unnest(?::{t}[]) AS c{k}' for k, t in enumerate(types))})",
                columns,
            )
            metrics = [
                [ids[i], fold, metric, value, now]
                for i, new in enumerate(news)
                if i in ids
                for fold, scores in sorted(new.declared.items())
                for metric, value in sorted(scores.items())
            ]
            if metrics:
                cur.execute(
                    "INSERT INTO metrics (attempt_id, source, scope, fold, metric, value, recorded_at) "
                    "SELECT c0, 'agent', 'fold', c1, c2, c3, c4 FROM (SELECT unnest(?::VARCHAR[]) AS c0, "
                    "unnest(?::INTEGER[]) AS c1, unnest(?::VARCHAR[]) AS c2, unnest(?::DOUBLE[]) AS c3, "
                    "unnest(?::TIMESTAMP[]) AS c4)",
                    [list(c) for c in zip(*metrics, strict=True)],
                )
            for i, new in enumerate(news):
                if i in ids:
                    self._insert_artifacts(cur, ids[i], new.artifacts)
        return out

    @staticmethod
    def _by_key(cur: Any, new: NewAttempt, content: dict[str, str]) -> str | None:
        row = cur.execute(
            "SELECT attempt_id, content_digests FROM attempts WHERE agent_id = ? AND idempotency_key = ?",
            [new.agent_id, new.idempotency_key],
        ).fetchone()
        if row is None:
            return None
        return Attempts._known(new, content, str(row[0]), row[1])

    @staticmethod
    def _known(new: NewAttempt, content: dict[str, str], attempt_id: str, digests: str | None) -> str:
        """The attempt a repeated key names, if the content is the same (a Conflict naming the fields if not)."""
        row = (attempt_id, digests)
        known = json.loads(row[1]) if row[1] else content  # attempts recorded before content was kept
        differing = sorted(name for name in content if known.get(name) != content[name])
        if differing:
            raise Conflict(
                f"idempotency_key: {new.idempotency_key!r} was used for attempt {row[0]} with a different "
                f"{', '.join(differing)}; resend the same content to get that attempt, or use a new key",
                field="idempotency_key",
            )
        return str(row[0])

    @staticmethod
    def _insert_artifacts(cur: Any, attempt_id: str, artifacts: list[ArtifactRow]) -> None:
        for a in artifacts:
            cur.execute(
                "INSERT INTO artifacts (attempt_id, role, declared_path, sha256, size_bytes, frozen_path, fold, "
                "member) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [attempt_id, a.role, a.declared_path, a.sha256, a.size_bytes, a.frozen_path, a.fold, a.member],
            )

    def get(self, attempt_id: str) -> dict[str, Any]:
        rows = self.db.cached_fetchall("SELECT * FROM attempts WHERE attempt_id = ?", [attempt_id])
        row = rows[0] if rows else None
        if row is None:
            raise NotFound(f"attempt_id: no attempt {attempt_id!r}", field="attempt_id")
        for key in ("folds", "inference_command", "claims"):
            row[key] = json.loads(row[key]) if row[key] else None
        return row

    def exists(self, attempt_id: str) -> bool:
        return self.db.scalar("SELECT count(*) FROM attempts WHERE attempt_id = ?", [attempt_id]) == 1

    def lane_exists(self, lane_id: str) -> bool:
        return self.db.scalar("SELECT count(*) FROM lanes WHERE lane_id = ?", [lane_id]) == 1

    def artifacts(self, attempt_id: str) -> list[dict[str, Any]]:
        return self.db.fetchall(
            "SELECT role, fold, member, declared_path, sha256, size_bytes, frozen_path, value_sha256 "
            "FROM artifacts WHERE attempt_id = ? ORDER BY role, fold, member, declared_path",
            [attempt_id],
        )

    def scores(self, attempt_id: str, source: str, scope: str = "fold") -> dict[int, dict[str, float | None]]:
        """fold → metric → value for one source ('agent' declared, 'reviewer' verified)."""
        rows = self.db.cached_fetchall(
            "SELECT fold, metric, value FROM metrics WHERE attempt_id = ? AND source = ? AND scope = ?",
            [attempt_id, source, scope],
        )
        found: dict[int, dict[str, float | None]] = {}
        for row in rows:
            found.setdefault(int(row["fold"]) if row["fold"] is not None else -1, {})[row["metric"]] = row["value"]
        return found

    def earlier_predictions(self, attempt_id: str, agent_id: str, folds: list[int]) -> list[dict[str, Any]]:
        """Prediction files of earlier attempts on the same folds that a new one must not duplicate:
        any other agent's (except withdrawn), and the same agent's unless rejected or withdrawn
        (resubmitting a rejected attempt's predictions with repaired evidence is a repair)."""
        if not folds:
            return []
        marks = ", ".join("?" for _ in folds)
        return self.db.fetchall(
            "SELECT ar.attempt_id, ar.fold, coalesce(ar.member, ar.declared_path) AS member, ar.sha256, "
            "ar.value_sha256, ar.frozen_path "
            "FROM artifacts ar JOIN attempts a USING (attempt_id) "
            "JOIN attempts me ON me.attempt_id = ? "
            f"WHERE ar.role = 'predictions' AND ar.fold IN ({marks}) AND a.attempt_id <> me.attempt_id "
            "AND (a.created_at < me.created_at OR (a.created_at = me.created_at AND a.attempt_id < me.attempt_id)) "
            "AND a.status <> 'withdrawn' "
            "AND (a.agent_id <> ? OR a.status <> 'rejected') "
            "ORDER BY a.created_at DESC, ar.attempt_id, ar.fold, ar.member",
            [attempt_id, *folds, agent_id],
        )

    def withdraw(self, attempt_id: str, agent_id: str | None) -> str:
        """Mark an attempt withdrawn (by its agent; `agent_id=None` for a supervisor)."""
        with self.db.transaction() as cur:
            row = cur.execute("SELECT agent_id, status FROM attempts WHERE attempt_id = ?", [attempt_id]).fetchone()
            if row is None:
                raise NotFound(f"attempt_id: no attempt {attempt_id!r}", field="attempt_id")
            owner, status = row
            if agent_id is not None and owner != agent_id:
                raise Forbidden(f"attempt_id: attempt {attempt_id!r} belongs to another agent", field="attempt_id")
            if status in ("accepted", "withdrawn", "revoked"):
                raise Conflict(
                    f"attempt_id: attempt {attempt_id!r} is {status}; only pending, in_review or rejected "
                    "attempts can be withdrawn",
                    field="attempt_id",
                )
            cur.execute(
                "UPDATE attempts SET status = 'withdrawn', updated_at = ?, change_seq = nextval('attempt_changes') "
                "WHERE attempt_id = ?",
                [utcnow(), attempt_id],
            )
        return "withdrawn"
