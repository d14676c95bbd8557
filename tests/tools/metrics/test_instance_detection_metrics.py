"""Instance F1, centroid F1, 3-D box IoU and COCO AP / AR against independent references.

COCO: the reference is pycocotools run directly on the same tiny set; our wrapper differs only in
turning pycocotools' -1 (no category with ground truth) into NaN.
"""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from amid.tools.metrics import (
    MetricConvention,
    box_iou_3d,
    centroid_f1,
    centroid_f1_labels,
    coco_summary,
    instance_f1,
    instance_f1_at,
    iou_matrix,
)


def _random_instances(rng: np.random.Generator, count: int, shape=(48, 48)) -> np.ndarray:
    labels = np.zeros(shape, np.int32)
    for label in range(1, count + 1):
        y, x = rng.integers(0, shape[0] - 8), rng.integers(0, shape[1] - 8)
        h, w = rng.integers(3, 9), rng.integers(3, 9)
        labels[y : y + h, x : x + w] = label
    return labels


def _greedy_f1(prediction: np.ndarray, reference: np.ndarray, threshold: float) -> float:
    """Reference for thresholds >= 0.5, where each instance has at most one partner above threshold."""
    pred_ids = [i for i in np.unique(prediction) if i]
    ref_ids = [j for j in np.unique(reference) if j]
    matched = 0
    for i in pred_ids:
        for j in ref_ids:
            inter = np.count_nonzero((prediction == i) & (reference == j))
            union = np.count_nonzero((prediction == i) | (reference == j))
            matched += inter / union >= threshold
    return 2 * matched / (len(pred_ids) + len(ref_ids))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("threshold", [0.5, 0.75])
def test_instance_f1_equals_unique_matching_above_half_iou(seed, threshold):
    rng = np.random.default_rng(seed)
    reference = _random_instances(rng, 6)
    prediction = np.roll(reference, rng.integers(-1, 2, 2), axis=(0, 1))
    prediction[_random_instances(rng, 2) > 0] = 7  # a spurious instance over others
    assert instance_f1_at(prediction, reference, threshold) == pytest.approx(
        _greedy_f1(prediction, reference, threshold)
    )


def test_iou_matrix_equals_mask_by_mask_iou():
    rng = np.random.default_rng(3)
    prediction, reference = _random_instances(rng, 4), _random_instances(rng, 5)
    ours = iou_matrix(prediction, reference)
    pred_ids, ref_ids = [i for i in np.unique(prediction) if i], [j for j in np.unique(reference) if j]
    for row, i in enumerate(pred_ids):
        for col, j in enumerate(ref_ids):
            a, b = prediction == i, reference == j
            assert ours[row, col] == pytest.approx(np.count_nonzero(a & b) / np.count_nonzero(a | b))


def test_hungarian_matching_finds_two_pairs_where_greedy_finds_one():
    reference = np.zeros((1, 20), np.int32)
    reference[0, :10], reference[0, 10:] = 1, 2
    prediction = np.zeros_like(reference)
    prediction[0, 4:14], prediction[0, 0:3] = 1, 2  # IoU(1,1)=.43, IoU(1,2)=.25, IoU(2,1)=.3
    assert instance_f1_at(prediction, reference, 0.2) == 1.0
    assert instance_f1(prediction, reference, MetricConvention(iou_thresholds=(0.2, 0.5))) == pytest.approx(
        (1.0 + 0.0) / 2
    )


@pytest.mark.parametrize(("rule", "expected"), [("best", 1.0), ("nan", math.nan)])
def test_no_instances_on_either_side_follows_empty_both(rule, expected):
    empty = np.zeros((8, 8), np.int32)
    value = instance_f1(empty, empty, MetricConvention(empty_both=rule))
    assert math.isnan(value) if math.isnan(expected) else value == expected


def test_centroid_f1_matches_points_within_the_radius_one_to_one():
    reference = np.array([[0.0, 0.0], [0.0, 4.0], [20.0, 20.0]])
    prediction = np.array([[0.0, 2.0], [0.0, 5.0], [40.0, 40.0]])
    # greedy nearest would give (0,2)->(0,4) and leave (0,0) unmatched; Hungarian pairs both
    assert centroid_f1(prediction, reference, MetricConvention(match_radius_px=2.5)) == pytest.approx(2 * 2 / 6)


def test_centroid_f1_of_label_maps_uses_instance_centres():
    reference = np.zeros((30, 30), np.int32)
    reference[2:6, 2:6], reference[20:24, 20:24] = 1, 2
    prediction = np.roll(reference, 1, axis=0)
    assert centroid_f1_labels(prediction, reference, MetricConvention(match_radius_px=1.5)) == 1.0
    assert centroid_f1_labels(prediction, reference, MetricConvention(match_radius_px=0.5)) == 0.0


def test_centroid_f1_without_a_radius_names_the_missing_setting():
    with pytest.raises(Exception, match="match_radius_px"):
        centroid_f1(np.zeros((1, 2)), np.zeros((1, 2)), MetricConvention())


def _raster(box: np.ndarray) -> np.ndarray:
    grid = np.zeros((12, 12, 12), bool)
    lo, hi = box[:3].astype(int), box[3:].astype(int)
    grid[lo[0] : hi[0], lo[1] : hi[1], lo[2] : hi[2]] = True
    return grid


def test_box_iou_3d_equals_voxel_counting_on_integer_boxes():
    rng = np.random.default_rng(0)
    low = rng.integers(0, 6, (5, 3))
    boxes = np.concatenate([low, low + rng.integers(1, 6, (5, 3))], axis=1).astype(float)
    ours = box_iou_3d(boxes[:3], boxes[2:])
    for i, a in enumerate(boxes[:3]):
        for j, b in enumerate(boxes[2:]):
            ra, rb = _raster(a), _raster(b)
            assert ours[i, j] == pytest.approx(np.count_nonzero(ra & rb) / np.count_nonzero(ra | rb))


def test_box_with_max_below_min_is_refused():
    with pytest.raises(Exception, match="boxes_a"):
        box_iou_3d(np.array([[5, 0, 0, 1, 1, 1]]), np.array([[0, 0, 0, 1, 1, 1]]))


def _coco_set() -> tuple[dict, list[dict]]:
    images = [{"id": i, "width": 64, "height": 64} for i in (1, 2, 3)]
    boxes = {1: [[4, 4, 10, 10], [30, 30, 12, 8]], 2: [[10, 40, 20, 10]], 3: [[5, 5, 5, 5]]}
    annotations = [
        {
            "id": n,
            "image_id": image,
            "category_id": 1 + (n % 2),
            "bbox": box,
            "area": box[2] * box[3],
            "iscrowd": 0,
        }
        for n, (image, box) in enumerate(((img, b) for img, bs in boxes.items() for b in bs), start=1)
    ]
    detections = [
        {"image_id": 1, "category_id": 2, "bbox": [5, 4, 10, 10], "score": 0.9},
        {"image_id": 1, "category_id": 1, "bbox": [31, 30, 12, 9], "score": 0.8},
        {"image_id": 2, "category_id": 2, "bbox": [12, 41, 18, 10], "score": 0.7},
        {"image_id": 3, "category_id": 1, "bbox": [40, 40, 5, 5], "score": 0.6},
        {"image_id": 2, "category_id": 1, "bbox": [0, 0, 8, 8], "score": 0.3},
    ]
    categories = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    return {"images": images, "annotations": annotations, "categories": categories}, detections


def _pycocotools_stats(ground_truth: dict, detections: list[dict]) -> np.ndarray:
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = ground_truth
        coco.createIndex()
        evaluation = COCOeval(coco, coco.loadRes(detections), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return evaluation.stats


def test_coco_summary_equals_pycocotools_stats():
    ground_truth, detections = _coco_set()
    ours = coco_summary(detections, ground_truth)
    stats = _pycocotools_stats(*_coco_set())
    assert (ours.ap, ours.ap50, ours.ap75, ours.ar100) == pytest.approx((stats[0], stats[1], stats[2], stats[8]))
    assert 0 < ours.ap < 1


def test_perfect_detections_score_one_and_inputs_are_left_untouched():
    ground_truth, _ = _coco_set()
    detections = [
        {"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 1.0}
        for a in ground_truth["annotations"]
    ]
    summary = coco_summary(detections, ground_truth)
    assert (summary.ap, summary.ap50, summary.ar100) == (1.0, 1.0, 1.0)
    assert "id" not in detections[0]


def test_no_ground_truth_gives_nan_where_pycocotools_gives_minus_one():
    ground_truth, detections = _coco_set()
    ground_truth["annotations"] = []
    assert _pycocotools_stats(ground_truth, [dict(d) for d in detections])[0] == -1
    assert math.isnan(coco_summary(detections, ground_truth).ap)


def test_no_detections_score_zero_against_existing_ground_truth():
    ground_truth, _ = _coco_set()
    assert coco_summary([], ground_truth).ap == 0.0
