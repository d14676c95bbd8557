"""What files there are: types, layout, splits, case-id structure, pairing, missing and duplicate cases."""

from __future__ import annotations

import os
import re
import stat
from collections import Counter

from pydantic import BaseModel

from amid.tools.profiling.casework import CaseResult
from amid.tools.profiling.inputs import ProfileRequest
from amid.tools.profiling.models import MAX_LISTED, capped, top_counts
from amid.tools.profiling.readers import file_kind

# A per-case field with at most this many distinct values is a stratum (site, scanner, stain);
# more distinct values look like an identifier or a measurement.
MAX_STRATUM_VALUES = 20
# Numeric ids count as a sequence with gaps only when most of the range is present.
MIN_SEQUENCE_FILL = 0.5


class Inventory(BaseModel):
    n_cases: dict[str, int]
    n_files: int
    total_bytes: int
    image_file_types: dict[str, int]
    label_file_types: dict[str, int]
    root: str | None
    layout: dict[str, int]
    id_patterns: dict[str, int]
    missing_ids: list[str]
    n_missing_ids: int
    channels_per_case: dict[str, int]
    with_label: dict[str, int]
    missing_files: int
    duplicate_sets: list[list[str]]
    n_duplicate_cases: int
    near_duplicate_sets: list[list[str]]
    strata: dict[str, dict[str, int]]


def id_pattern(case_id: str) -> str:
    """The id with each digit run replaced by its width, e.g. 'liver_017' -> 'liver_{3}'."""
    return re.sub(r"\d+", lambda match: "{" + str(len(match.group())) + "}", case_id)


def missing_sequence_ids(case_ids: list[str]) -> list[str]:
    """Ids absent from a numbered sequence (one digit run per id, same pattern), e.g. case_004."""
    patterns = Counter(id_pattern(c) for c in case_ids)
    if not patterns:
        return []
    pattern, _ = patterns.most_common(1)[0]
    if pattern.count("{") != 1:
        return []
    chosen = [c for c in case_ids if id_pattern(c) == pattern]
    numbers = {int(re.findall(r"\d+", c)[0]): c for c in chosen}
    low, high = min(numbers), max(numbers)
    if len(numbers) < MIN_SEQUENCE_FILL * (high - low + 1):
        return []
    width = int(pattern.split("{")[1].split("}")[0])
    template = re.sub(r"\d+", "{}", next(iter(numbers.values())), count=1)
    return [template.format(str(n).zfill(width)) for n in range(low, high + 1) if n not in numbers]


def _paths(request: ProfileRequest) -> tuple[list[str], list[str]]:
    images = [p for case in request.cases for p in case.image_paths]
    labels = [case.label_path for case in request.cases if case.label_path]
    return images, labels


def _layout(paths: list[str]) -> tuple[str | None, dict[str, int]]:
    if not paths:
        return None, {}
    root = os.path.commonpath(paths)
    if root in paths:
        root = os.path.dirname(root)
    folders: Counter[str] = Counter()
    # relpath once per folder, not once per file (50 us each: a tenth of a second for 4,000 files)
    for folder, count in Counter(os.path.dirname(p) for p in paths).items():
        folders[os.path.relpath(folder, root)] += count
    return root, top_counts(folders)


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:  # missing, as os.path.exists has it
        return None


def _strata(request: ProfileRequest, results: list[CaseResult]) -> dict[str, dict[str, int]]:
    """Few-valued per-case fields and DICOM header fields; the class label is supervision, not a stratum."""
    label_column = request.labels_table.label_column if request.labels_table else "label"
    values: dict[str, Counter[str]] = {}
    for case in request.cases:
        for key, value in case.extra.items():
            if key != label_column:
                values.setdefault(key, Counter())[value] += 1
    for result in results:
        for key, value in (result.header.meta if result.header else {}).items():
            if key in ("modality", "manufacturer", "mode"):
                values.setdefault(f"header:{key}", Counter())[value] += 1
    return {key: top_counts(counts) for key, counts in values.items() if 1 < len(counts) <= MAX_STRATUM_VALUES}


def build_inventory(
    request: ProfileRequest,
    results: list[CaseResult],
    duplicates: list[list[CaseResult]],
    near_duplicates: list[list[CaseResult]],
) -> Inventory:
    images, labels = _paths(request)
    infos = {p: _stat(p) for p in images + labels}  # one stat per file, for existence, kind and size
    existing = [p for p in images + labels if infos[p] is not None]
    root, layout = _layout(images + labels)
    missing_ids = missing_sequence_ids([c.case_id for c in request.cases])
    return Inventory(
        n_cases=dict(Counter(case.split for case in request.cases)),
        n_files=len(existing),
        total_bytes=sum(_size(p, infos[p]) for p in existing),
        image_file_types=dict(Counter(file_kind(p, _is_dir(infos[p])) for p in images)),
        label_file_types=dict(Counter(file_kind(p, _is_dir(infos[p])) for p in labels)),
        root=root,
        layout=layout,
        id_patterns=top_counts(Counter(id_pattern(c.case_id) for c in request.cases)),
        missing_ids=capped(missing_ids),
        n_missing_ids=len(missing_ids),
        channels_per_case=dict(Counter(str(len(c.image_paths)) for c in request.cases)),
        with_label=dict(Counter(c.split for c in request.cases if c.label_path)),
        missing_files=len(images) + len(labels) - len(existing),
        duplicate_sets=[capped(sorted(r.case_id for r in group)) for group in duplicates[:MAX_LISTED]],
        n_duplicate_cases=sum(len(group) - 1 for group in duplicates),
        near_duplicate_sets=[capped(sorted(r.case_id for r in group)) for group in near_duplicates[:MAX_LISTED]],
        strata=_strata(request, results),
    )


def _is_dir(info: os.stat_result | None) -> bool:
    return info is not None and stat.S_ISDIR(info.st_mode)


def _size(path: str, info: os.stat_result | None) -> int:
    if _is_dir(info):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    return info.st_size if info is not None else os.path.getsize(path)
