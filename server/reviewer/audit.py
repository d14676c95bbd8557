"""Re-audit (docs/ARCHITECTURE.md §7): re-hash the frozen files and check the stored commit of every accepted
attempt; an attempt whose evidence changed or vanished since its verdict becomes `revoked`, with
ARTIFACT_CHANGED / ARTIFACT_MISSING / COMMIT_UNKNOWN and their evidence recorded.

`audit` is a plain function of the ledger and the workspace: `amid audit` calls it (in the server
when one runs, else on the DuckDB file), and the supervisor will before promotion and packaging.
`evidence_changed` tells `request_review` whether an old verdict still stands.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from amid.server.ledger import Ledger, utcnow
from amid.server.ledger.audits import AuditCheckRow
from amid.server.reviewer.integrity import INTEGRITY_CODES, evidence_checks
from amid.server.reviewer.job import ArtifactRef
from amid.server.reviewer.report import Check
from amid.server.workspace import Workspace


class AuditedAttempt(BaseModel):
    attempt_id: str
    agent_id: str
    lane_id: str | None
    commit: str
    n_files: int = Field(description="frozen files re-hashed")
    failed: list[str] = Field(description="codes that fired: COMMIT_UNKNOWN, ARTIFACT_MISSING, ARTIFACT_CHANGED")
    revoked: bool = Field(description="accepted → revoked by this audit")
    messages: list[str]


class AuditReport(BaseModel):
    audit_id: str
    n_checked: int
    n_revoked: int
    attempts: list[AuditedAttempt]


def audit(ledger: Ledger, workspace: Workspace, requested_by: str = "amid audit") -> AuditReport:
    """Re-check every accepted attempt's evidence and revoke those that fail; one ledger transaction."""
    started = utcnow()
    audited: list[tuple[dict[str, object], int, list[Check]]] = []
    for attempt in ledger.audits.accepted():
        attempt_id = str(attempt["attempt_id"])
        refs = artifact_refs(ledger, attempt_id)
        audited.append((attempt, len(refs), evidence_checks(workspace, attempt_id, str(attempt["commit_sha"]), refs)))
    rows = [
        AuditCheckRow(str(attempt["attempt_id"]), c.code, c.passed, c.message, c.evidence)
        for attempt, _, checks in audited
        for c in checks
    ]
    audit_id, revoked = ledger.audits.record(requested_by, started, len(audited), rows)
    report = AuditReport(
        audit_id=audit_id,
        n_checked=len(audited),
        n_revoked=len(revoked),
        attempts=[_audited(attempt, n_files, checks, revoked) for attempt, n_files, checks in audited],
    )
    _log(ledger, report)
    return report


def _audited(attempt: dict[str, object], n_files: int, checks: list[Check], revoked: list[str]) -> AuditedAttempt:
    failed = [c for c in checks if not c.passed]
    return AuditedAttempt(
        attempt_id=str(attempt["attempt_id"]),
        agent_id=str(attempt["agent_id"]),
        lane_id=str(attempt["lane_id"]) if attempt["lane_id"] else None,
        commit=str(attempt["commit_sha"]),
        n_files=n_files,
        failed=[c.code for c in failed],
        revoked=attempt["attempt_id"] in revoked,
        messages=[c.message for c in failed],
    )


def _log(ledger: Ledger, report: AuditReport) -> None:
    for item in report.attempts:
        if item.revoked:
            ledger.activity.log(
                "attempt_revoked",
                agent_id=None,
                subject_type="attempt",
                subject_id=item.attempt_id,
                payload={"audit_id": report.audit_id, "codes": item.failed},
            )
    ledger.activity.log(
        "audit_done",
        agent_id=None,
        subject_type="audit",
        subject_id=report.audit_id,
        payload={"n_checked": report.n_checked, "n_revoked": report.n_revoked},
    )


def artifact_refs(ledger: Ledger, attempt_id: str) -> list[ArtifactRef]:
    return [
        ArtifactRef(**{k: row[k] for k in ArtifactRef.model_fields}) for row in ledger.attempts.artifacts(attempt_id)
    ]


def evidence_changed(ledger: Ledger, workspace: Workspace, attempt_id: str) -> bool:
    """Whether the attempt's frozen files or stored commit now fare otherwise than in the review
    its verdict came from (False when it has no verdict yet: the first review checks them)."""
    done = ledger.reviews.last_done(attempt_id)
    if done is None:
        return False
    then = {c["code"] for c in ledger.reviews.checks(done["review_id"]) if not c["passed"]}
    commit = str(ledger.attempts.get(attempt_id)["commit_sha"])
    checks = evidence_checks(workspace, attempt_id, commit, artifact_refs(ledger, attempt_id))
    return {c.code for c in checks if not c.passed} != then & set(INTEGRITY_CODES)
