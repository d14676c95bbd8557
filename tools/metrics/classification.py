"""Classification metrics over a data set: accuracy, balanced accuracy, AUC and F1.

Arguments are (prediction, reference): predicted labels (or scores for AUC) first, true labels
second, one entry per case. Balanced accuracy averages recall over the classes present in the
reference. AUC is the Mann-Whitney statistic with ties counted half; it is NaN when only one class
is present (as MONAI's ROCAUCMetric). Macro AUC averages one-vs-rest AUC over classes that have both
positive and negative cases, column c of the score matrix scoring class c. F1 is binary
(`positive_label`) or macro over every label seen in either array; binary F1 with no positive in
either array follows `empty_both`.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from amid.server.errors import invalid
from amid.tools.metrics.conventions import MetricConvention, rule_value
from amid.tools.metrics.inputs import vector_pair

DEFAULT = MetricConvention()


def accuracy(prediction: np.ndarray, reference: np.ndarray) -> float:
    """Share of cases whose predicted label equals the reference label."""
    pred, ref = vector_pair(prediction, reference)
    return float(np.mean(pred == ref))


def balanced_accuracy(prediction: np.ndarray, reference: np.ndarray) -> float:
    """Mean per-class recall over the classes present in the reference."""
    pred, ref = vector_pair(prediction, reference)
    recalls = [np.mean(pred[ref == label] == label) for label in np.unique(ref)]
    return float(np.mean(recalls))


def auc(scores: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT) -> float:
    """ROC AUC: binary (1-D scores for `positive_label`) or macro one-vs-rest (N x C scores)."""
    score, ref = vector_pair(scores, reference, allow_matrix=True)
    if convention.average == "binary":
        if score.ndim != 1:
            raise invalid("scores", f"shape {score.shape}", "one score per case for binary AUC")
        return _binary_auc(score.astype(np.float64), ref == convention.positive_label)
    if score.ndim != 2:
        raise invalid("scores", f"shape {score.shape}", "an N x C score matrix for macro AUC")
    per_class = [_binary_auc(score[:, c].astype(np.float64), ref == c) for c in range(score.shape[1])]
    defined = [value for value in per_class if not np.isnan(value)]
    return float(np.mean(defined)) if defined else float("nan")


def _binary_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    n_pos, n_neg = int(np.count_nonzero(positive)), int(np.count_nonzero(~positive))
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def f1(prediction: np.ndarray, reference: np.ndarray, convention: MetricConvention = DEFAULT) -> float:
    """F1 score: binary for `positive_label`, or the unweighted mean over labels (macro)."""
    pred, ref = vector_pair(prediction, reference)
    if convention.average == "binary":
        return _class_f1(pred == convention.positive_label, ref == convention.positive_label, convention)
    labels = np.union1d(np.unique(pred), np.unique(ref))
    return float(np.mean([_class_f1(pred == label, ref == label, convention) for label in labels]))


def _class_f1(pred: np.ndarray, ref: np.ndarray, convention: MetricConvention) -> float:
    true_pos = int(np.count_nonzero(pred & ref))
    denominator = int(np.count_nonzero(pred)) + int(np.count_nonzero(ref))
    if denominator == 0:
        return rule_value(convention.empty_both, best=1.0, worst=0.0)
    return 2.0 * true_pos / denominator
