"""Detection metrics: 3-D box IoU and COCO AP / AR through pycocotools.

Boxes are (min_0, min_1, min_2, max_0, max_1, max_2) in continuous coordinates along the array's
own axis order (no +1 on the extent). COCO statistics follow pycocotools' `COCOeval` exactly
(IoU 0.50:0.95, area "all", 100 detections), with one translation: where pycocotools reports -1
(no category has ground truth) the value here is NaN, so it cannot be averaged as a score.
"""

from __future__ import annotations

import contextlib
import copy
import io
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from amid.server.errors import invalid

IouType = Literal["bbox", "segm"]


class CocoSummary(BaseModel):
    """The COCO statistics a contract can name; NaN where pycocotools has nothing to evaluate."""

    model_config = ConfigDict(frozen=True)

    ap: float
    ap50: float
    ap75: float
    ar100: float


def box_iou_3d(boxes_a: np.ndarray, boxes_b: np.ndarray) -> np.ndarray:
    """IoU of every box in `boxes_a` (N x 6) with every box in `boxes_b` (M x 6): an N x M matrix."""
    a, b = _boxes("boxes_a", boxes_a), _boxes("boxes_b", boxes_b)
    low = np.maximum(a[:, None, :3], b[None, :, :3])
    high = np.minimum(a[:, None, 3:], b[None, :, 3:])
    inter = np.prod(np.clip(high - low, 0.0, None), axis=-1)
    volume_a, volume_b = np.prod(a[:, 3:] - a[:, :3], axis=1), np.prod(b[:, 3:] - b[:, :3], axis=1)
    union = volume_a[:, None] + volume_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def _boxes(name: str, boxes: np.ndarray) -> np.ndarray:
    array = np.asarray(boxes, dtype=np.float64)
    if array.size == 0:
        array = array.reshape(0, 6)
    if array.ndim != 2 or array.shape[1] != 6 or not np.all(np.isfinite(array)):
        raise invalid(name, f"array of shape {array.shape}", "N x 6 finite boxes (min_0..2, max_0..2)")
    if np.any(array[:, 3:] < array[:, :3]):
        raise invalid(name, "a box whose max corner is below its min corner", "max >= min on every axis")
    return array


def coco_summary(
    detections: list[dict[str, Any]], ground_truth: dict[str, Any], iou_type: IouType = "bbox"
) -> CocoSummary:
    """COCO AP@[.5:.95], AP50, AP75 and AR@100 of `detections` against a COCO-format ground truth.

    No detections at all scores 0 where ground truth exists (pycocotools cannot load an empty
    result list) and NaN where it does not.
    """
    gt = _ground_truth(ground_truth)
    if not detections:
        value = 0.0 if gt["annotations"] else float("nan")
        return CocoSummary(ap=value, ap50=value, ap75=value, ar100=value)
    stats = _evaluate(gt, copy.deepcopy(list(detections)), iou_type)  # loadRes edits its input
    return CocoSummary(**{key: _nan_if_missing(stats[i]) for key, i in _STAT_INDEX.items()})


_STAT_INDEX = {"ap": 0, "ap50": 1, "ap75": 2, "ar100": 8}


def _nan_if_missing(value: float) -> float:
    return float("nan") if value == -1 else float(value)


def _ground_truth(ground_truth: dict[str, Any]) -> dict[str, Any]:
    missing = {"images", "annotations", "categories"} - set(ground_truth)
    if missing:
        raise invalid(
            "ground_truth", f"keys {sorted(ground_truth)}", "a COCO dict with images, annotations, categories"
        )
    gt = copy.deepcopy(ground_truth)
    for annotation in gt["annotations"]:
        annotation.setdefault("iscrowd", 0)
        if "area" not in annotation and "bbox" in annotation:
            annotation["area"] = float(annotation["bbox"][2] * annotation["bbox"][3])
    return gt


def _evaluate(gt: dict[str, Any], detections: list[dict[str, Any]], iou_type: IouType) -> np.ndarray:
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = gt
        coco_gt.createIndex()
        evaluation = COCOeval(coco_gt, coco_gt.loadRes(detections), iou_type)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return np.asarray(evaluation.stats, dtype=np.float64)
