"""submit_attempt and withdraw_attempt: record an attempt bound to a commit, with its evidence frozen.

Every declared path is confined to the caller's worktree and every file is copied, read-only and
named by its hash, into a folder of `artifacts/` that this attempt alone owns, before it is
recorded; the commit and its history are copied into the server's commit store (no worktree can
erase them there). The ledger rows (attempt, artifacts, declared scores), the commit's pins and
the attempt's manifest are written in one transaction. A reused idempotency key returns the
first attempt only if the content is the same.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from amid.server import sandbox
from amid.server.agent_repo import agent_commit, import_commit
from amid.server.artifacts import ArtifactStore, DeclaredFile, FrozenFile, collect
from amid.server.context import ToolContext
from amid.server.errors import NotFound, invalid
from amid.server.ledger.attempts import ArtifactRow, NewAttempt
from amid.server.paths import agent_worktree
from amid.server.repo import pin_commit
from amid.server.toolkit import WORKERS, Progress, ToolResult, ToolSpec


class ArtifactPaths(BaseModel):
    """Paths in your worktree; the submitting-attempts skill gives the formats."""

    predictions: dict[int, str] = Field(
        default_factory=dict,
        description="fold → folder of CASE<file_ending> files (benchmark tasks: submission.csv + its files)",
    )
    submission: str | None = Field(default=None, description="folder: submission.csv + its files")
    logs: list[str] = Field(default_factory=list)
    checkpoint: str | None = None
    training_manifest: str | None = Field(default=None, description='JSON {"folds": {"0": [case ids trained on]}}')


BUDGET_CLASSES = ("real", "tune", "smoke")  # only real counts for coverage, plateau and promotion (server/finality.py)
LIMITS = {"commit": 100, "budget_class": 32, "summary": 500, "idempotency_key": 128}


class SubmitAttemptInput(BaseModel):
    commit: str = Field(description="git commit in your worktree")
    folds: Annotated[list[int], Field(min_length=1, description="locked folds validated on")]
    declared_scores: dict[int, dict[str, float]] = Field(description="fold → {metric: value}, primary included")
    artifacts: ArtifactPaths
    lane_id: str | None = None
    budget_class: str = Field(
        default="real", description="real | tune | smoke: only real counts for coverage, plateau and promotion"
    )
    parent_attempt_id: str | None = None
    claims_improvement: list[str] = Field(default_factory=list, description="metrics claimed better than the parent")
    inference_command: list[str] | None = Field(
        default=None,
        description="argv the reviewer replays on every predicted validation case, perturbed copies of them, and "
        "holdout cases: {python} {input_dir} "
        "{output_dir} {checkpoint} {fold} {case_ids} {code_dir}; benchmark tasks write submission.csv + files",
    )
    summary: str | None = None
    idempotency_key: str | None = None


class SubmitAttemptResult(ToolResult):
    attempt_id: str
    status: str
    commit: str
    n_files: int
    warnings: list[str] = Field(default_factory=list, description="what the reviewer will reject unless fixed")


Declared = list[tuple[str, int | None, DeclaredFile]]


def submit_attempt(
    ctx: ToolContext, request: SubmitAttemptInput, progress: Progress | None = None
) -> SubmitAttemptResult:
    """Record an attempt (commit, folds, declared scores, artifact paths); its files are frozen now.
    Returns attempt_id with status pending; then call request_review."""
    ws = ctx.workspace
    _check_request(ctx, request)
    worktree = agent_worktree(ws, ctx.caller.agent_id)
    sha = agent_commit(worktree, request.commit, boxed=_boxed(ctx))
    if sha is None:
        raise NotFound(
            f"commit: {request.commit!r} is not a commit of your repository {worktree}; commit first", field="commit"
        )
    declared = _declared(ctx, request.artifacts)
    store = ArtifactStore(ws)
    folder = store.new_folder()  # this submission's own copies: no other attempt points there
    try:
        attempt_id, created = _record(ctx, request, sha, declared, store, folder, progress)
    except Exception:
        store.discard(folder)
        raise
    if not created:  # a repeated key: the first attempt's own copies stand
        store.discard(folder)
    return _result(ctx, attempt_id, _warnings(ctx, request) if created else [])


def _record(
    ctx: ToolContext,
    request: SubmitAttemptInput,
    sha: str,
    declared: Declared,
    store: ArtifactStore,
    folder: Path,
    progress: Progress | None,
) -> tuple[str, bool]:
    ws, agent = ctx.workspace, ctx.caller.agent_id
    frozen = _freeze(store, folder, declared, progress)
    import_commit(
        ws.commit_store, ws.repo_dir, agent_worktree(ws, agent), sha, boxed=_boxed(ctx)
    )  # before the transaction
    rows = [
        ArtifactRow(role, f.declared_path, z.sha256, z.size_bytes, z.frozen_path, fold, f.member)
        for (role, fold, f), z in zip(declared, frozen, strict=True)
    ]
    new = NewAttempt(
        agent_id=agent,
        lane_id=request.lane_id,
        commit_sha=sha,
        folds=sorted(request.folds),
        budget_class=request.budget_class,
        parent_attempt_id=request.parent_attempt_id,
        inference_command=request.inference_command,
        idempotency_key=request.idempotency_key,
        summary=request.summary,
        claims=request.claims_improvement,
        artifacts=rows,
        declared=request.declared_scores,
    )

    def finish(attempt_id: str) -> str:
        pin_commit(ws.commit_store, sha, attempt_id)
        pin_commit(ws.repo_dir, sha, attempt_id)
        return store.write_manifest(attempt_id, _manifest(attempt_id, new))

    return ctx.ledger.attempts.create(new, on_created=finish)


def _check_request(ctx: ToolContext, request: SubmitAttemptInput) -> None:
    for name, limit in LIMITS.items():
        value = getattr(request, name)
        if value is not None and not 0 < len(value) <= limit:
            raise invalid(name, value, f"1 to {limit} characters")
    if request.budget_class not in BUDGET_CLASSES:
        raise invalid("budget_class", request.budget_class, f"one of {', '.join(BUDGET_CLASSES)}")
    k, names = ctx.folds.k, [m.name for m in ctx.contract.metrics]
    folds = request.folds
    if len(set(folds)) != len(folds) or any(not 0 <= f < k for f in folds):
        raise invalid("folds", folds, f"distinct locked fold indices from 0 to {k - 1}")
    if set(request.declared_scores) != set(folds):
        raise invalid("declared_scores", sorted(request.declared_scores), f"one entry per declared fold {folds}")
    for fold, scores in request.declared_scores.items():
        unknown = sorted(set(scores) - set(names))
        if unknown or ctx.contract.primary_metric not in scores:
            raise invalid(f"declared_scores.{fold}", sorted(scores), f"metrics among {names}, including the primary")
        if any(not math.isfinite(v) for v in scores.values()):
            raise invalid(f"declared_scores.{fold}", scores, "finite numbers")
    if set(request.artifacts.predictions) != set(folds):
        raise invalid("artifacts.predictions", sorted(request.artifacts.predictions), f"a folder for each fold {folds}")
    _check_links(ctx, request, names)


def _check_links(ctx: ToolContext, request: SubmitAttemptInput, names: list[str]) -> None:
    if not set(request.claims_improvement) <= set(names):
        raise invalid("claims_improvement", request.claims_improvement, f"metric names among {names}")
    if request.claims_improvement and not request.parent_attempt_id:
        raise invalid("parent_attempt_id", None, "the attempt you claim to improve on")
    parent = request.parent_attempt_id
    if parent and not ctx.ledger.attempts.exists(parent):
        raise NotFound(f"parent_attempt_id: no attempt {parent!r}", field="parent_attempt_id")
    if request.lane_id and not ctx.ledger.attempts.lane_exists(request.lane_id):
        raise NotFound(f"lane_id: no lane {request.lane_id!r}; see list_lanes", field="lane_id")
    command = request.inference_command
    if command is not None and (not 0 < len(command) <= 64 or not all(command)):
        raise invalid("inference_command", command, "an argv of 1 to 64 non-empty strings")


def _declared(ctx: ToolContext, paths: ArtifactPaths) -> Declared:
    ws, agent = ctx.workspace, ctx.caller.agent_id
    found: Declared = []
    for fold, folder in sorted(paths.predictions.items()):
        found += [("predictions", fold, f) for f in collect(ws, agent, folder, f"artifacts.predictions.{fold}")]
    singles = {
        "submission": paths.submission,
        "checkpoint": paths.checkpoint,
        "training_manifest": paths.training_manifest,
    }
    for role, path in singles.items():
        if path:
            found += [(role, None, f) for f in collect(ws, agent, path, f"artifacts.{role}")]
    for index, path in enumerate(paths.logs):
        found += [("logs", None, f) for f in collect(ws, agent, path, f"artifacts.logs.{index}")]
    if paths.training_manifest and len([r for r in found if r[0] == "training_manifest"]) != 1:
        raise invalid("artifacts.training_manifest", paths.training_manifest, "one JSON file")
    return found


def _freeze(store: ArtifactStore, folder: Path, declared: Declared, progress: Progress | None) -> list[FrozenFile]:
    total = float(sum(f.source.stat().st_size for _, _, f in declared)) or 1.0
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        if progress and total > 64e6:
            progress(done, total, "hashing and freezing artifacts")

    return [store.freeze(f.source, folder, step) for _, _, f in declared]


def _manifest(attempt_id: str, new: NewAttempt) -> dict[str, object]:
    return {
        "attempt_id": attempt_id,
        "agent_id": new.agent_id,
        "commit": new.commit_sha,
        "folds": new.folds,
        "files": [
            {
                "role": a.role,
                "fold": a.fold,
                "member": a.member,
                "declared_path": a.declared_path,
                "sha256": a.sha256,
                "size_bytes": a.size_bytes,
                "frozen_path": a.frozen_path,
            }
            for a in new.artifacts
        ],
    }


def _warnings(ctx: ToolContext, request: SubmitAttemptInput) -> list[str]:
    paths, need = request.artifacts, ctx.contract.evidence
    absent = [role for role in ("logs", "checkpoint", "training_manifest") if getattr(need, role)]
    absent = [role for role in absent if not getattr(paths, role)]
    found = [f"the contract requires {role}: MISSING_EVIDENCE unless you resubmit with it" for role in absent]
    if ctx.contract.validation.holdout_fraction > 0 and not request.inference_command:
        found.append("the contract has a holdout: without inference_command it is not replayed (HOLDOUT_GAP)")
    return found


def _result(ctx: ToolContext, attempt_id: str, warnings: list[str]) -> SubmitAttemptResult:
    attempt = ctx.ledger.attempts.get(attempt_id)
    files = ctx.ledger.attempts.artifacts(attempt_id)
    return SubmitAttemptResult(
        attempt_id=attempt_id,
        status=attempt["status"],
        commit=attempt["commit_sha"],
        n_files=len(files),
        warnings=warnings,
    )


class WithdrawInput(BaseModel):
    attempt_id: Annotated[str, Field(min_length=1)]


class WithdrawResult(ToolResult):
    attempt_id: str
    status: str


def withdraw_attempt(ctx: ToolContext, request: WithdrawInput) -> WithdrawResult:
    """Withdraw one of your attempts that is not accepted (it stays in the ledger, marked withdrawn)."""
    owner = ctx.caller.agent_id if ctx.caller.role == "agent" else None
    return WithdrawResult(attempt_id=request.attempt_id, status=ctx.ledger.attempts.withdraw(request.attempt_id, owner))


SUBMIT = ToolSpec(
    "submit_attempt",
    "Submit an attempt",
    SubmitAttemptInput,
    SubmitAttemptResult,
    submit_attempt,
    roles=WORKERS,
    wants_progress=True,
)
WITHDRAW = ToolSpec(
    "withdraw_attempt",
    "Withdraw an attempt",
    WithdrawInput,
    WithdrawResult,
    withdraw_attempt,
    roles=WORKERS,
    destructive=True,
)
TOOLS = [SUBMIT, WITHDRAW]


def _boxed(ctx: ToolContext) -> bool:
    """Agent repositories are read in the reader box unless the sandbox is switched off by setting
    (`replay_sandbox=none`); a required box that cannot run refuses the submission, naming the fix."""
    return sandbox.resolve_kind(ctx.settings.replay_sandbox) == "bwrap"
