"""How closely a replayed output matches the frozen prediction of the same case: pure functions.

- Label maps: foreground agreement, 2·|voxels where both carry the same foreground label| /
  (|foreground of one| + |foreground of the other|): Dice over all foreground labels at once, so a
  swapped label counts as disagreement and a tiny structure cannot dominate. Both empty → 1.0.
  A shape mismatch → 0.0.
- Continuous images (enhancement, regression maps): the fraction of voxels whose values agree within
  `atol + rtol·|frozen|`, with atol relative to the frozen image's value range. Shape mismatch → 0.0.
- Table values: equal within `atol + rtol·|frozen|`; a missing or non-numeric value disagrees.

A case is reproduced when its agreement reaches the threshold: 0.99 for label maps, 0.99 of the
voxels for continuous images. A deterministic CPU replay gives 1.0, and GPU non-determinism moves
a few boundary voxels. The bar is high on purpose: the demo's threshold model agrees with the true
labels at 0.89–0.93, so a looser one (0.9) would let label copies pass beside a decent model.
"""

from __future__ import annotations

import math

import numpy as np

LABEL_AGREEMENT = 0.99
VALUE_AGREEMENT = 0.99
RTOL = 1e-3
ATOL = 1e-3


def label_agreement(replayed: np.ndarray, frozen: np.ndarray) -> float:
    if replayed.shape != frozen.shape:
        return 0.0
    a, b = np.rint(replayed).astype(np.int64), np.rint(frozen).astype(np.int64)
    size = int(np.count_nonzero(a)) + int(np.count_nonzero(b))
    if size == 0:
        return 1.0
    return 2.0 * int(np.count_nonzero((a == b) & (b != 0))) / size


def value_agreement(replayed: np.ndarray, frozen: np.ndarray) -> float:
    if replayed.shape != frozen.shape:
        return 0.0
    if frozen.size == 0:
        return 1.0
    a, b = replayed.astype(np.float64), frozen.astype(np.float64)
    scale = float(np.nanmax(b) - np.nanmin(b)) if np.isfinite(b).any() else 0.0
    close = np.isclose(a, b, rtol=RTOL, atol=ATOL * max(scale, 1.0), equal_nan=True)
    return float(np.count_nonzero(close)) / close.size


def values_agree(replayed: str | None, frozen: str | None) -> bool:
    try:
        a, b = float(replayed or "nan"), float(frozen or "nan")
    except ValueError:
        return replayed is not None and (replayed or "").strip() == (frozen or "").strip()
    if math.isnan(a) or math.isnan(b):
        return False
    return math.isclose(a, b, rel_tol=RTOL, abs_tol=ATOL)
