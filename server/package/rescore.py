"""Re-scoring a package's predictions and re-grading its submission with the reviewer's own code.

A review context is made whose frozen files are the package's: the same fold scorers the reviewer
ran (`review_fold` for images, `review_table_fold` for tables, `review_graded_fold` with the task's
grader on benchmark tasks) and the same submission check (the task's grader on the submission),
against the workspace's labels and private answers.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.job import ArtifactRef, ReviewJob
from amid.server.reviewer.report import Check
from amid.server.settings import Settings
from amid.server.workspace import Workspace
from amid.tools.metrics.scoring import mean_value, plan_metrics

ROLES = ("predictions", "submission")


def context(package_dir: Path, manifest: dict[str, Any], workspace: Workspace) -> ReviewContext:
    """A review context over the package's prediction and submission files (absolute paths)."""
    refs = [
        ArtifactRef(
            role=a["role"],
            fold=a["fold"],
            member=a["member"],
            declared_path=a["declared_path"],
            sha256=a["sha256"],
            frozen_path=str((package_dir / a["path"]).resolve()),
        )
        for a in manifest.get("artifacts", [])
        if a["role"] in ROLES
    ]
    defaults = Settings(workspace=workspace.root)
    job = ReviewJob(
        review_id="verify-package",
        attempt_id=str(manifest.get("attempt_id")),
        agent_id=str(manifest.get("agent_id")),
        workspace=str(workspace.root),
        commit=str(manifest.get("commit")),
        folds=list(manifest.get("folds") or []),
        declared={},
        claims=[],
        parent=None,
        artifacts=refs,
        inference_command=None,
        baselines=[],
        earlier=[],
        replay_timeout_s=defaults.replay_timeout_s,
        grader_timeout_s=defaults.grader_timeout_s,
        python=sys.executable,
        grader_python=workspace.grader_python(),
    )
    ctx = ReviewContext.load(job)
    ctx.intact = {ref.frozen_path for ref in refs if Path(ref.frozen_path).is_file()}
    return ctx


def fold_scores(ctx: ReviewContext) -> dict[str, dict[str, float | None]]:
    """fold → metric → mean, as the reviewer computes its verified fold metrics."""
    from amid.server.reviewer.graded_folds import review_graded_fold
    from amid.server.reviewer.predictions import review_fold
    from amid.server.reviewer.tabular import review_table_fold
    from amid.server.reviewer.task_grader import scores_folds

    plan = plan_metrics(ctx.contract)
    scorer = {"csv": review_table_fold}.get(ctx.contract.prediction.file_type, review_fold)
    if scores_folds(ctx):
        scorer = review_graded_fold
    found: dict[str, dict[str, float | None]] = {}
    for fold in ctx.job.folds:
        result = scorer(ctx, plan, fold, False)
        found[str(fold)] = {name: mean_value(summary) for name, summary in result.summaries.items()}
    return found


def submission(ctx: ReviewContext) -> Check:
    """The reviewer's SUBMISSION_INVALID check on the package's submission (the task's grader included)."""
    from amid.server.reviewer.submission import submission_check

    return submission_check(ctx)[0]
