"""The holdout gate's statistics: per-case scores, a seeded bootstrap interval of the gap, a verdict."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from server.reviewer.holdout import case_scores
from server.reviewer.holdout_gate import RELATIVE_FLOOR, expanded_tail, gap_test
from server.reviewer.scoring import plan_metrics
from tools.task.importers import import_task


def scores(prefix: str, values: list[float]) -> dict[str, float]:
    return {f"{prefix}{i}": v for i, v in enumerate(values)}


def test_labels_are_averaged_within_a_case_before_the_spread_is_taken(demo_challenge: Path) -> None:
    dice = next(m for m in plan_metrics(import_task(demo_challenge).contract) if m.name == "dice")
    per_case = {"a": {"dice": [0.95, 0.0]}, "b": {"dice": [0.93, 0.1]}, "c": {"dice": [0.97, 0.05]}}
    by_case = case_scores(dice, per_case)
    assert by_case == pytest.approx({"a": 0.475, "b": 0.515, "c": 0.51})
    pooled = [v for case in per_case.values() for v in case["dice"]]
    assert np.std(list(by_case.values())) < np.std(pooled) / 10  # liver vs lesion is not case-to-case noise


def test_the_crafted_other_scan_gap_is_significantly_worse() -> None:
    validation = scores("v", [0.80, 0.74, 0.79, 0.76, 0.78, 0.75, 0.77, 0.77])  # mean 0.770
    holdout = scores("h", [0.52, 0.41, 0.49, 0.48])  # mean 0.475
    test = gap_test(validation, holdout, higher_is_better=True, metric_tolerance=1e-3, seed=0)
    assert test is not None and test.verdict == "worse" and not test.paired
    assert test.difference == pytest.approx(-0.295) and test.interval[1] < -test.floor
    assert test.difference < -test.tolerance and test.floor == pytest.approx(RELATIVE_FLOOR * 0.77)


def test_an_honest_gap_of_the_same_spread_is_within() -> None:
    validation = scores("v", [0.61, 0.48, 0.66, 0.52, 0.58, 0.55, 0.63, 0.47])
    holdout = scores("h", [0.50, 0.62, 0.45, 0.57])
    test = gap_test(validation, holdout, higher_is_better=True, metric_tolerance=1e-3, seed=0)
    assert test is not None and test.verdict == "within" and abs(test.difference) < test.tolerance


def test_the_interval_is_seeded() -> None:
    validation, holdout = scores("v", [0.6, 0.7, 0.5, 0.65]), scores("h", [0.55, 0.6, 0.7])
    first = gap_test(validation, holdout, higher_is_better=True, metric_tolerance=1e-3, seed=3)
    again = gap_test(validation, holdout, higher_is_better=True, metric_tolerance=1e-3, seed=3)
    other = gap_test(validation, holdout, higher_is_better=True, metric_tolerance=1e-3, seed=4)
    assert first == again and first is not None and other is not None and first.interval != other.interval


def test_lower_is_better_metrics_are_worse_when_the_holdout_is_higher() -> None:
    validation = scores("v", [4.0, 5.0, 4.5, 5.5, 4.2, 4.8])  # HD95 in mm
    holdout = scores("h", [20.0, 24.0, 18.0, 22.0])
    worse = gap_test(validation, holdout, higher_is_better=False, metric_tolerance=0.1, seed=0)
    better = gap_test(holdout, validation, higher_is_better=False, metric_tolerance=0.1, seed=0)
    assert worse is not None and worse.verdict == "worse"
    assert better is not None and better.verdict == "better"  # a warning for the reviewer, not a rejection


def test_same_cases_on_both_sides_are_paired() -> None:
    validation = scores("c", [0.6, 0.7, 0.5, 0.65, 0.55])
    shifted = {k: v - 0.2 for k, v in validation.items()}  # every case 0.2 worse: no noise at all
    test = gap_test(validation, shifted, higher_is_better=True, metric_tolerance=1e-3, seed=0)
    assert test is not None and test.paired and test.verdict == "worse"
    assert test.interval == pytest.approx((-0.2, -0.2))


def test_too_few_finite_cases_cannot_be_gated() -> None:
    assert gap_test(scores("v", [0.5, 0.6]), {"h": 0.4, "x": float("nan")}, higher_is_better=True,
                    metric_tolerance=1e-3, seed=0) is None  # fmt: skip


def test_small_samples_get_wider_tails() -> None:
    assert expanded_tail(4) < expanded_tail(40) < expanded_tail(4000) <= 0.005
