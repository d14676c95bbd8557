"""Percentiles of pooled samples: bit for bit what np.percentile gives, whatever the values."""

from __future__ import annotations

import numpy as np
import pytest

from amid.tools.profiling.quantiles import MIN_SIZE, percentiles

QUANTILES = [0.5, 50.0, 99.5]


def _samples(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "normal":
        return rng.normal(40, 300, n).astype(np.float32)
    if kind == "hounsfield":  # integer-valued, many ties
        return rng.integers(-1024, 3000, n).astype(np.float32)
    if kind == "two_values":  # almost everything in one histogram bucket
        return (rng.random(n) < 0.3).astype(np.float32)
    if kind == "signed_zeros":
        return rng.choice(np.asarray([-0.0, 0.0, -1e-30, 1e-30, 7.5], dtype=np.float32), n)
    if kind == "tiny_and_huge":
        return (rng.choice([-1, 1], n) * 10.0 ** rng.uniform(-40, 38, n)).astype(np.float32)
    return (rng.exponential(5, n) - 2).astype(np.float32)


@pytest.mark.parametrize("kind", ["normal", "hounsfield", "two_values", "signed_zeros", "tiny_and_huge", "skewed"])
def test_equal_to_numpy_bit_for_bit(kind: str) -> None:
    rng = np.random.default_rng(len(kind))
    for n in (MIN_SIZE, MIN_SIZE + 1, 200_003):
        values = _samples(kind, n, rng)
        for q in (QUANTILES, [0.0, 100.0, 25.0], list(rng.uniform(0, 100, 6))):
            expected = [float(v) for v in np.percentile(values, q)]
            assert percentiles([values], q) == expected, (kind, n, q)
            cuts = sorted(rng.integers(0, n, size=5))  # the pooled per-case samples, of any sizes
            assert percentiles(np.split(values, cuts), q) == expected, (kind, n, q)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_and_other_inputs_go_to_numpy(bad: float) -> None:
    values = np.random.default_rng(3).normal(size=MIN_SIZE * 2).astype(np.float32)
    values[17] = bad
    with np.errstate(invalid="ignore"):  # numpy's interpolation next to an infinity warns; the answer stands
        for sample in (values, values.astype(np.float64), values[:100]):
            expected = np.percentile(sample, QUANTILES)
            assert np.array_equal(percentiles([sample[:7], sample[7:]], QUANTILES), expected, equal_nan=True)


def test_column_medians_equal_numpys() -> None:
    from amid.tools.profiling.representation import _column_medians

    rng = np.random.default_rng(11)
    for n in (1, 2, 3, 10, 41):
        rows = rng.choice([0.703125, 0.78125, 2.5, 3.0, 5.0, 0.1, 1 / 3], size=(n, 3)).tolist()
        assert _column_medians(rows) == [float(v) for v in np.median(rows, axis=0)]
    assert _column_medians([]) == []
    assert np.isnan(_column_medians([[1.0], [float("nan")]])[0])
