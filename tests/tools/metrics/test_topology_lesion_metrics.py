"""Betti-0 error and lesion-wise metrics on hand-built cases with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from amid.tools.metrics import (
    MetricConvention,
    betti0_error,
    lesion_count_difference,
    lesion_f1,
    lesion_volume_difference_ml,
)


def _cubes(*corners: tuple[int, int, int], size: int = 2, shape: int = 20) -> np.ndarray:
    mask = np.zeros((shape, shape, shape), bool)
    for z, y, x in corners:
        mask[z : z + size, y : y + size, x : x + size] = True
    return mask


def test_betti0_error_counts_the_component_difference():
    reference = _cubes((1, 1, 1), (10, 10, 10), (1, 12, 1))
    prediction = _cubes((1, 1, 1))
    assert betti0_error(prediction, reference) == 2.0
    assert betti0_error(reference, reference) == 0.0


def test_connectivity_decides_whether_diagonal_voxels_join():
    diagonal = np.zeros((4, 4, 4), bool)
    diagonal[0, 0, 0], diagonal[1, 1, 1] = True, True
    single = np.zeros_like(diagonal)
    single[0, 0, 0] = True
    assert betti0_error(diagonal, single, MetricConvention(connectivity=3)) == 0.0
    assert betti0_error(diagonal, single, MetricConvention(connectivity=1)) == 1.0


def test_connectivity_above_the_mask_dimension_is_refused():
    with pytest.raises(Exception, match=r"convention\.connectivity"):
        betti0_error(np.zeros((4, 4), bool), np.zeros((4, 4), bool), MetricConvention(connectivity=3))


def test_lesion_f1_counts_detected_missed_and_spurious_lesions():
    reference = _cubes((1, 1, 1), (10, 10, 10), (1, 12, 1))
    prediction = _cubes((2, 2, 2), (10, 11, 11), (15, 1, 15))  # two hits, one miss, one false positive
    assert lesion_f1(prediction, reference) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))


def test_one_prediction_covering_two_lesions_detects_both():
    reference = _cubes((1, 1, 1), (1, 1, 5))
    prediction = np.zeros_like(reference)
    prediction[1:3, 1:3, 1:7] = True
    assert lesion_f1(prediction, reference) == 1.0


@pytest.mark.parametrize(("rule", "expected"), [("best", 1.0), ("worst", 0.0), ("nan", math.nan)])
def test_lesion_f1_without_lesions_follows_empty_both(rule, expected):
    empty = np.zeros((6, 6, 6), bool)
    value = lesion_f1(empty, empty, MetricConvention(empty_both=rule))
    assert math.isnan(value) if math.isnan(expected) else value == expected


def test_lesion_count_and_volume_differences_are_absolute():
    reference = _cubes((1, 1, 1), (10, 10, 10))
    prediction = _cubes((1, 1, 1), (10, 10, 10), (15, 1, 15), size=3)
    assert lesion_count_difference(prediction, reference) == 1.0
    voxels = 3 * 27 - 2 * 8
    assert lesion_volume_difference_ml(prediction, reference, (0.5, 1.0, 2.0)) == pytest.approx(voxels / 1000)
    assert lesion_volume_difference_ml(reference, prediction, (0.5, 1.0, 2.0)) == pytest.approx(voxels / 1000)
