"""Re-scoring with the metrics library under the contract's conventions.

Adapter (note for `tools/metrics`): a task contract writes conventions in the importers' dialect
(`{"empty_both": 1.0, "empty_one": "cap", "cap_mm": 100}`), while `MetricConvention` takes rules
(`"best" | "worst" | "nan"`). `convention_for` translates one into the other on top of the
metric's default convention, and the report records the convention applied to every metric.

Segmentation metrics that take binary masks are computed per foreground label and every
(case, label) value enters the summary (the mean equals a ReX-MLE grader's mean over cases and
labels); label-map, instance and image metrics take whole arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError

from amid.tools.metrics import METRICS, MetricConvention, MetricSpec, MetricSummary, summarize
from amid.tools.task.contract import MetricDef, TaskContract

LABEL_MAP_METRICS = frozenset({"dice_micro", "instance_f1", "centroid_f1"})
RULE_WORDS = {"best": "best", "worst": "worst", "nan": "nan", "cap": "worst", "max": "worst", "inf": "worst"}


@dataclass(frozen=True)
class PlannedMetric:
    name: str
    direction: str
    tolerance: float
    spec: MetricSpec | None  # None: the library does not know this metric
    convention: MetricConvention | None
    per_label: bool
    note: str = ""

    @property
    def computable(self) -> bool:
        return self.spec is not None and self.convention is not None

    def is_better(self, candidate: float, baseline: float) -> bool:
        return candidate > baseline if self.direction == "higher_better" else candidate < baseline


def plan_metrics(contract: TaskContract) -> list[PlannedMetric]:
    return [_plan(metric) for metric in contract.metrics]


def _plan(metric: MetricDef) -> PlannedMetric:
    spec = METRICS.get(metric.name)
    if spec is None:
        return PlannedMetric(metric.name, metric.direction, metric.tolerance, None, None, False, "unknown metric")
    try:
        convention, note = convention_for(metric, spec), ""
    except (ValidationError, ValueError) as exc:
        convention, note = None, f"contract convention not applicable: {exc}"
    per_label = spec.kind == "segmentation" and metric.name not in LABEL_MAP_METRICS
    return PlannedMetric(metric.name, metric.direction, metric.tolerance, spec, convention, per_label, note)


def convention_for(metric: MetricDef, spec: MetricSpec) -> MetricConvention:
    """The metric's default convention overlaid with the contract's, translated to rules."""
    fields = MetricConvention.model_fields
    update: dict[str, Any] = {}
    for key, value in metric.convention.items():
        if key in ("empty_both", "empty_one"):
            update[key] = _rule(value, metric.direction)
        elif key in fields:
            update[key] = value
    merged = {**spec.convention.model_dump(), **update}
    return MetricConvention.model_validate(merged)


def _rule(value: Any, direction: str) -> str:
    if isinstance(value, str):
        if value.lower() not in RULE_WORDS:
            raise ValueError(f"empty-case rule {value!r}; expected best, worst, nan, cap or a number")
        return RULE_WORDS[value.lower()]
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "nan"
    best = 1.0 if direction == "higher_better" else 0.0
    return "best" if float(value) == best else "worst"


def foreground_labels(contract: TaskContract) -> list[int]:
    values = contract.prediction.label_values or list(contract.layout.label_values)
    return sorted({int(v) for v in values} - {0})


def case_values(
    plan: list[PlannedMetric],
    prediction: np.ndarray,
    reference: np.ndarray,
    spacing: Sequence[float],
    labels: list[int],
) -> dict[str, list[float]]:
    """Every computable metric on one case: one value per foreground label, or one per case."""
    found: dict[str, list[float]] = {}
    for metric in plan:
        if metric.spec is None or metric.convention is None or metric.spec.scope != "case":
            continue
        if metric.per_label:
            pairs = [(prediction == lab, reference == lab) for lab in labels] or [(prediction > 0, reference > 0)]
        else:
            pairs = [(prediction, reference)]
        found[metric.name] = [float(metric.spec.compute(p, r, spacing, metric.convention)) for p, r in pairs]
    return found


def summarize_all(plan: list[PlannedMetric], values: dict[str, list[float]]) -> dict[str, MetricSummary]:
    return {m.name: summarize(values[m.name], m.convention) for m in plan if m.convention and m.name in values}


def mean_value(summary: MetricSummary | None) -> float | None:
    if summary is None or math.isnan(summary.mean):
        return None
    return float(summary.mean)


def close(declared: float | None, verified: float | None, tolerance: float) -> bool:
    if declared is None or verified is None:
        return declared is None and verified is None
    if math.isinf(declared) or math.isinf(verified):
        return declared == verified
    return abs(declared - verified) <= tolerance
