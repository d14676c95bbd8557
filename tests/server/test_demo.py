"""`amid demo` end to end, as the README's first command runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from server.ledger import Ledger
from server.workspace import Workspace


def test_amid_demo_runs_the_whole_loop_and_the_attempt_is_accepted(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "server.cli", "demo", "-w", str(tmp_path / "run")],
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "accepted" in result.stdout
    workspace = Workspace.open(tmp_path / "run" / "workspace")
    ledger = Ledger(workspace.ledger_path, read_only=True)
    try:
        board = ledger.db.fetchall("SELECT attempt_id, verified_score FROM v_leaderboard")
        checks = ledger.db.fetchall("SELECT code FROM check_results WHERE NOT passed AND severity = 'error'")
        notes = ledger.db.scalar("SELECT count(*) FROM notes WHERE kind = 'reflection'")
        jobs = ledger.db.scalar("SELECT count(*) FROM jobs WHERE status = 'succeeded'")
    finally:
        ledger.close()
    assert len(board) == 1 and board[0]["verified_score"] > 0.3
    assert checks == []
    assert notes == 1 and jobs == 3
