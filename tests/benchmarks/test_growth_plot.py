"""benchmarks/scale/plot.py draws the committed growth results, and a folder without them, into a PNG."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from benchmarks.scale import plot

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _assert_png(path: Path) -> None:
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    with Image.open(path) as image:
        width, height = image.size
    assert width > 400 and height > 300


def test_plot_draws_the_committed_results(tmp_path: Path) -> None:
    out = plot.plot(plot.RESULTS, tmp_path / "growth.png")
    assert out == tmp_path / "growth.png"
    _assert_png(out)


def test_plot_draws_no_data_panels_for_an_empty_folder(tmp_path: Path) -> None:
    empty = tmp_path / "results"
    empty.mkdir()
    out = plot.main(["--results", str(empty), "--out", str(tmp_path / "out" / "growth.png")])
    _assert_png(out)


def test_plot_survives_unreadable_and_partial_files(tmp_path: Path) -> None:
    (tmp_path / "ledger_growth.json").write_text('{"sizes": [{"attempts": 1}]}', encoding="utf-8")
    (tmp_path / "jobs_growth.json").write_text("not json", encoding="utf-8")
    (tmp_path / "reviews_growth.json").write_text('{"workers_1": {"review_workers": 1}}', encoding="utf-8")
    _assert_png(plot.plot(tmp_path, tmp_path / "growth.png"))
