"""The crash suite's audit: what clients were told (acknowledged) against what the stopped server's
DuckDB ledger and artifact store hold. Every acknowledged write must be there exactly once:
attempts, their artifacts (re-hashed), notes, claims, reviews (each finished once) and jobs."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amid.server.ledger import Ledger
from amid.server.ledger.database import Database
from amid.server.workspace import Workspace


@dataclass
class Ledgerless:
    """What clients were told (acknowledged), keyed by the idempotency key they sent."""

    attempts: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: dict[str, int] = field(default_factory=dict)
    jobs: dict[str, str] = field(default_factory=dict)
    reviews: dict[str, str] = field(default_factory=dict)  # attempt_id → review_id
    claims: dict[str, str] = field(default_factory=dict)  # agent → lane_id
    errors: list[str] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    retries: Counter[str] = field(default_factory=Counter)
    inflight: Counter[str] = field(default_factory=Counter)


@dataclass
class Findings:
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)

    def once_each(self, kind: str, told: dict[str, Any], held: dict[str, list[Any]]) -> None:
        """Each acknowledged (key → id) must be held under its key, and alone."""
        for key, told_id in told.items():
            ids = held.get(key, [])
            self.lost += [f"{kind} {key}"] if told_id not in ids else []
            self.duplicated += [f"{kind} {key}: {ids}"] if len(ids) > 1 else []


# what each acknowledged key (or agent) holds
_ATTEMPTS = "SELECT idempotency_key, list(attempt_id) FROM attempts GROUP BY 1"
_NOTES = "SELECT title, list(note_id) FROM notes GROUP BY 1"  # the writers' titles are their keys
_OPEN_CLAIMS = "SELECT agent_id, list(lane_id) FROM claims WHERE released_at IS NULL GROUP BY 1"
_JOBS = "SELECT command->>'$[3]', list(job_id) FROM jobs GROUP BY 1"  # the key is the command's last argument


def _grouped(db: Database, sql: str) -> dict[str, list[Any]]:
    """A two-column `SELECT key, list(id)` as a dict."""
    return dict(tuple(r.values()) for r in db.fetchall(sql))


def _artifacts(db: Database, workspace: Workspace, acked: Ledgerless, findings: Findings) -> tuple[int, list[str]]:
    """The acknowledged number of files per attempt, none twice, each re-hashed; returns the count
    of files and the ones whose bytes differ from the ledger's hash or size."""
    rows = db.fetchall(
        "SELECT attempt_id, role, fold, member, declared_path, sha256, size_bytes, frozen_path FROM artifacts"
    )
    per_attempt: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        per_attempt.setdefault(row["attempt_id"], []).append(row)
    bad_hash, n_artifacts = [], 0
    for key, told in acked.attempts.items():
        files = per_attempt.get(told["attempt_id"], [])
        n_artifacts += len(files)
        if len(files) < told["n_files"]:
            findings.lost.append(f"artifacts of {key}: {len(files)} of {told['n_files']}")
        names = Counter((f["role"], f["fold"], f["member"], f["declared_path"]) for f in files)
        findings.duplicated += [f"artifact {key} {n}" for n, c in names.items() if c > 1]
        bad_hash += [f"{key} {f['declared_path']}" for f in files if not _intact(workspace.root / f["frozen_path"], f)]
    return n_artifacts, bad_hash


def _intact(path: Path, row: dict[str, Any]) -> bool:
    return (
        path.is_file()
        and path.stat().st_size == row["size_bytes"]
        and hashlib.sha256(path.read_bytes()).hexdigest() == row["sha256"]
    )


def _reviews(db: Database, acked: Ledgerless, findings: Findings) -> tuple[list[str], list[str]]:
    """One review per acknowledged request, finished exactly once; returns (twice, unfinished)."""
    held = _grouped(db, "SELECT attempt_id, list(review_id) FROM reviews GROUP BY 1")
    findings.once_each("review of", acked.reviews, held)
    ends = db.fetchall(
        "SELECT coalesce(json_extract_string(payload, '$.review_id'), subject_id) AS review_id, count(*) AS n "
        "FROM events WHERE kind IN ('review_done', 'review_failed') GROUP BY 1"
    )
    finished = {r["review_id"]: int(r["n"]) for r in ends}
    twice = [f"{r} finished {finished[r]} times" for r in acked.reviews.values() if finished.get(r, 0) > 1]
    unfinished = [r for r in acked.reviews.values() if finished.get(r, 0) == 0]
    return twice, unfinished


def audit(workspace: Workspace, acked: Ledgerless) -> dict[str, Any]:
    """Compare what clients were told with what the stopped server's ledger and files hold."""
    ledger = Ledger(workspace.ledger_path, read_only=True)
    try:
        db, findings = ledger.db, Findings()
        attempts = {key: told["attempt_id"] for key, told in acked.attempts.items()}
        findings.once_each("attempt", attempts, _grouped(db, _ATTEMPTS))
        n_artifacts, bad_hash = _artifacts(db, workspace, acked, findings)
        findings.once_each("note", acked.notes, _grouped(db, _NOTES))
        findings.once_each("claim", acked.claims, _grouped(db, _OPEN_CLAIMS))
        twice, unfinished = _reviews(db, acked, findings)
        findings.once_each("job", acked.jobs, _grouped(db, _JOBS))
        status = {r["job_id"]: r["status"] for r in db.fetchall("SELECT job_id, status FROM jobs")}
        job_status = Counter(status[job_id] for job_id in acked.jobs.values() if job_id in status)
        return {
            "acknowledged": {
                "attempts": len(acked.attempts),
                "artifacts": n_artifacts,
                "notes": len(acked.notes),
                "claims": len(acked.claims),
                "reviews": len(acked.reviews),
                "jobs": len(acked.jobs),
            },
            "lost": findings.lost,
            "duplicated": findings.duplicated,
            "artifacts_bad_hash": bad_hash,
            "reviews_finished_twice": twice,
            "reviews_unfinished": unfinished,
            "job_status": dict(job_status),
        }
    finally:
        ledger.close()
