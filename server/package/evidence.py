"""What a package is built from, read from the ledger: the attempt, its verdict and verified scores,
its frozen files, its lane, its lineage. Refuses an attempt that cannot be final, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amid.server.errors import Conflict, NotFound
from amid.server.finality import final_problems
from amid.server.ledger import Ledger
from amid.server.ranking import rank_rows


@dataclass(frozen=True)
class PackageEvidence:
    attempt: dict[str, Any]  # the attempts row (JSON columns parsed)
    evidence: dict[str, Any]  # the v_evidence row: verdict, review id, verified primary score, gate
    lane: dict[str, Any] | None
    artifacts: list[dict[str, Any]]  # frozen files: role, fold, member, declared_path, sha256, frozen_path
    verified: list[dict[str, Any]]  # reviewer metric rows: scope, fold, metric, value, counts
    checks: list[dict[str, Any]]  # the review's check rows
    holdout_check: dict[str, Any] | None  # the review's HOLDOUT_GAP check
    review: dict[str, Any]  # the reviews row the verdict came from
    lineage: list[dict[str, Any]]  # parent, grandparent, …: attempt, commit, status, verdict
    run: dict[str, Any]  # task id, contract hash, primary metric and direction

    @property
    def attempt_id(self) -> str:
        return str(self.attempt["attempt_id"])

    @property
    def commit(self) -> str:
        return str(self.attempt["commit_sha"])


def gather(ledger: Ledger, attempt_id: str) -> PackageEvidence:
    """The evidence of an attempt that may be final; NotFound / Conflict naming what is wrong."""
    row = ledger.db.fetchone("SELECT * FROM v_evidence WHERE attempt_id = ?", [attempt_id])
    if row is None:
        raise NotFound(
            f'attempt_id: no attempt {attempt_id!r}; see `amid sql "SELECT * FROM v_evidence"`', field="attempt_id"
        )
    lane = ledger.lanes.get(row["lane_id"]) if row["lane_id"] else None
    problems = final_problems(row, lane["status"] if lane else None)
    if problems:
        raise Conflict(
            f"attempt_id: {attempt_id} cannot be packaged as final: {'; '.join(problems)}", field="attempt_id"
        )
    review = ledger.reviews.get(str(row["review_id"]))
    checks = ledger.reviews.checks(str(row["review_id"]))
    return PackageEvidence(
        attempt=ledger.attempts.get(attempt_id),
        evidence=row,
        lane=lane,
        artifacts=ledger.attempts.artifacts(attempt_id),
        verified=ledger.reviews.verified(attempt_id),
        checks=checks,
        holdout_check=next((c for c in checks if c["code"] == "HOLDOUT_GAP"), None),
        review=review,
        lineage=lineage(ledger, ledger.attempts.get(attempt_id).get("parent_attempt_id")),
        run={
            key: ledger.activity.get_state(key)
            for key in ("task_id", "contract_hash", "primary_metric", "primary_direction")
        },
    )


def lineage(ledger: Ledger, parent_id: str | None, limit: int = 100) -> list[dict[str, Any]]:
    """The parent chain, nearest first: each parent's commit, status and verdict (a cycle stops it)."""
    chain: list[dict[str, Any]] = []
    seen: set[str] = set()
    while parent_id and parent_id not in seen and len(chain) < limit:
        seen.add(parent_id)
        row = ledger.db.fetchone(
            "SELECT attempt_id, agent_id, lane_id, commit_sha, status, verdict, verified_score, parent_attempt_id "
            "FROM v_evidence WHERE attempt_id = ?",
            [parent_id],
        )
        if row is None:
            chain.append({"attempt_id": parent_id, "missing": True})
            break
        chain.append({**row, "commit": row.pop("commit_sha")})
        parent_id = row["parent_attempt_id"]
    return chain


def best_eligible(ledger: Ledger) -> str:
    """The final candidate without a supervisor: the top-ranked (`amid.server.ranking`: a bound of the
    verified primary score widened for tries) of the attempts `final_problems` allows."""
    higher = ledger.activity.get_state("primary_direction", "higher_better") == "higher_better"
    rows = ledger.db.fetchall("SELECT * FROM v_evidence WHERE status = 'accepted' ORDER BY created_at, attempt_id")
    lanes = {r["lane_id"]: ledger.lanes.get(r["lane_id"]) for r in rows if r["lane_id"]}
    status = {lane_id: lane["status"] if lane else None for lane_id, lane in lanes.items()}
    eligible = [r for r in rows if not final_problems(r, status.get(r["lane_id"]))]
    if not eligible:
        why = "; ".join(f"{r['attempt_id']}: {', '.join(final_problems(r, status.get(r['lane_id'])))}" for r in rows)
        raise Conflict(
            "attempt_id: no attempt can be final (accepted, real, holdout-gated, on a promoted or challenger lane)"
            f"{': ' + why if why else ': no accepted attempt'}; promote a lane with `amid supervise` first",
            field="attempt_id",
        )
    return str(rank_rows(eligible, higher)[0]["attempt_id"])  # the one ranking; ties: the oldest
