"""`amid report` on the demo run, rendered in headless Chromium; an empty run; ledger text escaped; a long run
shown in part."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from amid.server.context import Services
from amid.server.ledger import utcnow
from amid.server.ledger.attempts import NewAttempt
from amid.server.ledger.lanes import LaneRow
from amid.server.ledger.reviews import MetricRow, ReviewOutcome, Verdict
from amid.server.report import queries
from amid.server.report.build import build_report
from tests.server.report.checks import check_numbers_match, check_plots_drawn
from tests.server.report.chromium import WINDOW, dump_dom, screenshot
from tests.server.report.conftest import PLOT_IDS, numbers_from_file
from tests.server.report.dom import parse


def test_report_of_the_demo_run_draws_every_plot_and_matches_the_ledger(demo_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = subprocess.run(
        [sys.executable, "-m", "amid", "report", "-w", str(demo_copy), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
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
    result = subprocess.run(
        [sys.executable, "-m", "amid", "report", "-w", str(demo_copy)], capture_output=True, text=True, timeout=120
    )
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
    services.ledger.lanes.add(
        [
            LaneRow(
                lane_id="agent-lane",
                title=f"lane {evil}",
                family="custom",
                tier="secondary",
                origin="agent",
                rank=1.0,
                lane_file="memory/lanes/agent-lane.md",
                spec={},
            )
        ],
        utcnow(),
    )
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


def _attempt(services: Services, i: int) -> str:
    new = NewAttempt(f"agent-{i % 2}", "lane-a", f"{i:040x}", [0], "real", None, None, f"key-{i}", f"attempt {i}")
    return services.ledger.attempts.create(new)[0]


def _review(services: Services, attempt_id: str, score: float, verdict: Verdict) -> None:
    metric = services.workspace.contract().primary_metric
    review, _ = services.ledger.reviews.request(attempt_id, "supervisor")
    services.ledger.reviews.start(review["review_id"])
    row = MetricRow("fold", 0, metric, score, n_cases=4, n_valid=4, n_nan=0, n_capped=0, case_se=0.02)
    services.ledger.reviews.finish(review["review_id"], ReviewOutcome(verdict=verdict, checks=[], metrics=[row]))


def test_a_run_longer_than_the_page_shows_the_newest_attempts_every_accepted_one_and_names_the_rest(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At 100,000 attempts the page was 21 MB: it drew every attempt, review and heartbeat. Lowered
    # limits stand in for the page's own here.
    for name, value in {"RECENT": 5, "LINEAGE": 4, "POINTS": 3, "BUCKETS": 2}.items():
        monkeypatch.setattr(queries, name, value)
    ids = [_attempt(services, i) for i in range(12)]
    for i, attempt_id in enumerate(ids[:4]):  # the oldest: three accepted, one rejected
        _review(services, attempt_id, 0.5 + i / 10, "rejected" if i == 3 else "accepted")
    page = parse(build_report(services.ledger, services.workspace))

    facts = {node.attrs["data-fact"]: node.text for node in page.walk() if "data-fact" in node.attrs}
    assert (facts["attempts"], facts["accepted"]) == ("12", "3")  # counted over the whole run
    newest = [row.by_tag("td")[0].text for row in page.by_id("table-attempts").by_tag("tbody")[0].by_tag("tr")]
    assert newest == ids[:-6:-1]  # the newest five, newest first
    leaderboard = page.by_id("table-leaderboard").by_tag("tbody")[0].by_tag("tr")
    assert sorted(row.by_tag("td")[1].text for row in leaderboard) == ids[:3]  # old, but accepted: all listed
    shown = page.by_id("shown").text
    assert "the newest 5 of 12 attempts and all 3 accepted ones" in shown
    assert "amid sql 'SELECT * FROM v_evidence" in shown and f"amid export -w {services.workspace.root}" in shown

    assert page.by_id("plot-lineage").attrs["data-n"] == "4" and "newest 4 of 12" in page.by_id("plot-lineage").text
    scores = page.by_id("plot-score-over-time")  # 4 scored attempts, more than 3 points: time-slice bests
    assert "4 scored attempts" in scores.text and sum(int(m.attrs["data-count"]) for m in scores.by_class("mark")) == 4
    timeline = page.by_id("plot-agent-timeline")  # 12 attempts and 4 reviews, in 2 time slices per agent and kind
    assert "16 events" in timeline.text and len(timeline.by_class("mark")) < 16
