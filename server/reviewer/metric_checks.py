"""Do the numbers hold? METRIC_MISMATCH (declared vs recomputed), METRIC_DIRECTION (a claimed
improvement over the parent that is not strictly better, by more than the metric's tolerance, both
as declared and as verified), TRIVIAL_BASELINE (beats the trivial predictor)."""

from __future__ import annotations

import math
from typing import Any

from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.predictions import FoldResult
from amid.server.reviewer.report import BaselineValue, Check, fired, head, ok, unverifiable
from amid.tools.metrics.scoring import PlannedMetric, close, mean_value


def mismatch_check(ctx: ReviewContext, plan: list[PlannedMetric], results: list[FoldResult]) -> Check:
    by_name = {m.name: m for m in plan}
    mismatches: list[dict[str, Any]] = []
    unchecked: list[dict[str, Any]] = []
    for result in results:
        for name, declared in sorted(ctx.job.declared.get(result.fold, {}).items()):
            metric = by_name.get(name)
            if metric is None or name not in result.summaries:
                reason = (metric.note if metric else "") or "not recomputable for this prediction type"
                unchecked.append({"fold": result.fold, "metric": name, "reason": reason})
                continue
            verified = mean_value(result.summaries.get(name))
            if not close(declared, verified, metric.tolerance):
                mismatches.append(
                    {
                        "fold": result.fold,
                        "metric": name,
                        "declared": declared,
                        "verified": verified,
                        "tolerance": metric.tolerance,
                    }
                )
    primary = ctx.contract.primary_metric
    unverified = [r.fold for r in results if mean_value(r.summaries.get(primary)) is None]
    if unverified:
        why = _unverified_reason(results, unverified, primary, by_name.get(primary))
        return fired(
            "METRIC_MISMATCH",
            f"the primary metric {primary!r} could not be verified on fold(s) {unverified} ({why}); an attempt "
            "whose primary metric is not verified is never accepted",
            unverified_folds=unverified,
            mismatches=head(mismatches),
            unchecked=head(unchecked),
        )
    if mismatches:
        m = mismatches[0]
        return fired(
            "METRIC_MISMATCH",
            f"{len(mismatches)} declared scores differ from the recomputed ones beyond tolerance; first: fold "
            f"{m['fold']} {m['metric']} declared {m['declared']} verified {_fmt(m['verified'])} (± {m['tolerance']})",
            mismatches=head(mismatches),
            n_mismatches=len(mismatches),
            unchecked=head(unchecked),
        )
    if unchecked:
        return unverifiable(
            "METRIC_MISMATCH", f"{len(unchecked)} declared scores could not be recomputed", unchecked=head(unchecked)
        )
    return ok("METRIC_MISMATCH", "every declared score matches its recomputed value within tolerance")


def _unverified_reason(results: list[FoldResult], folds: list[int], primary: str, metric: PlannedMetric | None) -> str:
    summary = next((r.summaries.get(primary) for r in results if r.fold in folds), None)
    if summary is not None:
        return "the recomputation gave no finite value (NaN), e.g. a correlation of constant predictions"
    if any(r.schema for r in results if r.fold in folds):
        return "the predictions could not be scored (see PRED_SCHEMA)"
    return (metric.note if metric and metric.note else "") or "no recomputed value"


def direction_check(ctx: ReviewContext, plan: list[PlannedMetric], results: list[FoldResult]) -> Check:
    claims, parent = ctx.job.claims, ctx.job.parent
    if not claims:
        return ok("METRIC_DIRECTION", "no improvement over a parent attempt is claimed")
    if parent is None:
        return unverifiable("METRIC_DIRECTION", "improvement claimed but the parent attempt is unknown")
    by_name = {m.name: m for m in plan}
    verified = {r.fold: {k: mean_value(s) for k, s in r.summaries.items()} for r in results}
    wrong: list[dict[str, Any]] = []
    for name in claims:
        metric = by_name[name]
        folds = [f for f in ctx.job.folds if name in {**parent.declared.get(f, {}), **parent.verified.get(f, {})}]
        parent_folds = folds or sorted({*parent.declared, *parent.verified})
        source = "verified" if all(name in parent.verified.get(f, {}) for f in parent_folds) else "declared"
        parent_scores = parent.verified if source == "verified" else parent.declared
        before = _mean(parent_scores, parent_folds, name)
        after = _mean(ctx.job.declared, folds or ctx.job.folds, name)
        checked = _mean(verified, folds or ctx.job.folds, name)
        if (
            before is None
            or after is None
            or all(_improves(metric, v, before) for v in (after, checked) if v is not None)
        ):
            continue
        wrong.append(
            {
                "metric": name,
                "direction": metric.direction,
                "parent_attempt_id": parent.attempt_id,
                "parent_value": before,
                "parent_source": source,
                "declared_value": after,
                "verified_value": checked,
                "tolerance": metric.tolerance,
                "folds": folds,
            }
        )
    if wrong:
        w = wrong[0]
        better = "higher" if w["direction"] == "higher_better" else "lower"
        return fired(
            "METRIC_DIRECTION",
            f"claims to improve {w['metric']} over {w['parent_attempt_id']}, but {w['declared_value']:.4g} vs "
            f"{w['parent_value']:.4g} is not better by more than its tolerance {w['tolerance']:.3g} "
            f"({better} is better for {w['metric']})",
            claims=wrong,
        )
    return ok("METRIC_DIRECTION", f"claimed improvements ({', '.join(claims)}) beat the parent beyond tolerance")


def _improves(metric: PlannedMetric, value: float, parent: float) -> bool:
    """Strictly better than the parent, by more than the metric's tolerance (an equal claim is no improvement)."""
    return metric.is_better(value, parent) and abs(value - parent) > metric.tolerance


def _mean(scores: dict[int, dict[str, Any]], folds: list[int], name: str) -> float | None:
    values = [scores[f][name] for f in folds if f in scores and scores[f].get(name) is not None]
    return sum(values) / len(values) if values else None


def trivial_check(
    ctx: ReviewContext, plan: list[PlannedMetric], results: list[FoldResult], baselines: list[BaselineValue]
) -> Check:
    primary = next(m for m in plan if m.name == ctx.contract.primary_metric)
    if not any(primary.name in r.summaries for r in results):
        return unverifiable("TRIVIAL_BASELINE", f"primary metric {primary.name!r} cannot be recomputed here")
    known = {(b.fold, b.metric): b for b in baselines}
    losses: list[dict[str, Any]] = []
    compared: list[dict[str, Any]] = []
    for result in results:
        baseline = known.get((result.fold, primary.name))
        verified = mean_value(result.summaries.get(primary.name))
        if baseline is None or baseline.value is None:
            continue
        row = {
            "fold": result.fold,
            "metric": primary.name,
            "verified": verified,
            "baseline": baseline.value,
            "predictor": baseline.predictor,
        }
        compared.append(row)
        if verified is None or not primary.is_better(verified, baseline.value):
            losses.append(row)
    if losses:
        r = losses[0]
        return fired(
            "TRIVIAL_BASELINE",
            f"fold {r['fold']}: {r['metric']} {_fmt(r['verified'])} does not beat the trivial predictor "
            f"({r['predictor']}: {_fmt(r['baseline'])})",
            folds=losses,
        )
    if not compared:
        return unverifiable("TRIVIAL_BASELINE", "no trivial predictor could be scored on the declared folds")
    return ok("TRIVIAL_BASELINE", "beats the trivial predictor on every fold", folds=compared)


def _fmt(value: float | None) -> str:
    return "NaN" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.4g}"
