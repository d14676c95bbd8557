"""What one review works on: the job, the task it is judged against, and the frozen files it may trust."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from amid.server.reviewer.job import ArtifactRef, ReviewJob
from amid.server.reviewer.manifest import CaseIndex, parse_manifest, resolve_entries
from amid.server.workspace import Workspace
from amid.tools.task.cases import Case, discover_cases
from amid.tools.task.contract import TaskContract
from amid.tools.task.folds import LockedFolds

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
    replay_findings: list[dict[str, Any]] = field(default_factory=list)  # workspace/network reaches seen in replays

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
        """fold → case ids trained on (file paths mapped to their cases), or (None, why it is unusable)."""
        refs = self.files("training_manifest")
        if not refs:
            return None, "no training manifest declared"
        if not self.usable(refs[0]):
            return None, "the frozen training manifest is missing or changed"
        try:
            entries = parse_manifest(json.loads(self.path(refs[0]).read_text(encoding="utf-8")), self.job.folds)
        except (ValueError, TypeError, KeyError) as exc:
            return None, f"unreadable training manifest: {exc}"
        cases = [*self.train_cases.values(), *self.test_cases.values(), *self.holdout_cases]
        manifest, unknown = resolve_entries(entries, CaseIndex.of(cases, self.contract.layout))
        if unknown:
            named = ", ".join(repr(u) for u in unknown[:10])
            return None, f"{len(unknown)} training-manifest entries name no case of the task: {named}"
        return manifest, None
