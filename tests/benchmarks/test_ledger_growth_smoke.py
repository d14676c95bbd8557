"""Smoke test of benchmarks/scale/ledger_growth.py at two tiny sizes: it runs end to end against a
real `amid serve` and writes a well-formed result (no timing is asserted)."""

from __future__ import annotations

from pathlib import Path

import pytest

import benchmarks._common
from benchmarks.scale import ledger_growth

pytestmark = pytest.mark.slow  # two servers, two reports and two exports: about a minute on 2 cores


def test_ledger_growth_runs_and_writes_sane_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(benchmarks._common, "RESULTS", tmp_path)
    payload = ledger_growth.main(["--sizes", "50", "200", "--calls", "4", "--single", "3"])
    assert (tmp_path / "ledger_growth.json").is_file()
    assert [s["attempts"] for s in payload["sizes"]] == [50, 200]
    for size in payload["sizes"]:
        counts = size["history"]["counts"]
        assert counts["attempts"] == size["attempts"]
        assert counts["events"] >= ledger_growth.EVENTS_PER_ATTEMPT * size["attempts"]
        assert counts["notes"] >= size["attempts"] // ledger_growth.NOTE_EVERY
        assert counts["accepted"] > 0
        for phase in ("warm", "after_write"):
            assert set(size[phase]) == set(ledger_growth.TOOLS)
            assert all(s["calls"] > 0 and s["p99_ms"] >= s["p50_ms"] > 0 for s in size[phase].values())
        changes, window = size["after_write"]["run_evidence"], size["after_write"]["run_evidence_window"]
        assert 0 < changes["answer_bytes"] < window["answer_bytes"]  # a tick gets what changed, not the window
        assert len(size["supervisor_ticks"]) == 2 and size["report_s"] > 0 and size["export_s"] > 0
        assert size["report_bytes"] > 0
    assert payload["bare_sdk_ping"]["calls"] == 4
    assert set(payload["bounds"]) == {"tool_p99_ms", "window_p99_ms", "report_s"}
    every_call = [
        size[phase][tool]["p99_ms"]
        for size in payload["sizes"]
        for phase in ("warm", "after_write")
        for tool in ledger_growth.TOOLS
        if tool not in ledger_growth.ONCE
    ]
    assert payload["worst_tool_p99_ms"] == max(every_call)  # over every size and phase, not the first only
