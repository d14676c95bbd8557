"""Find the cases of a task from its data layout: ids, channel files, labels and groups."""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict

from amid.server.errors import DataUnreadable, InvalidInput
from amid.tools.task.contract import CaseFiles, DataLayout


class Case(BaseModel):
    model_config = ConfigDict(frozen=True)

    case_id: str
    split: str
    image_paths: tuple[str, ...]
    label_path: str | None = None
    group: str | None = None


DICOM_ENDING = ".dcm"


def _stem(name: str, ending: str) -> str | None:
    return name[: -len(ending)] if ending and name.endswith(ending) else None


def _is_series_folder(path: Path) -> bool:
    """A folder holding one DICOM series' slices (`imagesTr/case_001/*.dcm`)."""
    return path.is_dir() and any(p.is_file() and p.name.lower().endswith(DICOM_ENDING) for p in path.iterdir())


def _entry_stem(path: Path, ending: str) -> str | None:
    """The stem a folder entry gives the case pattern: a file's name without the layout's ending,
    or, when that ending is `.dcm`, a series folder's whole name."""
    if path.name.startswith("."):
        return None
    stem = _stem(path.name, ending)
    if stem is None and ending.lower() == DICOM_ENDING and _is_series_folder(path):
        return path.name
    return stem


def _index_files(folder: Path, layout: DataLayout) -> dict[str, dict[int, Path]]:
    if not folder.is_dir():
        raise InvalidInput(f"layout: folder {folder.name!r} does not exist under the task folder")
    pattern = re.compile(layout.case_id_pattern)
    found: dict[str, dict[int, Path]] = defaultdict(dict)
    for path in sorted(folder.iterdir()):
        stem = _entry_stem(path, layout.file_ending)
        match = pattern.match(stem) if stem is not None else None
        if match is None:
            continue
        channel = match.groupdict().get("channel")
        found[match.group("case")][int(channel) if channel else 0] = path
    return found


def _index_labels(folder: Path, ending: str) -> dict[str, Path]:
    """Label files are named by the case alone (`case_0001.nii.gz`): the whole stem is the id, even
    when it ends in digits that look like a channel suffix."""
    if not folder.is_dir():
        raise InvalidInput(f"layout: folder {folder.name!r} does not exist under the task folder")
    found = {}
    for path in sorted(folder.iterdir()):
        stem = _entry_stem(path, ending)
        if stem:
            found[stem] = path
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


EXT = "{ext}"  # in a template: whichever file ending the case's file has (mixed .png / .tif / .tiff)
EXT_PATTERN = re.compile(r"\.[A-Za-z0-9]+(?:\.gz)?")


def fill(template: str, case_id: str) -> str:
    """A case's file from its template (plain replacement: file names may hold braces)."""
    return template.replace("{case}", case_id)


def case_file(task_dir: Path, template: str, case_id: str) -> str:
    """The case's file (or series folder) under task/; an `{ext}` template resolves to the file that exists."""
    path = fill(template, case_id)
    if EXT not in path:
        return str(PurePosixPath(path))  # `imagesTr/{case}/` names the folder itself
    folder, name = PurePosixPath(path).parent, PurePosixPath(path).name
    before = name.removesuffix(EXT)
    for candidate in sorted((task_dir / folder).iterdir()) if (task_dir / folder).is_dir() else []:
        if candidate.name.startswith(before) and EXT_PATTERN.fullmatch(candidate.name[len(before) :]):
            return str(folder / candidate.name)
    return path


def _case_component(template: str) -> tuple[PurePosixPath, str]:
    """The folder above the path component that holds `{case}`, and that component: the case id
    may name a file (`imagesTr/{case}.nii.gz`) or a folder (`train/{case}/FLAIR`)."""
    parts = PurePosixPath(template).parts
    index = next((i for i, part in enumerate(parts) if "{case}" in part), len(parts) - 1)
    return PurePosixPath(*parts[:index]), parts[index]


def template_folder(template: str) -> PurePosixPath:
    """The folder under task/ whose entries `template_ids` matches (`train` for `train/{case}/FLAIR`)."""
    return _case_component(template)[0]


def template_regex(template: str) -> re.Pattern[str]:
    """Matches the name of the path component of `template` that holds `{case}`; group 'case' is the id."""
    before, after = _case_component(template)[1].split("{case}")
    suffix = re.escape(after).replace(re.escape(EXT), f"(?P<ext>{EXT_PATTERN.pattern})")
    return re.compile(f"{re.escape(before)}(?P<case>.+?){suffix}")


def template_ids(task_dir: Path, template: str) -> list[str]:
    """Case ids of the files (or folders) under task/ that match `template`'s case component, sorted."""
    parent = template_folder(template)
    folder = task_dir / parent
    if not folder.is_dir():
        raise InvalidInput(f"layout.case_files: folder {str(parent)!r} does not exist")
    pattern = template_regex(template)
    names = [p.name for p in folder.iterdir() if not p.name.startswith(".")]  # macOS `._x` files in real data
    return sorted({m.group("case") for name in names if (m := pattern.fullmatch(name))})


def case_path_exists(path: Path) -> bool:
    """A case's image is a file, or a series folder: a folder that holds at least one file (DICOM
    series are read from their folder, whatever their files are called)."""
    if path.is_file():
        return True
    return path.is_dir() and any(p.is_file() and not p.name.startswith(".") for p in path.iterdir())


def table_ids(table: Path, column: str | None) -> list[str]:
    """The values of one column of a CSV, as strings (case ids such as `002` keep their zeros)."""
    try:
        with table.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
    except OSError as exc:
        raise DataUnreadable(f"{table.name}: cannot read ({exc})") from None
    if not rows:
        raise InvalidInput(f"{table.name}: the table is empty", field="layout.case_files.test_ids_table")
    index = rows[0].index(column) if column in rows[0] else 0
    return [row[index] for row in rows[1:] if len(row) > index and row[index]]


def _template_cases(task_dir: Path, layout: DataLayout, files: CaseFiles, split: str) -> list[Case]:
    images = files.train_images if split == "train" else files.test_images
    if not images:
        return []
    if split == "test" and files.test_ids_table:
        ids = table_ids(task_dir / files.test_ids_table, files.test_id_column)
    else:
        ids = template_ids(task_dir, images[0])
    label = files.train_label if split == "train" else None
    groups = (
        read_groups(task_dir / layout.groups_table, layout.group_key)
        if layout.groups_table and layout.group_key
        else {}
    )
    cases = []
    for case_id in ids:
        paths = [case_file(task_dir, t, case_id) for t in images]
        label_path = case_file(task_dir, label, case_id) if label else None
        absent = [p for p in [*paths, label_path] if p is not None and not case_path_exists(task_dir / p)]
        if absent:
            raise InvalidInput(
                f"case {case_id!r}: files {absent[:3]} are missing under task/", field="layout.case_files"
            )
        cases.append(
            Case(
                case_id=case_id,
                split=split,
                image_paths=tuple(paths),
                label_path=label_path,
                group=groups.get(case_id, case_id),
            )
        )
    return cases


def discover_cases(task_dir: Path, layout: DataLayout, split: str = "train") -> list[Case]:
    """List the cases of one split; every case must have every channel (and a label for train)."""
    if layout.case_files is not None:
        return _template_cases(task_dir, layout, layout.case_files, split)
    folder = layout.train_images if split == "train" else layout.test_images
    if folder is None:
        return []
    images = _index_files(task_dir / folder, layout)
    labels = {}
    if split == "train" and layout.train_labels:
        labels = _index_labels(task_dir / layout.train_labels, layout.file_ending)
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
