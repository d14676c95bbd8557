"""The holdout gate's statistics (DESIGN §7): is the score an attempt gets on the server-held
holdout consistent with its verified validation score? Pure functions on per-case scores.

1. **Per-case scores** (the caller's: `holdout.case_scores`). A case's score is the mean of its
   per-label values after the metric's cap and NaN rule, so a case with liver 0.95 and lesion 0.0 counts once, as 0.475.
   The spread that sets the tolerance is then the spread between cases, not between labels (pooling
   one value per case *and* label made an honest 0.54 ± 0.49).
2. **The gap** d = mean(holdout) − mean(validation), and a seeded percentile bootstrap interval of
   d (`RESAMPLES` resamples, `CONFIDENCE` two-sided). Unpaired (the holdout holds other cases):
   both sides are resampled independently. Paired (both sides score the same cases): the per-case
   differences are resampled. The interval is the *expanded* percentile interval (Hesterberg 2015):
   its tail probability is Φ(−√(n/(n−1)) · t₍α/2, n−1₎) with n the smaller side, which widens
   it for the handful of cases a holdout often has, where the plain percentile interval is too
   narrow and would fail honest attempts.
3. **The verdict**, with d oriented so that negative means worse for the metric's direction and a
   practical floor = max(the metric's tolerance, `RELATIVE_FLOOR` × |validation mean|):
   `worse` when the whole interval lies below −floor, `better` when it lies above +floor, else
   `within`. `tolerance` is the distance |d| must exceed for that (floor plus the interval's
   half-width on the side of zero), so `worse` ⇔ d < −tolerance.

The reviewer turns `worse` into a HOLDOUT_GAP error (the attempt is rejected: never on a
leaderboard, never promoted or packaged) and `better` into a HOLDOUT_GAP warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np
from scipy import stats

RESAMPLES = 4000
CONFIDENCE = 0.99
RELATIVE_FLOOR = 0.05  # of the validation score: smaller gaps are never significant
MIN_CASES = 2  # per side; with fewer there is no spread to measure
CHUNK = 500  # resamples drawn at a time (bounds memory for large folds)

GapVerdict = Literal["within", "worse", "better"]


@dataclass(frozen=True)
class GapTest:
    validation: float
    holdout: float
    difference: float  # holdout − validation, in the metric's own units and sign
    interval: tuple[float, float]  # bootstrap interval of the difference
    floor: float
    tolerance: float
    n_validation: int
    n_holdout: int
    paired: bool
    verdict: GapVerdict

    def evidence(self) -> dict[str, object]:
        return {
            "holdout": self.holdout, "validation": self.validation, "difference": self.difference,
            "interval": [round(v, 6) for v in self.interval], "confidence": CONFIDENCE, "resamples": RESAMPLES,
            "floor": self.floor, "tolerance": self.tolerance, "n_validation_cases": self.n_validation,
            "n_holdout_scored": self.n_holdout, "paired": self.paired, "gate": self.verdict,
        }  # fmt: skip


def gap_test(
    validation: Mapping[str, float],
    holdout: Mapping[str, float],
    *,
    higher_is_better: bool,
    metric_tolerance: float,
    seed: int,
) -> GapTest | None:
    """The gap between per-case holdout and validation scores; None if either side has fewer than
    MIN_CASES finite scores. Same case ids on both sides → paired, else unpaired."""
    val = {k: v for k, v in validation.items() if math.isfinite(v)}
    held = {k: v for k, v in holdout.items() if math.isfinite(v)}
    if len(val) < MIN_CASES or len(held) < MIN_CASES:
        return None
    paired = set(val) == set(held)
    keys = sorted(val) if paired else None
    v = np.array([val[k] for k in keys] if keys else list(val.values()))
    h = np.array([held[k] for k in keys] if keys else list(held.values()))
    means = _bootstrap(v, h, paired, np.random.default_rng(seed))
    tail = expanded_tail(min(len(v), len(h)))
    lo, hi = (float(q) for q in np.quantile(means, [tail, 1.0 - tail]))
    difference = float(h.mean() - v.mean())
    floor = max(metric_tolerance, RELATIVE_FLOOR * abs(float(v.mean())))
    sign = 1.0 if higher_is_better else -1.0
    verdict, tolerance = _decide(sign * difference, sorted((sign * lo, sign * hi)), floor)
    return GapTest(
        float(v.mean()), float(h.mean()), difference, (lo, hi), floor, tolerance, len(v), len(h), paired, verdict
    )


def expanded_tail(n: int, confidence: float = CONFIDENCE) -> float:
    """Tail probability of the expanded percentile interval for n cases (Hesterberg 2015)."""
    alpha = (1.0 - confidence) / 2.0
    if n < 2:
        return alpha
    widened = math.sqrt(n / (n - 1)) * float(stats.t.ppf(1.0 - alpha, n - 1))
    return max(NormalDist().cdf(-widened), 0.5 / RESAMPLES)


def _bootstrap(v: np.ndarray, h: np.ndarray, paired: bool, rng: np.random.Generator) -> np.ndarray:
    if paired:
        return _resampled_means(h - v, rng)
    return _resampled_means(h, rng) - _resampled_means(v, rng)


def _resampled_means(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    n, chunks = len(values), []
    for start in range(0, RESAMPLES, CHUNK):
        size = min(CHUNK, RESAMPLES - start)
        chunks.append(values[rng.integers(0, n, (size, n))].mean(axis=1))
    return np.concatenate(chunks)


def _decide(gap: float, interval: list[float], floor: float) -> tuple[GapVerdict, float]:
    """Verdict and tolerance for an oriented gap (positive = better) and its oriented interval."""
    lo, hi = interval
    verdict: GapVerdict = "worse" if hi < -floor else "better" if lo > floor else "within"
    return verdict, floor + (hi - gap if gap < 0 else gap - lo)
