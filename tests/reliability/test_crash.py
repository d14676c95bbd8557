"""Crash suite, small: 3 writer agents over real HTTP, 7 kills (SIGKILL and SIGTERM during submits,
during notes, during job submissions, during a running review, during a running job, during
start-up), restarts on the same port, clients retrying with the same idempotency keys; then the
exactly-once audit of the ledger and the artifact store, and no process left behind by any kill."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from amid.server.workspace import Workspace
from benchmarks.reliability.crash import MOMENTS, plan, run

pytestmark = pytest.mark.slow
EXPECTED_EXIT = {"SIGKILL": -9, "SIGTERM": 0}  # a SIGTERM is a clean stop; 60 s without one ends in SIGKILL


@pytest.fixture(scope="module")
def crashed(_pristine_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("crash") / "ws"
    shutil.copytree(_pristine_workspace, root, symlinks=True)
    return run(Workspace.open(root), n_agents=3, kills=plan(rounds=1))


def test_every_planned_kill_happened_at_its_moment_with_both_signals(crashed: dict[str, Any]) -> None:
    kills = crashed["kills"]
    assert len(kills) >= 5
    assert {k["moment"] for k in kills} == set(MOMENTS)
    assert {k["signal"] for k in kills} == {"SIGKILL", "SIGTERM"}
    assert all(k["reached"] for k in kills), [k for k in kills if not k["reached"]]
    wrong = [(k["moment"], k["signal"], k["exit_code"]) for k in kills if k["exit_code"] != EXPECTED_EXIT[k["signal"]]]
    stuck = "\n\n".join(k["stuck"] for k in kills if k["stuck"])
    assert wrong == [], f"(moment, signal, exit code) of the kills that did not end as expected: {wrong}\n{stuck}"


def test_clients_retried_through_the_outages_and_every_write_was_answered(crashed: dict[str, Any]) -> None:
    assert crashed["errors"] == []
    assert sum(crashed["retries"].values()) > 0
    acknowledged = crashed["acknowledged"]
    assert min(acknowledged.values()) > 0, acknowledged


def test_no_acknowledged_write_is_lost_or_duplicated(crashed: dict[str, Any]) -> None:
    assert crashed["lost"] == []
    assert crashed["duplicated"] == []
    assert crashed["artifacts_bad_hash"] == []


def test_no_review_finishes_twice_and_every_job_ended(crashed: dict[str, Any]) -> None:
    assert crashed["settled"]
    assert crashed["reviews_finished_twice"] == []
    assert crashed["reviews_unfinished"] == []
    assert set(crashed["job_status"]) <= {"succeeded", "lost", "failed"}, crashed["job_status"]
    assert crashed["job_status"].get("succeeded", 0) > 0


def test_no_process_outlives_a_killed_server(crashed: dict[str, Any]) -> None:
    assert [k["orphans"] for k in crashed["kills"] if k["orphans"]] == []
    assert crashed["final_orphans"] == []
    assert crashed["final_exit"] == 0
