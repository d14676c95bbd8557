"""The training manifest: which cases each fold's model trained on, read into case ids.

Accepted shapes (`parse_manifest`): a list of entries, {"train_cases": [...]} (both for every
declared fold), {"folds": {"0": [...]}} or {"0": [...]}, one list per fold. An entry is a case id
or a file of one: `resolve_entries` maps `p03_a`, `p03_a_0000.nii.gz`,
`task/public/train/images/p03_a_0000.nii.gz` or an absolute path to the case id `p03_a` (by the
case's own file names, a path that ends with one, or the layout's case-id rule on the file stem).
An entry that names no case of the task (train, test or holdout) makes the manifest unusable: the
reviewer cannot tell what was trained on, so SPLIT_LEAK cannot be checked (MISSING_EVIDENCE).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from amid.tools.task.cases import Case
from amid.tools.task.contract import DataLayout


def parse_manifest(data: Any, folds: list[int]) -> dict[int, list[str]]:
    """fold → entries as written; ValueError when the shape is none of the accepted ones."""
    if isinstance(data, dict) and "train_cases" in data:
        data = data["train_cases"]
    if isinstance(data, list):
        return {fold: _entries(data) for fold in folds}
    if isinstance(data, dict):
        per_fold = data.get("folds", data)
        if isinstance(per_fold, dict):
            parsed = {int(k): _entries(v) for k, v in per_fold.items()}
            absent = [f for f in folds if f not in parsed]
            if absent:
                raise ValueError(f"no case list for fold(s) {absent}")
            return parsed
    raise ValueError("expected a list of case ids, {'train_cases': [...]} or {'folds': {fold: [...]}}")


def _entries(values: Any) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError("case lists must be lists of case-id strings")
    return values


@dataclass(frozen=True)
class CaseIndex:
    """Every name a case goes by: its id, its files' task-relative paths and (when unique) file names."""

    ids: frozenset[str]
    paths: dict[str, str]  # task-relative path → case id
    names: dict[str, str]  # file name → case id, only names no other case's file shares
    layout: DataLayout

    @classmethod
    def of(cls, cases: Iterable[Case], layout: DataLayout) -> CaseIndex:
        paths: dict[str, str] = {}
        ids = set()
        for case in cases:
            ids.add(case.case_id)
            for rel in (*case.image_paths, *([case.label_path] if case.label_path else [])):
                paths[PurePosixPath(str(rel)).as_posix()] = case.case_id
        counts = Counter(PurePosixPath(rel).name for rel in paths)
        names = {PurePosixPath(rel).name: cid for rel, cid in paths.items() if counts[PurePosixPath(rel).name] == 1}
        return cls(frozenset(ids), paths, names, layout)

    def case_of(self, entry: str) -> str | None:
        """The case id an entry names, or None."""
        if entry in self.ids:
            return entry
        path = PurePosixPath(entry.replace("\\", "/"))
        if path.name in self.names:
            return self.names[path.name]
        text = path.as_posix()
        for rel, case_id in self.paths.items():
            if text == rel or text.endswith("/" + rel):
                return case_id
        return self._by_rule(path.name)

    def _by_rule(self, name: str) -> str | None:
        ending = self.layout.file_ending
        stem = name[: -len(ending)] if ending and name.endswith(ending) else name
        match = re.match(self.layout.case_id_pattern, stem)
        case_id = match.group("case") if match else None
        return case_id if case_id in self.ids else None


def resolve_entries(manifest: dict[int, list[str]], index: CaseIndex) -> tuple[dict[int, list[str]], list[str]]:
    """(fold → case ids, the entries that name no case of the task)."""
    resolved: dict[int, list[str]] = {}
    unknown: list[str] = []
    for fold, entries in manifest.items():
        found = [(entry, index.case_of(entry)) for entry in entries]
        unknown.extend(entry for entry, case_id in found if case_id is None)
        resolved[fold] = list(dict.fromkeys(case_id for _, case_id in found if case_id is not None))
    return resolved, list(dict.fromkeys(unknown))
