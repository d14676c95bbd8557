"""What one review works on: the job, the task it is judged against, and the frozen files it may trust."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from server.reviewer.job import ArtifactRef, ReviewJob
from server.workspace import Workspace
from tools.task.cases import Case, discover_cases
from tools.task.contract import TaskContract
from tools.task.folds import LockedFolds

Progress = Callable[[float, str], None]


def _silent(fraction: float, stage: str) -> None:
    return None


@dataclass
class ReviewContext:
    job: ReviewJob
    workspace: Workspace
    contract: TaskContract
    folds: LockedFolds
    progress: Progress = _silent
    intact: set[str] = field(default_factory=set)  # frozen paths whose bytes still match their hash

    @classmethod
    def load(cls, job: ReviewJob, progress: Progress = _silent) -> ReviewContext:
        workspace = Workspace(Path(job.workspace))
        return cls(job, workspace, workspace.contract(), workspace.folds(), progress)

    def files(self, role: str, fold: int | None = None) -> list[ArtifactRef]:
        return [a for a in self.job.artifacts if a.role == role and (fold is None or a.fold == fold)]

    def path(self, ref: ArtifactRef | str) -> Path:
        return self.workspace.root / (ref if isinstance(ref, str) else ref.frozen_path)

    def usable(self, ref: ArtifactRef) -> bool:
        return ref.frozen_path in self.intact

    @cached_property
    def train_cases(self) -> dict[str, Case]:
        return {c.case_id: c for c in discover_cases(self.workspace.task_dir, self.contract.layout, "train")}

    @cached_property
    def test_cases(self) -> dict[str, Case]:
        return {c.case_id: c for c in discover_cases(self.workspace.task_dir, self.contract.layout, "test")}

    @cached_property
    def holdout_cases(self) -> list[Case]:
        path = self.workspace.private_dir / "holdout.json"
        if not path.is_file():
            return []
        return [Case.model_validate(c) for c in json.loads(path.read_text(encoding="utf-8"))["cases"]]

    @cached_property
    def training_manifest(self) -> tuple[dict[int, list[str]] | None, str | None]:
        """fold → case ids trained on, or (None, why it cannot be read)."""
        refs = self.files("training_manifest")
        if not refs:
            return None, "no training manifest declared"
        if not self.usable(refs[0]):
            return None, "the frozen training manifest is missing or changed"
        try:
            return parse_manifest(json.loads(self.path(refs[0]).read_text(encoding="utf-8")), self.job.folds), None
        except (ValueError, TypeError, KeyError) as exc:
            return None, f"unreadable training manifest: {exc}"


def parse_manifest(data: Any, folds: list[int]) -> dict[int, list[str]]:
    """Accepted forms: a list of case ids, {"train_cases": [...]} (both for every declared fold),
    {"folds": {"0": [...]}} or {"0": [...]}, one list per fold."""
    if isinstance(data, dict) and "train_cases" in data:
        data = data["train_cases"]
    if isinstance(data, list):
        return {fold: _ids(data) for fold in folds}
    if isinstance(data, dict):
        per_fold = data.get("folds", data)
        if isinstance(per_fold, dict):
            parsed = {int(k): _ids(v) for k, v in per_fold.items()}
            absent = [f for f in folds if f not in parsed]
            if absent:
                raise ValueError(f"no case list for fold(s) {absent}")
            return parsed
    raise ValueError("expected a list of case ids, {'train_cases': [...]} or {'folds': {fold: [...]}}")


def _ids(values: Any) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError("case lists must be lists of case-id strings")
    return values
