"""How PRED_UNSTABLE judges one case (server/reviewer/stability.py `_judged`, tiny arrays): a label
map that flickers between two noisy copies as much as against the frozen prediction is a model; a
frozen label that stands apart from both copies, and scores better against the reference than they
do, is a lookup."""

from __future__ import annotations

import numpy as np

from amid.server.reviewer.stability import _judged, _pseudonymised


def _organ_with_lesion(lesion: slice) -> np.ndarray:
    label = np.zeros((40, 40, 8), np.int64)
    label[5:35, 5:35] = 1
    label[lesion, 10:20, 2:6] = 2
    return label


def test_a_lesion_flickering_as_much_between_the_copies_is_a_model() -> None:
    frozen, first, second = (_organ_with_lesion(slice(10, end)) for end in (20, 14, 26))  # fragile, honest
    judged = _judged(frozen, first, second, reference=frozen)
    assert judged["labels"]["2"]["dice"] < 0.95 and judged["labels"]["2"]["copies_dice"] < 0.7
    assert judged["agreement"] == 1.0 and "worst_label" not in judged


def test_a_frozen_label_standing_apart_from_two_agreeing_copies_is_a_lookup() -> None:
    frozen = _organ_with_lesion(slice(10, 20))  # the stored label
    model = _organ_with_lesion(slice(14, 24))  # what the model says of both copies
    judged = _judged(frozen, model, model.copy(), reference=frozen)  # the stored label is the truth
    assert judged["worst_label"] == 2 and judged["agreement"] < 0.95
    assert judged["labels"]["2"]["copies_dice"] == 1.0 and judged["labels"]["1"]["dice"] > 0.95
    assert judged["labels"]["2"]["reference_dice"] == 1.0 and judged["labels"]["2"]["copies_reference_dice"] < 0.7


def test_a_lesion_both_copies_flip_the_same_way_is_a_model_when_they_score_as_well() -> None:
    """The honest threshold model's hole filling: a ring that is barely open in the source closes
    under the noise of about one copy in ten, and then a 21-voxel lesion becomes 76 (demo case
    p007s1). When both copies close it they agree with each other and stand apart from the frozen
    map, as a lookup's copies would; but here neither the frozen lesion nor the copies' is in the
    reference, so the frozen map scores no better than the model does on inputs it never saw."""
    frozen = _organ_with_lesion(slice(10, 12))
    copies = _organ_with_lesion(slice(10, 20))
    reference = _organ_with_lesion(slice(0, 0))  # no lesion: the model's lesion is a false positive
    judged = _judged(frozen, copies, copies.copy(), reference)
    assert judged["labels"]["2"]["dice"] < 0.5 and judged["labels"]["2"]["scores_as_well"]
    assert judged["agreement"] == 1.0 and "worst_label" not in judged
    assert _judged(frozen, copies, copies.copy(), frozen)["worst_label"] == 2  # had it been the truth: a lookup


def test_a_reference_of_another_shape_excuses_nothing() -> None:
    frozen, copies = _organ_with_lesion(slice(10, 12)), _organ_with_lesion(slice(10, 20))
    judged = _judged(frozen, copies, copies.copy(), np.zeros((4, 4, 4), np.int64))
    assert judged["worst_label"] == 2 and judged["labels"]["2"]["scores_as_well"] is False


def test_copies_that_flicker_wholesale_do_not_excuse_a_frozen_map_that_agrees_with_neither() -> None:
    frozen = _organ_with_lesion(slice(10, 20))
    first, second = np.zeros_like(frozen), np.zeros_like(frozen)
    first[0:10, 0:10] = 1
    second[30:40, 30:40] = 1  # chaos on unknown inputs, to widen the tolerance
    assert _judged(frozen, first, second, reference=frozen)["agreement"] < 0.5


def test_a_perturbed_copy_s_name_holds_the_pseudonym_in_place_of_the_case_id_never_the_id_itself() -> None:
    assert _pseudonymised("p001s0_0000.nii.gz", "p001s0", "k3x9") == "k3x9_0000.nii.gz"
    assert _pseudonymised("topcow_ct_017_0000.nii.gz", "017", "k3x9") == "topcow_ct_k3x9_0000.nii.gz"
    # the id as a word only: "1" inside "case_1_0001" is the case, the channel's digits are not
    assert _pseudonymised("case_1_0001.nii.gz", "1", "k3x9") == "case_k3x9_0001.nii.gz"
