"""The work done for one case inside a worker process: headers, hashes, label map, bounded voxel samples.

A case never raises: every unreadable file becomes a `ProfileIssue` naming it. Volumes are decoded only
as far as needed: gzip cannot seek, so decoding stops after the last slice that holds foreground or
the central slice, whichever comes later (float volumes are decoded whole, for the NaN check).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from amid.server.errors import DataUnreadable
from amid.tools.profiling import nifti_memory, readers_2d
from amid.tools.profiling.labelstats import LabelSummary, Moments, as_sample, seeded_sample, summarize_labels
from amid.tools.profiling.readers import ImageHeader, ZRange, read_array, read_header
from amid.tools.profiling.voxels import (
    PairSummary,
    central_region,
    channels_thumbnail,
    geometry_difference,
    pair_summary,
)

if TYPE_CHECKING:
    from amid.tools.profiling.inputs import ProfileCase
    from amid.tools.profiling.models import Severity

# Formats whose reader can stop after a slab of slices (TIFF stacks are decoded whole).
SLAB_TYPES = {"nifti", "nrrd", "metaimage", "dicom", "dicom_series"}

# Workers get and return plain dataclasses only: a worker that never imports pydantic (the request
# and profile models) starts about a fifth of a second sooner.


@dataclass(frozen=True)
class CaseFiles:
    """One case's files and split, as a worker reads them."""

    case_id: str
    split: str
    image_paths: tuple[str, ...]
    label_path: str | None = None

    @classmethod
    def of(cls, case: ProfileCase) -> CaseFiles:
        return cls(case.case_id, case.split, tuple(case.image_paths), case.label_path)


@dataclass(frozen=True)
class CaseIssue:
    """A problem found in one case (a `ProfileIssue` once back in the caller)."""

    code: str
    severity: Severity
    case_id: str | None
    path: str | None
    message: str


@dataclass(frozen=True)
class CaseJob:
    """One case and what to compute for it."""

    index: int
    case: CaseFiles
    task_type: str
    label_values: frozenset[int] | None
    foreground_samples: int
    image_samples: int
    seed: int

    @property
    def reads_label_map(self) -> bool:
        return self.task_type in ("segmentation", "instance_segmentation")


@dataclass
class CaseResult:
    """Everything the dataset-level sections need from one case; small enough to pickle back."""

    index: int
    case_id: str
    split: str
    headers: list[ImageHeader | None] = field(default_factory=list)
    label_header: ImageHeader | None = None
    content_hash: str | None = None
    thumbnail: np.ndarray | None = None
    label: LabelSummary | None = None
    foreground_samples: list[np.ndarray] = field(default_factory=list)
    foreground_moments: list[Moments | None] = field(default_factory=list)
    image_samples: list[np.ndarray] = field(default_factory=list)
    image_moments: list[Moments | None] = field(default_factory=list)
    pair: PairSummary | None = None
    nan_voxels: int = 0
    issues: list[CaseIssue] = field(default_factory=list)
    seconds: float = 0.0

    def add_issue(self, code: str, severity: Severity, path: str | None, message: str) -> None:
        self.issues.append(CaseIssue(code, severity, self.case_id, path, message))

    @property
    def header(self) -> ImageHeader | None:
        return self.headers[0] if self.headers else None


def analyze_case(job: CaseJob) -> CaseResult:
    """Profile one case; any failure becomes an issue on the result, never an exception."""
    start = time.perf_counter()
    result = CaseResult(index=job.index, case_id=job.case.case_id, split=job.case.split)
    try:
        with nifti_memory.case_files(), readers_2d.case_images():  # each file of the case is read once
            _analyze(job, result)
    except Exception as error:  # one bad case must not stop a profile of thousands
        result.add_issue("case_failed", "error", None, f"{type(error).__name__}: {error}")
    result.seconds = time.perf_counter() - start
    return result


def _analyze(job: CaseJob, result: CaseResult) -> None:
    case = job.case
    result.headers = [_header(path, result, "channel" if i else "image") for i, path in enumerate(case.image_paths)]
    result.content_hash = _content_hash([p for p, h in zip(case.image_paths, result.headers, strict=True) if h])
    if case.label_path is not None:
        result.label_header = _header(case.label_path, result, "label")
    reference = result.header
    if reference is None:
        return
    _check_channel_geometry(case, result)
    label_map, box = _read_label_map(job, result) if job.reads_label_map else (None, None)
    z_range = _decode_range(reference, box)
    channels = _read_channels(case, result, z_range)
    if channels:
        _sample_voxels(job, result, label_map, box, z_range, channels)


def _sample_voxels(
    job: CaseJob,
    result: CaseResult,
    label_map: np.ndarray | None,
    box: tuple[slice, ...] | None,
    z_range: ZRange | None,
    channels: list[np.ndarray],
) -> None:
    """Foreground and central-slice samples, the near-duplicate thumbnail and the enhancement pair."""
    reference = result.header
    assert reference is not None
    rng = np.random.default_rng([job.seed, job.index])  # per case: the same draws in any worker
    fits = label_map is not None and _on_grid(label_map, reference, channels[0])
    if label_map is not None and box is not None and job.foreground_samples > 0 and fits:
        _sample_foreground(label_map, box, z_range, channels, job.foreground_samples, rng, result)
    middle = _middle_index(reference, z_range)
    region = [central_region(channel, middle) for channel in channels]
    _sample_region(region, job.image_samples, rng, result)
    result.thumbnail = channels_thumbnail(region)
    target = job.case.label_path
    if job.task_type == "enhancement" and result.label_header is not None and target:
        result.pair = _pair(target, result, z_range, middle, region[0])


def _on_grid(label: np.ndarray, reference: ImageHeader, channel: np.ndarray) -> bool:
    """The label lies on the image grid, and the decoded channel is that grid (or a slab of it)."""
    return label.shape == reference.shape and channel.shape[:2] == reference.shape[:2]


def _header(path: str, result: CaseResult, role: str) -> ImageHeader | None:
    if not Path(path).exists():
        code = "missing_modality" if role == "channel" else "missing_file"
        result.add_issue(code, "error", path, f"{role} file {Path(path).name} does not exist")
        return None
    try:
        header = read_header(path)
    except DataUnreadable as error:
        result.add_issue("corrupt_file", "error", path, error.message)
        return None
    for code, severity, message in header.problems:  # e.g. a DICOM series with a missing slice
        result.add_issue(code, cast("Severity", severity), path, f"{role}: {message}")
    return header


def _file_digest(path: str) -> str:
    known = nifti_memory.file_sha256(path) or readers_2d.file_sha256(path)  # the bytes read for the header
    if known is not None:
        return hashlib.sha256(bytes.fromhex(known)).hexdigest()
    target = Path(path)
    files = sorted(p for p in target.rglob("*") if p.is_file()) if target.is_dir() else [target]
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as handle:
            digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()


def _content_hash(paths: list[str]) -> str | None:
    """sha256 over the image files' bytes: equal hashes mean byte-identical images."""
    if not paths:
        return None
    if len(paths) == 1:
        return _file_digest(paths[0])
    return hashlib.sha256("".join(_file_digest(p) for p in paths).encode()).hexdigest()


def _check_channel_geometry(case: CaseFiles, result: CaseResult) -> None:
    """A channel on its own grid is a warning, not broken data: real multi-sequence MRI ships so
    (ISLES'22: FLAIR on a finer grid than DWI and ADC, whose grid the mask shares), and a model must
    resample it onto channel 0's grid before stacking. A label off its image's grid stays an error."""
    reference = result.headers[0]
    assert reference is not None
    for index, (path, header) in enumerate(zip(case.image_paths[1:], result.headers[1:], strict=True), start=1):
        difference = geometry_difference(reference, header) if header else None
        if difference:
            result.add_issue(
                "channel_grid_differs",
                "warning",
                path,
                f"channel {index} is on another grid than channel 0 ({difference}): resample it onto channel 0's "
                "grid before stacking the channels (nnU-Net and MONAI's loaders expect one grid per case)",
            )


def _read_label_map(job: CaseJob, result: CaseResult) -> tuple[np.ndarray | None, tuple[slice, ...] | None]:
    path, header, reference = job.case.label_path, result.label_header, result.header
    if path is None or header is None or reference is None:
        return None, None
    difference = geometry_difference(reference, header)
    if difference:
        result.add_issue("geometry_mismatch", "error", path, f"label differs from image: {difference}")
    try:
        label, _ = read_array(path, header=header)
    except DataUnreadable as error:
        result.add_issue("corrupt_file", "error", path, error.message)
        return None, None
    if label.ndim > len(header.shape):
        result.add_issue("label_channels", "warning", path, "label has several channels; channel 0 was used")
        label = label[..., 0]
    summary, box = summarize_labels(label, instances=job.task_type == "instance_segmentation")
    result.label = summary
    _check_label_values(job, summary, path, result)
    return label, box


def _check_label_values(job: CaseJob, summary: LabelSummary, path: str, result: CaseResult) -> None:
    if summary.non_integer:
        result.add_issue("label_not_integer", "error", path, "label map holds non-integer values (or NaN)")
    if job.label_values is None or job.task_type != "segmentation":
        return
    unexpected = sorted(set(summary.counts) - job.label_values)
    if unexpected:
        expected = sorted(job.label_values)
        result.add_issue(
            "unexpected_label_value",
            "error",
            path,
            f"label values {unexpected[:10]} not in the contract's {expected}",
        )


def _decode_range(header: ImageHeader, box: tuple[slice, ...] | None) -> ZRange | None:
    """Slices to decode: up to the foreground's last slice and the central slice; None means all."""
    if header.file_type not in SLAB_TYPES or len(header.shape) != 3:
        return None
    if np.dtype(header.dtype).kind == "f":
        return None
    middle = header.shape[2] // 2
    low, high = middle, middle + 1
    if box is not None:
        low, high = min(low, box[2].start), max(high, box[2].stop)
    return low, high


def _middle_index(header: ImageHeader, z_range: ZRange | None) -> int | None:
    """Index of the volume's central slice within the decoded slab; None for 2-D images."""
    if len(header.shape) != 3:
        return None
    return header.shape[2] // 2 - (z_range[0] if z_range is not None else 0)


def _read_channels(case: CaseFiles, result: CaseResult, z_range: ZRange | None) -> list[np.ndarray]:
    """Decoded channels with channel 0's shape; NaN voxels are counted and reported."""
    channels: list[np.ndarray] = []
    for path, header in zip(case.image_paths, result.headers, strict=True):
        if header is None:
            continue
        try:
            array, used = read_array(path, z_range, header)
        except DataUnreadable as error:
            result.add_issue("corrupt_file", "error", path, error.message)
            continue
        parts = [array[..., c] for c in range(array.shape[-1])] if array.ndim > len(used.shape) else [array]
        channels.extend(p for p in parts if not channels or p.shape == channels[0].shape)
    floats = [c for c in channels if c.dtype.kind == "f"]
    nan_voxels = sum(int(np.isnan(c).sum()) for c in floats)
    if nan_voxels:
        result.nan_voxels = nan_voxels
        result.add_issue("nan_values", "error", case.image_paths[0], f"{nan_voxels} NaN voxels")
    infinite = sum(int(np.isinf(c).sum()) for c in floats)
    if infinite:
        result.add_issue("infinite_values", "error", case.image_paths[0], f"{infinite} infinite voxels")
    return channels


def _sample_foreground(
    label: np.ndarray,
    box: tuple[slice, ...],
    z_range: ZRange | None,
    channels: list[np.ndarray],
    k: int,
    rng: np.random.Generator,
    result: CaseResult,
) -> None:
    mask = label[box] != 0
    image_box = box
    if z_range is not None:
        image_box = (*box[:2], slice(box[2].start - z_range[0], box[2].stop - z_range[0]))
    values = [_finite(channel[image_box][mask]) for channel in channels]
    result.foreground_samples = _draw(values, k, rng)
    result.foreground_moments = [Moments.of(v) for v in values]


def _sample_region(region: list[np.ndarray], k: int, rng: np.random.Generator, result: CaseResult) -> None:
    flat = [_finite(r.ravel()) for r in region]
    result.image_samples = _draw(flat, k, rng)
    result.image_moments = [Moments.of(f) for f in flat]


def _finite(values: np.ndarray) -> np.ndarray:
    """The values statistics may use: NaN and infinite voxels are left out (counted as issues), not
    read as 0, which would drag a channel's mean and percentiles toward 0."""
    return values[np.isfinite(values)] if values.dtype.kind in "fc" else values


def _draw(values: list[np.ndarray], k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """k seeded draws per channel: the same voxels in every channel, unless left-out NaN voxels made
    the channels' value counts differ; an empty channel gives an empty sample."""
    if len({v.size for v in values}) > 1:
        return [seeded_sample(v, k, rng) for v in values]
    if values[0].size == 0:
        return [np.empty(0, dtype=np.float32) for _ in values]
    picks = rng.integers(0, values[0].size, size=k)
    return [as_sample(v[picks]) for v in values]


def _pair(
    target_path: str, result: CaseResult, z_range: ZRange | None, middle: int | None, source: np.ndarray
) -> PairSummary | None:
    assert result.header is not None and result.label_header is not None
    difference = geometry_difference(result.header, result.label_header)
    if difference:
        result.add_issue("geometry_mismatch", "error", target_path, f"target differs from input: {difference}")
        return PairSummary(aligned=False)
    try:
        target, used = read_array(target_path, z_range, result.label_header)
    except DataUnreadable as error:
        result.add_issue("corrupt_file", "error", target_path, error.message)
        return None
    if target.ndim > len(used.shape):
        target = target[..., 0]
    return pair_summary(source, central_region(target, middle))
