"""profile_dataset: read every case (in parallel), then build the sections, predicates and issues.

Plain Python: the `profile_data` tool wraps it with caching (keyed by `fingerprint`) and a job.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path

import numpy as np

from amid.server.errors import DataUnreadable
from amid.tools.profiling.boxes import BoxSummary, summarize_boxes
from amid.tools.profiling.casework import CaseFiles, CaseJob, CaseResult
from amid.tools.profiling.channel_counts import channel_count_issues
from amid.tools.profiling.dataprofile import PROFILE_VERSION, DataProfile
from amid.tools.profiling.duplicates import crosses_splits, exact_duplicate_sets, near_duplicate_sets
from amid.tools.profiling.evaluation import build_evaluation
from amid.tools.profiling.inputs import ProfileRequest
from amid.tools.profiling.inventory import build_inventory
from amid.tools.profiling.models import CaseRecord, ProfileIssue
from amid.tools.profiling.pool import Progress, run_cases, workers_within_memory
from amid.tools.profiling.predicates import Sections, build_predicates
from amid.tools.profiling.readers import read_header
from amid.tools.profiling.representation import build_representation
from amid.tools.profiling.supervision import build_supervision
from amid.tools.profiling.tables import read_coco, read_labels

TABLE_TASKS = ("classification", "regression", "graph_classification")
LABEL_FILE_TASKS = ("segmentation", "instance_segmentation", "enhancement")
# Headers sampled (evenly over the cases) to size the workers' memory before the pool starts.
HEADERS_FOR_MEMORY = 8
# Peak bytes a worker holds per voxel beyond the image itself: label map, masks, float copies.
WORKER_BYTES_PER_VOXEL = 16
# The whole-image (central-slice) samples get a tenth of the voxel budget: they describe shifts
# between splits, where 1e6 values pin percentiles to about 0.1 %; the foreground gets the rest.
IMAGE_SAMPLE_DIVISOR = 10


def profile_dataset(request: ProfileRequest, progress: Progress | None = None) -> DataProfile:
    """Profile the request's cases; unreadable or inconsistent files become issues, never exceptions."""
    start = time.perf_counter()
    key = fingerprint(request)  # before reading: the profile describes the files as they were then
    issues: list[ProfileIssue] = _missing_label_files(request)
    targets = _targets(request, issues)
    n_workers = _worker_count(request)
    if progress is not None:
        progress(0, len(request.cases), f"profiling {len(request.cases)} cases with {n_workers} workers")
    results = sorted(run_cases(_jobs(request), n_workers, progress), key=lambda r: r.index)
    issues += [ProfileIssue(**vars(issue)) for result in results for issue in result.issues]
    box_summary, boxes_per_case = _boxes(request, results, issues)
    duplicates, near = exact_duplicate_sets(results), near_duplicate_sets(results)
    issues += _duplicate_issues(duplicates, near) + channel_count_issues(results)
    inventory = build_inventory(request, results, duplicates, near)
    representation = build_representation(results, request.channel_names, _label_mismatches(request, results))
    supervision = build_supervision(request, results, targets, box_summary, boxes_per_case)
    evaluation, leak_issues = build_evaluation(request, targets, duplicates, near)
    issues += leak_issues
    sections = Sections(request, inventory, representation, supervision, evaluation)
    return DataProfile(
        fingerprint=key,
        task_type=request.task_type,
        inventory=inventory,
        representation=representation,
        supervision=supervision,
        evaluation=evaluation,
        predicates=build_predicates(sections),
        issues=issues,
        cases=[_record(request, r, targets, boxes_per_case) for r in results],
        seconds=time.perf_counter() - start,
        n_workers=n_workers,
    )


def _stat_signature(path: str) -> str:
    """name:size:mtime_ns of the file, or of every file under a folder; one stat per file (the key is
    computed at every profile_data call, over every file of the dataset)."""
    try:
        info = os.stat(path)
    except OSError:
        return "missing"
    if not stat.S_ISDIR(info.st_mode):
        return f"{os.path.basename(path)}:{info.st_size}:{info.st_mtime_ns}"
    files = sorted(p for p in Path(path).rglob("*") if p.is_file())
    return ";".join(f"{f.name}:{s.st_size}:{s.st_mtime_ns}" for f in files for s in [f.stat()])


def fingerprint(request: ProfileRequest) -> str:
    """Cache key: profile version, request fields (not n_workers), and every file's size and mtime."""
    digest = hashlib.sha256(f"amid-profile-v{PROFILE_VERSION}\n".encode())
    digest.update(request.model_dump_json(exclude={"n_workers"}).encode())
    paths = {p for case in request.cases for p in [*case.image_paths, case.label_path, case.label_file] if p}
    paths |= {p for p in (request.boxes_json, request.labels_table.path if request.labels_table else None) if p}
    for path in sorted(paths):
        digest.update(f"\n{path}\t{_stat_signature(path)}".encode())
    return digest.hexdigest()


def _jobs(request: ProfileRequest) -> list[CaseJob]:
    labelled = sum(c.split == "train" and c.label_path is not None for c in request.cases)
    labels = frozenset(request.label_values) if request.label_values is not None else None
    return [
        CaseJob(
            index=index,
            case=CaseFiles.of(case),
            task_type=request.task_type,
            label_values=labels,
            foreground_samples=max(1, request.max_voxel_samples // max(labelled, 1)) if case.split == "train" else 0,
            image_samples=max(1, request.max_voxel_samples // (IMAGE_SAMPLE_DIVISOR * len(request.cases))),
            seed=request.seed,
        )
        for index, case in enumerate(request.cases)
    ]


def _worker_count(request: ProfileRequest) -> int:
    """Requested workers (default: CPUs), fewer when the largest sampled case would not fit in memory."""
    requested = request.n_workers or os.cpu_count() or 1
    step = max(1, len(request.cases) // HEADERS_FOR_MEMORY)
    largest = 0
    for case in request.cases[::step]:
        try:
            header = read_header(case.image_paths[0])
        except (DataUnreadable, OSError):
            continue
        itemsize = np.dtype(header.dtype).itemsize if header.dtype in np.sctypeDict else 8
        per_voxel = itemsize * header.n_channels * len(case.image_paths) + WORKER_BYTES_PER_VOXEL
        largest = max(largest, header.n_voxels * per_voxel)
    return workers_within_memory(requested, largest, len(request.cases))


def _issue(code: str, case_id: str | None, path: str | None, message: str, severity: str = "error") -> ProfileIssue:
    return ProfileIssue.model_validate(
        {"code": code, "severity": severity, "case_id": case_id, "path": path, "message": message}
    )


def labels_are_files(request: ProfileRequest) -> bool:
    """Whether each case's supervision is a file of its own: a mask or target image, or a label file
    that is not an image (PUMA's GeoJSON, TopCoW's edge YAML and box text), rather than a table row."""
    return request.task_type in LABEL_FILE_TASKS or any(c.label_file is not None for c in request.cases)


def _missing_label_files(request: ProfileRequest) -> list[ProfileIssue]:
    """Training cases of label-file tasks that have no label file (image or not)."""
    if not labels_are_files(request):
        return []
    return [
        _issue("missing_label", c.case_id, c.image_paths[0], "training case without a label file")
        for c in request.cases
        if c.split == "train" and c.label_path is None and c.label_file is None
    ]


def _targets(request: ProfileRequest, issues: list[ProfileIssue]) -> dict[str, str]:
    """case id -> class or value, from the labels table (or each case's extra field of that name)."""
    if request.task_type not in TABLE_TASKS or (request.labels_table is None and labels_are_files(request)):
        return {}
    column = request.labels_table.label_column if request.labels_table else "label"
    targets = {c.case_id: c.extra[column] for c in request.cases if column in c.extra}
    if request.labels_table is not None:
        try:
            table = read_labels(request.labels_table)
        except DataUnreadable as error:
            issues.append(_issue("table_unreadable", None, request.labels_table.path, error.message))
            table = {}
        known = {c.case_id for c in request.cases}
        orphans = sorted(set(table) - known)
        if orphans:
            message = f"{len(orphans)} labelled id(s) match no case, e.g. {orphans[:3]}"
            issues.append(_issue("label_without_case", None, request.labels_table.path, message, "warning"))
        targets.update({k: v for k, v in table.items() if k in known})
    for case in request.cases:
        if case.split == "train" and case.case_id not in targets:
            issues.append(_issue("missing_label", case.case_id, None, f"no {column!r} for this training case"))
    return targets


def _boxes(
    request: ProfileRequest, results: list[CaseResult], issues: list[ProfileIssue]
) -> tuple[BoxSummary | None, dict[str, int]]:
    if request.boxes_json is None:
        return None, {}
    try:
        coco = read_coco(request.boxes_json)
    except DataUnreadable as error:
        issues.append(_issue("table_unreadable", None, request.boxes_json, error.message))
        return None, {}
    summary, per_case, box_issues = summarize_boxes(request, coco, {r.case_id: r for r in results})
    issues.extend(box_issues)
    return summary, per_case


def _duplicate_issues(duplicates: list[list[CaseResult]], near: list[list[CaseResult]]) -> list[ProfileIssue]:
    issues = []
    for group in duplicates:
        first, *others = sorted(group, key=lambda r: r.index)
        for other in others:
            message = f"image bytes identical to case {first.case_id!r} ({first.split} / {other.split})"
            issues.append(_issue("duplicate_case", other.case_id, None, message, "warning"))
    for group in near:
        ids = sorted(r.case_id for r in group)
        where = "across train and test" if crosses_splits(group) else "within one split"
        issues.append(_issue("near_duplicate", ids[0], None, f"near-identical images {where}: {ids[:10]}", "warning"))
    return issues


def _label_mismatches(request: ProfileRequest, results: list[CaseResult]) -> int:
    label_paths = {c.case_id: c.label_path for c in request.cases}
    return sum(
        any(i.code == "geometry_mismatch" and i.path == label_paths[r.case_id] for i in r.issues) for r in results
    )


def _record(request: ProfileRequest, r: CaseResult, targets: dict[str, str], boxes: dict[str, int]) -> CaseRecord:
    case = request.cases[r.index]
    header = r.header
    moments = r.image_moments[0] if r.image_moments else None
    label = r.label
    return CaseRecord(
        case_id=case.case_id,
        split=case.split,
        group=case.group,
        fold=(request.folds or {}).get(case.case_id),
        file_type=header.file_type if header else None,
        n_channels=sum(h.n_channels for h in r.headers if h) if header else None,
        shape=list(header.shape) if header else [],
        spacing=list(header.spacing) if header else [],
        orientation=header.orientation if header else None,
        dtype=header.dtype if header else None,
        size_bytes=sum(h.size_bytes for h in [*r.headers, r.label_header] if h),
        content_hash=r.content_hash,
        has_label=case.label_path is not None or case.label_file is not None or case.case_id in targets,
        foreground_ratio=label.foreground / label.total if label else None,
        n_components=sum(label.component_counts.values()) if label and not label.instance_sizes else None,
        n_instances=len(label.instance_sizes) if label and label.instance_sizes is not None else None,
        n_boxes=boxes.get(case.case_id, 0) if request.boxes_json else None,
        class_label=targets.get(case.case_id),
        intensity_mean=moments.mean if moments else None,
        intensity_std=moments.var**0.5 if moments else None,
        pair_correlation=r.pair.correlation if r.pair else None,
        n_issues=len(r.issues),
        seconds=r.seconds,
    )
