"""Instance metrics on label maps (0 = background, each positive label one instance).

Instance F1 at an IoU threshold t: predicted and reference instances are paired one-to-one by the
Hungarian algorithm maximising total IoU over pairs with IoU >= t; such pairs are true positives,
unpaired predictions false positives, unpaired references false negatives, and F1 = 2 TP / (2 TP +
FP + FN). `instance_f1` averages it over `convention.iou_thresholds`. Centroid-match F1 pairs
instance centroids (pixel units, spacing ignored) within `convention.match_radius_px`, maximising
the number of pairs and then minimising their total distance. Empty cases follow `empty_both` /
`empty_one` (best 1, worst 0).
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from amid.server.errors import invalid
from amid.tools.metrics.conventions import MetricConvention, empty_case_value
from amid.tools.metrics.inputs import label_map, label_pair

DEFAULT = MetricConvention(empty_both="best", iou_thresholds=(0.5,))


def iou_matrix(prediction: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """IoU of every predicted (rows) with every reference (columns) instance, in label order."""
    pred, ref = label_pair(prediction, reference)
    foreground = (pred > 0) | (ref > 0)
    pred_ids, pred_index = np.unique(pred[foreground], return_inverse=True)
    ref_ids, ref_index = np.unique(ref[foreground], return_inverse=True)
    pairs = np.bincount(pred_index * len(ref_ids) + ref_index, minlength=len(pred_ids) * len(ref_ids))
    counts = pairs.reshape(len(pred_ids), len(ref_ids)).astype(np.float64)
    pred_area, ref_area = counts.sum(axis=1), counts.sum(axis=0)
    keep_pred, keep_ref = pred_ids > 0, ref_ids > 0
    inter = counts[np.ix_(keep_pred, keep_ref)]
    union = pred_area[keep_pred][:, None] + ref_area[keep_ref][None, :] - inter
    return inter / np.maximum(union, 1.0)


def instance_f1_at(
    prediction: np.ndarray, reference: np.ndarray, threshold: float, convention: MetricConvention = DEFAULT
) -> float:
    """Instance F1 at one IoU threshold with Hungarian matching."""
    if not 0 < threshold <= 1:
        raise invalid("threshold", threshold, "an IoU threshold in (0, 1]")
    return _f1_from_iou(iou_matrix(prediction, reference), threshold, convention)


def instance_f1(prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT) -> float:
    """Instance F1 averaged over `convention.iou_thresholds`."""
    iou = iou_matrix(prediction, reference)
    scores = [_f1_from_iou(iou, threshold, convention) for threshold in convention.iou_thresholds]
    return float(np.mean(scores))


def _f1_from_iou(iou: np.ndarray, threshold: float, convention: MetricConvention) -> float:
    n_pred, n_ref = iou.shape
    empty = empty_case_value(n_pred > 0, n_ref > 0, convention, best=1.0, worst=0.0)
    if empty is not None:
        return empty
    eligible = np.where(iou >= threshold, iou, 0.0)
    rows, cols = linear_sum_assignment(eligible, maximize=True)
    matched = int(np.count_nonzero(iou[rows, cols] >= threshold))
    return _f1(matched, n_pred, n_ref)


def _f1(matched: int, n_pred: int, n_ref: int) -> float:
    return 2.0 * matched / (n_pred + n_ref)


def instance_centroids(labels: np.ndarray) -> np.ndarray:
    """Centroid (pixel coordinates, one row per instance in label order) of every instance."""
    instances = label_map("labels", labels)
    ids = np.unique(instances)
    ids = ids[ids > 0]
    if ids.size == 0:
        return np.zeros((0, instances.ndim))
    return np.asarray(ndimage.center_of_mass(instances > 0, instances, ids), dtype=np.float64)


def centroid_f1(prediction_points: np.ndarray, reference_points: np.ndarray, convention: MetricConvention) -> float:
    """F1 of one-to-one matches between point sets (N x D pixel coordinates) within the radius."""
    radius = _radius(convention)
    pred, ref = _points("prediction_points", prediction_points), _points("reference_points", reference_points)
    if len(pred) and len(ref) and pred.shape[1] != ref.shape[1]:
        raise invalid("prediction_points", f"{pred.shape[1]}-D points", f"{ref.shape[1]}-D like the reference")
    empty = empty_case_value(len(pred) > 0, len(ref) > 0, convention, best=1.0, worst=0.0)
    if empty is not None:
        return empty
    distance = cdist(pred, ref)
    within = distance <= radius
    # A forbidden pair costs more than any set of allowed pairs, so the number of matches is maximal.
    cost = np.where(within, distance, radius * min(len(pred), len(ref)) + 1.0)
    rows, cols = linear_sum_assignment(cost)
    return _f1(int(np.count_nonzero(within[rows, cols])), len(pred), len(ref))


def centroid_f1_labels(prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention) -> float:
    """Centroid-match F1 of two instance label maps."""
    pred, ref = label_pair(prediction, reference)
    return centroid_f1(instance_centroids(pred), instance_centroids(ref), convention)


def _radius(convention: MetricConvention) -> float:
    if convention.match_radius_px is None:
        raise invalid("convention.match_radius_px", None, "a matching radius in pixels (> 0)")
    return convention.match_radius_px


def _points(name: str, points: np.ndarray) -> np.ndarray:
    array = np.asarray(points, dtype=np.float64)
    if array.size == 0:
        return array.reshape(0, array.shape[-1] if array.ndim == 2 else 0)
    if array.ndim != 2 or not np.all(np.isfinite(array)):
        raise invalid(name, f"array of shape {array.shape}", "an N x D array of finite coordinates")
    return array
