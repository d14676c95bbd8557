"""HOLDOUT_GAP, the holdout gate: replay the attempt's declared inference command
(server/reviewer/replay.py: frozen commit, frozen checkpoint, sandbox) on copies of the server-held
holdout inputs, score the outputs per case, and compare with the attempt's verified validation
score per case (the statistics are in `holdout_gate`).

A holdout significantly worse than validation is an error: the attempt is rejected, so it never
counts for a leaderboard, lane coverage, promotion or the package. So is a holdout replay that
fails or times out (the gate fails closed: a command that crashes only on holdout inputs must not
dodge it). Significantly better is a warning (often a leak of holdout data, never a reason to doubt
the validation score); too few scored cases to compare is unverifiable (a warning).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from amid.server.errors import DataUnreadable
from amid.server.repo import resolve_commit
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.holdout_gate import MIN_CASES, GapTest, gap_test
from amid.server.reviewer.predictions import FoldResult
from amid.server.reviewer.replay import ReplayCase, replay
from amid.server.reviewer.report import Check, VerifiedMetric, fired, head, ok, unverifiable, warned
from amid.tools.metrics import MetricSummary, summarize
from amid.tools.metrics.images import read_reference, read_volume
from amid.tools.metrics.scoring import PlannedMetric, case_values, foreground_labels, mean_value, summarize_all


def holdout_check(
    ctx: ReviewContext, plan: list[PlannedMetric], results: list[FoldResult]
) -> tuple[Check, list[VerifiedMetric]]:
    cases = ctx.holdout_cases
    if ctx.contract.validation.holdout_fraction <= 0 or not cases:
        return ok("HOLDOUT_GAP", "the contract has no server-held holdout"), []
    if ctx.contract.prediction.file_type == "csv":  # the gate scores label images; a table has none to read
        return unverifiable("HOLDOUT_GAP", "not judged for csv predictions yet: the holdout gate scores images"), []
    if not ctx.job.inference_command:
        return unverifiable("HOLDOUT_GAP", "no inference_command declared: the holdout was not replayed"), []
    if resolve_commit(ctx.workspace.commit_store, ctx.job.commit) != ctx.job.commit:
        return unverifiable("HOLDOUT_GAP", "the commit is not in the repository: nothing to replay"), []
    ctx.progress(0.8, "holdout replay")
    with replay(ctx, _holdout_inputs(ctx), "holdout") as run:
        if not run.succeeded:
            message = f"holdout replay failed ({run.failure(ctx.job.replay_timeout_s)}): the gate cannot be passed"
            return fired("HOLDOUT_GAP", message, **run.evidence()), []  # fails closed: a crash must not dodge it
        summaries, missing = _score(ctx, plan, run.outputs)
    return _compare(ctx, results, summaries, missing, run.outcome.seconds)


def _holdout_inputs(ctx: ReviewContext) -> list[ReplayCase]:
    held = ctx.workspace.private_dir / "holdout"
    return [ReplayCase(c.case_id, tuple(held / rel for rel in c.image_paths)) for c in ctx.holdout_cases]


@dataclass
class HoldoutScores:
    """What the replayed holdout outputs scored: summaries per metric and each case's label values."""

    plan: list[PlannedMetric]
    summaries: dict[str, MetricSummary]
    case_values: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # case → metric → values


def _score(ctx: ReviewContext, plan: list[PlannedMetric], outputs: Path) -> tuple[HoldoutScores, list[str]]:
    ending, labels = ctx.contract.layout.file_ending, foreground_labels(ctx.contract)
    values: dict[str, list[float]] = {}
    per_case: dict[str, dict[str, list[float]]] = {}
    missing = []
    for case in ctx.holdout_cases:
        reference = read_reference(ctx.workspace.private_dir / "holdout" / str(case.label_path), ending)
        prediction = np.zeros_like(reference.array)  # a missing or misshapen output scores as empty
        try:
            volume = read_volume(outputs / f"{case.case_id}{ending}", ending)
            if volume.array.shape == reference.array.shape:
                prediction = volume.array
            else:
                missing.append(case.case_id)
        except (DataUnreadable, OSError):
            missing.append(case.case_id)
        per_case[case.case_id] = case_values(plan, prediction, reference.array, reference.spacing, labels)
        for name, items in per_case[case.case_id].items():
            values.setdefault(name, []).extend(items)
    return HoldoutScores(plan, summarize_all(plan, values), per_case), missing


def case_scores(metric: PlannedMetric, per_case: dict[str, dict[str, list[float]]]) -> dict[str, float]:
    """Each case's score on one metric: its label values averaged (after the cap and NaN rule)."""
    if metric.convention is None:
        return {}
    scored = {c: summarize(v[metric.name], metric.convention).mean for c, v in per_case.items() if metric.name in v}
    return {case: float(score) for case, score in scored.items()}


def _compare(
    ctx: ReviewContext, results: list[FoldResult], scores: HoldoutScores, missing: list[str], seconds: float
) -> tuple[Check, list[VerifiedMetric]]:
    primary = next(m for m in scores.plan if m.name == ctx.contract.primary_metric)
    metrics = [
        VerifiedMetric(
            scope="holdout",
            fold=None,
            metric=name,
            value=mean_value(s),
            n_cases=s.n_cases,
            n_valid=s.n_valid,
            n_nan=s.n_nan,
            n_capped=s.n_capped,
        )
        for name, s in scores.summaries.items()
    ]
    validation = case_scores(primary, {c: v for r in results for c, v in r.case_values.items()})
    test = gap_test(
        validation,
        case_scores(primary, scores.case_values),
        higher_is_better=primary.direction == "higher_better",
        metric_tolerance=primary.tolerance,
        seed=ctx.contract.validation.seed,
        groups={**ctx.folds.case_groups, **{c.case_id: c.group for c in ctx.holdout_cases if c.group}},
        alpha=ctx.job.holdout_alpha,
    )
    base = {
        "metric": primary.name,
        "n_holdout_cases": len(ctx.holdout_cases),
        "missing_outputs": head(missing),
        "n_missing_outputs": len(missing),
        "replay_seconds": round(seconds, 2),
    }
    if test is None:
        why = f"fewer than {MIN_CASES} scored cases on validation or holdout"
        return unverifiable("HOLDOUT_GAP", f"no per-case {primary.name} to compare: {why}", **base), metrics
    return _gate(primary.name, test, {**base, **test.evidence()}), metrics


def _gate(metric: str, test: GapTest, evidence: dict[str, Any]) -> Check:
    said = (
        f"holdout replay scores {metric} {test.holdout:.4g} against {test.validation:.4g} on validation "
        f"(per-case means over {test.n_holdout_groups} / {test.n_validation_groups} groups; gap "
        f"{test.difference:+.4g}, one-sided p {test.p_worse:.3g} at alpha {test.alpha:g}, "
        f"tolerance {test.tolerance:.3g})"
    )
    if test.verdict == "worse":
        return fired(
            "HOLDOUT_GAP",
            f"{said}: significantly worse, so the validation score does not generalise; the attempt is not promotable",
            **evidence,
        )
    if test.verdict == "better":
        return warned(
            "HOLDOUT_GAP", f"{said}: significantly better than validation; check for holdout leakage", **evidence
        )
    if not test.powered:
        return ok(
            "HOLDOUT_GAP",
            f"{said}: too few groups for the gate to reject anything at alpha {test.alpha:g} "
            "(a larger --holdout-fraction would)",
            **evidence,
        )
    return ok(
        "HOLDOUT_GAP",
        f"holdout {metric} {test.holdout:.4g} is within {test.tolerance:.3g} of validation {test.validation:.4g}",
        **evidence,
    )
