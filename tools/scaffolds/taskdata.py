"""A task as a scaffold sees it: the contract, the locked folds and the cases, read from the task folder.

Scaffolds run in a worker's worktree and are given the public task folder (`../../task` from there);
they never touch `private/`.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from amid.server.errors import Conflict, InvalidInput, NotFound
from amid.tools.task.cases import Case, discover_cases
from amid.tools.task.contract import TaskContract, load_contract
from amid.tools.task.folds import LockedFolds

MANIFEST_NAME = "training_manifest.json"
MANIFEST_FIX = "delete it or name another --manifest path"
STRAY_FIX = "move them out of the fold folder (manifests and logs go beside it: predictions/training_manifest.json)"


@dataclass(frozen=True)
class TaskData:
    task_dir: Path

    @classmethod
    def open(cls, task_dir: Path) -> TaskData:
        task_dir = task_dir.resolve()
        for name in ("contract.yaml", "folds.json"):
            if not (task_dir / name).is_file():
                raise NotFound(
                    f"task_dir: {task_dir} has no {name}; pass the workspace's task/ folder", field="task_dir"
                )
        return cls(task_dir)

    @cached_property
    def contract(self) -> TaskContract:
        return load_contract(self.task_dir / "contract.yaml")

    @cached_property
    def folds(self) -> LockedFolds:
        return LockedFolds.model_validate_json((self.task_dir / "folds.json").read_text(encoding="utf-8"))

    @cached_property
    def train_cases(self) -> dict[str, Case]:
        """Training cases that belong to the locked folds (holdout cases are not in the public folder)."""
        cases = discover_cases(self.task_dir, self.contract.layout, "train")
        return {c.case_id: c for c in cases if c.case_id in self.folds.case_groups}

    @cached_property
    def test_cases(self) -> dict[str, Case]:
        return {c.case_id: c for c in discover_cases(self.task_dir, self.contract.layout, "test")}

    def path(self, relative: str) -> Path:
        return self.task_dir / relative

    def fold(self, fold: int) -> tuple[list[str], list[str]]:
        """(training case ids, validation case ids) of one locked fold."""
        if not 0 <= fold < self.folds.k:
            raise InvalidInput(f"fold: got {fold}; expected 0..{self.folds.k - 1}", field="fold")
        locked = self.folds.folds[fold]
        return list(locked.train_cases), list(locked.val_cases)

    def label_values(self) -> list[int]:
        """The task's label values, background first (from the contract's layout or prediction schema)."""
        values = sorted(self.contract.layout.label_values) or sorted(self.contract.prediction.label_values)
        if not values:
            raise InvalidInput("contract: declares no label values (layout.label_values)", field="label_values")
        return values


def manifest_beside(predictions: Path) -> Path:
    """The attempt's training manifest for a fold folder `predictions/fold_K`: `predictions/training_manifest.json`.

    Never inside the fold folder: the reviewer takes every file there as a prediction (PRED_SCHEMA)."""
    return predictions.parent / MANIFEST_NAME


def stray_files(folder: Path, case_ids: list[str], ending: str) -> list[str]:
    """Names in `folder` that are not `CASE<ending>` of `case_ids`: the reviewer rejects a fold folder holding any."""
    expected = {f"{case_id}{ending}" for case_id in case_ids}
    return sorted(p.name for p in folder.iterdir() if p.name not in expected) if folder.is_dir() else []


def write_manifest(path: Path, *, fold: int, train_cases: list[str], val_cases: list[str], source: str) -> Path:
    """Record one fold in the training manifest the reviewer checks for SPLIT_LEAK: `{"folds": {"K": [case ids
    trained on]}}`, the other folds' entries kept, so one file serves an attempt of any declared folds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with (path.parent / f".{path.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # fold jobs may finish at the same time
        manifest = _read_manifest(path)
        manifest["folds"][str(fold)] = sorted(train_cases)
        manifest["val_cases"][str(fold)] = sorted(val_cases)
        manifest["sources"][str(fold)] = source
        staged = path.with_name(f".{path.name}.tmp")
        staged.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(staged, path)
    return path


def _read_manifest(path: Path) -> dict[str, dict[str, object]]:
    empty: dict[str, dict[str, object]] = {"folds": {}, "val_cases": {}, "sources": {}}
    if not path.exists():
        return empty
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Conflict(f"manifest: {path} is unreadable ({exc}); {MANIFEST_FIX}", field="manifest") from None
    if not isinstance(found, dict) or not all(isinstance(found.get(k), dict) for k in empty):
        raise Conflict(f"manifest: {path} is not a scaffold's training manifest; {MANIFEST_FIX}", field="manifest")
    return found


def write_submission(task: TaskData, folder: Path, files: dict[str, str]) -> Path:
    """submission.csv in `folder`: the id column and the file column (paths relative to `folder`)."""
    submission = task.contract.submission
    extra = [c for c in submission.columns if c not in (submission.id_column, submission.file_column)]
    if submission.file_column is None or extra:
        raise InvalidInput(
            f"submission.columns: {submission.columns} need values this scaffold cannot produce; "
            "expected only an id column and a file column",
            field="submission.columns",
        )
    path = folder / submission.filename
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(submission.columns)
        for case_id in sorted(files):
            row = {submission.id_column: case_id, submission.file_column: files[case_id]}
            writer.writerow([row[c] for c in submission.columns])
    return path
