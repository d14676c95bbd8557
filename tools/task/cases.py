"""Find the cases of a task from its data layout: ids, channel files, labels and groups."""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from server.errors import DataUnreadable, InvalidInput
from tools.task.contract import DataLayout


class Case(BaseModel):
    model_config = ConfigDict(frozen=True)

    case_id: str
    split: str
    image_paths: tuple[str, ...]
    label_path: str | None = None
    group: str | None = None


def _stem(name: str, ending: str) -> str | None:
    return name[: -len(ending)] if name.endswith(ending) else None


def _index_files(folder: Path, layout: DataLayout) -> dict[str, dict[int, Path]]:
    if not folder.is_dir():
        raise InvalidInput(f"layout: folder {folder.name!r} does not exist under the task folder")
    pattern = re.compile(layout.case_id_pattern)
    found: dict[str, dict[int, Path]] = defaultdict(dict)
    for path in sorted(folder.iterdir()):
        stem = _stem(path.name, layout.file_ending)
        match = pattern.match(stem) if stem is not None else None
        if match is None:
            continue
        channel = match.groupdict().get("channel")
        found[match.group("case")][int(channel) if channel else 0] = path
    return found


def read_groups(table: Path, group_key: str) -> dict[str, str]:
    """Map case id → group from a CSV with a `case_id` column and the group column."""
    try:
        with table.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        raise DataUnreadable(f"{table.name}: cannot read ({exc})") from None
    if not rows or "case_id" not in rows[0] or group_key not in rows[0]:
        raise InvalidInput(f"{table.name}: needs columns 'case_id' and {group_key!r}", field="layout.group_key")
    return {row["case_id"]: row[group_key] for row in rows}


def discover_cases(task_dir: Path, layout: DataLayout, split: str = "train") -> list[Case]:
    """List the cases of one split; every case must have every channel (and a label for train)."""
    folder = layout.train_images if split == "train" else layout.test_images
    if folder is None:
        return []
    images = _index_files(task_dir / folder, layout)
    labels = {}
    if split == "train" and layout.train_labels:
        labels = {cid: files[0] for cid, files in _index_files(task_dir / layout.train_labels, layout).items()}
    groups = {}
    if layout.groups_table and layout.group_key:
        groups = read_groups(task_dir / layout.groups_table, layout.group_key)
    return [_make_case(task_dir, cid, files, labels, groups, split, layout) for cid, files in images.items()]


def _make_case(
    task_dir: Path,
    case_id: str,
    files: dict[int, Path],
    labels: dict[str, Path],
    groups: dict[str, str],
    split: str,
    layout: DataLayout,
) -> Case:
    n_channels = len(layout.channels)
    if sorted(files) != list(range(n_channels)):
        raise InvalidInput(
            f"case {case_id!r}: has channels {sorted(files)}, the contract declares {n_channels} "
            f"({layout.channels}); name files CASE_0000{layout.file_ending}, CASE_0001…",
            field="layout.channels",
        )
    label = labels.get(case_id)
    if split == "train" and layout.train_labels and label is None:
        raise InvalidInput(f"case {case_id!r}: no label file in {layout.train_labels}", field="layout")
    return Case(
        case_id=case_id,
        split=split,
        image_paths=tuple(str(files[c].relative_to(task_dir)) for c in range(n_channels)),
        label_path=str(label.relative_to(task_dir)) if label else None,
        group=groups.get(case_id, case_id),
    )
