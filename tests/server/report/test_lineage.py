"""The lineage layout: generations left to right, a first child on its parent's row."""

from __future__ import annotations

from amid.server.report.lineage import layers


def test_a_chain_stays_on_one_row_and_a_second_child_opens_a_new_one() -> None:
    position = layers([("a1", None), ("a2", "a1"), ("a3", "a2"), ("a4", "a1"), ("b1", None)])
    assert position["a1"] == (0, 0) and position["a2"] == (1, 0) and position["a3"] == (2, 0)
    assert position["a4"][0] == 1 and position["a4"][1] not in {0, position["b1"][1]}
    assert position["b1"][0] == 0
    assert len(set(position.values())) == len(position)  # no two attempts share a place


def test_an_unknown_parent_or_a_cycle_still_places_every_attempt() -> None:
    position = layers([("x", "gone"), ("p", "q"), ("q", "p")])
    assert position["x"] == (0, 0)
    assert set(position) == {"x", "p", "q"} and len(set(position.values())) == 3
