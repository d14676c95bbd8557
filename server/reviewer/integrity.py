"""Is the evidence what was submitted? COMMIT_UNKNOWN, ARTIFACT_MISSING, ARTIFACT_CHANGED, MISSING_EVIDENCE."""

from __future__ import annotations

from typing import Any

from server.artifacts import sha256_of
from server.repo import resolve_commit
from server.reviewer.context import ReviewContext
from server.reviewer.report import Check, fired, head, ok

EVIDENCE_ROLES = ("logs", "checkpoint", "training_manifest")


def commit_check(ctx: ReviewContext) -> Check:
    sha = ctx.job.commit
    if resolve_commit(ctx.workspace.repo_dir, sha) == sha:
        return ok("COMMIT_UNKNOWN", f"commit {sha[:12]} is in the run's repository", commit=sha)
    return fired(
        "COMMIT_UNKNOWN",
        f"commit {sha[:12]} is not in the run's repository (repo/); its code cannot be audited or replayed",
        commit=sha,
        repository="repo/",
    )


def artifact_checks(ctx: ReviewContext) -> list[Check]:
    """Re-hash every frozen file; only files whose bytes match their hash are used afterwards."""
    missing, changed = [], []
    for ref in ctx.job.artifacts:
        path = ctx.path(ref)
        item = {"role": ref.role, "fold": ref.fold, "declared_path": ref.declared_path, "frozen_path": ref.frozen_path}
        if not path.is_file():
            missing.append(item)
            continue
        actual = sha256_of(path)
        if actual != ref.sha256:
            changed.append({**item, "expected_sha256": ref.sha256, "actual_sha256": actual})
            continue
        ctx.intact.add(ref.frozen_path)
    n = len(ctx.job.artifacts)
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
