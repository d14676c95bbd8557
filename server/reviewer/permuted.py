"""The trivial predictor where a constant has no score: the training targets in a seeded random order.

A constant prediction has no correlation (PLCC, SROCC, KROCC of a constant are undefined, and
graders return NaN), so "the training mean for every case" scores nothing a model could be held
against. The defined baseline for such metrics is a predictor that uses the training targets'
distribution but knows nothing of the case: a seeded draw of them, in random order. Its score is
the mean over `DRAWS` seeded draws: one draw on a fold of a few cases can correlate by chance.
A fold of fewer than `MIN_CASES` cases gets none: there, any two values correlate perfectly.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import TypeVar

from amid.tools.metrics import MetricSummary

PREDICTOR = "permuted_targets"
DRAWS = 5
# Two points correlate at ±1 whatever predicts them: below this a fold gets no such baseline (the
# check is then unverifiable, a warning), rather than one no model could beat.
MIN_CASES = 3
Value = TypeVar("Value")


def draws(train_values: Sequence[Value], n_cases: int, fold: int) -> list[list[Value]]:
    """`DRAWS` predictions of `n_cases` values each, drawn from the fold's training targets without
    replacement where there are enough of them (seeded by fold and draw: the same every review)."""
    if not train_values or n_cases < MIN_CASES:
        return []
    out = []
    for draw in range(DRAWS):
        rng = random.Random(f"amid-permuted-targets:{fold}:{draw}")
        if len(train_values) >= n_cases:
            out.append(rng.sample(list(train_values), n_cases))
        else:
            out.append([rng.choice(list(train_values)) for _ in range(n_cases)])
    return out


def undefined(summary: MetricSummary | None) -> bool:
    """A baseline metric the constant predictor left without a value."""
    return summary is None or math.isnan(summary.mean)


def averaged(summaries: list[dict[str, MetricSummary]], names: list[str]) -> dict[str, MetricSummary]:
    """Per metric, the mean of the draws' defined values (a metric no draw defines stays out)."""
    found: dict[str, MetricSummary] = {}
    for name in names:
        values = [s[name].mean for s in summaries if name in s and not undefined(s[name])]
        if values:
            mean = sum(values) / len(values)
            n = summaries[0][name].n_cases if name in summaries[0] else 0
            found[name] = MetricSummary(
                mean=mean, median=mean, std=0.0, n_cases=n, n_valid=n, n_nan=0, n_capped=0, values=tuple(values)
            )
    return found
