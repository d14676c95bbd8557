"""Classification metrics against scikit-learn and correlations against scipy.stats.

Conventions: AUC with one class present is NaN here and in MONAI (scikit-learn warns and returns
NaN); binary F1 with no positive anywhere follows `empty_both` (scikit-learn's `zero_division`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as sk

from amid.tools.metrics import MetricConvention, accuracy, auc, balanced_accuracy, f1, krocc, plcc, srocc

SEEDS = range(4)
MACRO = MetricConvention(average="macro")


def _labels(seed: int, classes: int = 3, n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    reference = rng.integers(0, classes, n)
    prediction = np.where(rng.random(n) < 0.7, reference, rng.integers(0, classes, n))
    return prediction, reference


@pytest.mark.parametrize("seed", SEEDS)
def test_accuracy_and_balanced_accuracy_equal_sklearn(seed):
    prediction, reference = _labels(seed)
    assert accuracy(prediction, reference) == pytest.approx(sk.accuracy_score(reference, prediction))
    assert balanced_accuracy(prediction, reference) == pytest.approx(sk.balanced_accuracy_score(reference, prediction))


@pytest.mark.parametrize("seed", SEEDS)
def test_binary_and_macro_f1_equal_sklearn(seed):
    prediction, reference = _labels(seed)
    assert f1(prediction, reference, MACRO) == pytest.approx(sk.f1_score(reference, prediction, average="macro"))
    binary_pred, binary_ref = (prediction == 1).astype(int), (reference == 1).astype(int)
    assert f1(binary_pred, binary_ref) == pytest.approx(sk.f1_score(binary_ref, binary_pred))


@pytest.mark.parametrize(("rule", "expected"), [("best", 1.0), ("worst", 0.0), ("nan", math.nan)])
def test_binary_f1_without_any_positive_follows_empty_both(rule, expected):
    value = f1(np.zeros(5), np.zeros(5), MetricConvention(empty_both=rule))
    assert math.isnan(value) if math.isnan(expected) else value == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_binary_auc_with_tied_scores_equals_sklearn(seed):
    rng = np.random.default_rng(seed)
    reference = rng.integers(0, 2, 80)
    scores = np.round(reference * 0.4 + rng.random(80), 1)  # rounding makes ties
    assert auc(scores, reference) == pytest.approx(sk.roc_auc_score(reference, scores))


@pytest.mark.parametrize("seed", SEEDS)
def test_macro_auc_equals_sklearn_one_vs_rest(seed):
    rng = np.random.default_rng(seed)
    reference = rng.integers(0, 3, 90)
    scores = rng.random((90, 3)) + np.eye(3)[reference] * 0.5
    scores /= scores.sum(axis=1, keepdims=True)
    expected = sk.roc_auc_score(reference, scores, multi_class="ovr", average="macro")
    assert auc(scores, reference, MACRO) == pytest.approx(expected)


def test_auc_with_one_class_present_is_nan():
    assert math.isnan(auc(np.array([0.1, 0.9, 0.4]), np.array([1, 1, 1])))


def _correlation_case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    reference = np.round(rng.normal(size=150), 1)  # ties on purpose
    prediction = np.round(reference + rng.normal(scale=0.7, size=150), 1)
    return prediction, reference


@pytest.mark.parametrize("seed", SEEDS)
def test_correlations_equal_scipy_stats_with_ties(seed):
    prediction, reference = _correlation_case(seed)
    assert plcc(prediction, reference) == pytest.approx(stats.pearsonr(prediction, reference).statistic)
    assert srocc(prediction, reference) == pytest.approx(stats.spearmanr(prediction, reference).statistic)
    assert krocc(prediction, reference) == pytest.approx(stats.kendalltau(prediction, reference).statistic)


def test_kendall_is_exact_across_row_blocks(monkeypatch):
    prediction, reference = _correlation_case(9)
    monkeypatch.setattr("amid.tools.metrics.regression._PAIR_BLOCK", 7 * len(prediction))
    assert krocc(prediction, reference) == pytest.approx(stats.kendalltau(prediction, reference).statistic)


def test_constant_input_makes_every_correlation_nan():
    constant, varying = np.ones(10), np.arange(10.0)
    assert all(math.isnan(fn(constant, varying)) for fn in (plcc, srocc, krocc))
