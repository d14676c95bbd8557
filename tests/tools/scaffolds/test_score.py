"""The score step: a fold's declared scores from the reviewer's own metric code, refusing what the reviewer refuses."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nibabel as nib
import numpy as np

from amid.server.workspace import Workspace
from amid.tools.scaffolds.score import MODULE

LABELS = Path("public/train/labels")


def _perfect_fold(workspace: Workspace, fold: int = 0) -> Path:
    """A worktree whose predictions/fold_K holds the reference labels: a perfect model's output."""
    worktree = workspace.worktrees_dir / "ann"
    predictions = worktree / "predictions" / f"fold_{fold}"
    predictions.mkdir(parents=True)
    for case in workspace.folds().val_cases(fold):
        shutil.copy(workspace.task_dir / LABELS / f"{case}.nii.gz", predictions)
    return worktree


def _score(worktree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", MODULE, *args]
    return subprocess.run(command, cwd=worktree, capture_output=True, text=True, timeout=300)


def test_perfect_predictions_score_as_the_reviewer_scores_them_and_beat_the_empty_mask(workspace: Workspace) -> None:
    worktree = _perfect_fold(workspace)
    done = _score(worktree, "--predictions", "predictions/fold_0", "--fold", "0", "--out", ".amid-local/s.json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["declared_scores"] == {"0": {"dice": 1.0, "hd95": 0.0}}  # the metric-conventions snippet's values
    assert result["beats_baseline"] is True and result["baseline"]["dice"] < 1.0
    assert json.loads((worktree / ".amid-local/s.json").read_text(encoding="utf-8")) == result


def test_a_degraded_prediction_scores_lower_in_both_metric_directions(workspace: Workspace) -> None:
    worktree = _perfect_fold(workspace)
    case = workspace.folds().val_cases(0)[0]
    path = worktree / "predictions/fold_0" / f"{case}.nii.gz"
    image = nib.load(path)
    nib.save(nib.Nifti1Image(np.zeros(image.shape, np.uint8), image.affine, image.header), path)
    scores = json.loads(_score(worktree, "--predictions", "predictions/fold_0", "--fold", "0").stdout)
    assert scores["declared_scores"]["0"]["dice"] < 1.0 and scores["declared_scores"]["0"]["hd95"] > 0.0


def test_a_manifest_inside_the_fold_folder_is_refused_as_the_reviewer_would(workspace: Workspace) -> None:
    worktree = _perfect_fold(workspace)
    (worktree / "predictions/fold_0/training_manifest.json").write_text('{"folds": {"0": []}}', encoding="utf-8")
    done = _score(worktree, "--predictions", "predictions/fold_0", "--fold", "0")
    assert done.returncode == 2 and "training_manifest.json" in done.stderr and "PRED_SCHEMA" in done.stderr


def test_a_missing_case_or_a_case_of_another_fold_is_refused_naming_it(workspace: Workspace) -> None:
    worktree = _perfect_fold(workspace)
    dropped = workspace.folds().val_cases(0)[0]
    (worktree / "predictions/fold_0" / f"{dropped}.nii.gz").unlink()
    done = _score(worktree, "--predictions", "predictions/fold_0", "--fold", "0")
    assert done.returncode == 2 and dropped in done.stderr and "no file" in done.stderr
    other = workspace.folds().val_cases(1)[0]  # a perfect answer for a case of fold 1 cannot fill the gap
    shutil.copy(workspace.task_dir / LABELS / f"{other}.nii.gz", worktree / "predictions/fold_0" / f"{dropped}.nii.gz")
    shutil.copy(workspace.task_dir / LABELS / f"{other}.nii.gz", worktree / "predictions/fold_0")
    done = _score(worktree, "--predictions", "predictions/fold_0", "--fold", "0")
    assert done.returncode == 2 and other in done.stderr


def test_a_prediction_of_the_wrong_shape_is_refused(workspace: Workspace) -> None:
    worktree = _perfect_fold(workspace)
    case = workspace.folds().val_cases(0)[0]
    path = worktree / "predictions/fold_0" / f"{case}.nii.gz"
    nib.save(nib.Nifti1Image(np.zeros((4, 4, 4), np.uint8), np.eye(4)), path)
    done = _score(worktree, "--predictions", "predictions/fold_0", "--fold", "0")
    assert done.returncode == 2 and "shape" in done.stderr and case in done.stderr


def test_without_a_fold_every_fold_folder_is_scored_into_one_declared_scores(workspace: Workspace) -> None:
    worktree = _perfect_fold(workspace, 0)
    shutil.rmtree(worktree / "predictions")
    for fold in (0, 2):
        target = worktree / "predictions" / f"fold_{fold}"
        target.mkdir(parents=True)
        for case in workspace.folds().val_cases(fold):
            shutil.copy(workspace.task_dir / LABELS / f"{case}.nii.gz", target)
    (worktree / "predictions/training_manifest.json").write_text("{}", encoding="utf-8")  # beside: ignored
    result = json.loads(_score(worktree, "--predictions", "predictions").stdout)
    assert result["folds"] == [0, 2]
    assert result["declared_scores"] == {"0": {"dice": 1.0, "hd95": 0.0}, "2": {"dice": 1.0, "hd95": 0.0}}
