"""Re-scoring tasks whose predictions are a table (classification, regression / quality scores).

A fold's predictions are one CSV with the contract's `prediction.csv_columns` (id column first,
then the value column); the reference is the task's `layout.labels_table`. Data-set metrics
(accuracy, AUC, PLCC, …) are computed once per fold. The trivial predictor is the majority class
(classification) or the mean target (regression) of the fold's training cases; it also stands in
for a case the table leaves out, so a gap never helps.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import statistics
from collections import Counter
from pathlib import PurePath

import numpy as np

from amid.server.errors import DataUnreadable
from amid.server.reviewer import permuted
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.job import ArtifactRef
from amid.server.reviewer.predictions import FoldResult
from amid.tools.metrics import MetricSummary
from amid.tools.metrics.scoring import PlannedMetric

FILE_KEY = "__table__"


def columns(ctx: ReviewContext) -> tuple[str, str]:
    named = ctx.contract.prediction.csv_columns
    return (named[0] if named else "case_id", named[1] if len(named) > 1 else "label")


def reference_values(ctx: ReviewContext) -> dict[str, float]:
    table = ctx.contract.layout.labels_table
    if table is None:
        raise DataUnreadable("the contract names no layout.labels_table to score predictions against")
    rows = list(csv.DictReader(io.StringIO((ctx.workspace.task_dir / table).read_text(encoding="utf-8"))))
    id_column, value_column = columns(ctx)
    header = list(rows[0]) if rows else []
    target = value_column if value_column in header else header[1]
    key = id_column if id_column in header else header[0]
    try:
        return {row[key]: float(row[target]) for row in rows}
    except ValueError as exc:
        raise DataUnreadable(f"{table}: column {target!r} is not numeric ({exc})") from None


def trivial_value(ctx: ReviewContext, truth: dict[str, float], fold: int) -> float:
    train = [truth[c] for c in ctx.folds.folds[fold].train_cases if c in truth]
    if ctx.contract.task_type == "classification":
        return Counter(train).most_common(1)[0][0]
    return statistics.fmean(train)


def row_hash(case_id: str, value: str) -> str:
    return hashlib.sha256(f"{case_id}\x00{value.strip()}".encode()).hexdigest()


def read_rows(text: str, id_column: str, value_column: str) -> dict[str, str] | None:
    rows = list(csv.DictReader(io.StringIO(text)))
    if rows and (id_column not in rows[0] or value_column not in rows[0]):
        return None
    return {row[id_column]: row[value_column] or "" for row in rows}


def review_table_fold(ctx: ReviewContext, plan: list[PlannedMetric], fold: int, need_baseline: bool) -> FoldResult:
    result = FoldResult(fold, ctx.folds.val_cases(fold))
    truth, (id_column, value_column) = reference_values(ctx), columns(ctx)
    rows = _rows(ctx, result, id_column, value_column)
    trivial = trivial_value(ctx, truth, fold)
    val = set(result.val_cases)
    result.outside = [
        {"case_id": c, "file": "predictions", "belongs_to_fold": _owner(ctx, c)} for c in rows if c not in val
    ]
    predicted = [_value(result, case_id, rows.get(case_id), trivial) for case_id in result.val_cases]
    reference = [truth[c] for c in result.val_cases]
    result.value_hashes = {c: row_hash(c, rows[c]) for c in result.val_cases if c in rows}
    result.summaries = _summaries(plan, predicted, reference)
    if need_baseline:
        result.baseline_summaries = _summaries(plan, [trivial] * len(reference), reference)
        _permuted_baseline(ctx, plan, result, truth, reference)
    return result


def _permuted_baseline(
    ctx: ReviewContext, plan: list[PlannedMetric], result: FoldResult, truth: dict[str, float], reference: list[float]
) -> None:
    """Metrics a constant leaves undefined (correlations, AUC) take seeded permutations of the fold's
    training targets as their trivial predictor."""
    names = [m.name for m in plan if permuted.undefined(result.baseline_summaries.get(m.name))]
    train = [truth[c] for c in ctx.folds.folds[result.fold].train_cases if c in truth]
    if not names:
        return
    drawn = [_summaries(plan, draw, reference) for draw in permuted.draws(train, len(reference), result.fold)]
    for name, summary in permuted.averaged(drawn, names).items():
        result.baseline_summaries[name] = summary
        result.baseline_predictors[name] = permuted.PREDICTOR


def _rows(ctx: ReviewContext, result: FoldResult, id_column: str, value_column: str) -> dict[str, str]:
    tables = [r for r in ctx.files("predictions", result.fold) if _name(r).endswith(".csv")]
    for ref in ctx.files("predictions", result.fold):
        if not _name(ref).endswith(".csv"):
            result.schema.append({"file": ref.declared_path, "problem": "file type", "expected": "one .csv per fold"})
    if not tables or not ctx.usable(tables[0]):
        return {}
    rows = read_rows(ctx.path(tables[0]).read_text(errors="replace"), id_column, value_column)
    if rows is None:
        result.schema.append(
            {"file": tables[0].declared_path, "problem": "columns", "expected": [id_column, value_column]}
        )
        return {}
    result.byte_hashes = {FILE_KEY: tables[0].sha256}
    return rows


def _name(ref: ArtifactRef) -> str:
    return PurePath(ref.member or ref.declared_path).name


def _owner(ctx: ReviewContext, case_id: str) -> int | str:
    try:
        return ctx.folds.fold_of(case_id)
    except KeyError:
        return "unknown case"


def _value(result: FoldResult, case_id: str, raw: str | None, trivial: float) -> float:
    if raw is None:
        result.missing.append(case_id)
        return trivial
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isnan(value):
        result.schema.append({"case_id": case_id, "problem": "nan", "got": raw})
        return trivial
    return value


def _summaries(plan: list[PlannedMetric], predicted: list[float], reference: list[float]) -> dict[str, MetricSummary]:
    found = {}
    for metric in plan:
        if metric.spec is None or metric.convention is None or metric.spec.scope != "dataset":
            continue
        value = float(metric.spec.compute(np.asarray(predicted), np.asarray(reference), metric.convention))
        nan = math.isnan(value)
        found[metric.name] = MetricSummary(
            mean=value,
            median=value,
            std=0.0,
            n_cases=len(reference),
            n_valid=0 if nan else len(reference),
            n_nan=len(reference) if nan else 0,
            n_capped=0,
            values=(value,),
        )
    return found
