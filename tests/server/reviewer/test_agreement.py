"""Agreement between a replayed output and a frozen prediction (pure functions, tiny arrays)."""

from __future__ import annotations

import numpy as np

from amid.server.reviewer.agreement import label_agreement, label_agreements, value_agreement, values_agree


def test_agreement_is_one_for_identical_maps_and_drops_with_swapped_labels() -> None:
    frozen = np.zeros((4, 4, 2), np.uint8)
    frozen[:2] = 1
    frozen[2:3] = 2
    swapped = np.where(frozen == 2, 1, np.where(frozen == 1, 2, 0))
    assert label_agreement(frozen, frozen) == 1.0 and label_agreement(np.zeros_like(frozen), frozen) == 0.0
    assert label_agreement(swapped, frozen) == 0.0 and label_agreement(frozen[:3], frozen) == 0.0
    assert label_agreement(np.zeros_like(frozen), np.zeros_like(frozen)) == 1.0  # both empty agree


def test_continuous_images_agree_within_tolerance_and_tables_by_value() -> None:
    frozen = np.linspace(0.0, 100.0, 1000).reshape(10, 10, 10)
    assert value_agreement(frozen + 0.01, frozen) == 1.0 and value_agreement(frozen + 5.0, frozen) < 0.01
    assert values_agree("0.50001", "0.5") and not values_agree("0.6", "0.5") and not values_agree(None, "0.5")
    assert values_agree("benign", "benign") and not values_agree("nan", "nan")


def test_a_small_label_edited_inside_a_big_agreeing_one_fails_per_label_but_not_pooled() -> None:
    """Issue 21's lesion-only edit: pooled agreement 0.99+, the lesion alone far below."""
    frozen = np.zeros((40, 40, 10), np.uint8)
    frozen[2:38, 2:38] = 1
    frozen[10:13, 10:13, 4:6] = 2  # 18 voxels of lesion
    replayed = frozen.copy()
    replayed[10:13, 10:13, 4:6] = 1
    replayed[20:23, 20:23, 4:6] = 2  # the lesion somewhere else, same size
    assert label_agreement(replayed, frozen) > 0.99  # what the pooled figure let through
    per_label = label_agreements(replayed, frozen)
    assert per_label[1] > 0.99 and per_label[2] == 0.0
    assert label_agreements(frozen, frozen) == {1: 1.0, 2: 1.0} and label_agreements(frozen * 0, frozen * 0) == {}
    assert label_agreements(frozen[:3], frozen) == {1: 0.0, 2: 0.0}  # another shape agrees on nothing
