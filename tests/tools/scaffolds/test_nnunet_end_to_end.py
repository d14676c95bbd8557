"""The nnU-Net lane's own commands, run end to end on the demo task on CPU with a tiny schedule, then its
replay command as the reviewer runs it: in the sandbox, with only the packaged model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from amid.server.reviewer.agreement import LABEL_AGREEMENT, label_agreement
from amid.server.workspace import Workspace
from amid.tools.scaffolds.nnunet_steps import DEFAULT_MODEL, commands
from amid.tools.task.folds import LockedFolds
from tests.tools.scaffolds.graded import (
    freeze_like_submit,
    grade_with_task_grader,
    moved_away,
    replay_like_the_reviewer,
    run_step,
    submission_rows,
    worktree_of,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def test_nnunet_lane_converts_plans_trains_predicts_and_converts_back(workspace: Workspace, tmp_path: Path) -> None:
    worktree = worktree_of(workspace)
    steps = {s.name: s for s in commands(sys.executable, "demo-liver-lesion-ct", "3d_fullres", 5, gpus_here=0, cpus=2)}
    run_step(steps["convert"], worktree)
    run_step(steps["plan_and_preprocess"], worktree)  # the real nnUNetv2_plan_and_preprocess, integrity checked
    preprocessed = worktree / ".amid-local/nnunet/preprocessed/Dataset501_DemoLiverLesionCt"
    assert (preprocessed / "nnUNetPlans.json").is_file()
    locked = LockedFolds.model_validate_json((workspace.task_dir / "folds.json").read_text(encoding="utf-8"))
    splits = json.loads((preprocessed / "splits_final.json").read_text(encoding="utf-8"))  # survived preprocessing
    assert [sorted(s["val"]) for s in splits] == [f.val_cases for f in locked.folds]

    run_step(steps["smoke_train_fold_0"], worktree)  # as the lane gives it on CPU: --device cpu, 1 epoch of 2
    run_step(steps["to_task_fold_0"], worktree)
    fold_dir = worktree / "predictions/fold_0"
    for case_id in locked.folds[0].val_cases:
        prediction = nib.load(fold_dir / f"{case_id}.nii.gz")
        reference = nib.load(workspace.task_dir / "public/train/images" / f"{case_id}_0000.nii.gz")
        assert prediction.shape == reference.shape and np.allclose(prediction.affine, reference.affine)
        assert set(np.unique(np.asarray(prediction.dataobj))) <= {0, 1, 2}
    assert sorted(p.name for p in fold_dir.iterdir()) == sorted(f"{c}.nii.gz" for c in locked.folds[0].val_cases)
    manifest = json.loads((worktree / "predictions/training_manifest.json").read_text(encoding="utf-8"))
    assert manifest["folds"]["0"] == locked.folds[0].train_cases

    run_step(steps["package"], worktree)  # every trained fold: here fold 0
    run_step(steps["predict_test"], worktree)  # the packaged folds, as the replay predicts
    submission = worktree / "submission"
    assert [row["case_id"] for row in submission_rows(submission)] == sorted(
        p.name.removesuffix("_0000.nii.gz") for p in (workspace.task_dir / "public/test/images").iterdir()
    )
    scores = grade_with_task_grader(workspace, submission)  # the challenge's grader accepts it
    assert 0.0 <= scores["dice"] <= 1.0 and scores["hd95"] >= 0.0

    model = worktree / DEFAULT_MODEL
    assert sorted(p.relative_to(model).as_posix() for p in model.rglob("*") if p.is_file()) == [
        "amid_conversion.json",
        "dataset.json",
        "dataset_fingerprint.json",
        "fold_0/checkpoint_final.pth",
        "plans.json",
    ]
    frozen = freeze_like_submit(model, tmp_path)
    moved_away(worktree / ".amid-local", tmp_path)  # raw, preprocessed, results and package gone: frozen copy only
    cases = locked.folds[0].val_cases[:2]
    images = [workspace.task_dir / "public/train/images" / f"{case_id}_0000.nii.gz" for case_id in cases]
    outputs, _ = replay_like_the_reviewer(steps["replay"], frozen, images, tmp_path / "replay", fold=0)
    assert sorted(p.name for p in outputs.iterdir()) == [f"{case_id}.nii.gz" for case_id in cases]
    for case_id, image in zip(cases, images, strict=True):
        replayed, reference = nib.load(outputs / f"{case_id}.nii.gz"), nib.load(image)
        assert replayed.shape == reference.shape and np.allclose(replayed.affine, reference.affine)
        submitted = np.asarray(nib.load(fold_dir / f"{case_id}.nii.gz").dataobj)
        agreement = label_agreement(np.asarray(replayed.dataobj), submitted)
        assert agreement >= LABEL_AGREEMENT, (case_id, agreement)  # what PRED_NOT_REPRODUCED asks
