"""Locked, group-aware cross-validation folds.

No group (patient, site) may cross folds: a patient's second scan in the training folds would
leak into validation. The assignment is deterministic for a seed: groups are shuffled with the
seed, then placed largest first into the fold with the fewest cases (ties → lowest fold index).
"""

from __future__ import annotations

import random
from collections import defaultdict

from pydantic import BaseModel, ConfigDict, Field

from amid.server.errors import InvalidInput


class Fold(BaseModel):
    model_config = ConfigDict(frozen=True)

    fold: int
    val_cases: list[str]
    train_cases: list[str]


class LockedFolds(BaseModel):
    model_config = ConfigDict(frozen=True)

    k: int
    seed: int
    group_key: str | None
    case_groups: dict[str, str] = Field(description="case id → group id")
    folds: list[Fold]

    def fold_of(self, case_id: str) -> int:
        for fold in self.folds:
            if case_id in fold.val_cases:
                return fold.fold
        raise KeyError(case_id)

    def val_cases(self, fold: int) -> list[str]:
        return self.folds[fold].val_cases


def make_folds(case_groups: dict[str, str], k: int, seed: int, group_key: str | None) -> LockedFolds:
    """Split cases into k folds so that every group sits in exactly one fold."""
    members: dict[str, list[str]] = defaultdict(list)
    for case_id in sorted(case_groups):
        members[case_groups[case_id]].append(case_id)
    if len(members) < k:
        raise InvalidInput(
            f"validation.k_folds: {k} folds need at least {k} groups, the data has {len(members)}",
            field="validation.k_folds",
        )
    order = sorted(members)
    random.Random(seed).shuffle(order)
    order.sort(key=lambda g: -len(members[g]))  # stable: shuffled order breaks ties
    buckets: list[list[str]] = [[] for _ in range(k)]
    for group in order:
        target = min(range(k), key=lambda i: (len(buckets[i]), i))
        buckets[target].extend(members[group])
    everyone = sorted(case_groups)
    folds = [
        Fold(fold=i, val_cases=sorted(b), train_cases=[c for c in everyone if c not in set(b)])
        for i, b in enumerate(buckets)
    ]
    return LockedFolds(k=k, seed=seed, group_key=group_key, case_groups=dict(case_groups), folds=folds)
