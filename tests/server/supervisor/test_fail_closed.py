"""No sandbox, no start: the real `amid serve` and `amid supervise` on a PATH without bubblewrap refuse
to replay or to start managed workers, naming the fix; with the sandbox switched off explicitly
(`--replay-sandbox none`, `--job-sandbox none`, `--sandbox none`) the same run goes ahead and every
record says `none`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from amid.server.demo import start_server, stop_server
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace

pytestmark = pytest.mark.slow
FIX = "install bubblewrap: apt-get install bubblewrap, or pass"


@pytest.fixture
def no_bwrap(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH holds links to every program on ours except bwrap."""
    folder = tmp_path / "bin-without-bwrap"
    folder.mkdir()
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        for entry in sorted(Path(directory).iterdir()) if Path(directory).is_dir() else []:
            if entry.name != "bwrap" and not (folder / entry.name).exists():
                (folder / entry.name).symlink_to(entry)
    return {**os.environ, "PATH": str(folder)}


def _amid(*args: str, env: dict[str, str], timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "amid", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)


def _sql(workspace: Workspace, query: str) -> list[list[object]]:
    return admin_call(workspace, "sql", {"query": query})["rows"]


def test_amid_serve_without_bubblewrap_refuses_to_serve_naming_the_fix(
    workspace: Workspace, no_bwrap: dict[str, str]
) -> None:
    done = _amid("serve", "-w", str(workspace.root), "--port", "0", env=no_bwrap)
    assert done.returncode == 2, done.stderr
    assert "replay_sandbox=bwrap needs a working sandbox, but bwrap is not installed" in done.stderr
    assert f"{FIX} --replay-sandbox none to run unconfined" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (workspace.control_dir / "server.json").exists()  # it never served


def test_amid_supervise_without_bubblewrap_starts_no_worker_and_names_the_fix(
    workspace: Workspace, no_bwrap: dict[str, str]
) -> None:
    server, _ = start_server(workspace.root)  # the server has its sandbox; the supervisor's machine has none
    try:
        done = _amid("supervise", "-w", str(workspace.root), "--workers", "1", "--max-s", "5", env=no_bwrap)
        transitions = _sql(workspace, "SELECT count(*) FROM worker_transitions")
    finally:
        stop_server(server)
    assert done.returncode == 2, done.stderr
    assert "sandbox=bwrap needs a working sandbox, but bwrap is not installed" in done.stderr
    assert f"{FIX} --sandbox none to run unconfined" in done.stderr
    assert transitions == [[0]] and not (workspace.worktrees_dir / "worker-1").exists()


def _wait_for(predicate: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout_s} s")


def test_with_the_sandbox_switched_off_explicitly_the_run_goes_on_and_the_evidence_says_none(
    workspace: Workspace, no_bwrap: dict[str, str], tmp_path: Path
) -> None:
    unboxed = {"PATH": no_bwrap["PATH"], "AMID_REPLAY_SANDBOX": "none", "AMID_JOB_SANDBOX": "none"}
    server, _ = start_server(workspace.root, env=unboxed)
    log = tmp_path / "supervise.log"
    command = [sys.executable, "-m", "amid", "supervise", "-w", str(workspace.root), "--poll-s", "0.5"]
    command += ["--workers", "1", "--sandbox", "none", "--max-s", "300"]
    try:
        with log.open("wb") as out:
            supervisor = subprocess.Popen(command, env=no_bwrap, stdout=out, stderr=subprocess.STDOUT)
        try:
            reviewed = "SELECT count(*) FROM reviews WHERE status = 'done'"
            _wait_for(lambda: _sql(workspace, reviewed) != [[0]] or supervisor.poll() is not None, 240, "a review")
        finally:
            supervisor.terminate()
            supervisor.wait(timeout=30)
        reports = _sql(workspace, "SELECT report_path FROM reviews WHERE status = 'done' ORDER BY review_id")
        details = _sql(workspace, "SELECT detail FROM worker_transitions WHERE event = 'started'")
        warnings = _sql(workspace, "SELECT payload FROM events WHERE kind = 'server_warning'")
        jobs = _sql(workspace, "SELECT DISTINCT json_extract_string(tags, '$.sandbox') FROM jobs")
        status = _amid("status", "-w", str(workspace.root), env=no_bwrap)
    finally:
        stop_server(server)
    assert reports, log.read_text()
    report = json.loads((workspace.root / str(reports[0][0])).read_text(encoding="utf-8"))
    replayed = next(c for c in report["checks"] if c["code"] == "PRED_NOT_REPRODUCED")["evidence"]
    assert replayed["sandbox"] == "none"
    assert details and {json.loads(str(d[0]))["sandbox"] for d in details} == {"none"}
    assert any("replay_sandbox=none" in str(w[0]) for w in warnings)
    assert any("jobs run unconfined (job_sandbox=none)" in str(w[0]) for w in warnings)
    assert jobs == [["none"]]  # its training jobs ran unconfined by the same explicit choice
    assert "worker-1 started (sandbox none, session new)" in log.read_text()
    assert "worker    worker-1 scripted" in status.stdout and "sandbox none" in status.stdout
