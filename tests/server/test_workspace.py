from __future__ import annotations

import json
from pathlib import Path

import git
import pytest
import yaml

from amid.server.errors import InvalidInput
from amid.server.ledger import Ledger
from amid.server.workspace import Workspace, init_workspace
from amid.tools.task.contract import contract_hash
from amid.tools.task.importers import import_task
from tests.factories import make_native_task, native_task_dict


def test_init_creates_the_full_layout_with_git_ledger_contract_and_folds(workspace: Workspace) -> None:
    for folder in (
        "task",
        "private",
        "repo",
        "memory/notes",
        "memory/skills",
        "memory/lanes",
        "artifacts",
        "jobs",
        "reviews",
        "exports",
        "package",
    ):
        assert (workspace.root / folder).is_dir(), folder
    with git.Repo(workspace.repo_dir) as repo:
        assert str(repo.head.commit.message).startswith("Start run demo-liver-lesion-ct")
    ledger = Ledger(workspace.ledger_path, read_only=True)
    try:
        assert ledger.activity.get_state("contract_hash") == contract_hash(workspace.contract())
        assert ledger.activity.get_state("stage") == "exploration"
    finally:
        ledger.close()
    folds = workspace.folds()
    assert folds.k == 5 and folds.group_key == "patient_id"
    assert len(folds.case_groups) == 20


def test_private_answers_and_grader_are_outside_the_public_task_folder(workspace: Workspace) -> None:
    assert (workspace.private_dir / "answers.csv").is_file()
    assert (workspace.private_dir / "grader" / "grade.py").is_file()
    public = {p.name for p in workspace.task_dir.rglob("*")}
    assert "answers.csv" not in public and "grade.py" not in public
    test_images = sorted(p.name for p in (workspace.task_dir / "public/test/images").iterdir())
    assert len(test_images) == 6
    assert not (workspace.task_dir / "public/test/labels").exists()


def test_scans_of_one_patient_share_a_fold(workspace: Workspace) -> None:
    folds = workspace.folds()
    for fold in folds.folds:
        patients_val = {folds.case_groups[c] for c in fold.val_cases}
        patients_train = {folds.case_groups[c] for c in fold.train_cases}
        assert not patients_val & patients_train


def test_existing_non_empty_target_is_refused_and_left_untouched(demo_challenge: Path, tmp_path: Path) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(InvalidInput, match="exists and is not empty"):
        init_workspace(import_task(demo_challenge), target)
    assert [p.name for p in target.iterdir()] == ["notes.txt"]


def test_failed_init_leaves_nothing_half_created(tmp_path: Path) -> None:
    data = native_task_dict()
    data["validation"] = {"k_folds": 5}  # the data has three sites: five folds cannot be grouped
    source = make_native_task(tmp_path / "src", data=data)
    target = tmp_path / "runs" / "ws"
    with pytest.raises(InvalidInput, match="5 folds need at least 5 groups"):
        init_workspace(import_task(source), target)
    assert not target.exists()
    assert list((tmp_path / "runs").iterdir()) == []


def test_holdout_moves_whole_groups_with_their_labels_to_private(tmp_path: Path) -> None:
    data = native_task_dict()
    data["validation"] = {"k_folds": 2, "seed": 3, "holdout_fraction": 0.3}
    ws = init_workspace(import_task(make_native_task(tmp_path / "src", data=data)), tmp_path / "ws")
    held = json.loads((ws.private_dir / "holdout.json").read_text(encoding="utf-8"))["cases"]
    held_ids = {c["case_id"] for c in held}
    assert len(held_ids) == 3  # one site of three
    assert {c["group"] for c in held} == {held[0]["group"]}
    assert not held_ids & set(ws.folds().case_groups)
    for case in held:
        assert (ws.private_dir / "holdout" / case["label_path"]).is_file()
        assert not (ws.task_dir / case["image_paths"][0]).exists()
    assert "holdout" not in yaml.safe_dump(ws.folds().model_dump())
