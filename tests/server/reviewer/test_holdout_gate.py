"""The holdout gate's statistics: per-case scores, whole groups relabelled, a one-sided verdict at a
stated false-rejection rate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from amid.server.reviewer.holdout import case_scores
from amid.server.reviewer.holdout_gate import ALPHA, RELATIVE_FLOOR, RESAMPLES, GapTest, gap_test
from amid.tools.metrics.scoring import plan_metrics
from amid.tools.task.importers import import_task


def scores(prefix: str, values: list[float] | np.ndarray) -> dict[str, float]:
    return {f"{prefix}{i}": float(v) for i, v in enumerate(values)}


def gate(validation: dict[str, float], holdout: dict[str, float], **options: Any) -> GapTest:
    defaults: dict[str, Any] = {"higher_is_better": True, "metric_tolerance": 1e-3, "seed": 0}
    test = gap_test(validation, holdout, **{**defaults, **options})
    assert test is not None
    return test


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
    test = gate(validation, holdout)
    assert test.verdict == "worse" and not test.paired and test.exact and test.arrangements == 495
    assert test.p_worse == pytest.approx(1 / 495)  # no relabelling puts the holdout lower than this one
    assert test.difference == pytest.approx(-0.295) and test.difference < -test.tolerance
    assert test.floor == pytest.approx(RELATIVE_FLOOR * 0.77)


def test_an_honest_gap_of_the_same_spread_is_within() -> None:
    validation = scores("v", [0.61, 0.48, 0.66, 0.52, 0.58, 0.55, 0.63, 0.47])
    holdout = scores("h", [0.50, 0.62, 0.45, 0.57])
    test = gate(validation, holdout)
    assert test.verdict == "within" and abs(test.difference) < test.tolerance and test.p_worse > 0.1


def test_two_patients_per_side_cannot_reject_even_the_issue_gap() -> None:
    """Issue 21: an honest model on fold 1 got −0.128 against a tolerance of 0.104 and was rejected."""
    validation = {"p1s0": 0.62, "p1s1": 0.60, "p2s0": 0.58, "p2s1": 0.57}
    holdout = {"p3s0": 0.47, "p3s1": 0.49, "p4s0": 0.46, "p4s1": 0.44}
    groups = {case: case[:2] for case in [*validation, *holdout]}
    test = gate(validation, holdout, groups=groups)
    assert test.difference == pytest.approx(-0.1275)
    assert test.verdict == "within" and not test.powered and test.arrangements == 6  # C(4, 2) patients
    assert test.evidence()["tolerance"] is None and test.evidence()["powered"] is False


def test_scans_of_one_patient_are_relabelled_together() -> None:
    """Patients differ far more than their scans: counting scans as independent rejects an easy fold."""
    rng = np.random.default_rng(5)
    level = {f"p{i}": 0.75 - 0.04 * i for i in range(8)}  # validation drew the 4 easiest patients
    cases = {f"p{i}s{s}": level[f"p{i}"] + rng.normal(0, 0.005) for i in range(8) for s in range(3)}
    validation = {c: v for c, v in cases.items() if int(c[1:].split("s")[0]) < 4}
    holdout = {c: v for c, v in cases.items() if c not in validation}
    by_patient = gate(validation, holdout, groups={c: c.split("s")[0] for c in cases})
    by_scan = gate(validation, holdout)
    assert (by_patient.n_validation_groups, by_patient.n_holdout_groups) == (4, 4)
    assert by_patient.verdict == "within" and by_patient.arrangements == 70 and not by_patient.powered
    assert by_scan.verdict == "worse" and by_scan.n_validation_groups == 12  # twelve "independent" scans


def test_honest_seeds_are_rejected_at_most_at_the_stated_rate() -> None:
    rng = np.random.default_rng(11)
    rejected = 0
    for seed in range(400):
        values = rng.beta(6, 4, 10)  # one model, ten unseen patients: which six are validation is chance
        test = gate(scores("v", values[:6]), scores("h", values[6:]), seed=seed, metric_tolerance=0.0)
        rejected += test.verdict == "worse"
    assert rejected / 400 <= ALPHA + 0.015  # exact in size; the floor only makes it rarer


def test_validation_inflated_by_six_copied_labels_of_twelve_is_caught_on_24_holdout_cases() -> None:
    """The power this buys is bounded by the fold: three copies of twelve (+0.09) stay within."""
    rng = np.random.default_rng(3)
    honest = rng.normal(0.55, 0.08, 12)
    copied = np.concatenate([np.ones(6), honest[6:]])  # six validation cases are their own labels
    holdout = scores("h", rng.normal(0.55, 0.08, 24))
    assert gate(scores("v", honest), holdout).verdict == "within"
    caught = gate(scores("v", copied), holdout)
    assert caught.verdict == "worse" and not caught.exact and caught.arrangements == RESAMPLES


def test_a_holdout_better_than_validation_is_never_worse() -> None:
    validation = scores("v", [0.40, 0.42, 0.38, 0.41, 0.39, 0.40])
    holdout = scores("h", [0.80, 0.82, 0.79, 0.81])
    test = gate(validation, holdout)
    assert test.verdict == "better" and test.p_worse == 1.0  # a warning for the reviewer, not a rejection


def test_the_draws_are_seeded() -> None:
    rng = np.random.default_rng(2)
    validation, holdout = scores("v", rng.normal(0.6, 0.1, 10)), scores("h", rng.normal(0.58, 0.1, 10))
    first, again, other = (
        gate(validation, holdout, seed=3),
        gate(validation, holdout, seed=3),
        gate(validation, holdout, seed=4),
    )
    assert first == again and not first.exact and first.p_worse != other.p_worse


def test_lower_is_better_metrics_are_worse_when_the_holdout_is_higher() -> None:
    validation = scores("v", [4.0, 5.0, 4.5, 5.5, 4.2, 4.8])  # HD95 in mm
    holdout = scores("h", [20.0, 24.0, 18.0, 22.0])
    worse = gate(validation, holdout, higher_is_better=False, metric_tolerance=0.1)
    better = gate(holdout, validation, higher_is_better=False, metric_tolerance=0.1)
    assert worse.verdict == "worse" and better.verdict == "better"


def test_same_cases_on_both_sides_flip_signs_of_the_paired_differences() -> None:
    validation = scores("c", [0.6, 0.7, 0.5, 0.65, 0.55, 0.62, 0.58, 0.66])
    shifted = {k: v - 0.2 for k, v in validation.items()}  # every case 0.2 worse
    test = gate(validation, shifted)
    assert test.paired and test.exact and test.arrangements == 2**8
    assert test.verdict == "worse" and test.p_worse == pytest.approx(1 / 256)


def test_too_few_finite_cases_cannot_be_gated() -> None:
    assert (
        gap_test(
            scores("v", [0.5, 0.6]), {"h": 0.4, "x": float("nan")}, higher_is_better=True, metric_tolerance=1e-3, seed=0
        )
        is None
    )
