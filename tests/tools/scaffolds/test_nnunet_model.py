"""The packaged nnU-Net model: exactly what the predictor reads, and the replay refusing anything less."""

from __future__ import annotations

from pathlib import Path

import pytest

from amid.server.errors import Conflict, DataUnreadable
from amid.server.workspace import Workspace
from amid.tools.scaffolds.nnunet_dataset import CONVERSION_FILE, NnunetLayout, convert_task, read_conversion
from amid.tools.scaffolds.nnunet_model import package, replay
from amid.tools.scaffolds.taskdata import TaskData

INFERENCE_FILES = [
    "amid_conversion.json",
    "dataset.json",
    "dataset_fingerprint.json",
    "fold_0/checkpoint_final.pth",
    "plans.json",
]


def _trained(workspace: Workspace, root: Path) -> NnunetLayout:
    """The demo converted, and a results folder as nnU-Net's trainer leaves it after training fold 0."""
    task = TaskData.open(workspace.task_dir)
    layout = NnunetLayout(root, 501, "Demo")
    convert_task(task, layout)
    results = layout.results("3d_fullres")
    for name in (
        "plans.json",
        "dataset.json",
        "dataset_fingerprint.json",
        "fold_0/checkpoint_final.pth",
        "fold_0/checkpoint_best.pth",
        "fold_0/progress.png",
        "fold_0/training_log.txt",
        "fold_0/debug.json",
        "fold_0/validation/p001s0.nii.gz",
        "fold_1/checkpoint_latest.pth",
    ):
        (results / name).parent.mkdir(parents=True, exist_ok=True)
        (results / name).write_bytes(name.encode())
    return layout


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_the_package_holds_the_predictors_files_of_each_trained_fold_and_nothing_else(
    workspace: Workspace, tmp_path: Path
) -> None:
    layout = _trained(workspace, tmp_path / "nnunet")
    result = package(layout, "3d_fullres", tmp_path / "model")
    model = tmp_path / "model"
    assert result["folds"] == [0] and _files(model) == INFERENCE_FILES  # fold 1 has no final weights yet
    assert not any(p.is_symlink() for p in model.rglob("*"))  # submit refuses links leaving the worktree
    assert (model / "fold_0/checkpoint_final.pth").read_bytes() == b"fold_0/checkpoint_final.pth"
    assert read_conversion(model).label_map == read_conversion(layout.raw).label_map == {0: 0, 1: 1, 2: 2}


def test_repackaging_replaces_the_earlier_package_and_never_another_folder(
    workspace: Workspace, tmp_path: Path
) -> None:
    layout = _trained(workspace, tmp_path / "nnunet")
    model = tmp_path / "model"
    (model / "fold_3").mkdir(parents=True)
    (model / "fold_3/checkpoint_final.pth").write_bytes(b"stale")
    (model / CONVERSION_FILE).write_text("{}", encoding="utf-8")
    package(layout, "3d_fullres", model, [0])
    assert _files(model) == INFERENCE_FILES
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep", encoding="utf-8")
    with pytest.raises(Conflict, match="holds other files"):
        package(layout, "3d_fullres", other)
    assert _files(other) == ["mine.txt"]
    with pytest.raises(DataUnreadable, match=r"folds: \[1\] have no checkpoint_final.pth"):
        package(layout, "3d_fullres", model, [0, 1])


def test_the_replay_names_what_a_model_folder_lacks(workspace: Workspace, tmp_path: Path) -> None:
    layout = _trained(workspace, tmp_path / "nnunet")
    inputs, outputs = tmp_path / "inputs", tmp_path / "outputs"
    with pytest.raises(DataUnreadable, match=r"amid_conversion\.json: missing; declare the package step's folder"):
        replay(layout.results("3d_fullres"), [0], inputs, outputs, device="cpu")  # the results folder is no package
    package(layout, "3d_fullres", tmp_path / "model")
    with pytest.raises(DataUnreadable, match=r"lacks \['fold_2/checkpoint_final.pth'\]"):
        replay(tmp_path / "model", [2], inputs, outputs, device="cpu")
    assert not outputs.exists()
