"""What every rendering of the demo's report must show, checked on the DOM Chromium built."""

from __future__ import annotations

import pytest

from tests.server.report.conftest import PLOT_IDS, LedgerNumbers
from tests.server.report.dom import Node


def check_plots_drawn(page: Node) -> None:
    """Every plot is there, titled, with both axis labels, and draws as many marks as its data-n says."""
    plots = {node.attrs["id"]: node for node in page.by_class("plot")}
    assert set(plots) == PLOT_IDS
    for plot_id, plot in plots.items():
        n_marks = int(plot.attrs["data-n"])
        assert n_marks > 0, f"{plot_id} is empty on the demo run: {plot.text[:200]}"
        assert "empty" not in plot.classes and not plot.by_class("no-data"), plot_id
        assert len(plot.by_class("mark")) == n_marks, plot_id
        assert plot.by_tag("h3")[0].text, plot_id
        assert plot.by_class("x-label")[0].text and plot.by_class("y-label")[0].text, plot_id


def check_numbers_match(page: Node, ledger: LedgerNumbers) -> None:
    """The header's counts, the lanes table and the check-failure bars say what the ledger says."""
    facts = {node.attrs["data-fact"]: node.text for node in page.walk() if "data-fact" in node.attrs}
    assert int(facts["attempts"]) == ledger.n_attempts
    assert int(facts["accepted"]) == ledger.n_accepted
    rows = page.by_id("table-lanes").by_tag("tbody")[0].by_tag("tr")
    shown = {row.by_tag("td")[0].text: row.by_tag("td") for row in rows}
    for lane, n in ledger.attempts_per_lane.items():
        assert int(shown[lane][4].text) == n, lane
    assert all(int(cells[4].text) == 0 for lane, cells in shown.items() if lane not in ledger.attempts_per_lane)
    best_shown = {lane: cells[7].text for lane, cells in shown.items() if cells[7].text != "-"}
    assert set(best_shown) == set(ledger.best_per_lane)
    for lane, best in ledger.best_per_lane.items():
        assert float(best_shown[lane]) == pytest.approx(best, rel=1e-3), lane
    counts = {node.attrs["data-code"]: int(node.text) for node in page.by_id("plot-check-failures").by_class("count")}
    assert counts == ledger.failed_per_code
    leaderboard = page.by_id("table-leaderboard").by_tag("tbody")[0].by_tag("tr")
    assert len(leaderboard) == ledger.n_accepted
