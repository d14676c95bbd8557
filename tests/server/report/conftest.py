"""A private copy of the session's demo run for the report tests, and the ledger's own numbers."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import DemoRun

PLOT_IDS = {
    "plot-score-over-time",
    "plot-lane-coverage",
    "plot-agent-timeline",
    "plot-check-failures",
    "plot-declared-vs-verified",
    "plot-holdout-vs-validation",
    "plot-lineage",
}

# Straight from the tables, not through the views the report reads.
BEST_PER_LANE = """
SELECT a.lane_id, max(s.score) AS best FROM attempts a
JOIN (SELECT attempt_id, avg(value) AS score FROM metrics
      WHERE source = 'reviewer' AND scope = 'fold' AND metric = ? GROUP BY attempt_id) s USING (attempt_id)
WHERE a.status = 'accepted' GROUP BY a.lane_id
"""
ATTEMPTS_PER_LANE = "SELECT lane_id, count(*) AS n FROM attempts GROUP BY lane_id"
FAILED_PER_CODE = """
SELECT code, count(*) AS n FROM (SELECT code FROM check_results WHERE NOT passed
                                 UNION ALL SELECT code FROM audit_checks WHERE NOT passed) GROUP BY code
"""


@dataclass(frozen=True)
class LedgerNumbers:
    best_per_lane: dict[str, float]
    attempts_per_lane: dict[str, int]
    failed_per_code: dict[str, int]
    n_attempts: int
    n_accepted: int


def ledger_numbers(rows: Any) -> LedgerNumbers:
    """`rows(sql, params)` returns a list of tuples; works on a DuckDB file or the admin sql route."""
    assert rows("SELECT json_extract_string(value, '$') FROM run_state WHERE key = 'primary_direction'", [])[0][0] == (
        "higher_better"
    )  # the demo's dice: the best is the largest
    metric = rows("SELECT json_extract_string(value, '$') FROM run_state WHERE key = 'primary_metric'", [])[0][0]
    statuses = dict(rows("SELECT status::VARCHAR, count(*) FROM attempts GROUP BY ALL", []))
    return LedgerNumbers(
        best_per_lane={lane: float(best) for lane, best in rows(BEST_PER_LANE, [metric])},
        attempts_per_lane={lane: int(n) for lane, n in rows(ATTEMPTS_PER_LANE, [])},
        failed_per_code={code: int(n) for code, n in rows(FAILED_PER_CODE, [])},
        n_attempts=sum(statuses.values()),
        n_accepted=int(statuses.get("accepted", 0)),
    )


def numbers_from_file(ledger_path: Path) -> LedgerNumbers:
    con = duckdb.connect(str(ledger_path), read_only=True)
    try:
        return ledger_numbers(lambda sql, params: con.execute(sql, params).fetchall())
    finally:
        con.close()


@pytest.fixture(scope="module")
def demo_copy(demo_run: DemoRun, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's workspace, copied: the tests may start a server on it or write the report into it."""
    root = tmp_path_factory.mktemp("report") / "run"
    shutil.copytree(demo_run.root, root, symlinks=True)
    return root / "workspace"
