"""Dice variants and clDice against MONAI, medpy and hand-computed values.

Conventions: MetricsReloaded gives 1 for two empty masks (`empty_both="best"`); medpy 0.5's `dc`
means to (an `except ZeroDivisionError` branch) but under numpy 2 returns NaN with a warning.
MONAI's `compute_dice(ignore_empty=False)` gives 1 too, while its default `ignore_empty=True`
returns NaN whenever the reference is empty, even when the prediction has foreground (a rule that
hides false positives and that no `MetricConvention` reproduces on purpose).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from medpy.metric import binary as medpy_binary
from monai.metrics import compute_dice
from skimage.morphology import skeletonize

from amid.tools.metrics import MetricConvention, cldice, dice, dice_micro, dice_per_class

SEEDS = range(4)


def _monai_dice(prediction: np.ndarray, reference: np.ndarray, **kwargs) -> np.ndarray:
    return compute_dice(
        torch.from_numpy(prediction)[None].float(), torch.from_numpy(reference)[None].float(), **kwargs
    )[0].numpy()


@pytest.mark.parametrize("seed", SEEDS)
def test_binary_dice_equals_monai_and_medpy(seed, blob_pair):
    prediction, reference = blob_pair(seed)
    ours = dice(prediction, reference)
    assert ours == pytest.approx(medpy_binary.dc(prediction, reference), rel=1e-12)
    theirs = _monai_dice(prediction[None], reference[None], include_background=True)
    assert ours == pytest.approx(float(theirs[0]), rel=1e-6)


@pytest.mark.parametrize(("rule", "expected"), [("best", 1.0), ("worst", 0.0), ("nan", math.nan)])
def test_two_empty_masks_score_what_empty_both_says(rule, expected):
    empty = np.zeros((6, 6, 6), bool)
    value = dice(empty, empty, MetricConvention(empty_both=rule))
    assert math.isnan(value) if math.isnan(expected) else value == expected


def test_medpy_means_one_for_two_empty_masks_but_returns_nan_under_numpy_2():
    empty = np.zeros((6, 6, 6), bool)
    with pytest.warns(RuntimeWarning, match="invalid value"):  # numpy 0/0 never raises ZeroDivisionError
        medpy_value = medpy_binary.dc(empty, empty)
    assert math.isnan(medpy_value)
    assert math.isnan(dice(empty, empty, MetricConvention(empty_both="nan")))


def test_empty_both_best_matches_monai_without_ignore_empty():
    empty = np.zeros((6, 6, 6), bool)
    assert dice(empty, empty, MetricConvention(empty_both="best")) == 1.0
    monai_value = _monai_dice(empty[None], empty[None], include_background=True, ignore_empty=False)
    assert float(monai_value[0]) == 1.0


def test_monai_default_nans_a_false_positive_on_an_empty_reference_where_we_score_zero():
    prediction, reference = np.zeros((6, 6, 6), bool), np.zeros((6, 6, 6), bool)
    prediction[1:3, 1:3, 1:3] = True
    assert math.isnan(float(_monai_dice(prediction[None], reference[None], include_background=True)[0]))
    assert dice(prediction, reference) == 0.0
    assert math.isnan(dice(prediction, reference, MetricConvention(empty_one="nan")))


def test_single_voxel_masks_give_one_when_equal_and_zero_when_apart():
    a, b = np.zeros((5, 5, 5), bool), np.zeros((5, 5, 5), bool)
    a[2, 2, 2] = True
    b[0, 0, 0] = True
    assert dice(a, a) == 1.0
    assert dice(a, b) == 0.0


@pytest.mark.parametrize("seed", SEEDS)
def test_per_class_dice_equals_monai_one_hot_dice(seed):
    rng = np.random.default_rng(seed)
    prediction, reference = rng.integers(0, 4, (16, 16, 16)), rng.integers(0, 4, (16, 16, 16))
    ours = dice_per_class(prediction, reference)
    one_hot = np.stack([prediction == c for c in range(4)]), np.stack([reference == c for c in range(4)])
    theirs = _monai_dice(*one_hot, include_background=False)
    assert list(ours) == [1, 2, 3]
    assert np.allclose(list(ours.values()), theirs, rtol=1e-6)


def test_micro_dice_pools_intersections_over_classes():
    prediction = np.array([[1, 1, 2, 2, 0, 3]])
    reference = np.array([[1, 2, 2, 2, 3, 0]])
    # agreement: one voxel of 1, two of 2 -> 2 * 3 / (5 + 5)
    assert dice_micro(prediction, reference) == pytest.approx(0.6)
    assert dice_micro(prediction, reference, MetricConvention(labels=(1,))) == pytest.approx(2 * 1 / (2 + 1))


def test_micro_dice_refuses_background_among_labels():
    labels = np.array([[0, 1]])
    with pytest.raises(Exception, match=r"convention\.labels"):
        dice_micro(labels, labels, MetricConvention(labels=(0, 1)))


def _tube(gap: bool = False) -> np.ndarray:
    mask = np.zeros((21, 41), bool)
    mask[9:12, 2:39] = True
    if gap:
        mask[:, 18:24] = False
    return mask


def test_cldice_is_one_for_identical_tubes_and_drops_for_a_broken_one():
    assert cldice(_tube(), _tube()) == 1.0
    broken, reference = _tube(gap=True), _tube()
    sensitivity = np.count_nonzero(skeletonize(reference) & broken) / np.count_nonzero(skeletonize(reference))
    precision = np.count_nonzero(skeletonize(broken) & reference) / np.count_nonzero(skeletonize(broken))
    expected = 2 * precision * sensitivity / (precision + sensitivity)
    assert precision == 1.0
    assert cldice(broken, reference) == pytest.approx(expected)
    assert cldice(broken, reference) < 1.0


def test_cldice_follows_the_empty_rules():
    empty = np.zeros((5, 5), bool)
    assert cldice(empty, empty, MetricConvention(empty_both="best")) == 1.0
    assert cldice(_tube(), np.zeros_like(_tube())) == 0.0
