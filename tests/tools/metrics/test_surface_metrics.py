"""Surface metrics against MONAI, medpy and a dense distance transform, under each convention.

Where the libraries legitimately differ:
- HD95: MONAI, DeepMind and MetricsReloaded take the max of the two directed 95th percentiles
  (`pooling="per_direction"`); medpy 0.5 takes the 95th percentile of both directions pooled
  (`pooling="pooled"`). Max HD is the same under both.
- MASD: MetricsReloaded averages the two directed means (`per_direction`, = mean of medpy's `asd`
  both ways); medpy 0.5 `assd` and MONAI's symmetric average surface distance pool the distances.
- NSD: MONAI with `use_subvoxels=False` counts boundary voxels, as here.
- Empty masks: MONAI 1.6 returns NaN for two empty masks and for one empty mask; medpy raises.
MONAI computes in float32, hence the relative tolerance.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from medpy.metric import binary as medpy_binary
from monai.metrics import (
    compute_average_surface_distance,
    compute_hausdorff_distance,
    compute_surface_dice,
)
from scipy import ndimage

from amid.tools.metrics import MetricConvention, hausdorff_distance, masd, nsd, surface_distances

SPACING = (0.7, 1.1, 2.5)
SEEDS = range(4)
PER_DIRECTION = MetricConvention(percentile=95)
POOLED = MetricConvention(percentile=95, pooling="pooled")
MAX_HD = MetricConvention(percentile=100)
MONAI_RTOL = 1e-5


def _tensor(mask: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(mask)[None, None].float()


def _monai(fn, prediction: np.ndarray, reference: np.ndarray, *args, **kwargs) -> float:
    with warnings.catch_warnings():  # MONAI warns about its own deprecated argument and empty masks
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", UserWarning)
        value = fn(_tensor(prediction), _tensor(reference), *args, include_background=True, **kwargs)
    return float(value.item())


@pytest.mark.parametrize("seed", SEEDS)
def test_hd95_per_direction_equals_monai_max_of_directed_percentiles(seed, blob_pair):
    prediction, reference = blob_pair(seed)
    ours = hausdorff_distance(prediction, reference, SPACING, PER_DIRECTION)
    theirs = _monai(compute_hausdorff_distance, prediction, reference, percentile=95, spacing=SPACING)
    assert ours == pytest.approx(theirs, rel=MONAI_RTOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_hd95_pooled_equals_medpy_hd95(seed, blob_pair):
    prediction, reference = blob_pair(seed)
    ours = hausdorff_distance(prediction, reference, SPACING, POOLED)
    assert ours == pytest.approx(medpy_binary.hd95(prediction, reference, SPACING), rel=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_max_hd_equals_medpy_and_monai(seed, blob_pair):
    prediction, reference = blob_pair(seed)
    ours = hausdorff_distance(prediction, reference, SPACING, MAX_HD)
    assert ours == pytest.approx(medpy_binary.hd(prediction, reference, SPACING), rel=1e-12)
    assert ours == pytest.approx(
        _monai(compute_hausdorff_distance, prediction, reference, spacing=SPACING), rel=MONAI_RTOL
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_directed_hd_measures_prediction_to_reference_as_monai_directed(seed, blob_pair):
    prediction, reference = blob_pair(seed)
    directed = MetricConvention(percentile=95, symmetric=False)
    ours = hausdorff_distance(prediction, reference, SPACING, directed)
    theirs = _monai(compute_hausdorff_distance, prediction, reference, percentile=95, directed=True, spacing=SPACING)
    assert ours == pytest.approx(theirs, rel=MONAI_RTOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_masd_pooled_equals_medpy_assd_and_monai_symmetric_asd(seed, blob_pair):
    prediction, reference = blob_pair(seed)
    ours = masd(prediction, reference, SPACING, MetricConvention(pooling="pooled"))
    assert ours == pytest.approx(medpy_binary.assd(prediction, reference, SPACING), rel=1e-12)
    theirs = _monai(compute_average_surface_distance, prediction, reference, symmetric=True, spacing=SPACING)
    assert ours == pytest.approx(theirs, rel=MONAI_RTOL)


@pytest.mark.parametrize("seed", SEEDS)
def test_masd_per_direction_is_the_mean_of_medpy_directed_asd(seed, blob_pair):
    prediction, reference = blob_pair(seed)
    ours = masd(prediction, reference, SPACING, MetricConvention(pooling="per_direction"))
    directed = (
        medpy_binary.asd(prediction, reference, SPACING),
        medpy_binary.asd(reference, prediction, SPACING),
    )
    assert ours == pytest.approx(sum(directed) / 2, rel=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("tolerance", [0.5, 1.5, 3.0])
def test_nsd_equals_monai_surface_dice_counting_voxels(seed, tolerance, blob_pair):
    prediction, reference = blob_pair(seed)
    ours = nsd(prediction, reference, SPACING, MetricConvention(tolerance_mm=tolerance))
    theirs = _monai(compute_surface_dice, prediction, reference, [tolerance], spacing=SPACING, use_subvoxels=False)
    assert ours == pytest.approx(theirs, rel=MONAI_RTOL)


def _dense_distances(prediction: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Reference: a full-volume Euclidean distance transform to the reference surface."""
    structure = ndimage.generate_binary_structure(prediction.ndim, 1)
    pred_surface = prediction & ~ndimage.binary_erosion(prediction, structure)
    ref_surface = reference & ~ndimage.binary_erosion(reference, structure)
    return ndimage.distance_transform_edt(~ref_surface, sampling=SPACING)[pred_surface]


def test_cropped_surface_distances_equal_a_full_volume_distance_transform_at_the_image_border():
    rng = np.random.default_rng(7)
    prediction, reference = rng.random((20, 24, 16)) > 0.7, rng.random((20, 24, 16)) > 0.8
    prediction[0, :, :] = True  # touches the image border, where the border counts as outside
    ours = surface_distances(prediction, reference, SPACING)
    assert np.allclose(np.sort(ours.pred_to_ref), np.sort(_dense_distances(prediction, reference)), atol=1e-9)
    assert np.allclose(np.sort(ours.ref_to_pred), np.sort(_dense_distances(reference, prediction)), atol=1e-9)


def test_single_voxels_are_as_far_apart_as_their_physical_offset():
    prediction, reference = np.zeros((10, 10, 10), bool), np.zeros((10, 10, 10), bool)
    prediction[2, 3, 4], reference[5, 3, 8] = True, True
    expected = math.hypot(3 * SPACING[0], 4 * SPACING[2])
    for convention in (PER_DIRECTION, POOLED, MAX_HD):
        assert hausdorff_distance(prediction, reference, SPACING, convention) == pytest.approx(expected)
    assert masd(prediction, reference, SPACING) == pytest.approx(expected)


def test_anisotropic_spacing_scales_a_shift_along_the_coarse_axis():
    reference = np.zeros((12, 12, 12), bool)
    reference[3:8, 3:8, 3:8] = True
    prediction = np.roll(reference, 2, axis=2)
    assert hausdorff_distance(prediction, reference, (1.0, 1.0, 3.0), MAX_HD) == pytest.approx(6.0)
    assert hausdorff_distance(prediction, reference, (3.0, 1.0, 1.0), MAX_HD) == pytest.approx(2.0)
    assert nsd(prediction, reference, (1.0, 1.0, 3.0), MetricConvention(tolerance_mm=5.9)) < 1.0


@pytest.mark.parametrize(
    ("rule", "hd", "nsd_value"), [("best", 0.0, 1.0), ("worst", math.inf, 0.0), ("nan", math.nan, math.nan)]
)
def test_two_empty_masks_score_what_empty_both_says(rule, hd, nsd_value):
    empty = np.zeros((8, 8, 8), bool)
    convention = MetricConvention(empty_both=rule, tolerance_mm=1.0)
    assert _same(hausdorff_distance(empty, empty, SPACING, convention), hd)
    assert _same(masd(empty, empty, SPACING, convention), hd)
    assert _same(nsd(empty, empty, SPACING, convention), nsd_value)


def test_monai_gives_nan_for_two_empty_masks_like_empty_both_nan():
    empty = np.zeros((8, 8, 8), bool)
    assert math.isnan(_monai(compute_hausdorff_distance, empty, empty, percentile=95, spacing=SPACING))
    assert math.isnan(hausdorff_distance(empty, empty, SPACING, MetricConvention(empty_both="nan")))


@pytest.mark.parametrize("empty_side", ["prediction", "reference"])
def test_one_empty_mask_scores_nan_inf_or_the_cap(empty_side):
    full = np.zeros((8, 8, 8), bool)
    full[2:5, 2:5, 2:5] = True
    empty = np.zeros_like(full)
    prediction, reference = (empty, full) if empty_side == "prediction" else (full, empty)
    assert math.isnan(hausdorff_distance(prediction, reference, SPACING, MetricConvention(empty_one="nan")))
    assert hausdorff_distance(prediction, reference, SPACING, MetricConvention(empty_one="worst")) == math.inf
    capped = MetricConvention(empty_one="worst", cap_mm=90.0)
    assert hausdorff_distance(prediction, reference, SPACING, capped) == 90.0
    assert nsd(prediction, reference, SPACING, MetricConvention(tolerance_mm=1.0)) == 0.0


@pytest.mark.parametrize("empty_side", ["prediction", "reference"])
def test_monai_gives_nan_when_one_mask_is_empty_which_empty_one_nan_reproduces(empty_side):
    full = np.zeros((8, 8, 8), bool)
    full[2:5, 2:5, 2:5] = True
    prediction, reference = (np.zeros_like(full), full) if empty_side == "prediction" else (full, np.zeros_like(full))
    assert math.isnan(_monai(compute_hausdorff_distance, prediction, reference, percentile=95, spacing=SPACING))
    assert math.isnan(hausdorff_distance(prediction, reference, SPACING, MetricConvention(empty_one="nan")))


def test_distances_beyond_the_cap_are_clipped_to_it():
    prediction, reference = np.zeros((40, 8, 8), bool), np.zeros((40, 8, 8), bool)
    prediction[1, 4, 4], reference[38, 4, 4] = True, True
    assert hausdorff_distance(prediction, reference, (1.0, 1.0, 1.0), MetricConvention(cap_mm=10.0)) == 10.0
    assert masd(prediction, reference, (1.0, 1.0, 1.0), MetricConvention(cap_mm=10.0)) == 10.0


def test_nsd_without_a_tolerance_names_the_missing_setting():
    mask = np.ones((4, 4, 4), bool)
    with pytest.raises(Exception, match="tolerance_mm"):
        nsd(mask, mask, SPACING, MetricConvention())


def _same(actual: float, expected: float) -> bool:
    return math.isnan(actual) if math.isnan(expected) else actual == expected
