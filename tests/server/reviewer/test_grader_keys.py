"""A contract metric is read from a task grader's result by its own key, else by one documented rule
(the metric's name with one aggregate word: PUMA returns `f1` as `macro_f1`); a key that only
contains the name is never taken, and two candidates are refused by name."""

from __future__ import annotations

import pytest

from amid.server.errors import InvalidInput
from amid.server.reviewer.grader_keys import metrics_of

PUMA = {"macro_f1": 0.61, "f1_tumor": 0.9, "f1_TILs": 0.5, "f1_other": 0.43, "f1_position": 3.0, "overall": 3.0}


def test_an_exact_key_wins_over_any_alias() -> None:
    assert metrics_of(["f1"], {"f1": 0.2, "macro_f1": 0.7}) == {"f1": 0.2}


def test_pumas_f1_is_its_macro_f1_not_a_per_class_part_listed_first() -> None:
    first_a_part = {"f1_tumor": 0.9, **PUMA}  # a per-class key before the aggregate
    assert metrics_of(["f1"], first_a_part) == {"f1": 0.61}


def test_a_key_that_only_contains_the_name_is_not_taken() -> None:
    assert metrics_of(["f1"], {"f1_tumor": 0.9, "lesion_f1_score": 0.4, "overall": 1.0}) == {}


def test_two_aggregate_keys_are_refused_naming_the_metric_the_keys_and_the_fix() -> None:
    with pytest.raises(InvalidInput) as caught:
        metrics_of(["f1"], {"macro_f1": 0.6, "micro_f1": 0.7})
    message = caught.value.message
    assert "'f1'" in message and "macro_f1" in message and "micro_f1" in message
    assert "metric_config.json" in message and caught.value.field == "metrics"


def test_ranking_keys_and_positions_are_never_a_metric() -> None:
    assert metrics_of(["dice"], {"overall": 2.0, "mean_position": 2.0, "dice_position": 1.0}) == {}
