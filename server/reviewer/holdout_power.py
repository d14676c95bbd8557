"""What the holdout gate can detect with a task's group counts, and the warning `amid init` gives
when the answer is "nothing worth having".

The gate (`holdout_gate`) relabels whole groups, so its power depends on the number of patients,
not scans. A cheat's effect size d is how far the validation mean is lifted, in between-group
standard deviations of the per-case score (for Dice spread 0.1 across patients, d = 1 is +0.1).
Power is the one-sided two-sample t-test's (noncentral t), which the relabelling test matches for
roughly normal scores; it is 0 when the relabellings cannot reach alpha at all (fewer than 1/alpha
arrangements: 2 + 2 patients give 6).
"""

from __future__ import annotations

import json
import math
from typing import Any

from scipy import optimize, stats

from amid.server.reviewer.holdout_gate import ALPHA

EFFECT_SIZE = 1.0  # the cheat `amid init` sizes the holdout for
POWER = 0.8
MAX_GROUPS = 10_000


def detection_power(n_validation: int, n_holdout: int, effect: float, alpha: float = ALPHA) -> float:
    """Chance the gate calls a validation lifted by `effect` group SDs `worse` (group counts per side)."""
    if n_validation < 1 or n_holdout < 1 or math.comb(n_validation + n_holdout, n_holdout) * alpha < 1:
        return 0.0
    df = max(n_validation + n_holdout - 2, 1)
    shift = effect / math.sqrt(1 / n_validation + 1 / n_holdout)
    return float(stats.nct.sf(stats.t.ppf(1 - alpha, df), df, shift))


def smallest_holdout(
    n_validation: int, effect: float = EFFECT_SIZE, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """The fewest holdout groups that detect `effect` with `power`; None if no holdout size can
    (the validation fold is the bottleneck: its own spread bounds the test)."""
    if detection_power(n_validation, MAX_GROUPS, effect, alpha) < power:
        return None
    low, high = 1, MAX_GROUPS
    while low < high:  # power grows with the holdout: bisect
        middle = (low + high) // 2
        low, high = (
            (middle + 1, high) if detection_power(n_validation, middle, effect, alpha) < power else (low, middle)
        )
    return low


def detectable_effect(n_validation: int, n_holdout: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The smallest effect (group SDs) detected with `power`; None when the gate cannot reject at all."""
    if detection_power(n_validation, n_holdout, 50.0, alpha) < power:
        return None
    return float(optimize.brentq(lambda d: detection_power(n_validation, n_holdout, d, alpha) - power, 0.0, 50.0))


def holdout_warning(n_validation: int, n_holdout: int, effect: float = EFFECT_SIZE) -> str | None:
    """A warning when the gate cannot detect `effect` with power POWER at ALPHA; None when it can."""
    found = detectable_effect(n_validation, n_holdout)
    if found is not None and found <= effect:
        return None
    can = "cannot reject any attempt" if found is None else f"detects only a lift of {found:.2g} group SDs"
    need = smallest_holdout(n_validation, effect)
    fix = (
        f"a holdout of {need} groups would detect {effect:g} SD with power {POWER:g}"
        if need is not None
        else f"no holdout size detects {effect:g} SD with power {POWER:g} while a fold holds {n_validation} groups "
        "(fewer folds or more data would)"
    )
    return (
        f"the holdout gate ({n_holdout} holdout groups, {n_validation} per validation fold, alpha {ALPHA:g}) "
        f"{can}; {fix}"
    )


def init_warning(workspace: Any) -> str | None:
    """The warning for a freshly initialised workspace (None without a holdout or when it suffices)."""
    held = workspace.private_dir / "holdout.json"
    if not held.is_file():
        return None
    cases = json.loads(held.read_text(encoding="utf-8"))["cases"]
    n_holdout = len({c.get("group") or c["case_id"] for c in cases})
    folds = workspace.folds()
    n_validation = min(len({folds.case_groups[c] for c in fold.val_cases}) for fold in folds.folds)
    return holdout_warning(n_validation, n_holdout)
