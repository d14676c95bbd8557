"""Surface-distance metrics in physical units: Hausdorff (percentile or max), NSD and MASD.

The surface of a mask is its foreground voxels with at least one face neighbour (6-connectivity in
3-D) outside the mask, as `mask ^ binary_erosion(mask)` in medpy and MONAI; the image border counts
as outside. Distances go from every surface voxel of one mask to the nearest surface voxel of the
other, in mm (`spacing`, one value per array axis). Both masks are first cropped to their union
bounding box (plus a one-voxel margin), and the nearest surface voxel is found with a k-d tree over
surface voxel coordinates: the exact Euclidean distance that `distance_transform_edt(~surface,
sampling=spacing)` gives, without a dense transform over the box.

Conventions (`MetricConvention`): `symmetric` (False = prediction → reference only), `pooling`
(per-direction statistics combined, or one statistic over both directions pooled), `percentile`,
`tolerance_mm`, `empty_both` / `empty_one` (best = 0 mm or NSD 1; worst = `cap_mm` or inf, or NSD
0) and `cap_mm` (distances clipped to it). NSD counts surface voxels, as MONAI with
`use_subvoxels=False`; DeepMind's surface-distance weights surfels by area and differs slightly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from amid.server.errors import invalid
from amid.tools.metrics.conventions import MetricConvention, cap_distance, empty_case_value
from amid.tools.metrics.inputs import mask_pair, voxel_spacing

HD95 = MetricConvention(percentile=95.0)
_NO_DISTANCES = np.zeros(0, dtype=np.float64)


@dataclass(frozen=True)
class SurfaceDistances:
    """Distances in mm from each surface voxel of one mask to the other mask's surface."""

    pred_to_ref: np.ndarray
    ref_to_pred: np.ndarray
    prediction_empty: bool
    reference_empty: bool


def surface_distances(prediction: np.ndarray, reference: np.ndarray, spacing: Sequence[float]) -> SurfaceDistances:
    """Compute both directed sets of surface distances once, for any number of surface metrics."""
    pred, ref = mask_pair(prediction, reference)
    sampling = np.asarray(voxel_spacing(spacing, pred.ndim))
    box = _union_box(pred, ref)
    if box is None:
        return SurfaceDistances(_NO_DISTANCES, _NO_DISTANCES, True, True)
    pred_points = np.argwhere(_surface(pred[box])) * sampling
    ref_points = np.argwhere(_surface(ref[box])) * sampling
    return SurfaceDistances(
        pred_to_ref=_nearest(pred_points, ref_points),
        ref_to_pred=_nearest(ref_points, pred_points),
        prediction_empty=len(pred_points) == 0,
        reference_empty=len(ref_points) == 0,
    )


def _union_box(pred: np.ndarray, ref: np.ndarray) -> tuple[slice, ...] | None:
    profiles = [p | r for p, r in zip(_occupancy(pred), _occupancy(ref), strict=True)]
    box = []
    for profile in profiles:
        present = np.flatnonzero(profile)
        if present.size == 0:
            return None
        box.append(slice(max(int(present[0]) - 1, 0), int(present[-1]) + 2))
    return tuple(box)


def _occupancy(mask: np.ndarray) -> list[np.ndarray]:
    """Per axis, whether each index holds foreground; two passes over the volume, not ndim."""
    if mask.ndim == 1:
        return [mask]
    head = np.any(mask, axis=-1)
    last = np.any(mask, axis=tuple(range(mask.ndim - 1)))
    others = [tuple(a for a in range(head.ndim) if a != axis) for axis in range(head.ndim)]
    return [np.any(head, axis=axes) if axes else head for axes in others] + [last]


def _surface(mask: np.ndarray) -> np.ndarray:
    padded = np.pad(mask, 1)
    interior = mask.copy()
    for axis in range(mask.ndim):
        for shifted in (slice(0, -2), slice(2, None)):
            window = [slice(1, -1)] * mask.ndim
            window[axis] = shifted
            interior &= padded[tuple(window)]
    return mask & ~interior


def _nearest(points: np.ndarray, targets: np.ndarray) -> np.ndarray:
    if len(points) == 0:
        return _NO_DISTANCES
    if len(targets) == 0:
        return np.full(len(points), np.inf)
    distances, _ = cKDTree(targets, leafsize=32).query(points, k=1)
    return np.asarray(distances, dtype=np.float64)


def hd_from_distances(distances: SurfaceDistances, convention: MetricConvention = HD95) -> float:
    """Hausdorff distance at `convention.percentile` (100 = max), capped at `cap_mm`."""
    worst = convention.worst_distance
    empty = _empty_value(distances, convention, best=0.0, worst=worst)
    if empty is not None:
        return empty

    def percentile(values: np.ndarray) -> float:
        return float(np.percentile(values, convention.percentile))

    return cap_distance(_combine(distances, convention, percentile, max), convention)


def masd_from_distances(distances: SurfaceDistances, convention: MetricConvention = HD95) -> float:
    """Mean (average) surface distance; per-direction pooling averages the two directed means."""
    empty = _empty_value(distances, convention, best=0.0, worst=convention.worst_distance)
    if empty is not None:
        return empty

    def mean(values: np.ndarray) -> float:
        return float(np.mean(values))

    return cap_distance(_combine(distances, convention, mean, lambda a, b: (a + b) / 2), convention)


def nsd_from_distances(distances: SurfaceDistances, convention: MetricConvention) -> float:
    """Normalised surface Dice: share of surface voxels within `tolerance_mm` of the other surface."""
    if convention.tolerance_mm is None:
        raise invalid("convention.tolerance_mm", None, "a tolerance in mm (>= 0) for NSD")
    empty = _empty_value(distances, convention, best=1.0, worst=0.0)
    if empty is not None:
        return empty
    within = np.count_nonzero(distances.pred_to_ref <= convention.tolerance_mm)
    if not convention.symmetric:
        return within / len(distances.pred_to_ref)
    within += np.count_nonzero(distances.ref_to_pred <= convention.tolerance_mm)
    return float(within / (len(distances.pred_to_ref) + len(distances.ref_to_pred)))


def _empty_value(distances: SurfaceDistances, convention: MetricConvention, best: float, worst: float) -> float | None:
    return empty_case_value(not distances.prediction_empty, not distances.reference_empty, convention, best, worst)


def _combine(
    distances: SurfaceDistances,
    convention: MetricConvention,
    statistic: Callable[[np.ndarray], float],
    merge: Callable[[float, float], float],
) -> float:
    if not convention.symmetric:
        return statistic(distances.pred_to_ref)
    if convention.pooling == "pooled":
        return statistic(np.concatenate([distances.pred_to_ref, distances.ref_to_pred]))
    return merge(statistic(distances.pred_to_ref), statistic(distances.ref_to_pred))


def hausdorff_distance(
    prediction: np.ndarray,
    reference: np.ndarray,
    spacing: Sequence[float],
    convention: MetricConvention = HD95,
) -> float:
    """Hausdorff distance in mm at `convention.percentile` (95 = HD95, 100 = max HD)."""
    return hd_from_distances(surface_distances(prediction, reference, spacing), convention)


def masd(
    prediction: np.ndarray,
    reference: np.ndarray,
    spacing: Sequence[float],
    convention: MetricConvention = HD95,
) -> float:
    """Mean average surface distance in mm (per_direction: MetricsReloaded; pooled: medpy 0.5 assd)."""
    return masd_from_distances(surface_distances(prediction, reference, spacing), convention)


def nsd(
    prediction: np.ndarray,
    reference: np.ndarray,
    spacing: Sequence[float],
    convention: MetricConvention,
) -> float:
    """Normalised surface Dice (surface Dice) at `convention.tolerance_mm`."""
    return nsd_from_distances(surface_distances(prediction, reference, spacing), convention)
