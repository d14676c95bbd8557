"""Duplicate cases: byte-identical image files, and near-duplicates whose central slices look the same."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from amid.tools.profiling.casework import CaseResult
from amid.tools.profiling.voxels import thumbnails_match, unit_thumbnail, unit_thumbnails_match

# Besides correlated thumbnails, two near-duplicates' central slices agree in mean to within 5 % of
# their spread and in spread to within 5 % (a flipped or re-windowed image is not a copy).
NEAR_DUPLICATE_TOLERANCE = 0.05
# Cases of one in-plane shape, sorted by mean, are compared with this many neighbours only, so that
# thousands of similar images cost linear, not quadratic, time.
NEAR_DUPLICATE_WINDOW = 8


def exact_duplicate_sets(results: list[CaseResult]) -> list[list[CaseResult]]:
    """Cases whose image files have identical bytes, grouped; groups of one are left out."""
    by_hash: dict[str, list[CaseResult]] = defaultdict(list)
    for result in results:
        if result.content_hash:
            by_hash[result.content_hash].append(result)
    return [group for group in by_hash.values() if len(group) > 1]


def _moments_close(first: CaseResult, second: CaseResult) -> bool:
    a = first.image_moments[0] if first.image_moments else None
    b = second.image_moments[0] if second.image_moments else None
    if a is None or b is None:
        return False
    spread = max(a.var, b.var) ** 0.5
    same_mean = abs(a.mean - b.mean) <= NEAR_DUPLICATE_TOLERANCE * spread
    return same_mean and abs(a.var**0.5 - b.var**0.5) <= NEAR_DUPLICATE_TOLERANCE * spread


def _looks_same(first: CaseResult, second: CaseResult, units: dict[str, np.ndarray | None]) -> bool:
    if first.thumbnail is None or second.thumbnail is None or first.content_hash == second.content_hash:
        return False
    if not _moments_close(first, second):
        return False
    first_unit, second_unit = units[first.case_id], units[second.case_id]
    if first_unit is None or second_unit is None:  # a flat thumbnail (slice_thumbnail returns none such)
        return thumbnails_match(first.thumbnail, second.thumbnail)
    return unit_thumbnails_match(first.thumbnail, second.thumbnail, first_unit, second_unit)


def _candidate_pairs(results: list[CaseResult]) -> list[tuple[CaseResult, CaseResult]]:
    by_shape: dict[tuple[int, ...], list[CaseResult]] = defaultdict(list)
    for result in results:
        if result.thumbnail is not None and result.header is not None:
            by_shape[result.header.shape[:2]].append(result)
    pairs = []
    for group in by_shape.values():
        ordered = sorted(group, key=lambda r: float(r.thumbnail.mean()) if r.thumbnail is not None else 0.0)
        for i, first in enumerate(ordered):
            pairs += [(first, second) for second in ordered[i + 1 : i + 1 + NEAR_DUPLICATE_WINDOW]]
    return pairs


def near_duplicate_sets(results: list[CaseResult]) -> list[list[CaseResult]]:
    """Cases that are not byte-identical but look the same, grouped through matching pairs."""
    parent = {r.case_id: r.case_id for r in results}

    def root(case_id: str) -> str:
        while parent[case_id] != case_id:
            case_id = parent[case_id]
        return case_id

    pairs = _candidate_pairs(results)
    # each case's thumbnail centred and scaled once, not once per pair it is in (up to 16 pairs)
    units = {r.case_id: unit_thumbnail(r.thumbnail) for r in results if r.thumbnail is not None}
    for first, second in pairs:
        if _looks_same(first, second, units):
            parent[root(first.case_id)] = root(second.case_id)
    clusters: dict[str, list[CaseResult]] = defaultdict(list)
    for result in results:
        clusters[root(result.case_id)].append(result)
    return [group for group in clusters.values() if len(group) > 1]


def crosses_splits(group: list[CaseResult]) -> bool:
    return len({r.split for r in group}) > 1
