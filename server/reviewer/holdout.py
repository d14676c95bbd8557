"""HOLDOUT_GAP (a warning): replay the attempt's declared inference command at its frozen commit,
in a detached worktree, on copies of the server-held holdout inputs; score the outputs; compare
with the attempt's verified validation score.

The command is argv (no shell) with placeholders: {input_dir} (one file per holdout case, named as
in the task: CASE_0000.nii.gz), {output_dir} (write CASE.nii.gz there) and {python} (the server's
interpreter). It runs as a bounded subprocess with `replay_timeout_s`; when the job runner can take
CPU jobs from the server itself, this becomes a job with the same argv, cwd and limit.
"""

from __future__ import annotations

import math
import shutil
import statistics
import tempfile
from pathlib import Path

import numpy as np

from server.errors import DataUnreadable
from server.repo import detached_worktree, resolve_commit
from server.reviewer.bounded import Outcome, child_env, run_bounded
from server.reviewer.context import ReviewContext
from server.reviewer.images import read_reference, read_volume
from server.reviewer.predictions import FoldResult
from server.reviewer.report import Check, VerifiedMetric, fired, ok, unverifiable
from server.reviewer.scoring import PlannedMetric, case_values, foreground_labels, mean_value, summarize_all

RELATIVE_TOLERANCE = 0.1  # of the validation score
SPREAD_FACTOR = 2.0  # times the spread of the per-fold scores
NOISE_FACTOR = 2.0  # times the standard error of the difference of the two means (per-case values)


def holdout_check(
    ctx: ReviewContext, plan: list[PlannedMetric], results: list[FoldResult]
) -> tuple[Check, list[VerifiedMetric]]:
    cases = ctx.holdout_cases
    if ctx.contract.validation.holdout_fraction <= 0 or not cases:
        return ok("HOLDOUT_GAP", "the contract has no server-held holdout"), []
    if not ctx.job.inference_command:
        return unverifiable("HOLDOUT_GAP", "no inference_command declared: the holdout was not replayed"), []
    if resolve_commit(ctx.workspace.repo_dir, ctx.job.commit) != ctx.job.commit:
        return unverifiable("HOLDOUT_GAP", "the commit is not in the repository: nothing to replay"), []
    ctx.progress(0.8, "holdout replay")
    repo = ctx.workspace.repo_dir
    with detached_worktree(repo, ctx.job.commit) as tree, tempfile.TemporaryDirectory(prefix="amid-holdout-") as tmp:
        argv, outcome = _replay(ctx, tree, Path(tmp))
        if outcome.timed_out or outcome.returncode != 0:
            why = f"timed out after {ctx.job.replay_timeout_s:.0f} s" if outcome.timed_out else "failed"
            message = f"holdout replay {why} (exit {outcome.returncode}); the gap could not be measured"
            evidence = {"argv": argv, "exit_code": outcome.returncode, "stderr_tail": outcome.stderr_tail[-1500:]}
            return unverifiable("HOLDOUT_GAP", message, **evidence), []
        summaries, missing = _score(ctx, plan, Path(tmp) / "outputs")
    return _compare(ctx, results, summaries, missing, outcome.seconds)


def _replay(ctx: ReviewContext, tree: Path, tmp: Path) -> tuple[list[str], Outcome]:
    inputs, outputs = tmp / "inputs", tmp / "outputs"
    _copy_inputs(ctx, inputs)
    outputs.mkdir()
    fill = {"{input_dir}": str(inputs), "{output_dir}": str(outputs), "{python}": ctx.job.python}
    argv = [_fill(part, fill) for part in ctx.job.inference_command or []]
    return argv, run_bounded(argv, tree, ctx.job.replay_timeout_s, child_env())


def _fill(part: str, fill: dict[str, str]) -> str:
    for key, value in fill.items():
        part = part.replace(key, value)
    return part


def _copy_inputs(ctx: ReviewContext, inputs: Path) -> None:
    inputs.mkdir()
    for case in ctx.holdout_cases:
        for rel in case.image_paths:
            shutil.copyfile(ctx.workspace.private_dir / "holdout" / rel, inputs / Path(rel).name)


def _score(ctx: ReviewContext, plan: list[PlannedMetric], outputs: Path) -> tuple[dict, list[str]]:
    ending, labels = ctx.contract.layout.file_ending, foreground_labels(ctx.contract)
    values: dict[str, list[float]] = {}
    missing = []
    for case in ctx.holdout_cases:
        reference = read_reference(ctx.workspace.private_dir / "holdout" / str(case.label_path), ending)
        prediction = np.zeros_like(reference.array)
        try:
            volume = read_volume(outputs / f"{case.case_id}{ending}", ending)
            if volume.array.shape == reference.array.shape:
                prediction = volume.array
            else:
                missing.append(case.case_id)
        except (DataUnreadable, OSError):
            missing.append(case.case_id)
        for name, items in case_values(plan, prediction, reference.array, reference.spacing, labels).items():
            values.setdefault(name, []).extend(items)
    return summarize_all(plan, values), missing


def _compare(
    ctx: ReviewContext, results: list[FoldResult], summaries: dict, missing: list[str], seconds: float
) -> tuple[Check, list[VerifiedMetric]]:
    primary = ctx.contract.primary_metric
    metrics = [
        VerifiedMetric(scope="holdout", fold=None, metric=name, value=mean_value(s), n_cases=s.n_cases,
                       n_valid=s.n_valid, n_nan=s.n_nan, n_capped=s.n_capped)
        for name, s in summaries.items()
    ]  # fmt: skip
    fold_values = [v for r in results if (v := mean_value(r.summaries.get(primary))) is not None]
    holdout = mean_value(summaries.get(primary))
    if not fold_values or holdout is None:
        return unverifiable("HOLDOUT_GAP", f"no {primary} to compare (holdout {holdout})"), metrics
    validation = statistics.fmean(fold_values)
    spread = statistics.pstdev(fold_values) if len(fold_values) > 1 else 0.0
    per_case = [v for r in results for v in r.summaries[primary].values if primary in r.summaries]
    noise = math.hypot(_standard_error(per_case), _standard_error(list(summaries[primary].values)))
    tolerance = max(RELATIVE_TOLERANCE * abs(validation), SPREAD_FACTOR * spread, NOISE_FACTOR * noise)
    evidence = {"metric": primary, "holdout": holdout, "validation": validation, "tolerance": tolerance,
                "n_holdout_cases": len(ctx.holdout_cases), "missing_outputs": missing[:20],
                "replay_seconds": round(seconds, 2)}  # fmt: skip
    if abs(holdout - validation) > tolerance:
        return fired(
            "HOLDOUT_GAP",
            f"holdout replay scores {primary} {holdout:.4g} against {validation:.4g} on validation "
            f"(gap {holdout - validation:+.4g}, tolerance {tolerance:.3g})",
            **evidence,
        ), metrics
    return ok(
        "HOLDOUT_GAP", f"holdout {primary} {holdout:.4g} is within {tolerance:.3g} of validation", **evidence
    ), metrics


def _standard_error(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return statistics.stdev(finite) / math.sqrt(len(finite)) if len(finite) > 1 else 0.0
