"""Score one fold's predictions with the reviewer's own metric code: the `declared_scores` to submit.

    python -m amid.tools.scaffolds.score --predictions predictions/fold_0 --fold 0 --out .amid-local/scores/fold_0.json
    python -m amid.tools.scaffolds.score --predictions predictions     # every predictions/fold_N folder

Run from the worktree (the task folder is `../../task`). It reads and scores the files the way the
reviewer does (`amid.tools.metrics.images`, `amid.tools.metrics.scoring`: per foreground label and case,
the contract's empty-case conventions, mm spacing from the reference header) and prints
`{"declared_scores": {"0": {metric: value}}, ...}`. It refuses a folder the reviewer would refuse:
a missing case (PRED_INCOMPLETE), a file that is not a case of the fold (PRED_SCHEMA or
FOLD_MISMATCH) or a prediction whose shape differs from the reference (PRED_SCHEMA).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from amid.server.errors import AmidError, DataUnreadable, InvalidInput
from amid.tools.metrics.images import read_reference, read_volume
from amid.tools.metrics.scoring import PlannedMetric, case_values, foreground_labels, plan_metrics, summarize_all
from amid.tools.scaffolds.taskdata import STRAY_FIX, TaskData, stray_files

MODULE = "amid.tools.scaffolds.score"
IMAGE_TASKS = ("segmentation", "enhancement")
Values = dict[str, list[float]]


def score_fold(task: TaskData, predictions: Path, fold: int) -> dict[str, Any]:
    """The fold's scores (and the empty-mask or identity baseline the attempt must beat)."""
    contract = task.contract
    if contract.task_type not in IMAGE_TASKS:
        raise InvalidInput(f"task_type: {contract.task_type}; this step scores {IMAGE_TASKS} folds", field="task_type")
    ending, val_cases = contract.layout.file_ending, task.fold(fold)[1]
    check_fold_folder(predictions, val_cases, ending)
    plan, labels = plan_metrics(contract), foreground_labels(contract)
    values: Values = {}
    baseline: Values = {}
    for case_id in val_cases:
        case = task.train_cases[case_id]
        reference = read_reference(task.path(str(case.label_path)), ending)
        prediction = _prediction(predictions / f"{case_id}{ending}", reference.array, ending, contract.task_type)
        _extend(values, case_values(plan, prediction, reference.array, reference.spacing, labels))
        trivial = _baseline(task, case.image_paths[0], reference.array, ending, contract.task_type)
        _extend(baseline, case_values(plan, trivial, reference.array, reference.spacing, labels))
    scores, floor = _means(plan, values), _means(plan, baseline)
    primary = contract.primary_metric
    return {
        "fold": fold,
        "cases": len(val_cases),
        "declared_scores": {str(fold): scores},
        "baseline": floor,
        "beats_baseline": _beats(plan, primary, scores, floor),
        "primary_metric": primary,
    }


def score_folds(task: TaskData, predictions: Path) -> dict[str, Any]:
    """Every `fold_N` folder under `predictions`, in one `declared_scores` (the attempt's folds)."""
    folds = sorted(int(p.name[5:]) for p in predictions.glob("fold_*") if p.is_dir() and p.name[5:].isdigit())
    if not folds:
        raise DataUnreadable(f"predictions: no fold_N folder in {predictions}; run a predict step", field="predictions")
    results = [score_fold(task, predictions / f"fold_{fold}", fold) for fold in folds]
    declared: dict[str, dict[str, float]] = {}
    for result in results:
        declared |= result["declared_scores"]
    return {"folds": folds, "declared_scores": declared, "per_fold": results}


def check_fold_folder(predictions: Path, val_cases: list[str], ending: str) -> None:
    """The folder holds exactly the fold's cases, as `CASE<ending>` files (what the reviewer accepts)."""
    if not predictions.is_dir():
        raise DataUnreadable(f"predictions: {predictions} is not a folder; run the predict step", field="predictions")
    missing = [c for c in val_cases if not (predictions / f"{c}{ending}").is_file()]
    if missing:
        raise DataUnreadable(
            f"predictions: {len(missing)} case(s) of the fold have no file in {predictions}: {missing[:5]}",
            field="predictions",
        )
    stray = stray_files(predictions, val_cases, ending)
    if stray:
        raise InvalidInput(
            f"predictions: {predictions} holds files that are not this fold's cases {stray[:5]}; the reviewer "
            f"rejects them (PRED_SCHEMA, FOLD_MISMATCH): {STRAY_FIX}",
            field="predictions",
        )


def _prediction(path: Path, reference: np.ndarray, ending: str, task_type: str) -> np.ndarray:
    array = read_volume(path, ending).array
    if array.shape != reference.shape:
        raise InvalidInput(
            f"predictions: {path.name} has shape {list(array.shape)}; the reference has {list(reference.shape)}",
            field="predictions",
        )
    return array.astype(np.int64) if task_type == "segmentation" and array.dtype.kind == "f" else array


def _baseline(task: TaskData, image: str, reference: np.ndarray, ending: str, task_type: str) -> np.ndarray:
    if task_type == "enhancement":
        return read_reference(task.path(image), ending).array  # the identity: the input image itself
    return np.zeros_like(reference)


def _means(plan: list[PlannedMetric], values: Values) -> dict[str, float]:
    return {name: float(summary.mean) for name, summary in summarize_all(plan, values).items()}


def _beats(plan: list[PlannedMetric], primary: str, scores: dict[str, float], floor: dict[str, float]) -> bool | None:
    metric = next((m for m in plan if m.name == primary), None)
    if metric is None or primary not in scores or math.isnan(scores[primary]):
        return None
    return metric.is_better(scores[primary], floor[primary])


def _extend(into: Values, values: Values) -> None:
    for name, items in values.items():
        into.setdefault(name, []).extend(items)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    parser.add_argument("--task-dir", type=Path, default=Path("../../task"), help="the workspace's task/ folder")
    parser.add_argument("--predictions", type=Path, required=True, help="the fold's folder: CASE<ending> files only")
    parser.add_argument("--fold", type=int, default=None, help="omit: --predictions holds fold_N folders")
    parser.add_argument("--out", type=Path, default=None, help="also write the result here (JSON)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        task = TaskData.open(args.task_dir)
        if args.fold is None:
            result = score_folds(task, args.predictions)
        else:
            result = score_fold(task, args.predictions, args.fold)
    except AmidError as exc:
        print(f"{exc.code}: {exc.message}", file=sys.stderr)
        return 2
    text = json.dumps(result, indent=1)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
