"""One review, from frozen evidence to report: runs inside a review process, never in the server.

`review(job)` computes every check of docs/ARCHITECTURE.md §7 and the verified metrics; `worker_main` is the loop
of a review process and `run_job` one review in it: progress goes to `reviews/<id>.progress.json`,
the full report to `reviews/<id>.json` (atomically), or the error to `reviews/<id>.error.txt`.
"""

from __future__ import annotations

import json
import os
import signal
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

from amid.server.ranking import standard_error
from amid.server.reviewer.access import access_check
from amid.server.reviewer.bounded import exit_with, kill_live_groups
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.duplicates import duplicate_check
from amid.server.reviewer.fold_checks import fold_check, incomplete_check, schema_check, split_leak_check
from amid.server.reviewer.graded_folds import review_graded_fold
from amid.server.reviewer.holdout import case_scores, holdout_check
from amid.server.reviewer.integrity import artifact_checks, commit_check, evidence_check
from amid.server.reviewer.job import ReviewJob, report_paths
from amid.server.reviewer.metric_checks import direction_check, mismatch_check, trivial_check
from amid.server.reviewer.predictions import FoldResult, baseline_name, review_fold
from amid.server.reviewer.report import CODES, BaselineValue, ReviewReport, VerifiedMetric, unverifiable, verdict_of
from amid.server.reviewer.reproduce import reproduction_check
from amid.server.reviewer.stability import stability_check
from amid.server.reviewer.submission import submission_check
from amid.server.reviewer.tabular import review_table_fold
from amid.server.reviewer.task_grader import scores_folds
from amid.tools.metrics.scoring import PlannedMetric, mean_value, plan_metrics

IMAGE_TYPES = frozenset({"nifti", "png", "tiff"})


def review(job: ReviewJob, ctx: ReviewContext | None = None) -> ReviewReport:
    started = time.monotonic()
    ctx = ctx or ReviewContext.load(job)
    plan = plan_metrics(ctx.contract)
    checks = [commit_check(ctx), *artifact_checks(ctx), evidence_check(ctx)]
    cached = {(b.fold, b.metric) for b in job.baselines}
    primary = ctx.contract.primary_metric
    file_type = ctx.contract.prediction.file_type
    fold_review = {"csv": review_table_fold}.get(file_type, review_fold)
    if scores_folds(ctx):
        fold_review = review_graded_fold  # a benchmark task: its own grader scores the folds
    scored = file_type in IMAGE_TYPES or file_type == "csv" or scores_folds(ctx)
    per_attempt = baseline_name(ctx) == "fixed_prediction"  # made from this attempt's own files: never cached
    results = [
        fold_review(ctx, plan, fold, per_attempt or (fold, primary) not in cached) if scored else FoldResult(fold, [])
        for fold in job.folds
    ]
    new_baselines = _new_baselines(ctx, results)
    submission, missing_test = submission_check(ctx)
    if scored:
        checks += [incomplete_check(results, missing_test), schema_check(results), fold_check(results)]
    else:
        why = f"{file_type} predictions are not re-scored by the built-in reviewer yet"
        checks += [unverifiable(code, why) for code in ("PRED_INCOMPLETE", "PRED_SCHEMA", "FOLD_MISMATCH")]
    checks += [split_leak_check(ctx), mismatch_check(ctx, plan, results)]
    checks += [direction_check(ctx, plan, results), duplicate_check(ctx, results), submission]
    checks.append(trivial_check(ctx, plan, results, [*job.baselines, *new_baselines]))
    holdout, holdout_metrics = holdout_check(ctx, plan, results)
    reproduced = reproduction_check(ctx)
    checks += [holdout, reproduced, stability_check(ctx, reproduced)]
    checks.append(access_check(ctx))  # last: it reports what the replays reached for
    checks.sort(key=lambda c: CODES.index(c.code))
    return ReviewReport(
        review_id=job.review_id,
        attempt_id=job.attempt_id,
        commit=job.commit,
        verdict=verdict_of(checks),
        checks=checks,
        metrics=[*_fold_metrics(results, plan, ctx.folds.case_groups), *holdout_metrics],
        baselines=new_baselines,
        value_hashes={
            r.byte_hashes[c]: r.value_hashes[c] for r in results for c in r.value_hashes if c in r.byte_hashes
        },
        conventions={m.name: m.convention.model_dump(mode="json") for m in plan if m.convention is not None},
        seconds=round(time.monotonic() - started, 3),
    )


def _fold_metrics(results: list[FoldResult], plan: list[PlannedMetric], groups: dict[str, str]) -> list[VerifiedMetric]:
    by_name = {m.name: m for m in plan}

    def case_se(r: FoldResult, name: str) -> float | None:  # the noise ranking needs, even for one fold
        return standard_error(case_scores(by_name[name], r.case_values), groups) if name in by_name else None

    return [
        VerifiedMetric(
            scope="fold",
            fold=r.fold,
            metric=name,
            value=mean_value(s),
            n_cases=s.n_cases,
            n_valid=s.n_valid,
            n_nan=s.n_nan,
            n_capped=s.n_capped,
            case_se=case_se(r, name),
        )
        for r in results
        for name, s in r.summaries.items()
    ]


def _new_baselines(ctx: ReviewContext, results: list[FoldResult]) -> list[BaselineValue]:
    predictor = baseline_name(ctx)
    return [
        BaselineValue(
            fold=r.fold,
            predictor=r.baseline_predictors.get(name, predictor),
            metric=name,
            value=mean_value(s),
            n_cases=s.n_cases,
            n_valid=s.n_valid,
            n_nan=s.n_nan,
            n_capped=s.n_capped,
        )
        for r in results
        for name, s in r.baseline_summaries.items()
    ]


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _stop(signum: int, frame: object) -> None:
    """SIGTERM from the pool (timeout or server stop): take replay and grader processes along."""
    kill_live_groups()
    os._exit(128 + signum)


def run_job(job_json: str) -> bool:
    """One review: the report (or the error) goes to reviews/; True if there is a report."""
    job = ReviewJob.model_validate_json(job_json)
    report_path, progress_path, error_path = report_paths(Path(job.workspace) / "reviews", job.review_id)

    def progress(fraction: float, stage: str) -> None:
        _write_atomic(progress_path, json.dumps({"fraction": round(fraction, 3), "stage": stage}))

    try:
        report = review(job, ReviewContext.load(job, progress))
    except Exception as exc:
        _write_atomic(error_path, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-4000:]}")
        return False
    _write_atomic(report_path, report.model_dump_json(indent=1))
    return True


def worker_main(connection: Connection, server_pid: int | None = None) -> None:
    """A review process: its own process group (so the pool can kill it whole, subprocesses
    included); takes job after job from the pool until the pool hangs up, and stops (with its
    subprocesses) as soon as the server process is gone, even in the middle of a review."""
    os.setpgrp()
    signal.signal(signal.SIGTERM, _stop)
    if server_pid is not None:
        exit_with(server_pid)
    while True:
        try:
            job_json = connection.recv()
        except (EOFError, OSError):
            return
        if job_json is None:
            return
        connection.send(run_job(job_json))
