"""`amid report` on the demo run, rendered in headless Chromium; an empty run; ledger text escaped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from server.context import Services
from server.ledger import utcnow
from server.ledger.lanes import LaneRow
from server.report import queries
from server.report.build import build_report
from tests.server.report.checks import check_numbers_match, check_plots_drawn
from tests.server.report.chromium import WINDOW, dump_dom, screenshot
from tests.server.report.conftest import PLOT_IDS, numbers_from_file
from tests.server.report.dom import parse


def test_report_of_the_demo_run_draws_every_plot_and_matches_the_ledger(demo_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = subprocess.run([sys.executable, "-m", "server.cli", "report", "-w", str(demo_copy), "--out", str(out)],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"report written to {out}" in result.stdout
    html = out.read_text(encoding="utf-8")
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    page = parse(dump_dom(out, tmp_path / "profile"))
    check_plots_drawn(page)
    check_numbers_match(page, numbers_from_file(demo_copy / "amid.duckdb"))

    png = screenshot(out, tmp_path / "report.png", tmp_path / "profile")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(png) as image:
        assert image.size == WINDOW
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 50  # drawn, not a blank page


def test_report_defaults_to_the_workspace_folder(demo_copy: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "server.cli", "report", "-w", str(demo_copy)],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (demo_copy / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_run_without_attempts_shows_no_data_yet_in_every_plot(services: Services) -> None:
    page = parse(build_report(services.ledger, services.workspace))
    plots = page.by_class("plot")
    assert {p.attrs["id"] for p in plots} == PLOT_IDS
    for plot in plots:
        assert plot.attrs["data-n"] == "0" and "empty" in plot.classes
        assert plot.by_class("no-data")[0].text.startswith("no data yet"), plot.attrs["id"]
    assert page.by_id("table-leaderboard").by_class("no-data")
    assert "no final choice yet" in page.by_id("table-package").text


def test_ledger_text_written_by_agents_is_escaped(services: Services, tmp_path: Path) -> None:
    evil = '<script>document.title="owned"</script><img src=x onerror="document.title=1">'
    services.ledger.lanes.add([LaneRow(lane_id="agent-lane", title=f"lane {evil}", family="custom", tier="secondary",
                                       origin="agent", rank=1.0, lane_file="memory/lanes/agent-lane.md", spec={})],
                              utcnow())  # fmt: skip
    services.ledger.notes.add("alice", "observation", "agent-lane", f"note {evil}", "body", {})
    html = build_report(services.ledger, services.workspace)
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html
    out = tmp_path / "report.html"
    out.write_text(html, encoding="utf-8")
    page = parse(dump_dom(out, tmp_path / "profile"))
    assert not page.by_tag("script") and not page.by_tag("img")
    assert page.by_tag("title")[0].text.startswith("AMID report")  # no script ran to change it
    notes = page.by_id("table-notes").by_tag("tbody")[0].text
    assert f"note {evil}" in notes  # shown as text, exactly as written
    lanes = page.by_id("table-lanes").text
    assert f"lane {evil}" in lanes


def test_a_run_larger_than_the_row_limit_says_what_the_page_leaves_out(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At 100,000 attempts the report's queries stopped at 50,000 rows and nothing said so.
    monkeypatch.setattr(queries, "ROW_LIMIT", 20)
    for i in range(19):
        services.ledger.activity.add_heartbeat("alice", "custom", f"h{i}", "manager", None)
    assert 'id="truncated"' not in build_report(services.ledger, services.workspace)
    services.ledger.activity.add_heartbeat("alice", "custom", "h19", "manager", None)
    notice = parse(build_report(services.ledger, services.workspace)).by_id("truncated")
    assert "at most 20 rows per query" in notice.text and ": heartbeats." in notice.text
