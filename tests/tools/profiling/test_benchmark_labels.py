"""The profile of a benchmark import sees the supervision the challenge ships: ldct-iqa's labels table
by the columns its grader scores (image_id, quality_score), and per-case label files that are not
images (PUMA's GeoJSON, TopCoW's edge YAML and box text) as labels. A correctly labelled task has no
error-severity issue; a case whose label is really gone is the one called unlabelled."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from amid.server.workspace import Workspace, init_workspace
from amid.tools.profile_data import build_request
from amid.tools.profiling import profile_dataset
from amid.tools.task.importers import import_task
from tests.fixtures.rexmle import make_challenge

LABEL_FILES = ("ldct-iqa", "topcow-track1-task3", "topcow-track1-task2", "puma-track1-task1", "puma-track1-task2")


def _workspace(root: Path, challenge_id: str) -> Workspace:
    folder, data_dir = make_challenge(root, challenge_id)
    return init_workspace(import_task(folder, data_dir=data_dir), root / "ws")


def _profile(workspace: Workspace) -> Any:
    request = build_request(workspace, workspace.contract(), workspace.folds())
    return profile_dataset(request.model_copy(update={"n_workers": 1}))


def _errors(profile: Any) -> list[tuple[str, str | None]]:
    return [(i.code, i.case_id) for i in profile.issues if i.severity == "error"]


@pytest.mark.parametrize("challenge_id", LABEL_FILES)
def test_a_correctly_labelled_benchmark_task_has_no_unlabelled_case(challenge_id: str, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, challenge_id)
    profile = _profile(workspace)
    n_train = len(workspace.folds().case_groups)
    assert _errors(profile) == []
    assert (profile.supervision.labelled_train_cases, profile.supervision.unlabelled_train_cases) == (n_train, 0)
    assert all(c.has_label for c in profile.cases if c.split == "train")


def test_ldct_targets_are_read_from_the_scored_column(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "ldct-iqa")
    request = build_request(workspace, workspace.contract(), workspace.folds())
    assert request.labels_table is not None
    assert (request.labels_table.id_column, request.labels_table.label_column) == ("image_id", "quality_score")
    target = _profile(workspace).supervision.target_values
    assert target is not None and target.n == 15 and target.max > target.min  # real numbers, not one default


def test_a_score_row_dropped_from_the_table_is_the_one_case_called_unlabelled(tmp_path: Path) -> None:
    workspace = _workspace(tmp_path, "ldct-iqa")
    table = workspace.task_dir / str(workspace.contract().layout.labels_table)
    with table.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    dropped = rows.pop(2)["image_id"]
    with table.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["image_id", "quality_score"])
        writer.writeheader()
        writer.writerows(rows)
    profile = _profile(workspace)
    assert _errors(profile) == [("missing_label", dropped)]
    assert profile.supervision.unlabelled_train_cases == 1


@pytest.mark.parametrize("challenge_id", ["puma-track1-task1", "topcow-track1-task3"])
def test_a_case_without_its_label_file_is_the_one_called_unlabelled(challenge_id: str, tmp_path: Path) -> None:
    # Case discovery refuses a missing template file at init; the profile must still not count a
    # case whose label file it was not given (a request built otherwise) as labelled.
    workspace = _workspace(tmp_path, challenge_id)
    request = build_request(workspace, workspace.contract(), workspace.folds())
    index, case = next((i, c) for i, c in enumerate(request.cases) if c.split == "train" and i > 0)
    assert case.label_file is not None and case.label_path is None  # GeoJSON / YAML: not read as voxels
    cases = [*request.cases[:index], case.model_copy(update={"label_file": None}), *request.cases[index + 1 :]]
    profile = profile_dataset(request.model_copy(update={"cases": cases, "n_workers": 1}))
    assert _errors(profile) == [("missing_label", case.case_id)]
    assert profile.supervision.unlabelled_train_cases == 1
