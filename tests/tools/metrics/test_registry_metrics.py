"""The metric table covers docs/ARCHITECTURE.md §7, every entry computes, and `summarize` applies each NaN rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from amid.server.errors import InvalidInput
from amid.tools.metrics import METRICS, MetricConvention, summarize

DESIGN_METRICS = {
    "dice",
    "dice_micro",
    "hd95",
    "hd",
    "nsd",
    "masd",
    "cldice",
    "betti0_error",
    "lesion_f1",
    "lesion_count_difference",
    "lesion_volume_difference_ml",
    "instance_f1",
    "centroid_f1",
    "coco_ap",
    "coco_ap50",
    "coco_ap75",
    "coco_ar100",
    "accuracy",
    "balanced_accuracy",
    "auc",
    "f1",
    "plcc",
    "srocc",
    "krocc",
    "ssim",
    "psnr",
    "lncc",
}
REQUIRED_VALUES = {"tolerance_mm": 2.0, "match_radius_px": 3.0, "data_range": 1.0}


def test_every_design_metric_is_registered_with_a_direction_kind_and_scope():
    assert set(METRICS) == DESIGN_METRICS
    for name, spec in METRICS.items():
        assert spec.name == name
        assert spec.direction in ("higher_better", "lower_better")
        assert spec.scope == ("case" if spec.kind in ("segmentation", "instance", "enhancement") else "dataset")
        assert all(getattr(spec.convention, field) is None for field in spec.requires)


def _case_inputs(kind: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    reference = np.zeros((16, 16, 16), bool)
    reference[4:11, 5:12, 3:9] = True
    prediction = np.roll(reference, 1, axis=0)
    if kind == "instance":
        return prediction.astype(np.int32), reference.astype(np.int32)
    if kind == "enhancement":
        image = rng.random((16, 16, 16))
        return np.clip(image + 0.05 * rng.normal(size=image.shape), 0, 1), image
    return prediction, reference


@pytest.mark.parametrize("name", sorted(n for n, s in METRICS.items() if s.scope == "case"))
def test_every_case_metric_computes_a_number_with_its_default_convention(name):
    spec = METRICS[name]
    convention = spec.convention.model_copy(update={field: REQUIRED_VALUES[field] for field in spec.requires})
    prediction, reference = _case_inputs(spec.kind)
    value = spec.compute(prediction, reference, (1.0, 0.8, 2.5), convention)
    assert isinstance(value, float)
    assert math.isfinite(value)


@pytest.mark.parametrize("name", sorted(n for n, s in METRICS.items() if s.requires))
def test_a_metric_without_its_required_setting_names_that_setting(name):
    spec = METRICS[name]
    assert spec.missing_settings(spec.convention) == list(spec.requires)
    prediction, reference = _case_inputs(spec.kind)
    with pytest.raises(InvalidInput, match=spec.requires[0]):
        spec.compute(prediction, reference, (1.0, 1.0, 1.0), spec.convention)


def test_every_dataset_metric_computes_a_number_with_its_default_convention():
    labels, scores = np.array([0, 1, 1, 0, 1]), np.array([0.2, 0.8, 0.6, 0.3, 0.4])
    gt = {
        "images": [{"id": 1, "width": 32, "height": 32}],
        "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [2, 2, 8, 8]}],
        "categories": [{"id": 1, "name": "lesion"}],
    }
    detections = [{"image_id": 1, "category_id": 1, "bbox": [2, 3, 8, 8], "score": 0.9}]
    inputs = {
        "classification": (labels, labels[::-1].copy()),
        "regression": (scores, scores**2),
        "detection": (detections, gt),
    }
    for spec in (s for s in METRICS.values() if s.scope == "dataset"):
        prediction, reference = inputs[spec.kind]
        if spec.name == "auc":
            prediction = scores
        assert math.isfinite(spec.compute(prediction, reference, spec.convention)), spec.name


def test_is_better_follows_the_metric_direction():
    assert METRICS["dice"].is_better(0.9, 0.8)
    assert METRICS["hd95"].is_better(2.0, 3.0)
    assert not METRICS["hd95"].is_better(3.0, 2.0)


def test_summarize_drops_nan_cases_and_counts_them():
    summary = summarize([0.8, math.nan, 0.6, 1.0], MetricConvention(nan_rule="drop"))
    assert summary.mean == pytest.approx(0.8)
    assert summary.median == pytest.approx(0.8)
    assert (summary.n_cases, summary.n_valid, summary.n_nan, summary.n_capped) == (4, 3, 1, 0)
    assert math.isnan(summary.values[1])


def test_summarize_counts_nan_cases_as_the_worst_value():
    summary = summarize([0.8, math.nan, 0.6, 1.0], MetricConvention(nan_rule="worst", worst_value=0.0))
    assert summary.mean == pytest.approx(0.6)
    assert summary.std == pytest.approx(np.std([0.8, 0.0, 0.6, 1.0]))


def test_summarize_caps_distances_and_counts_nan_as_the_cap():
    convention = MetricConvention(nan_rule="cap", cap_mm=90.0)
    summary = summarize([2.0, math.inf, 150.0, math.nan], convention)
    assert summary.mean == pytest.approx((2.0 + 90 + 90 + 90) / 4)
    assert (summary.n_valid, summary.n_nan, summary.n_capped) == (1, 1, 2)


def test_summarize_of_an_uncapped_infinite_distance_reports_inf_not_a_finite_mean():
    summary = summarize([2.0, math.inf], MetricConvention())
    assert summary.mean == math.inf
    assert math.isnan(summary.std)
    assert summary.n_valid == 2


def test_summarize_of_no_usable_case_is_nan():
    summary = summarize([math.nan], MetricConvention())
    assert math.isnan(summary.mean)
    assert summary.n_valid == 0
