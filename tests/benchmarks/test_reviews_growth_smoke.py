"""Smoke: benchmarks/scale/reviews_growth.py runs one review (one reviewer process, bubblewrap replay) and
one direct wrapped/unwrapped replay, and writes sane results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks._common
from amid.server.sandbox import bwrap_problem
from benchmarks.scale import reviews_growth

pytestmark = [
    pytest.mark.slow,  # the review pool's fork server imports the reviewer before the first review
    pytest.mark.skipif(bwrap_problem() is not None, reason=f"the replay sandbox cannot run here: {bwrap_problem()}"),
]


def test_reviews_growth_runs_and_writes_well_formed_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(benchmarks._common, "RESULTS", tmp_path)
    argv = ["--workers", "1", "--submitters", "1", "--attempts", "1", "--direct", "1", "--skip-none", "--no-warmup"]
    reviews_growth.main([*argv, "--name", "reviews_growth_smoke"])
    result = json.loads((tmp_path / "reviews_growth_smoke.json").read_text(encoding="utf-8"))
    run = result["workers_1"]
    assert run["reviews"] == 1 and run["review_workers"] == 1 and run["replay_sandbox"] == "bwrap"
    assert run["verdict_latency_s"]["n"] == 1 and run["reviews_per_minute"] > 0
    assert run["replay_s"]["bwrap"]["n"] >= 1 and run["pool_start_and_first_review_s"] is None
    assert "none" not in run["replay_s"] and run["peak_rss"]["workers"] >= 1
    direct = result["sandbox_direct"]
    for what in ("replay", "python_pass"):
        assert direct[what]["bwrap_s"]["n"] == direct[what]["none_s"]["n"] == 1
        assert direct[what]["bwrap_s"]["p50"] > 0 and direct[what]["none_s"]["p50"] > 0
    assert "sandbox_none" not in result and result["summary"]["reviews_per_minute"] == {"1": run["reviews_per_minute"]}
