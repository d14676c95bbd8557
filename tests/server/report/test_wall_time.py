"""The report's wall time is the run's own span: an agent's first event to `done` (or now)."""

from __future__ import annotations

import re
import time
from datetime import timedelta

from amid.server.context import Services
from amid.server.ledger import utcnow
from amid.server.report.build import build_report
from tests.server.report.dom import parse


def _wall_time(services: Services) -> str:
    page = parse(build_report(services.ledger, services.workspace))
    return next(node.text for node in page.walk() if node.attrs.get("data-fact") == "wall-time")


def _event(services: Services, agent_id: str | None, kind: str, seconds_ago: float) -> None:
    services.ledger.db.execute(
        "INSERT INTO events (occurred_at, agent_id, kind, payload) VALUES (?, ?, ?, '{}')",
        [utcnow() - timedelta(seconds=seconds_ago), agent_id, kind],
    )


def _done(services: Services, seconds_ago: float) -> None:
    services.ledger.db.execute(
        "INSERT INTO stage_transitions (from_stage, to_stage, reason, decided_by, decided_at) "
        "VALUES ('finalization', 'done', 'final attempt a1', 'supervisor', ?)",
        [utcnow() - timedelta(seconds=seconds_ago)],
    )


def test_wall_time_of_a_finished_run_is_unchanged_by_later_tokens_logins_and_restarts(services: Services) -> None:
    services.ledger.identities.create_token("worker-1", "agent")
    _event(services, "worker-1", "tool_call", seconds_ago=3600)
    _done(services, seconds_ago=3600 - 110)
    assert _wall_time(services) == "1m 50s"
    services.ledger.identities.create_token("hugo", "human")  # a person reads the run an hour later
    _event(services, None, "token_created", seconds_ago=0)
    _event(services, None, "server_started", seconds_ago=0)
    _event(services, "hugo", "dashboard_login", seconds_ago=0)
    _event(services, "hugo", "dashboard_login", seconds_ago=7200)  # a human's event before the run is no start
    assert _wall_time(services) == "1m 50s"


def test_wall_time_of_a_running_run_counts_to_now(services: Services) -> None:
    assert _wall_time(services) == "-"  # no agent has done anything yet
    services.ledger.identities.create_token("worker-1", "agent")
    started = time.monotonic()
    _event(services, "worker-1", "tool_call", seconds_ago=125)
    shown = re.fullmatch(r"(\d+)m (\d+)s", _wall_time(services))
    assert shown, "the wall time reads like 2m 05s"
    seconds = int(shown[1]) * 60 + int(shown[2])
    assert 125 <= seconds <= 125 + (time.monotonic() - started) + 1  # to now: however slow the machine
