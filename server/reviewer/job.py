"""The input of one review, gathered from the ledger by the server before the review process starts.

Review processes never open the ledger (one writer per DuckDB file): everything they need from it
travels in this JSON-serialisable job; everything else they read from the frozen artifacts, the
run's repository and the data the server owns (task/ and private/).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from amid.server.ledger import Ledger
from amid.server.reviewer.report import BaselineValue
from amid.server.sandbox import SandboxSetting
from amid.server.settings import Settings
from amid.server.workspace import Workspace


class ArtifactRef(BaseModel):
    role: str
    fold: int | None
    member: str | None
    declared_path: str
    sha256: str
    frozen_path: str  # workspace-relative


class EarlierPrediction(BaseModel):
    attempt_id: str
    fold: int
    member: str | None
    sha256: str
    value_sha256: str | None
    frozen_path: str


class ParentScores(BaseModel):
    attempt_id: str
    declared: dict[int, dict[str, float | None]]
    verified: dict[int, dict[str, float | None]]


class ReviewJob(BaseModel):
    review_id: str
    attempt_id: str
    agent_id: str
    workspace: str
    commit: str
    folds: list[int]
    declared: dict[int, dict[str, float | None]]
    claims: list[str]
    parent: ParentScores | None
    artifacts: list[ArtifactRef]
    inference_command: list[str] | None
    baselines: list[BaselineValue]
    earlier: list[EarlierPrediction]
    replay_timeout_s: float
    replay_sandbox: SandboxSetting = "auto"
    grader_timeout_s: float
    holdout_alpha: float = 0.01  # the holdout gate's stated false-rejection rate (settings.holdout_alpha)
    python: str
    grader_python: str | None = None  # the interpreter named at init for the task's grader


def build_job(ledger: Ledger, workspace: Workspace, settings: Settings, review_id: str) -> ReviewJob:
    review = ledger.reviews.get(review_id)
    attempt = ledger.attempts.get(review["attempt_id"])
    folds = [int(f) for f in attempt["folds"]]
    return ReviewJob(
        review_id=review_id,
        attempt_id=attempt["attempt_id"],
        agent_id=attempt["agent_id"],
        workspace=str(workspace.root),
        commit=attempt["commit_sha"],
        folds=folds,
        declared=ledger.attempts.scores(attempt["attempt_id"], "agent"),
        claims=attempt["claims"] or [],
        parent=_parent(ledger, attempt.get("parent_attempt_id")),
        artifacts=[ArtifactRef(**_pick(row, ArtifactRef)) for row in ledger.attempts.artifacts(attempt["attempt_id"])],
        inference_command=attempt["inference_command"],
        baselines=[BaselineValue(**_pick(vars(b), BaselineValue)) for b in ledger.reviews.baselines(folds)],
        earlier=[
            EarlierPrediction(**row)
            for row in ledger.attempts.earlier_predictions(attempt["attempt_id"], attempt["agent_id"], folds)
        ],
        replay_timeout_s=settings.replay_timeout_s,
        replay_sandbox=settings.replay_sandbox,
        grader_timeout_s=settings.grader_timeout_s,
        holdout_alpha=settings.holdout_alpha,
        python=sys.executable,
        grader_python=workspace.grader_python(),
    )


def _parent(ledger: Ledger, parent_id: str | None) -> ParentScores | None:
    if not parent_id or not ledger.attempts.exists(parent_id):
        return None
    return ParentScores(
        attempt_id=parent_id,
        declared=ledger.attempts.scores(parent_id, "agent"),
        verified=ledger.attempts.scores(parent_id, "reviewer"),
    )


def _pick(row: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k in model.model_fields}


def report_paths(reviews_dir: Path, review_id: str) -> tuple[Path, Path, Path]:
    """(report, progress, error) files of one review."""
    return (
        reviews_dir / f"{review_id}.json",
        reviews_dir / f"{review_id}.progress.json",
        reviews_dir / f"{review_id}.error.txt",
    )
