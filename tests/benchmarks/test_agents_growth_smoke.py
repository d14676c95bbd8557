"""Smoke: benchmarks/scale/agents_growth.py runs 4 paced agents against amid serve and the bare SDK server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks._common
from benchmarks.scale import agents_growth

pytestmark = pytest.mark.slow  # amid serve and the bare server start and stop: about 20 s on a quiet 2-core machine

TOOLS = {"get_task", "list_lanes", "read_notes", "post_note", "list_jobs", "leaderboard", "get_review"}


def test_agents_growth_runs_and_writes_well_formed_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(benchmarks._common, "RESULTS", tmp_path)
    agents_growth.main(["--agents", "4", "--seconds", "3", "--idle-s", "0.5", "--no-py-spy", "--name", "smoke"])
    result = json.loads((tmp_path / "smoke.json").read_text(encoding="utf-8"))
    assert result["sizes"] == [4] and result["errors_total"] == 0
    for server in ("amid", "bare_sdk_json_response"):
        (row,) = result[server]
        assert row["agents"] == 4 and row["errors"] == {} and row["calls"] >= 8
        assert row["server_cpu_ms_per_call"] > 0 and row["client_cores"] > 0 and row["behind_pace_p99_ms"] >= 0
        assert row["p50_ms"] <= row["p99_ms"]
    assert set(result["amid"][0]["per_tool"]) <= TOOLS and "get_task" in result["amid"][0]["per_tool"]
    assert set(result["bare_sdk_json_response"][0]["per_tool"]) == {"ping"}
    assert result["post_note_audit"]["exactly_once"] is True
    assert set(result["ratio_amid_over_bare"]) == {"4"}
    assert result["amid_scaling"]["growth_vs_smallest"][0]["agents"] == 4
    assert result["amid_hot_spots_at_largest"] is None


def test_hot_spots_sorts_self_time_into_layers(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    loop = "Runner.run (asyncio/runners.py:118)"
    raw.write_text(
        f"{loop};handle (mcp/server/lowlevel/server.py:10);_run (amid/server/ledger/database.py:291) 6\n"
        f"{loop};call (amid/server/toolkit.py:50);summaries (amid/server/ledger/lanes.py:20) 2\n"
        f"{loop};call (amid/server/toolkit.py:50) 1\n"
        f"{loop};send (uvicorn/protocols/http/httptools_impl.py:400) 1\n",
        encoding="utf-8",
    )
    spots = agents_growth.hot_spots(raw)
    assert spots["samples"] == 10
    layers = {row["frame"]: row["share"] for row in spots["self_by_layer"]}
    assert layers["ledger (server/ledger, DuckDB)"] == 0.8 and layers["AMID tools and server code"] == 0.1
    assert spots["self_by_function"][0] == {"frame": "_run (amid/server/ledger/database.py)", "share": 0.6}
    inclusive = {row["frame"]: row["share"] for row in spots["inclusive_amid"]}
    assert inclusive["call (amid/server/toolkit.py)"] == 0.3
    assert "handle (mcp/server/lowlevel/server.py)" not in inclusive
