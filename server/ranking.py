"""The one ranking of attempts: by a pessimistic confidence bound of the verified primary score, so
that the best of many tries is not ranked first for its luck.

- **The spread** of an attempt's verified score is its standard error from the per-case scores
  (`standard_error`: cases grouped by patient where groups are known, a cluster-robust ratio
  estimator; fold means combined as independent), so an attempt scored on one fold has noise too.
  Where no per-case spread was recorded, the fold scores' standard error stands in, else none.
- **The bound** is score − z·SE (score + z·SE when lower is better), with z the one-sided normal
  quantile at RANK_ALPHA / tries: a Bonferroni correction over the tries the same agent made on the
  same lane. Reporting the best of k tries is a selection among k estimates; a bound that holds for
  all k at once (at any dependence between them: tries on one fold share its cases) is what keeps
  the selected one honest. One try gets the plain 95 % bound; six get z = 2.39 instead of 1.64.
- **Ties** go to the better raw score, then the older attempt.

Leaderboard, promotion, the supervisor's final choice and `amid finalize` all rank through here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from statistics import NormalDist
from typing import Any, TypeVar

RANK_ALPHA = 0.05
T = TypeVar("T")


def standard_error(scores: Mapping[str, float], groups: Mapping[str, str] | None = None) -> float | None:
    """Standard error of the mean per-case score, resampling unit = group (a case without one is its
    own); None with fewer than two groups or finite scores."""
    finite = {case: value for case, value in scores.items() if math.isfinite(value)}
    sums: dict[str, list[float]] = {}
    for case, value in finite.items():
        entry = sums.setdefault((groups or {}).get(case, f"case:{case}"), [0.0, 0.0])
        entry[0], entry[1] = entry[0] + value, entry[1] + 1
    n_groups = len(sums)
    if n_groups < 2:
        return None
    mean = sum(s for s, _ in sums.values()) / len(finite)
    spread = sum((s - n * mean) ** 2 for s, n in sums.values())
    return math.sqrt(n_groups / (n_groups - 1) * spread) / len(finite)


def z_value(tries: int, alpha: float = RANK_ALPHA) -> float:
    """The one-sided quantile for a bound that holds over `tries` tries at once (Bonferroni)."""
    return NormalDist().inv_cdf(1.0 - alpha / max(tries, 1))


def bound(score: float, se: float | None, tries: int | None, higher_is_better: bool) -> float:
    """The pessimistic bound of a verified score: below it when higher is better, above it when lower is."""
    width = z_value(tries or 1) * (se or 0.0)
    return score - width if higher_is_better else score + width


def order_key(score: float, se: float | None, tries: int | None, higher_is_better: bool, *tie: Any) -> tuple[Any, ...]:
    """Sort key, best first: the bound, then the raw score, then the caller's ties (age, id)."""
    sign = -1.0 if higher_is_better else 1.0
    return (sign * bound(score, se, tries, higher_is_better), sign * score, *tie)


def rank_rows(rows: Iterable[dict[str, Any]], higher_is_better: bool) -> list[dict[str, Any]]:
    """Rows with verified_score, score_se, tries (and created_at / attempt_id for ties), best first,
    each given its `score_bound`; rows without a finite score are left out."""
    scored = [r for r in rows if r.get("verified_score") is not None and math.isfinite(float(r["verified_score"]))]
    for row in scored:
        score, se, tries = float(row["verified_score"]), row.get("score_se"), row.get("tries")
        row["score_bound"] = bound(score, se, tries, higher_is_better)

    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        tie = (str(row.get("created_at") or row.get("updated_at") or ""), str(row.get("attempt_id")))
        return order_key(float(row["verified_score"]), row.get("score_se"), row.get("tries"), higher_is_better, *tie)

    return sorted(scored, key=key)
