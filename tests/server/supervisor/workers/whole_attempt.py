"""One whole attempt by a real CLI under a WorkerPool (as `amid supervise` runs it, in bubblewrap), and what
the ledger must show after it: the CLI's own commit, its job, its attempt, the accepted verdict and the
reviewer's verified scores (fold and holdout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from amid.registry.schemas import WorkerBackend
from amid.server import sandbox
from amid.server.local_client import call
from amid.server.supervisor.workers.pool import Worker, WorkerPool
from amid.server.supervisor.workers.settings import WorkerSettings
from tests.server.conftest import Running
from tests.server.supervisor.workers import cheat_probe
from tests.server.supervisor.workers.attempt_script import COMMIT_MESSAGE, MODEL_PY, VALIDATE_PY, whole_attempt
from tests.server.supervisor.workers.conftest import named, wait_for
from tests.server.supervisor.workers.scripted_endpoint import ScriptedEndpoint

TASK_PROMPT = (
    "Do one whole AMID attempt in your worktree: write a training script, train it through run_gpu_job, "
    "validate on your fold, commit, submit_attempt, request_review and wait for the verdict."
)
SCRIPT = whole_attempt(sys.executable)  # the interpreter the agent's jobs and shell commands name


@dataclass
class Outcome:
    agent_id: str
    worker: Worker
    events: list[dict[str, Any]]
    wall_s: float
    turns_path: Path


def npm_prefix(binary: Path) -> Path:
    """The npm prefix the CLI was found under (its node_modules/.bin), else AMID_NPM_PREFIX's default."""
    if binary.parent.name == ".bin":
        return binary.parent.parent.parent
    return Path(os.environ.get("AMID_NPM_PREFIX", Path.home() / ".cache/amid/npm"))


def require_bwrap() -> None:
    problem = sandbox.bwrap_problem()
    if problem is None:
        return
    if os.environ.get("AMID_REQUIRE_EXTERNAL") == "1":
        pytest.fail(f"bubblewrap is required (AMID_REQUIRE_EXTERNAL=1): {problem}")
    pytest.skip(f"bubblewrap cannot run here: {problem}")


def run_attempt(
    running: Running,
    backend: str | WorkerBackend,
    endpoint: ScriptedEndpoint,
    *,
    prefix: str,
    binary: Path,
    model_env: dict[str, str] | None = None,
    timeout_s: float = 240.0,
    sandbox_setting: Literal["bwrap", "none"] = "bwrap",
) -> Outcome:
    """Start one sandboxed worker with the attempt prompt and wait until its CLI exits (the script's last
    step waits for the verdict); the scripted turns are saved beside the workspace."""
    if sandbox_setting == "bwrap":
        require_bwrap()
    settings = WorkerSettings(
        sandbox=sandbox_setting,
        restart_on_clean=False,
        agent_prefix=prefix,
        npm_prefix=npm_prefix(binary),
        model_env=model_env or {},
        task_prompt=TASK_PROMPT,
    )
    pool = WorkerPool(running.workspace, running.url, backend, 1, settings=settings)
    turns_path = running.workspace.root.parent / f"{prefix}-whole-attempt-turns.json"
    started = time.monotonic()
    pool.start()
    try:
        [agent] = pool.agents
        events = wait_for(pool, lambda ev: bool(named(ev, "exited", agent)), timeout_s=timeout_s)
        wall_s = time.monotonic() - started
        return Outcome(agent, pool.worker(agent), events, wall_s, turns_path)
    finally:
        pool.stop()
        endpoint.save_turns(turns_path)


def _rows(running: Running, query: str) -> list[list[Any]]:
    return [list(row) for row in call(running.workspace, "sql", {"query": query})["rows"]]


def _head_commit(worktree: Path) -> tuple[str, str, list[str]]:
    """(sha, subject, files) of the last commit on the worker's branch, read from its worktree."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(worktree), *args], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    sha, subject = git("log", "-1", "--format=%H%n%s", "HEAD").split("\n", 1)
    files = git("show", "--name-only", "--format=", "HEAD").splitlines()
    assert git("show", "HEAD:threshold_model.py") + "\n" == MODEL_PY  # written by the CLI's edit tool
    assert git("show", "HEAD:validate.py") + "\n" == VALIDATE_PY
    return sha, subject, files


def assert_accepted(running: Running, outcome: Outcome, endpoint: ScriptedEndpoint) -> dict[str, Any]:
    """The ledger shows the CLI's commit, its job, its attempt, an accepted verdict and verified scores."""
    agent, log = outcome.agent_id, outcome.worker.log_path.read_text(encoding="utf-8")[-3000:]
    assert named(outcome.events, "exited")[0]["exit_class"] == "clean", log
    turns = json.dumps(endpoint.turns, indent=1)
    assert "accepted" in endpoint.turns[-1]["answered"].get("text", ""), turns
    sha, subject, files = _head_commit(outcome.worker.worktree)
    assert subject == COMMIT_MESSAGE and {"threshold_model.py", "validate.py", "outputs/model.json"} <= set(files)
    [[attempt_id, commit_sha, status]] = _rows(
        running, f"SELECT attempt_id, commit_sha, status FROM attempts WHERE agent_id = '{agent}'"
    )
    assert (commit_sha, status) == (sha, "accepted"), turns
    jobs = _rows(running, f"SELECT status, command FROM jobs WHERE agent_id = '{agent}'")
    assert [status for status, command in jobs if '"train"' in str(command)] == ["succeeded"], jobs
    [[verdict, requested_by]] = _rows(
        running, f"SELECT verdict, requested_by FROM reviews WHERE attempt_id = '{attempt_id}'"
    )
    assert (verdict, requested_by) == ("accepted", agent)
    verified = _rows(
        running,
        f"SELECT scope, metric, value FROM metrics WHERE attempt_id = '{attempt_id}' AND source = 'reviewer' "
        "AND value IS NOT NULL ORDER BY scope, metric",
    )
    scopes = {scope for scope, _, _ in verified}
    assert {"fold", "holdout"} <= scopes, verified
    return {"attempt_id": attempt_id, "commit": sha, "verified": verified, "wall_s": round(outcome.wall_s, 1)}


def run_cheater(
    running: Running,
    backend: str | WorkerBackend,
    endpoint: ScriptedEndpoint,
    *,
    prefix: str,
    binary: Path,
    model_env: dict[str, str] | None = None,
    sandbox_setting: Literal["bwrap", "none"] = "bwrap",
) -> dict[str, str]:
    """A worker whose shell probes what it must not read or write (cheat_probe); the probe table."""
    ws = running.workspace
    own, other = ws.worktrees_dir / f"{prefix}-1", cheat_probe.other_agent(ws, f"{prefix}-other")
    checked = cheat_probe.probes(ws, own, other)
    endpoint.script = cheat_probe.cheat_script(checked.command)
    before = cheat_probe.ledger_counts(ws)
    outcome = run_attempt(
        running, backend, endpoint, prefix=prefix, binary=binary, model_env=model_env, sandbox_setting=sandbox_setting
    )
    assert named(outcome.events, "exited")[0]["exit_class"] == "clean", outcome.worker.log_path.read_text()[-3000:]
    seen = cheat_probe.assert_boxed(ws, checked, own, before)
    (ws.root.parent / f"{prefix}-probe-table.json").write_text(json.dumps(seen, indent=1), encoding="utf-8")
    return seen
