"""The training manifest scaffolds write: one file beside the fold folders, one entry per fold, read by the reviewer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amid.server.errors import Conflict
from amid.server.reviewer.manifest import parse_manifest
from amid.tools.scaffolds.taskdata import manifest_beside, write_manifest


def test_the_manifest_lies_beside_the_fold_folders_never_inside_one(tmp_path: Path) -> None:
    assert manifest_beside(tmp_path / "predictions" / "fold_3") == tmp_path / "predictions" / "training_manifest.json"


def test_each_fold_adds_its_entry_and_the_reviewer_reads_every_declared_fold(tmp_path: Path) -> None:
    path = tmp_path / "predictions" / "training_manifest.json"
    write_manifest(path, fold=1, train_cases=["c", "a"], val_cases=["b"], source="s1")
    write_manifest(path, fold=0, train_cases=["b", "c"], val_cases=["a"], source="s0")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert parse_manifest(data, [0, 1]) == {0: ["b", "c"], 1: ["a", "c"]}
    assert data["val_cases"] == {"0": ["a"], "1": ["b"]} and data["sources"] == {"0": "s0", "1": "s1"}
    with pytest.raises(ValueError, match=r"\[2\]"):
        parse_manifest(data, [0, 2])  # a fold never trained has no entry: MISSING_EVIDENCE, not a guess


def test_retraining_a_fold_replaces_only_that_folds_entry(tmp_path: Path) -> None:
    path = tmp_path / "training_manifest.json"
    write_manifest(path, fold=0, train_cases=["x"], val_cases=["y"], source="first")
    write_manifest(path, fold=1, train_cases=["y"], val_cases=["x"], source="s1")
    write_manifest(path, fold=0, train_cases=["z"], val_cases=["y"], source="second")
    assert parse_manifest(json.loads(path.read_text(encoding="utf-8")), [0, 1]) == {0: ["z"], 1: ["y"]}


def test_a_file_that_is_not_a_scaffold_manifest_is_refused_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "training_manifest.json"
    path.write_text('["hand", "written"]', encoding="utf-8")
    with pytest.raises(Conflict, match=r"manifest: .* not a scaffold's training manifest"):
        write_manifest(path, fold=0, train_cases=["a"], val_cases=["b"], source="s")
    assert path.read_text(encoding="utf-8") == '["hand", "written"]'
