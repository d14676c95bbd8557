from __future__ import annotations

import random

import pytest

from amid.server.errors import InvalidInput
from amid.tools.task.folds import make_folds


def _groups(seed: int) -> dict[str, str]:
    rng = random.Random(seed)
    return {f"case{i:03d}": f"patient{rng.randrange(17)}" for i in range(60)}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_no_group_crosses_folds(seed: int) -> None:
    case_groups = _groups(seed)
    folds = make_folds(case_groups, k=5, seed=seed, group_key="patient")
    fold_of_group: dict[str, set[int]] = {}
    for fold in folds.folds:
        for case in fold.val_cases:
            fold_of_group.setdefault(case_groups[case], set()).add(fold.fold)
        assert not set(fold.val_cases) & set(fold.train_cases)
        assert sorted(fold.val_cases + fold.train_cases) == sorted(case_groups)
    assert all(len(f) == 1 for f in fold_of_group.values())
    assert sorted(c for f in folds.folds for c in f.val_cases) == sorted(case_groups)


def test_same_seed_gives_same_folds_and_other_seed_differs() -> None:
    case_groups = _groups(5)
    first = make_folds(case_groups, 5, 11, "patient")
    assert first == make_folds(dict(reversed(list(case_groups.items()))), 5, 11, "patient")
    assert first != make_folds(case_groups, 5, 12, "patient")


def test_folds_are_balanced_in_cases_when_groups_allow() -> None:
    folds = make_folds({f"c{i}": f"c{i}" for i in range(23)}, 5, 0, None)
    sizes = sorted(len(f.val_cases) for f in folds.folds)
    assert sizes[-1] - sizes[0] <= 1


def test_fewer_groups_than_folds_is_refused() -> None:
    with pytest.raises(InvalidInput, match="5 folds need at least 5 groups, the data has 3"):
        make_folds({"a": "p1", "b": "p2", "c": "p3"}, 5, 0, "patient")
