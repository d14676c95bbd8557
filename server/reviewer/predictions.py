"""One pass over a fold's frozen predictions: find, decode, check the schema, score, fingerprint.

Each validation case is read once and then dropped, so memory stays at one case at a time. A case
with no usable prediction (missing, unreadable, wrong shape, changed bytes) is scored as an empty
prediction: the reviewer never fills a gap in the agent's favour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

import numpy as np

from amid.server.errors import DataUnreadable
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.job import ArtifactRef
from amid.tools.metrics import MetricSummary
from amid.tools.metrics.images import Volume, read_reference, read_volume, value_hash
from amid.tools.metrics.scoring import PlannedMetric, case_values, foreground_labels, summarize_all

BASELINES = {  # every other task: the empty mask
    "enhancement": "identity",
    "classification": "majority_class",
    "graph_classification": "majority_class",
    "regression": "mean",
}


@dataclass
class FoldResult:
    fold: int
    val_cases: list[str]
    missing: list[str] = field(default_factory=list)
    outside: list[dict[str, Any]] = field(default_factory=list)
    schema: list[dict[str, Any]] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)
    case_values: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # case → metric → label values
    baseline_values: dict[str, list[float]] = field(default_factory=dict)
    byte_hashes: dict[str, str] = field(default_factory=dict)  # case → sha256 of the file
    value_hashes: dict[str, str] = field(default_factory=dict)  # case → sha256 of the decoded values
    summaries: dict[str, MetricSummary] = field(default_factory=dict)
    baseline_summaries: dict[str, MetricSummary] = field(default_factory=dict)
    baseline_predictors: dict[str, str] = field(default_factory=dict)  # metric → predictor, where not the task's


def baseline_name(ctx: ReviewContext) -> str:
    grader = ctx.contract.grader
    image_like = ctx.contract.prediction.file_type in ("nifti", "png", "tiff", "mha", "nrrd", "csv")
    if grader is not None and grader.fold_answers is not None and not image_like:
        return "fixed_prediction"  # the attempt's own prediction of one case, for every case
    return BASELINES.get(ctx.contract.task_type, "empty_mask")


def case_of(ref: ArtifactRef, ending: str) -> str | None:
    name = PurePath(ref.member or ref.declared_path).name
    return name[: -len(ending)] if name.endswith(ending) and len(name) > len(ending) else None


def review_fold(ctx: ReviewContext, plan: list[PlannedMetric], fold: int, need_baseline: bool) -> FoldResult:
    ending = ctx.contract.layout.file_ending
    result = FoldResult(fold, ctx.folds.val_cases(fold))
    found = _sort_files(ctx, result, ending)
    labels = foreground_labels(ctx.contract)
    for index, case_id in enumerate(result.val_cases):
        reference = read_reference(ctx.workspace.task_dir / str(ctx.train_cases[case_id].label_path), ending)
        prediction = _prediction(ctx, result, case_id, found.get(case_id), reference, ending)
        result.case_values[case_id] = case_values(plan, prediction, reference.array, reference.spacing, labels)
        _extend(result.values, result.case_values[case_id])
        if need_baseline:
            trivial = _baseline(ctx, case_id, reference, ending)
            _extend(result.baseline_values, case_values(plan, trivial, reference.array, reference.spacing, labels))
        ctx.progress(0.1 + 0.6 * (index + 1) / max(1, len(result.val_cases)), f"fold {fold}: case {case_id}")
    result.summaries = summarize_all(plan, result.values)
    if need_baseline:
        result.baseline_summaries = summarize_all(plan, result.baseline_values)
    return result


def _sort_files(ctx: ReviewContext, result: FoldResult, ending: str) -> dict[str, ArtifactRef]:
    """Map the fold's files to its validation cases; note wrong endings and cases outside the fold."""
    val, found = set(result.val_cases), {}
    for ref in ctx.files("predictions", result.fold):
        case_id = case_of(ref, ending)
        if case_id is None:
            result.schema.append({"file": ref.declared_path, "problem": "file type", "expected": f"CASE{ending}"})
        elif case_id in val:
            found[case_id] = ref
        else:
            owner = _fold_of(ctx, case_id)
            result.outside.append({"case_id": case_id, "file": ref.declared_path, "belongs_to_fold": owner})
    return found


def _fold_of(ctx: ReviewContext, case_id: str) -> int | str:
    try:
        return ctx.folds.fold_of(case_id)
    except KeyError:
        return "test" if case_id in ctx.test_cases else "unknown case"


def _prediction(
    ctx: ReviewContext, result: FoldResult, case_id: str, ref: ArtifactRef | None, reference: Volume, ending: str
) -> np.ndarray:
    empty = np.zeros_like(reference.array)
    if ref is None or not ctx.usable(ref):
        result.missing.append(case_id)
        return empty
    try:
        volume = read_volume(ctx.path(ref), ending)
    except DataUnreadable as exc:
        result.schema.append({"case_id": case_id, "file": ref.declared_path, "problem": "unreadable", "got": str(exc)})
        return empty
    result.byte_hashes[case_id] = ref.sha256
    result.value_hashes[case_id] = value_hash(volume.array)
    problems = schema_problems(ctx, volume, reference)
    result.schema.extend({"case_id": case_id, "file": ref.declared_path, **p} for p in problems)
    if any(p["problem"] in ("shape", "nan", "non-integer values") for p in problems):
        return empty
    array = volume.array
    return array.astype(np.int64) if _is_label_task(ctx) and array.dtype.kind == "f" else array


def _is_label_task(ctx: ReviewContext) -> bool:
    return ctx.contract.task_type in ("segmentation", "instance_segmentation")


def schema_problems(ctx: ReviewContext, prediction: Volume, reference: Volume) -> list[dict[str, Any]]:
    """Shape, spacing, affine against the reference; NaN; integer label values from the contract."""
    pred, ref = prediction.array, reference.array
    if pred.shape != ref.shape:
        return [{"problem": "shape", "expected": list(ref.shape), "got": list(pred.shape)}]
    problems: list[dict[str, Any]] = []
    if ctx.contract.prediction.geometry_must_match:
        problems.extend(_geometry(prediction, reference))
    if pred.dtype.kind == "f" and np.isnan(pred).any():
        problems.append({"problem": "nan", "got": int(np.isnan(pred).sum())})
    elif _is_label_task(ctx):
        problems.extend(_labels(ctx, pred))
    return problems


def _geometry(prediction: Volume, reference: Volume) -> list[dict[str, Any]]:
    problems = []
    if not np.allclose(prediction.spacing, reference.spacing, rtol=1e-3, atol=1e-4):
        problems.append(
            {"problem": "spacing", "expected": _round(reference.spacing), "got": _round(prediction.spacing)}
        )
    both = prediction.affine is not None and reference.affine is not None
    if both and not np.allclose(prediction.affine, reference.affine, atol=1e-3):  # type: ignore[arg-type]
        problems.append({"problem": "affine", "expected": _round(reference.affine), "got": _round(prediction.affine)})
    return problems


def _labels(ctx: ReviewContext, pred: np.ndarray) -> list[dict[str, Any]]:
    if pred.dtype.kind == "f" and not np.all(np.mod(pred, 1) == 0):
        return [{"problem": "non-integer values", "expected": "integer labels"}]
    allowed = set(ctx.contract.prediction.label_values or ctx.contract.layout.label_values)
    if ctx.contract.task_type != "segmentation" or not allowed:
        return []
    extra = sorted(int(v) for v in np.unique(pred) if int(v) not in allowed)
    return [{"problem": "label values", "expected": sorted(allowed), "got": extra}] if extra else []


def _baseline(ctx: ReviewContext, case_id: str, reference: Volume, ending: str) -> np.ndarray:
    if baseline_name(ctx) == "identity":
        image = ctx.workspace.task_dir / ctx.train_cases[case_id].image_paths[0]
        return read_reference(image, ending).array
    return np.zeros_like(reference.array)


def _extend(into: dict[str, list[float]], values: dict[str, list[float]]) -> None:
    for name, items in values.items():
        into.setdefault(name, []).extend(items)


def _round(values: Any) -> Any:
    return np.round(np.asarray(values, dtype=np.float64), 4).tolist()
