"""The holdout gate's statistics: is the score an attempt gets on the server-held holdout
consistent with its verified validation score? Pure functions on per-case scores.

1. **Per-case scores** (the caller's: `holdout.case_scores`). A case's score is the mean of its
   per-label values after the metric's cap and NaN rule, so a case with liver 0.95 and lesion 0.0
   counts once, as 0.475: the spread that sets the tolerance is the spread between cases.
2. **Groups.** Scans of one patient are not independent; where group ids are known, whole groups
   are resampled (a case without a group is its own group).
3. **The test** is one-sided in the direction that matters: the cheat signal is a validation score
   much better than the holdout's. The shortfall s = mean(validation) − mean(holdout), oriented by
   the metric's direction (positive = validation better). Under honesty, validation and holdout
   groups are exchangeable (both are random groups of the same data the model never trained on),
   so the labels "validation" / "holdout" can be reassigned among the pooled groups: the null
   distribution of s is that relabelling, enumerated exactly when there are at most `RESAMPLES`
   arrangements, else `RESAMPLES` seeded ones (p = (1 + hits) / (1 + draws), still exact in size).
   Paired scores (the same cases on both sides) flip the sign of each group's differences instead.
4. **The verdict**: `worse` when the shortfall minus a practical floor (max of the metric's
   tolerance and `RELATIVE_FLOOR` × |validation mean|, room for an agent's honest selection on its
   validation fold) is significant at `ALPHA`. So an honest attempt is rejected with probability at
   most `ALPHA`, whatever the fold sizes; with too few groups no arrangement is rare enough and the
   gate cannot reject at all (`powered` is false; `holdout_power` says what size would do).
   `better` (the mirror test) is only ever a warning: a holdout better than validation is not a
   cheat of the validation score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations, product
from typing import Literal

import numpy as np

ALPHA = 0.01  # the stated false-rejection rate of an honest attempt
RESAMPLES = 4000  # arrangements drawn when there are more than this many
RELATIVE_FLOOR = 0.05  # of the validation score: smaller gaps are never significant
MIN_CASES = 2  # per side; with fewer there is no spread to measure

GapVerdict = Literal["within", "worse", "better"]


@dataclass(frozen=True)
class GapTest:
    validation: float
    holdout: float
    difference: float  # holdout − validation, in the metric's own units and sign
    floor: float
    tolerance: float  # |difference| beyond which (holdout worse) the gate fails; inf: it cannot fail
    p_worse: float  # one-sided p of the shortfall beyond the floor
    p_better: float
    alpha: float
    arrangements: int  # relabellings the null distribution holds
    exact: bool  # every arrangement enumerated (else seeded draws)
    n_validation: int
    n_holdout: int
    n_validation_groups: int
    n_holdout_groups: int
    paired: bool
    verdict: GapVerdict

    @property
    def powered(self) -> bool:
        """Whether the gate could reject anything at all with these group counts."""
        return math.isfinite(self.tolerance)

    def evidence(self) -> dict[str, object]:
        return {
            "holdout": self.holdout,
            "validation": self.validation,
            "difference": self.difference,
            "floor": self.floor,
            "tolerance": self.tolerance if self.powered else None,
            "p_worse": round(self.p_worse, 6),
            "p_better": round(self.p_better, 6),
            "alpha": self.alpha,
            "test": "one-sided group relabelling",
            "arrangements": self.arrangements,
            "exact": self.exact,
            "n_validation_cases": self.n_validation,
            "n_holdout_scored": self.n_holdout,
            "n_validation_groups": self.n_validation_groups,
            "n_holdout_groups": self.n_holdout_groups,
            "paired": self.paired,
            "powered": self.powered,
            "gate": self.verdict,
        }


@dataclass(frozen=True)
class _Null:
    """The shortfalls a relabelling produces, and whether they are every arrangement."""

    shortfalls: np.ndarray
    exact: bool


def gap_test(
    validation: Mapping[str, float],
    holdout: Mapping[str, float],
    *,
    higher_is_better: bool,
    metric_tolerance: float,
    seed: int,
    groups: Mapping[str, str] | None = None,
    alpha: float = ALPHA,
) -> GapTest | None:
    """The one-sided gate on per-case scores (case id → score; `groups`: case id → patient or site);
    None if either side has fewer than MIN_CASES finite scores. Same case ids on both sides → paired."""
    val = {k: v for k, v in validation.items() if math.isfinite(v)}
    held = {k: v for k, v in holdout.items() if math.isfinite(v)}
    if len(val) < MIN_CASES or len(held) < MIN_CASES:
        return None
    sign = 1.0 if higher_is_better else -1.0
    paired = set(val) == set(held)
    null, shortfall, n_groups = _null(val, held, sign, dict(groups or {}), seed, paired)
    v_mean, h_mean = float(np.mean(list(val.values()))), float(np.mean(list(held.values())))
    floor = max(metric_tolerance, RELATIVE_FLOOR * abs(v_mean))
    p_worse = _p_value(null, shortfall - floor)
    p_better = _p_value(_Null(-null.shortfalls, null.exact), -shortfall - floor)
    verdict: GapVerdict = "worse" if p_worse <= alpha else "better" if p_better <= alpha else "within"
    return GapTest(
        validation=v_mean,
        holdout=h_mean,
        difference=h_mean - v_mean,
        floor=floor,
        tolerance=floor + _threshold(null, alpha),
        p_worse=p_worse,
        p_better=p_better,
        alpha=alpha,
        arrangements=len(null.shortfalls),
        exact=null.exact,
        n_validation=len(val),
        n_holdout=len(held),
        n_validation_groups=n_groups[0],
        n_holdout_groups=n_groups[1],
        paired=paired,
        verdict=verdict,
    )


def _null(
    val: dict[str, float], held: dict[str, float], sign: float, group_of: dict[str, str], seed: int, paired: bool
) -> tuple[_Null, float, tuple[int, int]]:
    """The null distribution, the observed oriented shortfall and the group counts of each side."""
    if paired:
        diffs = {k: sign * (val[k] - held[k]) for k in val}
        flipped = _grouped(diffs, group_of)
        return _sign_flips(flipped, seed), float(np.mean(list(diffs.values()))), (len(flipped), len(flipped))
    v_groups, h_groups = _grouped(val, group_of), _grouped(held, group_of)
    shortfall = sign * (float(np.mean(list(val.values()))) - float(np.mean(list(held.values()))))
    return _relabellings(v_groups, h_groups, sign, seed), shortfall, (len(v_groups), len(h_groups))


def _grouped(scores: Mapping[str, float], group_of: Mapping[str, str]) -> list[np.ndarray]:
    """Each group's case scores (a case without a known group is its own group), in a fixed order."""
    members: dict[str, list[float]] = {}
    for case_id in sorted(scores):
        members.setdefault(group_of.get(case_id, f"case:{case_id}"), []).append(scores[case_id])
    return [np.array(members[g]) for g in sorted(members)]


def _relabellings(v_groups: list[np.ndarray], h_groups: list[np.ndarray], sign: float, seed: int) -> _Null:
    """Oriented shortfalls (validation mean − holdout mean) over reassignments of the pooled groups."""
    pooled = [*v_groups, *h_groups]
    sums = np.array([g.sum() for g in pooled])
    sizes = np.array([len(g) for g in pooled], dtype=float)
    n_v, total = len(v_groups), len(pooled)
    exact = math.comb(total, n_v) <= RESAMPLES
    if exact:
        masks = np.zeros((math.comb(total, n_v), total), dtype=bool)
        for row, chosen in enumerate(combinations(range(total), n_v)):
            masks[row, list(chosen)] = True
    else:
        rng = np.random.default_rng(seed)
        order = np.argsort(rng.random((RESAMPLES, total)), axis=1)
        masks = np.zeros((RESAMPLES, total), dtype=bool)
        np.put_along_axis(masks, order[:, :n_v], True, axis=1)
    v_mean = (masks * sums).sum(axis=1) / (masks * sizes).sum(axis=1)
    h_mean = (~masks * sums).sum(axis=1) / (~masks * sizes).sum(axis=1)
    return _Null(sign * (v_mean - h_mean), exact)


def _sign_flips(groups: list[np.ndarray], seed: int) -> _Null:
    """Mean oriented per-case difference over sign flips of whole groups' differences."""
    sums = np.array([g.sum() for g in groups])
    n_cases = sum(len(g) for g in groups)
    exact = 2 ** len(groups) <= RESAMPLES
    if exact:
        signs = np.array(list(product((1.0, -1.0), repeat=len(groups))))
    else:
        signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(RESAMPLES, len(groups)))
    return _Null((signs * sums).sum(axis=1) / n_cases, exact)


def _p_value(null: _Null, observed: float) -> float:
    """One-sided p of `observed` (large = evidence): exact share, or (1 + hits) / (1 + draws)."""
    hits = int(np.sum(null.shortfalls >= observed - 1e-12))
    if null.exact:
        return hits / len(null.shortfalls)
    return (1 + hits) / (1 + len(null.shortfalls))


def _threshold(null: _Null, alpha: float) -> float:
    """The largest shortfall-beyond-floor `_p_value` does not judge significant (inf: none can be):
    at most `allowed` arrangements may reach the observed one (the observed one is among them)."""
    ordered = np.sort(null.shortfalls)[::-1]
    allowed = math.floor(alpha * len(ordered)) if null.exact else math.floor(alpha * (1 + len(ordered))) - 1
    if allowed < (1 if null.exact else 0):
        return math.inf
    return float(ordered[allowed])
