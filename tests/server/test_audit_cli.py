"""`amid audit` as a real subprocess: on the DuckDB file when no server runs, through the running
server otherwise; it prints what it checked and exits 1 when it revoked an attempt.

The attempt is submitted through the real tool; its verdict is recorded through the ledger's own
review API, because the reviewer is not what these tests are about (tests/server/reviewer/test_audit.py
audits attempts the real reviewer accepted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from amid.server.context import Services
from amid.server.demo import start_server, stop_server
from amid.server.ledger import Ledger
from amid.server.ledger.reviews import ReviewOutcome
from amid.server.settings import Settings
from amid.server.workspace import Workspace
from tests.server.reviewer.sandbox import AgentSandbox, call, client_for, marked

pytestmark = pytest.mark.anyio


def amid_audit(workspace: Workspace) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "amid", "audit", "-w", str(workspace.root)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


async def accepted_then_tampered(workspace: Workspace) -> str:
    """An accepted attempt whose frozen checkpoint was rewritten afterwards; the ledger is closed."""
    ledger = Ledger(workspace.ledger_path)
    services = Services(settings=Settings(workspace=workspace.root, port=0), workspace=workspace, ledger=ledger)
    try:
        box = AgentSandbox(workspace, "audited")
        async with client_for(services, box.agent_id) as client:
            payload = box.payload(box.commit(), 0, box.write_predictions(0, marked(1)))
            attempt_id = (await call(client, "submit_attempt", payload))["attempt_id"]
        review, _ = ledger.reviews.request(attempt_id, "test")
        assert ledger.reviews.start(review["review_id"])
        ledger.reviews.finish(review["review_id"], ReviewOutcome(verdict="accepted", checks=[]))
        checkpoint = next(a for a in ledger.attempts.artifacts(attempt_id) if a["role"] == "checkpoint")
    finally:
        ledger.close()
    path = workspace.root / checkpoint["frozen_path"]
    path.chmod(0o644)
    path.write_bytes(b"another model")
    return attempt_id


def status_of(workspace: Workspace, attempt_id: str) -> str:
    ledger = Ledger(workspace.ledger_path, read_only=True)
    try:
        return str(ledger.attempts.get(attempt_id)["status"])
    finally:
        ledger.close()


async def test_amid_audit_without_a_server_revokes_a_tampered_attempt_and_exits_one(workspace: Workspace) -> None:
    attempt_id = await accepted_then_tampered(workspace)

    first = amid_audit(workspace)
    assert first.returncode == 1, first.stderr
    row = next(line for line in first.stdout.splitlines() if line.startswith(attempt_id))
    assert row.split()[1] == "audited" and row.endswith("revoked: ARTIFACT_CHANGED")
    assert "1 accepted attempt(s) checked, 1 revoked" in first.stdout
    assert status_of(workspace, attempt_id) == "revoked"
    second = amid_audit(workspace)
    assert second.returncode == 0 and "0 accepted attempt(s) checked, 0 revoked" in second.stdout


async def test_amid_audit_goes_through_the_running_server(workspace: Workspace) -> None:
    attempt_id = await accepted_then_tampered(workspace)
    process, _ = start_server(Path(workspace.root))
    try:
        result = amid_audit(workspace)  # the server holds the ledger: only its admin route can write
    finally:
        stop_server(process)
    assert result.returncode == 1, result.stderr
    assert f"{attempt_id}" in result.stdout and "1 revoked" in result.stdout
    assert status_of(workspace, attempt_id) == "revoked"
