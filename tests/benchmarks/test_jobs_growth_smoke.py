"""Smoke: benchmarks/scale/jobs_growth.py runs at a tiny size (local backend) and writes sane results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks._common
from benchmarks.scale import jobs_growth


def test_jobs_growth_runs_and_writes_well_formed_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(benchmarks._common, "RESULTS", tmp_path)
    jobs_growth.main(["--sizes", "3", "6", "--skip-ray", "--name", "jobs_growth_smoke"])
    result = json.loads((tmp_path / "jobs_growth_smoke.json").read_text(encoding="utf-8"))
    assert set(result["local"]) == {"3", "6"} and "ray" not in result
    for size, run in result["local"].items():
        assert run["jobs"] == run["ran"] == int(size) and run["cancelled_at_window"] == 0
        assert run["queue_latency_s"]["n"] == int(size) and run["submit_ms"]["n"] == int(size)
        assert run["jobs_per_s"] > 0 and run["tick"]["ticks"] > 0
        memory = run["memory"]
        assert memory["structures_after"]["states"] == int(size) + 2  # the burst and the two idle jobs
        assert memory["structures_after"]["launching"] == 0 and memory["peak_rss_mb"] >= memory["rss_mb_before"] > 0
    assert set(result["tick_cost"]) == {"3", "6"}
    assert all(t["queued"]["plan_ms"] >= 0 and t["held"]["poll_ms"] >= 0 for t in result["tick_cost"].values())
    assert result["growth"]["local"]["sizes"] == "6/3"
