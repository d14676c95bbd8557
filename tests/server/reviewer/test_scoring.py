"""The reviewer's re-scoring adapter: contract conventions translated for the metrics library, and
verified Dice equal to the demo task's own grader on the same predictions."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from amid.server.reviewer.manifest import parse_manifest
from amid.server.workspace import Workspace
from amid.tools.metrics.images import read_volume, value_hash
from amid.tools.metrics.scoring import case_values, foreground_labels, plan_metrics, summarize_all
from tests.server.reviewer.sandbox import AgentSandbox, eroded


def test_demo_conventions_are_translated_to_explicit_rules(workspace: Workspace) -> None:
    plan = {m.name: m for m in plan_metrics(workspace.contract())}
    dice, hd95 = plan["dice"].convention, plan["hd95"].convention
    assert dice is not None and hd95 is not None
    assert dice.empty_both == "best" and plan["dice"].per_label
    assert (hd95.empty_both, hd95.empty_one, hd95.cap_mm, hd95.percentile) == ("best", "worst", 100.0, 95.0)
    assert foreground_labels(workspace.contract()) == [1, 2]


def test_verified_dice_equals_the_tasks_own_grader(workspace: Workspace) -> None:
    spec = importlib.util.spec_from_file_location("demo_grade", workspace.private_dir / "grader/grade.py")
    assert spec is not None and spec.loader is not None
    grader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grader)
    box = AgentSandbox(workspace, "checker")
    folder = box.write_predictions(0, eroded)
    contract = workspace.contract()
    plan, labels = plan_metrics(contract), foreground_labels(contract)
    values: dict[str, list[float]] = {}
    theirs = []
    for case_id in box.folds.val_cases(0):
        reference = box.label(case_id)
        ref = np.asarray(reference.dataobj)
        pred = np.asarray(nib.load(box.worktree / folder / f"{case_id}.nii.gz").dataobj)  # type: ignore[attr-defined]
        for name, items in case_values(plan, pred, ref, reference.header.get_zooms()[:3], labels).items():
            values.setdefault(name, []).extend(items)
        theirs += [grader._dice(pred == label, ref == label) for label in labels]
    ours = summarize_all(plan, values)["dice"]
    assert ours.mean == pytest.approx(float(np.mean(theirs)), abs=1e-12)
    assert 0.0 < ours.mean < 1.0 and ours.n_cases == 2 * len(box.folds.val_cases(0))


def test_re_encoded_predictions_share_a_value_hash_but_not_bytes(tmp_path: Path) -> None:
    array = np.zeros((6, 6, 3), np.uint8)
    array[2:4, 2:4, 1] = 2
    nib.save(nib.Nifti1Image(array, np.eye(4)), tmp_path / "a.nii.gz")
    nib.save(nib.Nifti1Image(array.astype(np.int16), np.eye(4)), tmp_path / "b.nii.gz")
    a, b = (read_volume(tmp_path / name, ".nii.gz") for name in ("a.nii.gz", "b.nii.gz"))
    assert (tmp_path / "a.nii.gz").read_bytes() != (tmp_path / "b.nii.gz").read_bytes()
    assert value_hash(a.array) == value_hash(b.array)
    assert a.spacing == (1.0, 1.0, 1.0) and a.affine is not None


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (["a", "b"], {0: ["a", "b"], 2: ["a", "b"]}),
        ({"train_cases": ["a"]}, {0: ["a"], 2: ["a"]}),
        ({"folds": {"0": ["a"], "2": ["b"]}}, {0: ["a"], 2: ["b"]}),
        ({"0": ["a"], "2": ["b"], "3": ["c"]}, {0: ["a"], 2: ["b"], 3: ["c"]}),
    ],
)
def test_training_manifest_forms(manifest: object, expected: dict[int, list[str]]) -> None:
    assert parse_manifest(manifest, [0, 2]) == expected


@pytest.mark.parametrize("manifest", [{"folds": {"0": ["a"]}}, {"folds": {"0": "a", "2": []}}, 42])
def test_unreadable_training_manifests_say_why(manifest: object) -> None:
    with pytest.raises(ValueError):
        parse_manifest(manifest, [0, 2])
