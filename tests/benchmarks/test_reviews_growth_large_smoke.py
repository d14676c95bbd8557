"""Smoke: benchmarks/scale/reviews_growth.py on the large-volume task (the demo at scale 2 here),
with the warm-up review on the same fold as the timed one, so two honest attempts on one fold must
both be accepted (not near-duplicates of each other on the finer grid)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import benchmarks._common
from amid.server.sandbox import bwrap_problem
from benchmarks.scale import reviews_growth
from tests.server.reviewer.sandbox import PREDICT_PY


def test_the_scaled_model_differs_from_the_sandboxs_only_in_its_checkpoint_block() -> None:
    assert reviews_growth.model_code(1) is None
    scaled = reviews_growth.model_code(3)
    assert scaled is not None
    changed = set(scaled["predict.py"].splitlines()) ^ set(PREDICT_PY.splitlines())
    assert changed == {
        "        " + reviews_growth.MARK,
        "        label[3 * x : 3 * (x + 4), 3 * y : 3 * (y + 4), 3 * z : 3 * (z + 2)] = 1",
    }


@pytest.mark.slow  # a scale-2 task per workspace, the review pool's start and two reviews
@pytest.mark.skipif(bwrap_problem() is not None, reason=f"the replay sandbox cannot run here: {bwrap_problem()}")
def test_reviews_growth_at_scale_2_records_the_volume_and_writes_its_own_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(benchmarks._common, "RESULTS", tmp_path)
    argv = ["--scale", "2", "--workers", "1", "--submitters", "1", "--attempts", "1", "--direct", "1", "--skip-none"]
    reviews_growth.main(argv)
    result = json.loads((tmp_path / "reviews_growth_large.json").read_text(encoding="utf-8"))
    assert result["scale"] == 2 and "128x128x40" in result["task"]
    volume = result["volume"]
    assert volume["shape"] == [128, 128, 40] and volume["spacing_mm"] == [0.4, 0.4, 2.0]
    assert volume["voxels_per_case"] == 128 * 128 * 40
    assert volume["image_bytes_per_case_decoded"] == 2 * volume["voxels_per_case"]
    assert 0 < volume["label_bytes_per_case_file"] < volume["image_bytes_per_case_file"]
    run = result["workers_1"]
    assert run["reviews"] == 1 and run["reviews_per_minute"] > 0 and run["verdict_latency_s"]["n"] == 1
    assert run["replay_s"]["bwrap"]["n"] >= 2 and run["peak_rss"]["worker_max_mb"] > 0  # warm-up and timed
    assert run["pool_start_and_first_review_s"] is not None
