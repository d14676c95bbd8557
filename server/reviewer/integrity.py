"""Is the evidence what was submitted? COMMIT_UNKNOWN, ARTIFACT_MISSING, ARTIFACT_CHANGED, MISSING_EVIDENCE.

`evidence_checks` is the part that needs no review context (the frozen files and the stored
commit of one attempt): the re-audit and `request_review` use it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from amid.server.artifacts import sha256_of
from amid.server.repo import stored_commit
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.job import ArtifactRef
from amid.server.reviewer.report import Check, fired, head, ok
from amid.server.workspace import Workspace

EVIDENCE_ROLES = ("logs", "checkpoint", "training_manifest")
INTEGRITY_CODES = ("COMMIT_UNKNOWN", "ARTIFACT_MISSING", "ARTIFACT_CHANGED")
STORE = ".amid/commits.git"


def commit_check(ctx: ReviewContext) -> Check:
    return stored_commit_check(ctx.workspace, ctx.job.attempt_id, ctx.job.commit)


def stored_commit_check(workspace: Workspace, attempt_id: str, sha: str) -> Check:
    """The commit must be pinned for this attempt in the server's store, with all of its history."""
    if stored_commit(workspace.commit_store, attempt_id) == sha:
        return ok("COMMIT_UNKNOWN", f"commit {sha[:12]} is in the server's commit store", commit=sha)
    return fired(
        "COMMIT_UNKNOWN",
        f"commit {sha[:12]} is not pinned for {attempt_id} in the server's commit store ({STORE}), or its history "
        "is incomplete; its code cannot be audited or replayed",
        commit=sha,
        repository=STORE,
    )


def artifact_checks(ctx: ReviewContext) -> list[Check]:
    """Re-hash every frozen file; only files whose bytes match their hash are used afterwards."""
    checks, intact = frozen_file_checks(ctx.workspace, ctx.job.artifacts)
    ctx.intact.update(intact)
    return checks


def evidence_checks(workspace: Workspace, attempt_id: str, sha: str, refs: Sequence[ArtifactRef]) -> list[Check]:
    """COMMIT_UNKNOWN, ARTIFACT_MISSING and ARTIFACT_CHANGED of one attempt, from the files alone."""
    return [stored_commit_check(workspace, attempt_id, sha), *frozen_file_checks(workspace, refs)[0]]


def frozen_file_checks(workspace: Workspace, refs: Sequence[ArtifactRef]) -> tuple[list[Check], set[str]]:
    """ARTIFACT_MISSING and ARTIFACT_CHANGED, and the frozen paths whose bytes match their hash."""
    missing, changed, intact = [], [], set()
    for ref in refs:
        path = workspace.root / ref.frozen_path
        item = {"role": ref.role, "fold": ref.fold, "declared_path": ref.declared_path, "frozen_path": ref.frozen_path}
        if not path.is_file():
            missing.append(item)
            continue
        actual = sha256_of(path)
        if actual != ref.sha256:
            changed.append({**item, "expected_sha256": ref.sha256, "actual_sha256": actual})
            continue
        intact.add(ref.frozen_path)
    return _file_checks(missing, changed, len(refs)), intact


def _file_checks(missing: list[dict[str, Any]], changed: list[dict[str, Any]], n: int) -> list[Check]:
    return [
        fired(
            "ARTIFACT_MISSING",
            f"{len(missing)} of {n} frozen files are gone from artifacts/ (first: {missing[0]['declared_path']})",
            files=head(missing),
            n_missing=len(missing),
        )
        if missing
        else ok("ARTIFACT_MISSING", f"all {n} frozen files are present"),
        fired(
            "ARTIFACT_CHANGED",
            f"{len(changed)} frozen files no longer match the sha256 recorded at submission "
            f"(first: {changed[0]['declared_path']})",
            files=head(changed),
            n_changed=len(changed),
        )
        if changed
        else ok("ARTIFACT_CHANGED", "every frozen file matches its recorded sha256"),
    ]


def evidence_check(ctx: ReviewContext) -> Check:
    required = ctx.contract.evidence
    wanted = [role for role in EVIDENCE_ROLES if getattr(required, role)]
    absent = [role for role in wanted if not ctx.files(role)]
    problems: list[dict[str, Any]] = [{"role": role, "reason": "not declared"} for role in absent]
    manifest, why = ctx.training_manifest
    if required.training_manifest and "training_manifest" not in absent and manifest is None:
        problems.append({"role": "training_manifest", "reason": why})
    if problems:
        roles = ", ".join(p["role"] for p in problems)
        return fired(
            "MISSING_EVIDENCE",
            f"the contract requires {', '.join(wanted)}; missing or unusable: {roles}",
            problems=problems,
            required=wanted,
        )
    return ok("MISSING_EVIDENCE", f"required evidence present: {', '.join(wanted) or 'none required'}")
