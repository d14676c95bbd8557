"""The metric table; `summarize` (from `summary`) is the one aggregation rule.

Every metric has a name, a direction, a kind, a scope and a default convention. Case metrics are
called `compute(prediction, reference, spacing, convention)` on one case's arrays (spacing in mm
per array axis; metrics that do not need it ignore it) and aggregated with `summarize`; data-set
metrics are called `compute(prediction, reference, convention)` once on all cases' values.
`requires` names convention fields that have no safe default and that a task contract must set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from amid.tools.metrics import (
    classification,
    detection,
    enhancement,
    instances,
    lesions,
    overlap,
    regression,
    surface,
    topology,
)
from amid.tools.metrics.conventions import MetricConvention
from amid.tools.metrics.summary import MetricSummary, summarize

Direction = Literal["higher_better", "lower_better"]
Kind = Literal["segmentation", "instance", "detection", "classification", "regression", "enhancement"]
Scope = Literal["case", "dataset"]
CaseFn = Callable[[Any, Any, Sequence[float], MetricConvention], float]
DatasetFn = Callable[[Any, Any, MetricConvention], float]


@dataclass(frozen=True)
class MetricSpec:
    """One metric: how to compute it, which way is better, and its default convention."""

    name: str
    direction: Direction
    kind: Kind
    scope: Scope
    compute: Callable[..., float]
    convention: MetricConvention
    unit: str = ""
    requires: tuple[str, ...] = ()

    def missing_settings(self, convention: MetricConvention) -> list[str]:
        """Convention fields this metric needs that `convention` leaves unset."""
        return [name for name in self.requires if getattr(convention, name) is None]

    def is_better(self, candidate: float, baseline: float) -> bool:
        """Whether `candidate` strictly improves on `baseline` in this metric's direction."""
        return candidate > baseline if self.direction == "higher_better" else candidate < baseline


def _ignoring_spacing(fn: Callable[[Any, Any, MetricConvention], float]) -> CaseFn:
    def compute(prediction: Any, reference: Any, spacing: Sequence[float], convention: MetricConvention) -> float:
        return fn(prediction, reference, convention)

    return compute


def _ignoring_convention(fn: Callable[[Any, Any], float]) -> DatasetFn:
    def compute(prediction: Any, reference: Any, convention: MetricConvention) -> float:
        return fn(prediction, reference)

    return compute


def _volume_difference(prediction: Any, reference: Any, spacing: Sequence[float], _: MetricConvention) -> float:
    return lesions.lesion_volume_difference_ml(prediction, reference, spacing)


def _coco(statistic: str) -> DatasetFn:
    def compute(prediction: Any, reference: Any, convention: MetricConvention) -> float:
        return float(getattr(detection.coco_summary(prediction, reference), statistic))

    return compute


_HIGHER: Direction = "higher_better"
_LOWER: Direction = "lower_better"
_SEG: Kind = "segmentation"

_CASE_METRICS: list[tuple[str, Direction, Kind, CaseFn, MetricConvention, str]] = [
    ("dice", _HIGHER, _SEG, _ignoring_spacing(overlap.dice), overlap.DEFAULT, ""),
    ("dice_micro", _HIGHER, _SEG, _ignoring_spacing(overlap.dice_micro), overlap.DEFAULT, ""),
    ("hd95", _LOWER, _SEG, surface.hausdorff_distance, surface.HD95, "mm"),
    ("hd", _LOWER, _SEG, surface.hausdorff_distance, MetricConvention(percentile=100), "mm"),
    ("nsd", _HIGHER, _SEG, surface.nsd, MetricConvention(), ""),
    ("masd", _LOWER, _SEG, surface.masd, MetricConvention(), "mm"),
    ("cldice", _HIGHER, _SEG, _ignoring_spacing(overlap.cldice), overlap.DEFAULT, ""),
    ("betti0_error", _LOWER, _SEG, _ignoring_spacing(topology.betti0_error), topology.DEFAULT, ""),
    ("lesion_f1", _HIGHER, _SEG, _ignoring_spacing(lesions.lesion_f1), lesions.DEFAULT, ""),
    (
        "lesion_count_difference",
        _LOWER,
        _SEG,
        _ignoring_spacing(lesions.lesion_count_difference),
        lesions.DEFAULT,
        "",
    ),
    ("lesion_volume_difference_ml", _LOWER, _SEG, _volume_difference, lesions.DEFAULT, "mL"),
    ("instance_f1", _HIGHER, "instance", _ignoring_spacing(instances.instance_f1), instances.DEFAULT, ""),
    (
        "centroid_f1",
        _HIGHER,
        "instance",
        _ignoring_spacing(instances.centroid_f1_labels),
        instances.DEFAULT,
        "",
    ),
    ("ssim", _HIGHER, "enhancement", _ignoring_spacing(enhancement.ssim), enhancement.DEFAULT, ""),
    ("psnr", _HIGHER, "enhancement", _ignoring_spacing(enhancement.psnr), enhancement.DEFAULT, "dB"),
    ("lncc", _HIGHER, "enhancement", _ignoring_spacing(enhancement.lncc), enhancement.DEFAULT, ""),
]

_DATASET_METRICS: list[tuple[str, Kind, DatasetFn, MetricConvention]] = [
    *((f"coco_{stat}", "detection", _coco(stat), MetricConvention()) for stat in ("ap", "ap50", "ap75", "ar100")),
    ("accuracy", "classification", _ignoring_convention(classification.accuracy), classification.DEFAULT),
    (
        "balanced_accuracy",
        "classification",
        _ignoring_convention(classification.balanced_accuracy),
        classification.DEFAULT,
    ),
    ("auc", "classification", classification.auc, classification.DEFAULT),
    ("f1", "classification", classification.f1, classification.DEFAULT),
    ("plcc", "regression", _ignoring_convention(regression.plcc), MetricConvention()),
    ("srocc", "regression", _ignoring_convention(regression.srocc), MetricConvention()),
    ("krocc", "regression", _ignoring_convention(regression.krocc), MetricConvention()),
]

_REQUIRES = {
    "nsd": ("tolerance_mm",),
    "centroid_f1": ("match_radius_px",),
    "ssim": ("data_range",),
    "psnr": ("data_range",),
}

METRICS: dict[str, MetricSpec] = {
    **{
        name: MetricSpec(name, direction, kind, "case", fn, convention, unit, _REQUIRES.get(name, ()))
        for name, direction, kind, fn, convention, unit in _CASE_METRICS
    },
    **{
        name: MetricSpec(name, _HIGHER, kind, "dataset", fn, convention, "", _REQUIRES.get(name, ()))
        for name, kind, fn, convention in _DATASET_METRICS
    },
}

__all__ = ["METRICS", "MetricSpec", "MetricSummary", "summarize"]
