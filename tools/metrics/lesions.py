"""Lesion-wise metrics from connected components (ISLES 2022 / autoPET style).

A reference lesion is detected (true positive) when any of its voxels is predicted; a predicted
component touching no reference voxel is a false positive; an undetected reference lesion is a false
negative. Lesion F1 = 2 TP / (2 TP + FP + FN), with `empty_both` when neither mask has a lesion and
`empty_one` when exactly one has (worst = 0 is also the formula's value). Components use
`convention.connectivity` (default full: 26-connectivity in 3-D).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from amid.tools.metrics.conventions import MetricConvention, empty_case_value
from amid.tools.metrics.inputs import mask_pair, voxel_spacing
from amid.tools.metrics.topology import betti0_error, components

DEFAULT = MetricConvention(empty_both="best")


def lesion_f1(prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT) -> float:
    """Lesion-wise F1 (any-voxel overlap detects a lesion)."""
    pred, ref = mask_pair(prediction, reference)
    pred_labels, pred_count = components(pred, convention)
    ref_labels, ref_count = components(ref, convention)
    empty = empty_case_value(pred_count > 0, ref_count > 0, convention, best=1.0, worst=0.0)
    if empty is not None:
        return empty
    detected = _touched(ref_labels, pred)
    false_positives = pred_count - _touched(pred_labels, ref)
    false_negatives = ref_count - detected
    return 2.0 * detected / (2 * detected + false_positives + false_negatives)


def _touched(labels: np.ndarray, other: np.ndarray) -> int:
    """How many labelled components share at least one voxel with `other`."""
    hit = np.unique(labels[other])
    return int(np.count_nonzero(hit))


def lesion_count_difference(
    prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT
) -> float:
    """Absolute difference in lesion counts, |#components(pred) - #components(ref)| (= Betti-0 error)."""
    return betti0_error(prediction, reference, convention)


def lesion_volume_difference_ml(prediction: np.ndarray, reference: np.ndarray, spacing: Sequence[float]) -> float:
    """Absolute difference in total lesion volume in millilitres (spacing in mm)."""
    pred, ref = mask_pair(prediction, reference)
    voxel_ml = float(np.prod(voxel_spacing(spacing, pred.ndim))) / 1000.0
    return abs(int(np.count_nonzero(pred)) - int(np.count_nonzero(ref))) * voxel_ml
