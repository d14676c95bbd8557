"""nnU-Net raw conversion: names, labels, geometry checks, locked splits, and the way back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from amid.server.errors import DataUnreadable
from amid.server.workspace import Workspace, init_workspace
from amid.tools.scaffolds.nnunet_back import predictions_to_task
from amid.tools.scaffolds.nnunet_dataset import NnunetLayout, contiguous_label_map, convert_task, write_splits
from amid.tools.scaffolds.nnunet_steps import commands
from amid.tools.scaffolds.pinning import PIN_FLAG, scaffold_digest
from amid.tools.scaffolds.taskdata import TaskData
from amid.tools.task.importers import import_task
from tests.factories import native_task_dict, write_nifti


def _layout(tmp_path: Path, task: TaskData) -> NnunetLayout:
    return NnunetLayout(tmp_path / "nnunet", 501, "Demo")


def _native_task(root: Path, label_value: int = 255, bad_affine_case: int | None = None) -> Workspace:
    """Nine 10 x 10 x 5 cases, labels {0, label_value}, three sites; optionally one label on a shifted grid."""
    rng = np.random.default_rng(0)
    for i in range(9):
        image = rng.normal(0, 1, (10, 10, 5)).astype(np.float32)
        label = np.zeros((10, 10, 5), np.uint8)
        label[2:5, 2:5, 1:3] = label_value
        write_nifti(root / "data/images" / f"c{i:02d}_0000.nii.gz", image)
        affine = np.diag([1.0, 1.0, 3.0, 1.0])
        if i == bad_affine_case:
            affine[0, 3] = 5.0
        root.joinpath("data/labels").mkdir(parents=True, exist_ok=True)
        nib.save(nib.Nifti1Image(label, affine), root / "data/labels" / f"c{i:02d}.nii.gz")
    (root / "data/groups.csv").write_text(
        "case_id,site\n" + "".join(f"c{i:02d},site{i % 3}\n" for i in range(9)), encoding="utf-8"
    )
    data = native_task_dict()
    data["layout"]["label_values"] = {0: "background", label_value: "lesion"}
    data["prediction"]["label_values"] = [0, label_value]
    import yaml

    (root / "task.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    return init_workspace(import_task(root / "task.yaml"), root.parent / f"{root.name}-ws")


def test_the_demo_converts_to_a_raw_dataset_with_locked_patient_grouped_splits(
    workspace: Workspace, tmp_path: Path
) -> None:
    task = TaskData.open(workspace.task_dir)
    layout = _layout(tmp_path, task)
    conversion = convert_task(task, layout)
    splits = json.loads(write_splits(task, layout).read_text(encoding="utf-8"))
    spec = json.loads((layout.raw / "dataset.json").read_text(encoding="utf-8"))
    assert spec["channel_names"] == {"0": "CT"} and spec["labels"] == {"background": 0, "liver": 1, "lesion": 2}
    assert spec["numTraining"] == 20 and spec["file_ending"] == ".nii.gz"
    assert sorted(p.name for p in (layout.raw / "imagesTr").iterdir())[0] == "p000s0_0000.nii.gz"
    assert len(list((layout.raw / "labelsTr").iterdir())) == 20 and len(list((layout.raw / "imagesTs").iterdir())) == 6
    assert conversion.label_map == {0: 0, 1: 1, 2: 2} and conversion.relabelled_cases == 0
    assert [sorted(s["val"]) for s in splits] == [f.val_cases for f in task.folds.folds]
    for split in splits:
        assert not {c[:4] for c in split["val"]} & {c[:4] for c in split["train"]}  # p000s0, p000s1: one patient


def test_non_contiguous_labels_are_remapped_and_mapped_back_exactly(tmp_path: Path) -> None:
    workspace = _native_task(tmp_path / "native")
    task = TaskData.open(workspace.task_dir)
    layout = _layout(tmp_path, task)
    conversion = convert_task(task, layout)
    write_splits(task, layout)
    assert conversion.label_map == {0: 0, 255: 1} and conversion.relabelled_cases == 9
    assert json.loads((layout.raw / "dataset.json").read_text(encoding="utf-8"))["labels"] == {
        "background": 0,
        "lesion": 1,
    }
    nnunet_label = np.asarray(nib.load(layout.raw / "labelsTr" / "c00.nii.gz").dataobj)
    assert set(np.unique(nnunet_label)) == {0, 1}
    predictions = tmp_path / "fake_predictions"  # nnU-Net-valued masks, as nnU-Net writes them
    shutil.copytree(layout.raw / "labelsTr", predictions)
    result = predictions_to_task(task, layout, predictions, tmp_path / "fold0", split="val", fold=0)
    train_cases, val_cases = task.fold(0)
    for case_id in val_cases:
        restored = nib.load(tmp_path / "fold0" / f"{case_id}.nii.gz")
        original = nib.load(workspace.task_dir / "data/labels" / f"{case_id}.nii.gz")
        assert np.array_equal(np.asarray(restored.dataobj), np.asarray(original.dataobj))
        assert np.allclose(restored.affine, original.affine) and restored.get_data_dtype() == np.uint8
    manifest = json.loads(Path(str(result["manifest"])).read_text(encoding="utf-8"))
    assert Path(str(result["manifest"])) == tmp_path / "training_manifest.json"  # beside the fold folder
    assert manifest["folds"]["0"] == sorted(train_cases) and manifest["val_cases"]["0"] == sorted(val_cases)


def test_a_case_whose_label_grid_differs_from_its_image_stops_the_conversion(tmp_path: Path) -> None:
    workspace = _native_task(tmp_path / "shifted", label_value=1, bad_affine_case=4)
    task = TaskData.open(workspace.task_dir)
    with pytest.raises(DataUnreadable, match=r"geometry differs within cases .*c04: c04.nii.gz has a different affine"):
        convert_task(task, _layout(tmp_path, task))


def test_undeclared_label_values_are_refused(tmp_path: Path) -> None:
    workspace = _native_task(tmp_path / "undeclared", label_value=1)
    label = workspace.task_dir / "data/labels/c03.nii.gz"
    image = nib.load(label)
    data = np.asarray(image.dataobj).copy()
    data[0, 0, 0] = 7
    nib.save(nib.Nifti1Image(data, image.affine), label)
    task = TaskData.open(workspace.task_dir)
    with pytest.raises(DataUnreadable, match=r"c03.nii.gz: label values \[7\] are not declared"):
        convert_task(task, _layout(tmp_path, task))
    with pytest.raises(Exception, match="0 \\(background\\)"):
        contiguous_label_map([1, 2])


def test_predictions_missing_for_a_validation_case_are_named(workspace: Workspace, tmp_path: Path) -> None:
    task = TaskData.open(workspace.task_dir)
    layout = _layout(tmp_path, task)
    convert_task(task, layout)
    write_splits(task, layout)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataUnreadable, match=r"4 case\(s\) have no file"):
        predictions_to_task(task, layout, tmp_path / "empty", tmp_path / "out", split="val", fold=0)


def test_the_commands_name_every_nnunet_step_per_fold() -> None:
    steps = commands("/venv/bin/python", "demo-liver-lesion-ct", "3d_fullres", 5)
    names = [s.name for s in steps]
    assert names[:3] == ["convert", "plan_and_preprocess", "smoke_train_fold_0"]
    assert names[-3:] == ["package", "predict_test", "replay"]
    replay = (
        "{python} -m amid.tools.scaffolds.nnunet replay --model {checkpoint} --folds {fold} --input-dir {input_dir}"
    )
    assert steps[-1].argv == [*replay.split(), "--output-dir", "{output_dir}", PIN_FLAG, scaffold_digest("nnunet")]
    assert "inference_command" in steps[-1].note and "artifacts.checkpoint" in steps[-3].note
    assert not steps[-1].job and steps[-1].run_gpu_job is None
    package = steps[-3].argv
    assert package[package.index("--dest") + 1] == ".amid-local/nnunet_model"  # in the worktree, git-ignored
    assert not [s.name for s in steps if "worktree>" in " ".join(s.argv)]
    assert [n for n in names if n.startswith("train_fold_")] == [f"train_fold_{f}" for f in range(5)]
    assert [n for n in names if n.startswith("score_fold_")] == [f"score_fold_{f}" for f in range(5)]
    train = next(s for s in steps if s.name == "train_fold_3")
    assert train.argv == ["/venv/bin/nnUNetv2_train", "501", "3d_fullres", "3", "--npz"] and train.gpus == 1
    assert train.env["nnUNet_raw"] == ".amid-local/nnunet/raw" and train.route == "full"
    predict = next(s for s in steps if s.name == "predict_test")
    assert predict.argv[predict.argv.index("--model") + 1] == ".amid-local/nnunet_model"  # the folds packaged
    assert predict.argv[-2:] == ["--device", "cuda"]
