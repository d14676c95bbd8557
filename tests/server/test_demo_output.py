"""What `amid demo` prints as it runs (stage, attempts, verdicts as they happen) and at its end
(commands that run as printed, `amid` being on PATH only in an activated venv)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from amid.server.demo_progress import Progress
from tests.conftest import DemoRun

REPO = Path(__file__).resolve().parents[2]


def test_progress_prints_each_stage_attempt_and_verdict_once() -> None:
    progress = Progress()
    first = progress.lines("exploration", [["att-00001", "worker-1", "lane-a", None, None, ""]])
    assert first == ["stage: exploration", "att-00001 submitted by worker-1 on lane-a"]
    assert progress.lines("exploration", [["att-00001", "worker-1", "lane-a", None, None, ""]]) == []
    rejected = [["att-00001", "worker-1", "lane-a", "rejected", 0.98, "PRED_NOT_REPRODUCED"]]
    assert progress.lines("exploitation", rejected) == [
        "stage: exploration → exploitation",
        "att-00001 rejected: verified dice 0.98 (PRED_NOT_REPRODUCED)",
    ]
    assert progress.lines("exploitation", rejected) == []
    assert progress.status(12.4).startswith("stage exploitation · 1 attempts, 1 reviewed · 12 s")


def test_the_demo_shows_its_progress_while_the_supervisor_runs(demo_run: DemoRun) -> None:
    out = demo_run.stdout
    tables = out.index("lanes\n") if "lanes\n" in out else len(out)
    during = out[:tables]  # printed before the summary tables, i.e. while the run went on
    assert "stage: exploration" in during and "stage: exploration → exploitation" in during
    assert "att-00001 submitted by worker-" in during
    assert " rejected: verified dice " in during and "PRED_NOT_REPRODUCED" in during


def test_the_demos_closing_commands_run_as_printed(demo_run: DemoRun) -> None:
    lines = demo_run.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("next, as printed"))
    commands = [line.strip() for line in lines[start + 1 : start + 4]]
    assert len(commands) == 3 and all(c.split()[0].endswith("bin/amid") for c in commands), commands
    assert "/activate`" in lines[start]  # `amid` alone is on PATH only in an activated venv
    for command in commands[:2]:  # the third, amid dashboard, serves until Ctrl-C (tests/server/report)
        result = subprocess.run(shlex.split(command), cwd=REPO, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (command, result.stderr)
    assert commands[2].split("#")[0].split()[1:] == ["dashboard", "-w", str(demo_run.workspace)]
