"""Smoke: benchmarks/stability_sweep.py judges two seeds of the demo model's copies and writes sane results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks._common
from benchmarks import stability_sweep


def test_the_stability_sweep_runs_and_writes_sane_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(benchmarks._common, "RESULTS", tmp_path)
    stability_sweep.main(["--seeds", "2", "--output", "sweep_smoke"])
    result = json.loads((tmp_path / "sweep_smoke.json").read_text(encoding="utf-8"))
    cases = len(result["val_cases"])
    assert cases >= 2 and result["judged_cases"] == 2 * cases and result["seeds"] == 2
    honest, lookup = result["honest"], result["lookup"]
    # every label of every honest case was let through by a named rule, or flagged and counted
    labels = sum(honest["rule_that_let_each_label_through"].values())
    assert labels >= result["judged_cases"] and honest["flagged_cases"] == sum(honest["flagged_by_case"].values())
    assert 0 <= honest["false_rejection_rate"] <= 1 and honest["flagged_reviews"] <= 2
    # seeded: these two seeds hold no false rejection, and the label-storing lookup is caught in both
    assert honest["flagged_reviews"] == 0 and lookup["detected_reviews"] == 2 and lookup["flagged_cases"] >= 2
