"""Bad inputs raise InvalidInput naming the parameter, the value and what is expected; conventions
validate their own consistency and cannot be changed after creation."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from amid.server.errors import InvalidInput
from amid.tools.metrics import (
    MetricConvention,
    accuracy,
    dice,
    hausdorff_distance,
    image_diagonal_mm,
    instance_f1,
    plcc,
    psnr,
)

MASK = np.zeros((4, 4, 4), bool)


def test_a_shape_mismatch_names_prediction_and_both_shapes():
    with pytest.raises(InvalidInput, match=r"prediction: got 'shape \(4, 4, 5\)'.*\(4, 4, 4\)") as caught:
        dice(np.zeros((4, 4, 5), bool), MASK)
    assert caught.value.field == "prediction"


def test_a_non_binary_mask_names_its_values():
    labels = np.zeros((4, 4, 4), np.uint8)
    labels[0, 0, 0] = 2
    with pytest.raises(InvalidInput, match=r"reference: got .*\[0 2\].*binary mask"):
        dice(MASK, labels)


def test_a_spacing_of_the_wrong_length_or_sign_is_refused():
    for spacing in ((1.0, 1.0), (1.0, -1.0, 1.0), (1.0, float("nan"), 1.0)):
        with pytest.raises(InvalidInput, match=r"spacing: .*3 positive voxel sizes in mm") as caught:
            hausdorff_distance(MASK, MASK, spacing)
        assert caught.value.field == "spacing"


def test_zero_one_integer_and_float_masks_are_accepted():
    mask = np.zeros((4, 4, 4), np.int64)
    mask[1:3, 1:3, 1:3] = 1
    assert dice(mask, mask.astype(float)) == 1.0


def test_negative_or_float_label_maps_are_refused():
    with pytest.raises(InvalidInput, match="non-negative integer label map"):
        instance_f1(np.full((3, 3), -1), np.zeros((3, 3), int))
    with pytest.raises(InvalidInput, match="non-negative integer label map"):
        instance_f1(np.zeros((3, 3), float), np.zeros((3, 3), int))


def test_per_case_vectors_must_line_up():
    with pytest.raises(InvalidInput, match="prediction: got 'shape \\(3,\\)'"):
        accuracy(np.zeros(3), np.zeros(4))
    with pytest.raises(InvalidInput, match="reference"):
        plcc(np.zeros(1), np.zeros(1))
    with pytest.raises(InvalidInput, match="finite"):
        plcc(np.array([1.0, np.nan]), np.array([1.0, 2.0]))


def test_images_with_nan_are_refused():
    image = np.ones((12, 12))
    image[0, 0] = np.nan
    with pytest.raises(InvalidInput, match="prediction"):
        psnr(image, np.ones((12, 12)), MetricConvention(data_range=1.0))


def test_conventions_are_frozen_and_reject_unknown_fields():
    convention = MetricConvention()
    with pytest.raises(ValidationError):
        convention.cap_mm = 5.0  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        MetricConvention(cap=5.0)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"nan_rule": "worst"}, "worst_value"),
        ({"nan_rule": "cap"}, "cap_mm"),
        ({"window": 10}, "odd"),
        ({"iou_thresholds": (0.5, 1.5)}, "iou_thresholds"),
        ({"percentile": 0}, "greater than 0"),
        ({"empty_both": "zero"}, "best"),
    ],
)
def test_inconsistent_conventions_are_refused_with_the_reason(settings, message):
    with pytest.raises(ValidationError, match=message):
        MetricConvention(**settings)


def test_the_image_diagonal_is_a_physical_length():
    assert image_diagonal_mm((3, 4), (1.0, 1.0)) == pytest.approx(5.0)
    assert image_diagonal_mm((100, 100, 10), (1.0, 1.0, 5.0)) == pytest.approx(150.0)
