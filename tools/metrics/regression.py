"""Correlation metrics over a data set: PLCC (Pearson), SROCC (Spearman) and KROCC (Kendall tau-b).

Arguments are (prediction, reference), one value per case. No logistic fit is applied before PLCC
(some image-quality benchmarks fit one first; a contract that wants it must say so). A constant
input makes every coefficient undefined: NaN. Ties get average ranks (SROCC) and the tau-b
correction (KROCC), as scipy.stats.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from amid.server.errors import invalid
from amid.tools.metrics.inputs import vector_pair

_PAIR_BLOCK = 2_000_000


def plcc(prediction: np.ndarray, reference: np.ndarray) -> float:
    """Pearson linear correlation coefficient."""
    pred, ref = _values(prediction, reference)
    return _pearson(pred, ref)


def srocc(prediction: np.ndarray, reference: np.ndarray) -> float:
    """Spearman rank-order correlation: Pearson of the average ranks."""
    pred, ref = _values(prediction, reference)
    return _pearson(rankdata(pred), rankdata(ref))


def krocc(prediction: np.ndarray, reference: np.ndarray) -> float:
    """Kendall rank-order correlation, tau-b: (concordant - discordant) / sqrt(untied_x * untied_y).

    Exact over all pairs, computed in blocks of rows (O(n^2) time, bounded memory).
    """
    pred, ref = _values(prediction, reference)
    rows = max(1, _PAIR_BLOCK // len(pred))
    agreement, untied_pred, untied_ref = 0.0, 0.0, 0.0
    for start in range(0, len(pred), rows):
        sign_pred = np.sign(pred[start : start + rows, None] - pred[None, :])
        sign_ref = np.sign(ref[start : start + rows, None] - ref[None, :])
        agreement += float(np.sum(sign_pred * sign_ref))
        untied_pred += float(np.count_nonzero(sign_pred))
        untied_ref += float(np.count_nonzero(sign_ref))
    if untied_pred == 0 or untied_ref == 0:
        return float("nan")
    return agreement / float(np.sqrt(untied_pred * untied_ref))


def _values(prediction: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pred, ref = vector_pair(prediction, reference, min_length=2)
    pred, ref = pred.astype(np.float64), ref.astype(np.float64)
    for name, values in (("prediction", pred), ("reference", ref)):
        if not np.all(np.isfinite(values)):
            raise invalid(name, "values with NaN or inf", "finite numbers, one per case")
    return pred, ref


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    dx, dy = x - x.mean(), y - y.mean()
    norm = float(np.sqrt(np.sum(dx * dx) * np.sum(dy * dy)))
    if norm == 0:
        return float("nan")
    return float(np.clip(np.sum(dx * dy) / norm, -1.0, 1.0))
