"""How the images are stored: shapes, spacing, orientation, dtype, channels, intensities.

Geometry comes from every case's header. Intensities come from seeded samples of equal size per case,
as nnU-Net's fingerprint does: percentiles from the pooled samples; mean and std computed exactly from
per-case moments with every case weighted equally (what nnU-Net's pooled samples estimate); min and
max exact over the sampled region.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from amid.tools.profiling.casework import CaseResult
from amid.tools.profiling.labelstats import Moments
from amid.tools.profiling.models import ChannelStats, Stats, top_counts
from amid.tools.profiling.quantiles import percentiles
from amid.tools.profiling.readers import ImageHeader

# nnU-Net's rule for an axis that gets its own target spacing: spacing more than 3x the others'
# and fewer than a third of their voxels along it.
NNUNET_ANISOTROPY_FACTOR = 3.0
FOREGROUND_REGION = "foreground (label > 0), training cases"
IMAGE_REGION = "central slice of each volume, whole 2-D images"


class IntensitySummary(BaseModel):
    region: str
    channels: list[ChannelStats]


class Representation(BaseModel):
    spatial_dims: dict[str, int]
    dtypes: dict[str, int]
    channels_per_case: dict[str, int]
    rgb_cases: int
    orientations: dict[str, int]
    spacing_unit: str
    shape: list[Stats | None]
    spacing: list[Stats | None]
    median_spacing: list[float]
    spacing_p10: list[float]
    size_mm: list[Stats | None]
    voxels_per_case: Stats | None
    anisotropy: Stats | None
    nnunet_anisotropic_axis: int | None
    tiled_cases: int
    max_pyramid_levels: int
    image_label_mismatches: int
    nan_cases: int
    intensity: IntensitySummary | None
    intensity_by_split: dict[str, IntensitySummary]


def _axis_stats(rows: Sequence[Sequence[float]]) -> list[Stats | None]:
    if not rows:
        return []
    return [Stats.of(row[axis] for row in rows) for axis in range(len(rows[0]))]


def _nnunet_axis(spacing: list[float], shape: list[float]) -> int | None:
    if len(spacing) != 3:
        return None
    worst = int(np.argmax(spacing))
    others = [i for i in range(3) if i != worst]
    coarse = spacing[worst] > NNUNET_ANISOTROPY_FACTOR * max(spacing[i] for i in others)
    thin = shape[worst] * NNUNET_ANISOTROPY_FACTOR < min(shape[i] for i in others)
    return worst if coarse and thin else None


def _channel_stats(channel: int, name: str | None, pool: list[np.ndarray], parts: list[Moments]) -> ChannelStats:
    low, median, high = percentiles(pool, [0.5, 50.0, 99.5])
    means = np.asarray([p.mean for p in parts])
    mean = float(means.mean())
    variance = float(np.mean(np.asarray([p.var for p in parts]) + np.square(means - mean)))
    return ChannelStats(
        channel=channel,
        name=name,
        n_samples=sum(int(part.size) for part in pool),
        n_cases=len(parts),
        mean=mean,
        median=float(median),
        std=variance**0.5,
        min=min(p.min for p in parts),
        max=max(p.max for p in parts),
        percentile_00_5=float(low),
        percentile_99_5=float(high),
    )


def pooled_channel_stats(
    samples: list[list[np.ndarray]], moments: list[list[Moments | None]], names: dict[int, str] | None
) -> list[ChannelStats]:
    """Dataset statistics per channel from equal-size per-case samples and exact per-case moments."""
    width = Counter(len(s) for s in samples if s).most_common(1)
    channels: list[ChannelStats] = []
    for channel in range(width[0][0] if width else 0):
        pool = [s[channel] for s in samples if len(s) > channel and s[channel].size]
        parts = [m[channel] for m in moments if len(m) > channel]
        present = [p for p in parts if p is not None]
        if pool and present:
            channels.append(_channel_stats(channel, (names or {}).get(channel), pool, present))
    return channels


def _intensity(results: list[CaseResult], names: dict[int, str] | None) -> IntensitySummary | None:
    with_foreground = [r for r in results if r.foreground_samples]
    if with_foreground:
        stats = pooled_channel_stats(
            [r.foreground_samples for r in with_foreground],
            [r.foreground_moments for r in with_foreground],
            names,
        )
        return IntensitySummary(region=FOREGROUND_REGION, channels=stats)
    train = [r for r in results if r.split == "train" and r.image_samples]
    if not train:
        return None
    stats = pooled_channel_stats([r.image_samples for r in train], [r.image_moments for r in train], names)
    return IntensitySummary(region=IMAGE_REGION, channels=stats)


def _by_split(results: list[CaseResult], names: dict[int, str] | None) -> dict[str, IntensitySummary]:
    summaries = {}
    for split in ("train", "test"):
        chosen = [r for r in results if r.split == split and r.image_samples]
        if chosen:
            stats = pooled_channel_stats([r.image_samples for r in chosen], [r.image_moments for r in chosen], names)
            summaries[split] = IntensitySummary(region=IMAGE_REGION, channels=stats)
    return summaries


def _column_medians(rows: Sequence[Sequence[float]]) -> list[float]:
    """np.median(rows, axis=0) (the middle value, or the mean of the two middle ones), without the
    numpy.ma import that np.median costs a fresh process on first use; non-finite values go to numpy."""
    columns = [sorted(float(v) for v in column) for column in zip(*rows, strict=True)]
    if not all(np.isfinite(column).all() for column in columns):
        return [float(v) for v in np.median(rows, axis=0)]
    middle = len(rows) // 2
    return [c[middle] if len(c) % 2 else (c[middle - 1] + c[middle]) / 2 for c in columns]


def _anisotropy(header: ImageHeader) -> float:
    return max(header.spacing) / min(header.spacing) if min(header.spacing) > 0 else float("nan")


def build_representation(results: list[CaseResult], names: dict[int, str] | None, mismatches: int) -> Representation:
    headers = [r.header for r in results if r.header is not None]
    rank = Counter(len(h.shape) for h in headers).most_common(1)
    main = [h for h in headers if rank and len(h.shape) == rank[0][0]]
    spacings = [list(h.spacing) for h in main]
    shapes = [list(h.shape) for h in main]
    median_spacing = _column_medians(spacings)
    median_shape = _column_medians(shapes)
    return Representation(
        spatial_dims=dict(Counter(str(h.spatial_dims) for h in headers)),
        dtypes=top_counts(Counter(h.dtype for h in headers)),
        channels_per_case=dict(Counter(str(sum(h.n_channels for h in r.headers if h)) for r in results if r.header)),
        rgb_cases=sum(h.is_rgb for h in headers),
        orientations=top_counts(Counter(h.orientation or "none" for h in headers)),
        spacing_unit=Counter(h.spacing_unit for h in headers).most_common(1)[0][0] if headers else "mm",
        shape=_axis_stats(shapes),
        spacing=_axis_stats(spacings),
        median_spacing=median_spacing,
        spacing_p10=[float(v) for v in np.percentile(spacings, 10, axis=0)] if spacings else [],
        size_mm=_axis_stats([[n * s for n, s in zip(h.shape, h.spacing, strict=True)] for h in main]),
        voxels_per_case=Stats.of(h.n_voxels for h in headers),
        anisotropy=Stats.of(_anisotropy(h) for h in main),
        nnunet_anisotropic_axis=_nnunet_axis(median_spacing, median_shape),
        tiled_cases=sum(h.is_tiled or h.n_levels > 1 for h in headers),
        max_pyramid_levels=max((h.n_levels for h in headers), default=0),
        image_label_mismatches=mismatches,
        nan_cases=sum(r.nan_voxels > 0 for r in results),
        intensity=_intensity(results, names),
        intensity_by_split=_by_split(results, names),
    )
