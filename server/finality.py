"""Which attempts count, and which may be final: one rule for the supervisor (coverage, plateau,
promotion, its final choice), `choose_final`, `amid finalize` and the package builder.

An attempt **counts** when the reviewer accepted it, it spent a real budget (not a smoke run), the
holdout gate did not fail and it has a finite verified primary score (a NaN mean says nothing). It
**may be final** when it counts and its lane is promoted or the challenger. Each rule gives its
reasons, so a refusal names every condition that failed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

FINAL_LANE_STATES = ("promoted", "challenger")


def count_problems(attempt: Mapping[str, Any]) -> list[str]:
    """Why an attempt (a v_evidence row, or anything with its status, budget_class, holdout_gated and
    verified_score) does not count; empty when it does."""
    found = []
    if attempt["status"] != "accepted":
        found.append(f"status is {attempt['status']}, not accepted")
    if attempt["budget_class"] != "real":
        found.append(f"budget class is {attempt['budget_class']}, not real")
    if not attempt["holdout_gated"]:
        found.append("its holdout gate failed")
    score = attempt["verified_score"]
    if score is None or not math.isfinite(float(score)):
        found.append("it has no verified primary score")
    return found


def counts(attempt: Mapping[str, Any]) -> bool:
    return not count_problems(attempt)


def final_problems(attempt: Mapping[str, Any], lane_status: str | None) -> list[str]:
    """Why an attempt cannot be final (its lane's status None: no lane); empty when it can."""
    found = count_problems(attempt)
    if lane_status not in FINAL_LANE_STATES:
        found.append(f"its lane {attempt['lane_id']!r} is not promoted or challenger")
    return found
