"""One rule for what counts and what may be final (server/finality.py), used by the supervisor, choose_final,
amid finalize and the package builder; they disagreed on a NaN verified score before."""

from __future__ import annotations

from typing import Any

import pytest

from amid.server.finality import count_problems, counts, final_problems
from amid.server.supervisor.state import RunView
from amid.tools.run_evidence import AttemptEvidence

GOOD: dict[str, Any] = {"status": "accepted", "budget_class": "real", "holdout_gated": True, "verified_score": 0.8}


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"status": "rejected"}, "status is rejected, not accepted"),
        ({"budget_class": "smoke"}, "budget class is smoke, not real"),
        ({"holdout_gated": False}, "its holdout gate failed"),
        ({"verified_score": None}, "it has no verified primary score"),
        ({"verified_score": float("nan")}, "it has no verified primary score"),
        ({"verified_score": float("inf")}, "it has no verified primary score"),
    ],
)
def test_each_condition_is_named_and_the_supervisor_agrees(change: dict[str, Any], reason: str) -> None:
    row = {**GOOD, **change}
    assert count_problems(row) == [reason] and not counts(row)
    evidence = AttemptEvidence(
        attempt_id="att-00001",
        agent_id="ana",
        lane_id="unet",
        review_id="rev-00001",
        verdict="accepted",
        fold_spread=0.0,
        n_folds=1,
        failed_codes=[],
        created_at="2026-01-01T00:00:00",
        **row,
    )
    assert RunView.counts(None, evidence) is False  # type: ignore[arg-type]
    assert RunView.counts(None, evidence.model_copy(update=GOOD)) is True  # type: ignore[arg-type]


def test_final_needs_a_counted_attempt_on_a_promoted_or_challenger_lane() -> None:
    row = {**GOOD, "lane_id": "unet"}
    assert final_problems(row, "promoted") == [] and final_problems(row, "challenger") == []
    assert final_problems(row, "covered") == ["its lane 'unet' is not promoted or challenger"]
    assert final_problems({**row, "verified_score": float("nan")}, None) == [
        "it has no verified primary score",
        "its lane 'unet' is not promoted or challenger",
    ]
