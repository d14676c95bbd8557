"""What `amid demo` shows while the supervisor runs: the stage, attempts and verdicts as they happen.

The demo waits minutes for its supervisor process; without this it printed nothing meanwhile. Each
poll reads the ledger through the running server (the admin `sql` route, as `amid sql` does), prints
one line per new stage, attempt and verdict, and keeps a live status line (stage, counts, elapsed
time) on a terminal.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.markup import escape

from amid.server.errors import AmidError, JobFailed
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace

POLL_S = 3.0  # each read after a change copies the ledger (the human read path): rarely, beside the agents
SUPERVISE_LOG = ".amid/supervise.log"
PROGRESS_SQL = (  # one read per poll: the stage on every row, and a row per attempt (none yet: one row)
    "SELECT s.stage, e.* FROM (SELECT json_extract_string(value, '$') AS stage FROM run_state WHERE key = 'stage') s "
    "LEFT JOIN (SELECT attempt_id, agent_id, lane_id, verdict, round(verified_score, 4), "
    "coalesce(failed_codes, '') FROM v_evidence) e ON true ORDER BY e.attempt_id"
)


@dataclass
class Progress:
    """What was printed already, so each stage, attempt and verdict is printed once."""

    stage: str | None = None
    verdicts: dict[str, str | None] = field(default_factory=dict)

    def lines(self, stage: str | None, attempts: list[list[Any]]) -> list[str]:
        shown: list[str] = []
        if stage and stage != self.stage:
            shown.append(f"stage: {self.stage} → {stage}" if self.stage else f"stage: {stage}")
            self.stage = stage
        for attempt_id, agent_id, lane_id, verdict, score, failed in attempts:
            if attempt_id not in self.verdicts:
                shown.append(f"{attempt_id} submitted by {agent_id} on {lane_id}")
            if verdict and self.verdicts.get(attempt_id) != verdict:
                why = f" ({failed})" if failed else ""
                shown.append(f"{attempt_id} {verdict}: verified dice {score}{why}")
            self.verdicts[attempt_id] = verdict
        return shown

    def status(self, elapsed_s: float) -> str:
        decided = sum(1 for v in self.verdicts.values() if v)
        return (
            f"stage {self.stage or '-'} · {len(self.verdicts)} attempts, {decided} reviewed · "
            f"{elapsed_s:.0f} s (the supervisor's log: {SUPERVISE_LOG})"
        )


def _read(workspace: Workspace) -> tuple[str | None, list[list[Any]]]:
    rows = admin_call(workspace, "sql", {"query": PROGRESS_SQL})["rows"]
    return (rows[0][0] if rows else None), [row[1:] for row in rows if row[1] is not None]


def watch(workspace: Workspace, supervisor: subprocess.Popen[bytes], console: Console, timeout_s: float) -> None:
    """Print the run's progress until the supervisor exits (or `timeout_s` passes: JobFailed)."""
    progress, started = Progress(), time.monotonic()
    with console.status("starting the workers …") as live:
        while supervisor.poll() is None:
            elapsed = time.monotonic() - started
            if elapsed > timeout_s:  # one line from the CLI, not a traceback; the caller stops the processes
                raise JobFailed(f"the demo's supervisor did not finish within {timeout_s:.0f} s; see {SUPERVISE_LOG}")
            try:
                stage, attempts = _read(workspace)
            except AmidError:  # a slow answer while the server is busy: the next poll reads again
                stage, attempts = progress.stage, []
            for line in progress.lines(stage, attempts):
                console.print(escape(line))
            live.update(progress.status(elapsed))
            time.sleep(POLL_S)
    for line in progress.lines(*_read(workspace)):  # what the last poll missed
        console.print(escape(line))
