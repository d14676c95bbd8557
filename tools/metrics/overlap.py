"""Overlap metrics: Dice (binary, per class, micro) and centreline Dice (clDice).

Dice = 2|P ∩ R| / (|P| + |R|). When both masks are empty the convention's `empty_both` decides
(best = 1, worst = 0, nan); when one is empty, `empty_one` (worst = 0 is also the formula's value).
MetricsReloaded gives 1 for two empty masks; medpy 0.5 means to but returns NaN under numpy 2;
MONAI gives NaN whenever the reference is empty (`ignore_empty=True`, hiding false positives) and 1
for two empty masks with `ignore_empty=False`.
"""

from __future__ import annotations

import numpy as np

from amid.server.errors import invalid
from amid.tools.metrics.conventions import MetricConvention, empty_case_value
from amid.tools.metrics.inputs import label_pair, mask_pair

DEFAULT = MetricConvention(empty_both="best")


def dice(prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT) -> float:
    """Binary Dice of two masks; empty cases follow `empty_both` / `empty_one`."""
    pred, ref = mask_pair(prediction, reference)
    pred_count, ref_count = int(np.count_nonzero(pred)), int(np.count_nonzero(ref))
    empty = empty_case_value(pred_count > 0, ref_count > 0, convention, best=1.0, worst=0.0)
    if empty is not None:
        return empty
    return 2.0 * int(np.count_nonzero(pred & ref)) / (pred_count + ref_count)


def dice_per_class(
    prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT
) -> dict[int, float]:
    """Binary Dice of each foreground label (`convention.labels`, else every non-zero label present)."""
    pred, ref = label_pair(prediction, reference)
    return {label: dice(pred == label, ref == label, convention) for label in _labels(pred, ref, convention)}


def dice_micro(prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT) -> float:
    """Micro Dice over foreground labels: 2 Σ|P_c ∩ R_c| / Σ(|P_c| + |R_c|), empty rules as binary."""
    pred, ref = label_pair(prediction, reference)
    labels = np.asarray(_labels(pred, ref, convention), dtype=np.int64)
    pred_in, ref_in = np.isin(pred, labels), np.isin(ref, labels)
    pred_count, ref_count = int(np.count_nonzero(pred_in)), int(np.count_nonzero(ref_in))
    empty = empty_case_value(pred_count > 0, ref_count > 0, convention, best=1.0, worst=0.0)
    if empty is not None:
        return empty
    agree = int(np.count_nonzero(pred_in & (pred == ref)))
    return 2.0 * agree / (pred_count + ref_count)


def _labels(pred: np.ndarray, ref: np.ndarray, convention: MetricConvention) -> list[int]:
    if convention.labels is not None:
        if 0 in convention.labels:
            raise invalid("convention.labels", convention.labels, "foreground labels only (no 0)")
        return list(convention.labels)
    present = np.union1d(np.unique(pred), np.unique(ref))
    return [int(label) for label in present if label != 0]


def cldice(prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT) -> float:
    """Centreline Dice (Shit et al. 2021): harmonic mean of topology precision and sensitivity.

    Skeletons come from scikit-image's `skeletonize` (Lee's thinning in 3-D), imported lazily, as in
    the authors' reference code. Empty cases follow the convention like Dice.
    """
    pred, ref = mask_pair(prediction, reference)
    empty = empty_case_value(bool(pred.any()), bool(ref.any()), convention, best=1.0, worst=0.0)
    if empty is not None:
        return empty
    precision = _fraction_inside(_skeleton(pred), ref)
    sensitivity = _fraction_inside(_skeleton(ref), pred)
    if precision + sensitivity == 0:
        return 0.0
    return 2.0 * precision * sensitivity / (precision + sensitivity)


def _skeleton(mask: np.ndarray) -> np.ndarray:
    from skimage.morphology import skeletonize

    return np.asarray(skeletonize(mask), dtype=bool)


def _fraction_inside(skeleton: np.ndarray, mask: np.ndarray) -> float:
    total = int(np.count_nonzero(skeleton))
    return int(np.count_nonzero(skeleton & mask)) / total if total else 0.0
