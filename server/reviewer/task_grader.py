"""The task's own grader, called from a review: on the test submission (validity only) and on a
validation fold (scores), with answers the reviewer builds from the public training labels in the
schema of the grader's own answers table (`GraderRef.fold_answers`, inferred at init).

The grader runs in a bounded subprocess of the interpreter named at init (`amid init
--grader-python`, where the benchmark's package and dependencies import; default: the server's),
with the whole challenge folder beside its file.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from amid.server.reviewer.bounded import child_env, run_bounded
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.job import ArtifactRef
from amid.tools.task.contract import GraderRef
from amid.tools.task.fold_answers import write_fold_answers

RUNNER = Path(__file__).with_name("grader_runner.py")
Status = Literal["valid", "invalid", "error", "timed_out", "not_run"]


@dataclass(frozen=True)
class GraderVerdict:
    status: Status
    reason: str
    metrics: dict[str, float | None] = field(default_factory=dict)
    seconds: float = 0.0


def grader_of(ctx: ReviewContext) -> GraderRef | None:
    return ctx.contract.grader


def scores_folds(ctx: ReviewContext) -> bool:
    """The task's grader re-scores validation folds (benchmark imports with answers recipes)."""
    grader = ctx.contract.grader
    return grader is not None and grader.fold_answers is not None


def run_grader(
    ctx: ReviewContext, submission_dir: Path, answers_csv: Path, answers_dir: Path, mode: Literal["validity", "scores"]
) -> GraderVerdict:
    grader = ctx.contract.grader
    assert grader is not None
    grader_file = ctx.workspace.private_dir / grader.file
    if not grader_file.is_file():
        return GraderVerdict("not_run", f"the task's grader file private/{grader.file} is missing")
    python = ctx.job.grader_python or ctx.job.python
    argv = [
        python,
        str(RUNNER),
        str(grader_file),
        grader.function,
        str(submission_dir / ctx.contract.submission.filename),
        str(submission_dir),
        str(answers_csv),
        str(answers_dir),
        mode,
    ]
    env = child_env({"PYTHONNOUSERSITE": "1"})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(grader_file.parent), env.get("PYTHONPATH", "")) if p)
    outcome = run_bounded(argv, grader_file.parent, ctx.job.grader_timeout_s, env)
    if outcome.timed_out:
        return GraderVerdict(
            "timed_out", f"did not finish within {ctx.job.grader_timeout_s:.0f} s", {}, outcome.seconds
        )
    lines = outcome.stdout.strip().splitlines()
    try:
        verdict = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = outcome.stderr_tail[-800:].strip()
        return GraderVerdict("error", f"crashed (exit {outcome.returncode}): {tail}", {}, outcome.seconds)
    return GraderVerdict(verdict["status"], verdict.get("reason", ""), verdict.get("metrics") or {}, outcome.seconds)


def test_answers(ctx: ReviewContext) -> tuple[Path, Path] | None:
    """The grader's own answers table and folder under private/ (None: the contract names none)."""
    grader = ctx.contract.grader
    if grader is None:
        return None
    private = ctx.workspace.private_dir
    if grader.answers is None:  # tasks imported before answers were recorded: the old fixed names
        answers, folder = private / "answers.csv", private / "labels"
        return (answers, folder if folder.is_dir() else private) if answers.is_file() else None
    return private / grader.answers, private / (grader.answers_dir or PurePosixPath(grader.answers).parent)


def place_files(ctx: ReviewContext, refs: dict[str, ArtifactRef], into: Path) -> None:
    """Copy frozen files to their member paths under `into` (a submission as the agent laid it out)."""
    for member, ref in refs.items():
        target = into / member
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ctx.path(ref), target)


def build_fold_answers(ctx: ReviewContext, case_ids: list[str], into: Path) -> Path:
    """The answers of these training cases, as the task's grader reads its own (see fold_answers)."""
    return write_fold_answers(ctx.workspace.task_dir, ctx.contract, case_ids, into)
