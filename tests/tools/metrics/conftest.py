"""Seeded mask factories for the metric cross-checks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy import ndimage

MaskPair = tuple[np.ndarray, np.ndarray]


def _blob_pair(seed: int, shape: tuple[int, ...] = (32, 32, 32)) -> MaskPair:
    """A smooth random reference blob set and a perturbed prediction of it."""
    rng = np.random.default_rng(seed)
    field = ndimage.gaussian_filter(rng.normal(size=shape), 3)
    noise = ndimage.gaussian_filter(rng.normal(size=shape), 2)
    level = 0.6 * field.std()
    reference = field > level
    prediction = ndimage.gaussian_filter(field + 0.3 * noise, 1) > level
    return prediction, reference


@pytest.fixture
def blob_pair() -> Callable[..., MaskPair]:
    return _blob_pair
