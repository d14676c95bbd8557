"""Lanes and their claims (leases).

A claim is a lease: it lives `lease_s` seconds past the later of its start and its holder's last
recorded activity (any tool call), so an agent that keeps working keeps its lane and one that stops
loses it. Expired claims are closed (released_at = when they expired) by the next claim or listing.
Every claim decision runs in one transaction on the ledger's single connection, so concurrent
claims are serialised: with `max_claimants` = 1 exactly one of many simultaneous claimants wins.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from amid.server.errors import Conflict, conflict, not_found
from amid.server.ledger.database import Database, Transaction
from amid.server.ledger.idempotency import IdempotencyKeys, Receipt
from amid.server.ledger.reviews import VERDICT_TABLES, verdicts_version

UNCLAIMABLE = frozenset({"waived", "retired"})
TIER_SQL_ORDER = "CASE tier WHEN 'primary' THEN 0 WHEN 'secondary' THEN 1 ELSE 2 END"

# Active claims with the expiry their holder's activity has earned them.
_ACTIVE = """
WITH seen AS (
    SELECT agent_id, max(occurred_at) AS last_seen FROM events
    WHERE agent_id IN (SELECT agent_id FROM claims WHERE released_at IS NULL) GROUP BY agent_id
)
SELECT c.claim_id, c.lane_id, c.agent_id, c.claimed_at,
       greatest(c.expires_at, coalesce(s.last_seen + to_seconds(CAST(? AS BIGINT)), c.expires_at)) AS expires_at
FROM claims c LEFT JOIN seen s USING (agent_id)
WHERE c.released_at IS NULL
"""


@dataclass(frozen=True)
class LaneRow:
    lane_id: str
    title: str
    family: str
    tier: str
    origin: str
    rank: float
    lane_file: str
    spec: dict[str, Any]
    template_id: str | None = None
    proposed_by: str | None = None


@dataclass(frozen=True)
class ClaimOutcome:
    lane_id: str
    agent_id: str
    expires_at: datetime
    renewed: bool
    holders: list[str]
    released: list[str] = field(default_factory=list)


def _rows(cur: Transaction, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    cursor = cur.execute(sql, params)
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


_LANES_IN_ORDER = f"SELECT * FROM lanes ORDER BY {TIER_SQL_ORDER}, rank DESC, lane_id"
_HOLDERS = "SELECT lane_id, agent_id FROM claims WHERE released_at IS NULL ORDER BY claimed_at"
# v_leaderboard's rows, without its ranking columns (a window over every attempt) that counts need not
_SCORES_BY_LANE = (
    "SELECT a.lane_id, count(*) AS n_accepted, max(p.verified_score) AS best_max, min(p.verified_score) AS best_min "
    "FROM attempts a JOIN v_verified_primary p USING (attempt_id) WHERE a.status = 'accepted' GROUP BY a.lane_id"
)


class Lanes:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._no_expiry_before: tuple[tuple[int, int], datetime] | None = None

    # --- the portfolio -------------------------------------------------------------------------
    def add(self, rows: list[LaneRow], now: datetime) -> int:
        """Insert lanes that do not exist yet, all in one transaction; returns how many were new."""
        with self.db.transaction() as cur:
            existing = {r[0] for r in cur.execute("SELECT lane_id FROM lanes").fetchall()}
            new = [row for row in rows if row.lane_id not in existing]
            for row in new:
                cur.execute(
                    "INSERT INTO lanes (lane_id, title, family, tier, status, origin, proposed_by, template_id, rank, "
                    "lane_file, spec, created_at, updated_at) VALUES (?, ?, ?, ?, 'open', ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        row.lane_id,
                        row.title,
                        row.family,
                        row.tier,
                        row.origin,
                        row.proposed_by,
                        row.template_id,
                        row.rank,
                        row.lane_file,
                        json.dumps(row.spec),
                        now,
                        now,
                    ],
                )
        return len(new)

    def count(self, origin: str | None = None) -> int:
        return int(self.db.scalar("SELECT count(*) FROM lanes WHERE ? IS NULL OR origin = ?", [origin, origin]) or 0)

    def ids(self) -> set[str]:
        return {r["lane_id"] for r in self.db.fetchall("SELECT lane_id FROM lanes")}

    def get(self, lane_id: str) -> dict[str, Any] | None:
        return self.db.fetchone("SELECT * FROM lanes WHERE lane_id = ?", [lane_id])

    def specs(self, origin: str) -> list[dict[str, Any]]:
        rows = self.db.fetchall(
            f"SELECT spec FROM lanes WHERE origin = ? ORDER BY {TIER_SQL_ORDER}, rank DESC", [origin]
        )
        return [json.loads(r["spec"]) for r in rows]

    def summaries(self, now: datetime, lease_s: int, descending: bool) -> list[dict[str, Any]]:
        """Every lane best first, with its current holders, accepted attempts and best verified score."""
        if self._expiry_due(now, lease_s):
            with self.db.transaction() as cur:
                self._expire(cur, now, lease_s)
        with self.db.consistent():  # no write between the three reads
            lanes = self.db.cached_fetchall(_LANES_IN_ORDER)
            holders = self.db.cached_fetchall(_HOLDERS)
            scores = self._scores_by_lane()
        by_lane = {s["lane_id"]: s for s in scores}
        for lane in lanes:
            lane["claimants"] = [h["agent_id"] for h in holders if h["lane_id"] == lane["lane_id"]]
            score = by_lane.get(lane["lane_id"], {})
            lane["n_accepted"] = int(score.get("n_accepted", 0))
            lane["best_verified"] = score.get("best_max" if descending else "best_min")
        return lanes

    def _scores_by_lane(self) -> list[dict[str, Any]]:
        """Accepted attempts and best verified score per lane, kept while the verdicts are unchanged."""
        key = ("scores_by_lane", verdicts_version(self.db))
        others = self.db.tables_read(_SCORES_BY_LANE) - VERDICT_TABLES
        return [dict(row) for row in self.db.cached(key, others, lambda: self.db.fetchall(_SCORES_BY_LANE))]

    # --- claims --------------------------------------------------------------------------------
    def claim(self, lane_id: str, agent_id: str, *, now: datetime, lease_s: int, max_claimants: int) -> ClaimOutcome:
        """Claim (or renew) a lane; an agent holds one lane at a time, so its other claims are released."""
        expires = now + timedelta(seconds=lease_s)
        with self.db.transaction() as cur:
            self._expire(cur, now, lease_s)
            lane = cur.execute("SELECT status FROM lanes WHERE lane_id = ?", [lane_id]).fetchone()
            if lane is None:
                raise not_found("lane_id", lane_id, "a lane of the run (see list_lanes)")
            if lane[0] in UNCLAIMABLE:
                raise conflict("lane_id", lane_id, f"an open or claimed lane; this one is {lane[0]} (see list_lanes)")
            holders = [
                r[0]
                for r in cur.execute(
                    "SELECT agent_id FROM claims WHERE lane_id = ? AND released_at IS NULL ORDER BY claimed_at",
                    [lane_id],
                ).fetchall()
            ]
            if agent_id in holders:
                cur.execute(
                    "UPDATE claims SET expires_at = ? WHERE lane_id = ? AND agent_id = ? AND released_at IS NULL",
                    [expires, lane_id, agent_id],
                )
                return ClaimOutcome(lane_id, agent_id, expires, renewed=True, holders=holders)
            if len(holders) >= max_claimants:
                raise Conflict(
                    f"lane_id: got {lane_id!r}, held by {', '.join(holders)} (at most {max_claimants} "
                    "claimant(s)); expected another open lane from list_lanes",
                    field="lane_id",
                )
            released = self._release_all(cur, agent_id, now)
            cur.execute(
                "INSERT INTO claims (lane_id, agent_id, claimed_at, expires_at) VALUES (?, ?, ?, ?)",
                [lane_id, agent_id, now, expires],
            )
            cur.execute(
                "UPDATE lanes SET status = 'claimed', updated_at = ? WHERE lane_id = ? AND status = 'open'",
                [now, lane_id],
            )
        return ClaimOutcome(lane_id, agent_id, expires, renewed=False, holders=[*holders, agent_id], released=released)

    def release(self, lane_id: str, agent_id: str, now: datetime, *, receipt: Receipt | None = None) -> str | None:
        """Give the lane back; returns the lane's status after, or None when the agent held no claim
        on it. With a receipt, the idempotency key commits in the same transaction (a retry after a
        lost answer finds the release, whenever the server died)."""
        with self.db.transaction() as cur:
            closed = cur.execute(
                "UPDATE claims SET released_at = ? WHERE lane_id = ? AND agent_id = ? AND released_at IS NULL "
                "RETURNING claim_id",
                [now, lane_id, agent_id],
            ).fetchall()
            if not closed:
                return None
            self._reopen(cur, now)
            row = cur.execute("SELECT status FROM lanes WHERE lane_id = ?", [lane_id]).fetchone()
            status = str(row[0]) if row else "open"
            if receipt is not None:
                IdempotencyKeys.insert(cur, receipt, {"lane_id": lane_id, "status": status})
        return status

    def _release_all(self, cur: Transaction, agent_id: str, now: datetime) -> list[str]:
        rows = cur.execute(
            "UPDATE claims SET released_at = ? WHERE agent_id = ? AND released_at IS NULL RETURNING lane_id",
            [now, agent_id],
        ).fetchall()
        self._reopen(cur, now)
        return sorted({r[0] for r in rows})

    def _expire(self, cur: Transaction, now: datetime, lease_s: int) -> None:
        """Release the claims whose lease ran out. Skipped while no claim can have expired: until
        the earliest expiry the last pass saw, with the claims unchanged since (later activity
        only moves an expiry later)."""
        if not self._expiry_due(now, lease_s):
            return
        unchanged = (self.db.generation("claims"), lease_s)
        active = _rows(cur, _ACTIVE, [lease_s])
        expired = [row for row in active if row["expires_at"] <= now]
        later = [row["expires_at"] for row in active if row["expires_at"] > now]
        # a release below moves the claims on at commit: the next pass looks again, once
        self._no_expiry_before = (unchanged, min(later, default=datetime.max))
        for row in expired:
            cur.execute("UPDATE claims SET released_at = ? WHERE claim_id = ?", [row["expires_at"], row["claim_id"]])
            cur.execute(
                "INSERT INTO events (occurred_at, agent_id, kind, subject_type, subject_id, payload) "
                "VALUES (?, NULL, 'claim_expired', 'lane', ?, ?)",
                [now, row["lane_id"], json.dumps({"agent_id": row["agent_id"], "expired_at": str(row["expires_at"])})],
            )
        if expired:  # every other release reopens its lanes itself
            self._reopen(cur, now)

    def _expiry_due(self, now: datetime, lease_s: int) -> bool:
        seen = self._no_expiry_before
        return seen is None or seen[0] != (self.db.generation("claims"), lease_s) or now >= seen[1]

    @staticmethod
    def _reopen(cur: Transaction, now: datetime) -> None:
        cur.execute(
            "UPDATE lanes SET status = 'open', updated_at = ? WHERE status = 'claimed' AND lane_id NOT IN "
            "(SELECT lane_id FROM claims WHERE released_at IS NULL)",
            [now],
        )

    def active_claims(self, lane_id: str, lease_s: int) -> list[dict[str, Any]]:
        return self.db.fetchall(f"SELECT * FROM ({_ACTIVE}) WHERE lane_id = ? ORDER BY claimed_at", [lease_s, lane_id])

    # --- what others tried ---------------------------------------------------------------------
    def history(self, lane_id: str, limit: int = 10) -> dict[str, list[dict[str, Any]]]:
        """Recent attempts (with verified scores), notes and past claims of one lane."""
        attempts = self.db.fetchall(
            "SELECT a.attempt_id, a.agent_id, a.status, a.summary, p.verified_score FROM attempts a "
            "LEFT JOIN v_verified_primary p USING (attempt_id) WHERE a.lane_id = ? ORDER BY a.created_at DESC LIMIT ?",
            [lane_id, limit],
        )
        notes = self.db.fetchall(
            "SELECT note_id, agent_id, kind, title FROM notes WHERE lane_id = ? ORDER BY created_at DESC LIMIT ?",
            [lane_id, limit],
        )
        claims = self.db.fetchall(
            "SELECT agent_id, claimed_at, released_at FROM claims WHERE lane_id = ? AND released_at IS NOT NULL "
            "ORDER BY claimed_at DESC LIMIT ?",
            [lane_id, limit],
        )
        return {"attempts": attempts, "notes": notes, "claims": claims}
