"""Smoke run of benchmarks/scale/data_growth.py at tiny sizes: it runs and writes well-formed results.

No timing assertions: only shapes, counts, the cache's behaviour (a second call reads the stored
profile and starts no worker) and that both metric libraries scored the same pair.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.scale import data_growth


@pytest.mark.slow  # two real `amid serve` runs, two floor children, two metric processes: ≈ 15 s idle
def test_quick_run_writes_sane_results(tmp_path: Path) -> None:
    output = tmp_path / "data_growth.json"
    data_growth.main(["--quick", "--sizes", "5", "--output", str(output)])
    payload = json.loads(output.read_text(encoding="utf-8"))
    assert set(payload["growth"]) == {"ct", "tiles"}
    for kind, curve in payload["growth"].items():
        assert curve["cases"] == [5]
        assert all(v > 0 for v in curve["ns_per_byte_profile"]), kind
        assert all(v > 0 for v in curve["worker_peak_rss_mib"]), kind
    for name, row in payload["datasets"].items():
        n = int(name.split("_")[1])
        assert row["files"] == 2 * n
        assert row["cases_profiled"] == n
        assert row["floor"]["inflated_bytes"] > row["bytes"] / 2  # every file inflated
        assert row["cached_status"] == "ready"
        assert row["cached_same_fingerprint"]
        assert not row["cached_profile_rewritten"]
        assert row["cached_new_processes"] == 0  # no worker pool for an unchanged dataset
    metrics = payload["metrics"]
    assert metrics["pairs"] == 1
    assert set(metrics["seconds_total"]) == {"ours", "monai"}
    assert metrics["max_abs_difference"]["dice"] < 1e-6


def test_large_case_generator(tmp_path: Path) -> None:
    from amid.tools.profiling import read_array

    folder = tmp_path / "large"
    (folder / "imagesTr").mkdir(parents=True)
    (folder / "labelsTr").mkdir()
    data_growth._large_case(folder, (40, 36, 70), 0)
    image, _ = read_array(str(folder / "imagesTr" / "big_0000_0000.nii.gz"))
    label, _ = read_array(str(folder / "labelsTr" / "big_0000.nii.gz"))
    assert image.shape[:3] == label.shape[:3] == (40, 36, 70)
    assert 0 < label.sum() < label.size


def test_png_floor_inflates_image_data(tmp_path: Path) -> None:
    from PIL import Image

    image, _ = data_growth.synthetic_tile(0, 32, 0)
    path = tmp_path / "tile.png"
    Image.fromarray(image, "RGB").save(path)
    for how in ("isal", "zlib"):
        assert data_growth._inflate_file((str(path), how)) == 32 * (1 + 32 * 3)  # a filter byte per row
