"""Duplicate cases: byte-identical image files, and near-duplicates whose central slices look the same."""

from __future__ import annotations

from collections import defaultdict

from tools.profiling.casework import CaseResult
from tools.profiling.voxels import thumbnails_match

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


def _looks_same(first: CaseResult, second: CaseResult) -> bool:
    if first.thumbnail is None or second.thumbnail is None or first.content_hash == second.content_hash:
        return False
    return _moments_close(first, second) and thumbnails_match(first.thumbnail, second.thumbnail)


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

    for first, second in _candidate_pairs(results):
        if _looks_same(first, second):
            parent[root(first.case_id)] = root(second.case_id)
    clusters: dict[str, list[CaseResult]] = defaultdict(list)
    for result in results:
        clusters[root(result.case_id)].append(result)
    return [group for group in clusters.values() if len(group) > 1]


def crosses_splits(group: list[CaseResult]) -> bool:
    return len({r.split for r in group}) > 1
