"""Comparisons on headers and decoded slices: geometry agreement, near-duplicate signatures, paired images."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from amid.tools.profiling.readers import ImageHeader

# Image and label grids must agree to a micrometre: float32 header rounding stays far below it,
# a real shift or flip of a voxel does not.
AFFINE_TOLERANCE_MM = 1e-3
SPACING_RELATIVE_TOLERANCE = 1e-4
# Near duplicates are found on 16 x 16 thumbnails of the central slice (1 KB per case): block means
# average noise away, so a re-encoded or lightly noised copy correlates above 0.995 with its source,
# while different patients' slices differ at body and organ outlines and stay below it.
THUMB_SIDE = 16
NEAR_DUPLICATE_CORRELATION = 0.995
# Pair statistics use at most this many voxels, evenly strided: enough for a correlation to 3 digits.
MAX_PAIR_VOXELS = 1_000_000


@dataclass(frozen=True)
class PairSummary:
    """How an enhancement target relates to its input on the central slice."""

    aligned: bool
    correlation: float | None = None
    mean_shift: float | None = None
    std_ratio: float | None = None


def geometry_difference(reference: ImageHeader, other: ImageHeader) -> str | None:
    """What differs between two images' grids (shape, spacing, affine), or None when they agree."""
    if tuple(reference.shape) != tuple(other.shape):
        return f"shape {list(reference.shape)} vs {list(other.shape)}"
    if not _all_close(reference.spacing, other.spacing, SPACING_RELATIVE_TOLERANCE):
        return f"spacing {list(reference.spacing)} vs {list(other.spacing)}"
    if reference.affine is not None and other.affine is not None and reference.affine != other.affine:
        # (equal affines differ by 0, or by NaN where both hold an infinity: no difference either way)
        gap = float(np.max(np.abs(np.asarray(reference.affine) - np.asarray(other.affine))))
        if gap > AFFINE_TOLERANCE_MM:
            return f"affine differs by up to {gap:.4g} mm (orientation {reference.orientation} vs {other.orientation})"
    return None


def _all_close(first: tuple[float, ...], second: tuple[float, ...], relative: float) -> bool:
    """`np.allclose(first, second, rtol=relative, atol=0)` for equal-length tuples, in plain Python: a
    few microseconds instead of 50 per call, twice per case (NaN is close to nothing, an infinity
    only to itself)."""
    pairs = zip(first, second, strict=True)
    return all(a == b or (math.isfinite(b) and abs(a - b) <= relative * abs(b)) for a, b in pairs)


def central_region(array: np.ndarray, middle: int | None) -> np.ndarray:
    """The central slice of a decoded volume (index `middle` within it), or the 2-D image itself."""
    if array.ndim != 3 or middle is None:
        return array
    return array[:, :, min(max(middle, 0), array.shape[2] - 1)]


def channels_thumbnail(channels: list[np.ndarray]) -> np.ndarray | None:
    """`slice_thumbnail` of the channels' mean. Integer channels are summed exactly and divided once
    per block (the mean of an RGB tile as float64, then its block sums, cost twice as much); the
    thumbnail then differs from the mean's in the last bits at most."""
    if len(channels) == 1:
        return slice_thumbnail(channels[0])
    if all(channel.dtype.kind in "iu" for channel in channels):
        total = channels[0].astype(np.int64)
        for channel in channels[1:]:
            total += channel
        return slice_thumbnail(total, divisor=len(channels))
    return slice_thumbnail(np.mean(channels, axis=0))


def slice_thumbnail(region: np.ndarray, divisor: int = 1) -> np.ndarray | None:
    """Block means of a 2-D region on a THUMB_SIDE x THUMB_SIDE grid, each divided by `divisor`; None for
    tiny or flat regions."""
    if region.ndim != 2 or min(region.shape) < THUMB_SIDE:
        return None
    row_edges = np.linspace(0, region.shape[0], THUMB_SIDE + 1).astype(int)
    column_edges = np.linspace(0, region.shape[1], THUMB_SIDE + 1).astype(int)
    counts = np.outer(np.diff(row_edges), np.diff(column_edges)).astype(np.float64)
    if region.dtype.kind in "iu":
        # exact integer block sums, columns first (the cheaper order; any order gives the same
        # integers), as float64: the numbers float64 sums of the pixels give
        sums = np.add.reduceat(region, column_edges[:-1], axis=1, dtype=np.int64)
        sums = np.add.reduceat(sums, row_edges[:-1], axis=0).astype(np.float64)
        return _thumbnail_or_none(sums / np.maximum(counts * divisor, 1))
    pixels = region.astype(np.float64)

    def block_sums(values: np.ndarray) -> np.ndarray:
        return np.add.reduceat(np.add.reduceat(values, row_edges[:-1], axis=0), column_edges[:-1], axis=1)

    finite = None if region.dtype.kind == "b" else np.isfinite(pixels)
    if finite is None or finite.all():
        # every pixel counts: the block sizes are the counts (the same numbers the sums below give,
        # without two more passes over the region)
        return _thumbnail_or_none(block_sums(pixels) / np.maximum(counts * divisor, 1))
    # Means of the finite pixels only: a NaN read as 0 would make two scans that differ only in
    # where they hold NaN look unrelated, and an all-NaN block is 0.
    counts = block_sums(finite.astype(np.float64))
    return _thumbnail_or_none(block_sums(np.where(finite, pixels, 0.0)) / np.maximum(counts * divisor, 1))


def _thumbnail_or_none(thumb: np.ndarray) -> np.ndarray | None:
    """The thumbnail as float32, or None when it is flat (no correlation can be taken)."""
    return thumb.astype(np.float32) if float(thumb.std()) > 0 else None


def thumbnails_match(first: np.ndarray, second: np.ndarray) -> bool:
    """Whether two thumbnails correlate at NEAR_DUPLICATE_CORRELATION or above."""
    return float(np.corrcoef(first.ravel(), second.ravel())[0, 1]) >= NEAR_DUPLICATE_CORRELATION


def unit_thumbnail(thumbnail: np.ndarray) -> np.ndarray | None:
    """The thumbnail centred and scaled to unit length (float64): the dot product of two is their
    correlation. None when it is flat (no correlation is defined)."""
    centred = thumbnail.astype(np.float64).ravel()
    centred -= centred.mean()
    norm = float(np.sqrt(centred @ centred))
    return centred / norm if norm > 0 else None


def unit_thumbnails_match(
    first: np.ndarray, second: np.ndarray, first_unit: np.ndarray, second_unit: np.ndarray
) -> bool:
    """`thumbnails_match` from the thumbnails' unit vectors: one dot product instead of np.corrcoef
    (about 100 us a pair, 3,000 pairs for 400 similar cases). The two round differently in the last
    bits, so a correlation within 1e-9 of the threshold is decided by np.corrcoef itself."""
    correlation = float(first_unit @ second_unit)
    if abs(correlation - NEAR_DUPLICATE_CORRELATION) < 1e-9:
        return thumbnails_match(first, second)
    return correlation >= NEAR_DUPLICATE_CORRELATION


def pair_summary(source: np.ndarray, target: np.ndarray) -> PairSummary:
    """Pearson correlation, mean shift (target - input) and std ratio (target / input)."""
    if source.shape != target.shape:
        return PairSummary(aligned=False)
    stride = max(1, source.size // MAX_PAIR_VOXELS)
    first = source.astype(np.float64).ravel()[::stride]
    second = target.astype(np.float64).ravel()[::stride]
    both = np.isfinite(first) & np.isfinite(second)  # NaN voxels are left out, not read as 0
    first, second = first[both], second[both]
    if first.size == 0:
        return PairSummary(aligned=True)
    spread_first, spread_second = float(first.std()), float(second.std())
    correlation = None
    if spread_first > 0 and spread_second > 0:
        correlation = float(np.corrcoef(first, second)[0, 1])
    return PairSummary(
        aligned=True,
        correlation=correlation,
        mean_shift=float(second.mean() - first.mean()),
        std_ratio=spread_second / spread_first if spread_first > 0 else None,
    )
