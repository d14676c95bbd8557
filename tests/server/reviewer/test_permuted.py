"""The trivial predictor of correlation metrics: seeded draws of the fold's training targets, the
same on every review, and defined where the constant predictor's correlation is not."""

from __future__ import annotations

import math

from amid.server.reviewer import permuted
from amid.tools.metrics import MetricSummary


def _summary(value: float) -> MetricSummary:
    return MetricSummary(mean=value, median=value, std=0.0, n_cases=3, n_valid=3, n_nan=0, n_capped=0, values=(value,))


def test_draws_are_seeded_by_fold_and_come_from_the_training_targets_only() -> None:
    train = [1.0, 2.0, 3.0, 4.0, 5.0]
    first, again = permuted.draws(train, 3, fold=2), permuted.draws(train, 3, fold=2)
    assert first == again and len(first) == permuted.DRAWS
    assert all(len(d) == 3 and len(set(d)) == 3 and set(d) <= set(train) for d in first)  # without replacement
    assert permuted.draws(train, 3, fold=3) != first
    assert len({tuple(d) for d in first}) > 1  # the draws differ: their mean is not one lucky order


def test_more_cases_than_targets_draw_with_replacement_and_no_targets_draw_nothing() -> None:
    assert all(len(d) == 5 and set(d) <= {7.0, 8.0} for d in permuted.draws([7.0, 8.0], 5, fold=0))
    assert permuted.draws([], 3, fold=0) == []


def test_a_fold_of_two_cases_gets_no_baseline_no_model_could_beat() -> None:
    assert permuted.draws([1.0, 2.0, 3.0, 4.0], 2, fold=0) == []  # |correlation| of two points is 1
    assert len(permuted.draws([1.0, 2.0, 3.0, 4.0], permuted.MIN_CASES, fold=0)) == permuted.DRAWS


def test_a_nan_baseline_is_undefined_and_the_draws_mean_of_defined_values_replaces_it() -> None:
    assert permuted.undefined(None) and permuted.undefined(_summary(math.nan)) and not permuted.undefined(_summary(0))
    averaged = permuted.averaged(
        [{"score": _summary(0.5)}, {"score": _summary(math.nan)}, {"score": _summary(1.0)}], ["score", "absent"]
    )
    assert set(averaged) == {"score"} and averaged["score"].mean == 0.75 and averaged["score"].n_cases == 3
