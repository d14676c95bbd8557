"""Exact percentiles of large float32 samples, equal to numpy's (linear method), in a third of the time.

`np.percentile` copies the pooled samples and partitions them around every order statistic it
needs: about 0.35 s for the 10 million foreground samples of a profile, spent in the caller after
every worker is done. Here the order statistics come from a histogram of the values' top 16 bits
(float32 bits map to integers of the same order) and a partition of the few values in the buckets
that hold them, in chunks of a million values; numpy's own interpolation formula then gives the
same float64 results bit for bit (a test compares them). Small samples, other dtypes, and samples
holding NaN or infinity go to `np.percentile` itself.

Samples of 8- and 16-bit integers (what CT, MRI and RGB voxels are; workers keep them so, a half to a
quarter of float32's bytes to send back) count as their float32 values: their order statistics come
exactly from one histogram of the values themselves, then the same float32 interpolation (samples
of several integer types are compared as float32).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

MIN_SIZE = 1 << 16  # below this np.percentile is as fast
BUCKETS = 1 << 16
# Values handled at a time: every temporary stays a few MB, so the allocator reuses its pages
# (whole-sample temporaries of 40-80 MB are fresh mappings each time, and faulting them in costs
# more than the arithmetic).
CHUNK = 1 << 20
# Buckets of the top 16 bits of the ordered keys that hold -inf, +inf or NaN.
NON_FINITE = (slice(0, 0x80), slice(0xFF80, BUCKETS))
# Integer samples kept in their own type (one histogram bucket per value).
SMALL_INTEGERS = {np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16)}


def percentiles(parts: Sequence[np.ndarray], q: Sequence[float]) -> list[float]:
    """`np.percentile(np.concatenate(parts).astype(np.float32), q)` for 1-D float32 or 8/16-bit integer
    arrays, as Python floats (np.percentile itself for other dtypes)."""
    n = sum(part.size for part in parts)
    dtypes = {part.dtype for part in parts}
    if len(dtypes) == 1 and dtypes <= SMALL_INTEGERS and all(part.ndim == 1 for part in parts) and n >= MIN_SIZE:
        return _interpolated(n, q, lambda ranks: _integer_order_statistics(parts, ranks))
    if any(part.dtype in SMALL_INTEGERS for part in parts):
        parts = [part.astype(np.float32) for part in parts]  # their values exactly
    usual = all(part.dtype == np.float32 and part.ndim == 1 for part in parts)
    if not usual or n < MIN_SIZE:
        return _numpy(parts, q)
    counts = np.zeros(BUCKETS, dtype=np.int64)
    for chunk in _chunks(parts):
        counts += np.bincount(_buckets(chunk), minlength=BUCKETS)
    if any(counts[part].any() for part in NON_FINITE):
        return _numpy(parts, q)
    return _interpolated(n, q, lambda ranks: _order_statistics(parts, counts, ranks))


def _interpolated(n: int, q: Sequence[float], order_statistics: Callable[[np.ndarray], list[float]]) -> list[float]:
    """numpy's linear method (Hyndman and Fan's 7th) in float32, from the values at the ranks needed."""
    quantiles = np.true_divide(np.asarray(q, dtype=np.float64), 100)
    virtual = (n - 1) * quantiles
    below = np.floor(virtual).astype(np.intp)
    above = below + 1
    below, above = np.clip(below, 0, n - 1), np.clip(above, 0, n - 1)
    ranks = np.asarray(sorted(set(below.tolist()) | set(above.tolist())), dtype=np.intp)
    found = dict(zip(ranks.tolist(), order_statistics(ranks), strict=True))
    low = np.asarray([found[r] for r in below.tolist()], dtype=np.float32)
    high = np.asarray([found[r] for r in above.tolist()], dtype=np.float32)
    gamma = virtual - below
    difference = high - low
    result = low + difference * gamma
    np.subtract(high, difference * (1 - gamma), out=result, where=gamma >= 0.5)
    return [float(v) for v in result]


def _numpy(parts: Sequence[np.ndarray], q: Sequence[float]) -> list[float]:
    return [float(v) for v in np.percentile(np.concatenate(parts), q)]


def _chunks(parts: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The parts in chunks of about CHUNK values: large parts cut, runs of small ones joined (a
    histogram per case's few thousand values would cost all its buckets each time)."""
    chunks: list[np.ndarray] = []
    run: list[np.ndarray] = []
    held = 0
    for part in parts:
        for start in range(0, part.size, CHUNK):
            piece = part[start : start + CHUNK]
            if held + piece.size > CHUNK and run:
                chunks.append(np.concatenate(run) if len(run) > 1 else run[0])
                run, held = [], 0
            run.append(piece)
            held += piece.size
    if run:
        chunks.append(np.concatenate(run) if len(run) > 1 else run[0])
    return chunks


def _integer_order_statistics(parts: Sequence[np.ndarray], ranks: np.ndarray) -> list[float]:
    """The values at the given ranks of the sorted sample of one 8/16-bit integer type, from its
    histogram: each value's bits as unsigned, the sign bit flipped for signed types (then the keys
    sort as the values do)."""
    dtype = parts[0].dtype
    bits = 8 * dtype.itemsize
    unsigned = np.dtype(f"u{dtype.itemsize}")
    offset = 1 << (bits - 1) if dtype.kind == "i" else 0
    counts = np.zeros(1 << bits, dtype=np.int64)
    for chunk in _chunks(parts):
        keys = chunk.view(unsigned) ^ unsigned.type(offset) if offset else chunk
        counts += np.bincount(keys, minlength=1 << bits)
    keys_at = np.searchsorted(np.cumsum(counts), ranks, side="right")
    return [float(key - offset) for key in keys_at.tolist()]


def _buckets(values: np.ndarray) -> np.ndarray:
    """Each value's histogram bucket: the top 16 bits of a uint32 key in the order of the float32 values
    (sign bit flipped for positives, all bits for negatives)."""
    bits = values.view(np.uint32)
    keys = (values.view(np.int32) >> 31).view(np.uint32)  # all ones for negatives, else zeros
    keys |= np.uint32(0x80000000)
    keys ^= bits
    keys >>= 16
    return keys.astype(np.uint16)  # bincount converts wider types slowly


def _order_statistics(parts: Sequence[np.ndarray], counts: np.ndarray, ranks: np.ndarray) -> list[float]:
    """The values at the given ranks of the sorted sample (0-based, ascending)."""
    ends = np.cumsum(counts)
    buckets = np.searchsorted(ends, ranks, side="right")
    wanted = sorted(set(buckets.tolist()))
    pieces: dict[int, list[np.ndarray]] = {bucket: [] for bucket in wanted}
    for chunk in _chunks(parts):
        of_chunk = _buckets(chunk)
        for bucket in wanted:
            pieces[bucket].append(chunk[of_chunk == bucket])
    members = {bucket: np.concatenate(found) for bucket, found in pieces.items()}
    values_at: list[float] = []
    for rank, bucket in zip(ranks.tolist(), buckets.tolist(), strict=True):
        offset = rank - int(ends[bucket] - counts[bucket])
        values_at.append(float(np.partition(members[bucket], offset)[offset]))
    return values_at
