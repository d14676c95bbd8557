"""Aggregation of per-case metric values under a convention's cap and NaN rule."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from amid.server.errors import invalid
from amid.tools.metrics.conventions import MetricConvention


class MetricSummary(BaseModel):
    """Aggregate of per-case values under one convention; the counts always add up to n_cases."""

    model_config = ConfigDict(frozen=True)

    mean: float
    median: float
    std: float
    n_cases: int
    n_valid: int
    n_nan: int
    n_capped: int
    values: tuple[float, ...]


def summarize(values: Sequence[float], convention: MetricConvention) -> MetricSummary:
    """Aggregate per-case values: clip at `cap_mm`, then drop NaN or replace it per `nan_rule`.

    n_valid + n_nan + n_capped = n_cases: n_capped counts non-NaN values at or above `cap_mm`, n_nan
    the NaN cases whatever the rule does with them. `values` keeps the raw per-case values. std is
    the population standard deviation, NaN when an infinite value enters it.
    """
    raw = np.asarray(values, dtype=np.float64)
    if raw.ndim != 1:
        raise invalid("values", f"array of shape {raw.shape}", "one value per case")
    is_nan = np.isnan(raw)
    cap = convention.cap_mm
    capped = np.zeros_like(is_nan) if cap is None else ~is_nan & (raw >= cap)
    used = _apply_nan_rule(raw if cap is None else np.minimum(raw, cap), is_nan, convention)
    return MetricSummary(
        **_statistics(used),
        n_cases=len(raw),
        n_valid=int(np.count_nonzero(~is_nan & ~capped)),
        n_nan=int(np.count_nonzero(is_nan)),
        n_capped=int(np.count_nonzero(capped)),
        values=tuple(float(v) for v in raw),
    )


def _apply_nan_rule(used: np.ndarray, is_nan: np.ndarray, convention: MetricConvention) -> np.ndarray:
    if convention.nan_rule == "drop":
        return used[~is_nan]
    stand_in = convention.worst_value if convention.nan_rule == "worst" else convention.cap_mm
    if stand_in is None:  # the convention's validator makes this unreachable
        raise invalid("convention.nan_rule", convention.nan_rule, "a rule whose stand-in value is set")
    return np.where(is_nan, stand_in, used)


def _statistics(used: np.ndarray) -> dict[str, float]:
    if used.size == 0:
        return {"mean": math.nan, "median": math.nan, "std": math.nan}
    std = float(np.std(used)) if np.all(np.isfinite(used)) else math.nan
    return {"mean": float(np.mean(used)), "median": float(np.median(used)), "std": std}
