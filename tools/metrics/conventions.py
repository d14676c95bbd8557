"""Metric conventions: every choice that changes a score, written down as a frozen model.

Reference implementations disagree on empty masks, NaN handling and how two directed surface
distances are combined (REFERENCE §5). A task contract carries one `MetricConvention` per metric so
that the reviewer and the agent compute the same number. Each field names the metrics it affects;
metrics ignore fields that do not concern them.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

EmptyRule = Literal["best", "worst", "nan"]
"""Score for an empty case: the metric's best value (Dice 1, distance 0), its worst (Dice 0,
distance `cap_mm` or inf) or NaN."""

NanRule = Literal["drop", "worst", "cap"]
"""Aggregation of NaN cases: leave them out, count them as `worst_value`, or as `cap_mm`."""

Pooling = Literal["per_direction", "pooled"]
"""Symmetric surface statistics: `per_direction` computes the statistic on each directed set of
distances and combines them (max for Hausdorff as MONAI / DeepMind / MetricsReloaded; mean of the
two directed means for MASD as MetricsReloaded); `pooled` computes it once on both sets
concatenated (medpy 0.5's hd95 and assd, MONAI's symmetric average surface distance)."""

Average = Literal["binary", "macro"]


class MetricConvention(BaseModel):
    """How one metric is computed and aggregated; frozen so a contract cannot drift."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    empty_both: Annotated[
        EmptyRule,
        Field(description="Score when prediction and reference are both empty (overlap, surface, lesion, F1)."),
    ] = "nan"
    empty_one: Annotated[
        EmptyRule,
        Field(description="Score when exactly one of prediction and reference is empty."),
    ] = "worst"
    cap_mm: Annotated[
        float | None,
        Field(gt=0, description="Distances above this many mm are clipped to it; also the worst distance."),
    ] = None
    symmetric: Annotated[
        bool,
        Field(description="Surface metrics: both directions; False measures prediction → reference only."),
    ] = True
    pooling: Annotated[Pooling, Field(description="How symmetric surface statistics combine.")] = "per_direction"
    percentile: Annotated[
        float, Field(gt=0, le=100, description="Hausdorff percentile (95 for HD95, 100 for max HD).")
    ] = 95.0
    tolerance_mm: Annotated[
        float | None, Field(ge=0, description="NSD / surface Dice tolerance in mm (required by NSD).")
    ] = None
    connectivity: Annotated[
        int | None,
        Field(ge=1, le=3, description="Connected components: 1 = faces only, ndim = full; None = full."),
    ] = None
    labels: Annotated[
        tuple[int, ...] | None,
        Field(description="Foreground labels for multi-class Dice; None = every non-zero label present."),
    ] = None
    iou_thresholds: Annotated[
        tuple[float, ...], Field(min_length=1, description="Instance F1 IoU thresholds; the F1 is averaged.")
    ] = (0.5,)
    match_radius_px: Annotated[
        float | None, Field(gt=0, description="Centroid-match F1: largest matching distance in pixels.")
    ] = None
    data_range: Annotated[
        float | None, Field(gt=0, description="PSNR / SSIM intensity range (max - min possible value).")
    ] = None
    window: Annotated[
        int, Field(ge=3, description="SSIM Gaussian (sigma 1.5) / LNCC box window side in pixels, odd.")
    ] = 11
    average: Annotated[Average, Field(description="Classification F1 / AUC: binary (positive_label) or macro.")] = (
        "binary"
    )
    positive_label: Annotated[int, Field(description="Positive class for binary F1 / AUC.")] = 1
    nan_rule: Annotated[NanRule, Field(description="How NaN per-case values enter the mean.")] = "drop"
    worst_value: Annotated[
        float | None, Field(description="Value standing in for a NaN case when nan_rule is 'worst'.")
    ] = None

    @model_validator(mode="after")
    def _rules_have_their_values(self) -> MetricConvention:
        if self.nan_rule == "worst" and self.worst_value is None:
            raise ValueError("nan_rule 'worst' needs worst_value (e.g. 0 for Dice, 1000 for HD95)")
        if self.nan_rule == "cap" and self.cap_mm is None:
            raise ValueError("nan_rule 'cap' needs cap_mm")
        if self.window % 2 == 0:
            raise ValueError(f"window must be odd, got {self.window}")
        if any(not 0 < t <= 1 for t in self.iou_thresholds):
            raise ValueError(f"iou_thresholds must lie in (0, 1], got {self.iou_thresholds}")
        return self

    @property
    def worst_distance(self) -> float:
        """The worst surface distance: `cap_mm` when set, else infinity."""
        return self.cap_mm if self.cap_mm is not None else math.inf


def rule_value(rule: EmptyRule, best: float, worst: float) -> float:
    """The score an empty-case rule stands for."""
    return {"best": best, "worst": worst, "nan": math.nan}[rule]


def empty_case_value(
    prediction_any: bool, reference_any: bool, convention: MetricConvention, best: float, worst: float
) -> float | None:
    """The rule's score when either side is empty, or None when both have foreground."""
    if prediction_any and reference_any:
        return None
    rule = convention.empty_one if (prediction_any or reference_any) else convention.empty_both
    return rule_value(rule, best, worst)


def cap_distance(value: float, convention: MetricConvention) -> float:
    """Clip a distance to `cap_mm` when a cap is set."""
    if convention.cap_mm is None or math.isnan(value):
        return value
    return min(value, convention.cap_mm)


def image_diagonal_mm(shape: tuple[int, ...], spacing: tuple[float, ...]) -> float:
    """The physical diagonal of an image, a common `cap_mm` for a data set of one image size."""
    return math.sqrt(sum((n * s) ** 2 for n, s in zip(shape, spacing, strict=True)))
