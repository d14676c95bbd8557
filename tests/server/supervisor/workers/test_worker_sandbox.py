"""A managed worker in bubblewrap sees its worktree, the public task, the shared memory and the server's
port — not private/, other worktrees, the admin secret or the server's files."""

from __future__ import annotations

import json

import pytest

from registry.loader import worker_backend
from registry.schemas import WorkerBackend
from server import sandbox
from server.supervisor.workers.pool import WorkerPool
from server.supervisor.workers.settings import WorkerSettings
from tests.server.conftest import Running
from tests.server.supervisor.workers.conftest import named, wait_for

PROBE = """
import json, os, sys, urllib.request
seen = {}
for path in json.loads(sys.argv[1]):
    try:
        seen[path] = os.listdir(path) if os.path.isdir(path) else open(path, 'rb').read(64).decode('latin1')
    except OSError as exc:
        seen[path] = None
url = os.environ['AMID_URL'].rsplit('/mcp', 1)[0] + '/healthz'
seen['healthz'] = json.loads(urllib.request.urlopen(url, timeout=10).read())['ok']
print(json.dumps({'type': 'probe', 'seen': seen}), flush=True)
print(json.dumps({'type': 'result'}), flush=True)
"""


def _probe_backend() -> WorkerBackend:
    data = worker_backend("scripted").model_dump()
    data.update(
        id="probe",
        start=["{python}", "-c", PROBE, "{prompt}"],
        resume=["{python}", "-c", PROBE, "{session_id}", "{prompt}"],
    )
    return WorkerBackend.model_validate(data)


def test_a_sandboxed_worker_cannot_read_private_other_worktrees_or_the_server_files(running: Running) -> None:
    if sandbox.bwrap_problem() is not None:
        pytest.skip(f"bubblewrap cannot run here: {sandbox.bwrap_problem()}")
    ws = running.workspace
    other = ws.worktrees_dir / "someone-else"
    other.mkdir(parents=True, exist_ok=True)
    (other / "notes.txt").write_text("secret idea", encoding="utf-8")
    settings = WorkerSettings(sandbox="bwrap", restart_on_clean=False, agent_prefix="boxed")
    pool = WorkerPool(ws, running.url, _probe_backend(), 1, settings=settings)
    # the probe's prompt: the paths it tries
    mine = ws.worktrees_dir / "boxed-1"
    wanted = {
        "own": str(mine / "AGENTS.md"),
        "task": str(ws.task_dir / "contract.yaml"),
        "memory": str(ws.memory_dir),
        "private": str(ws.private_dir),
        "other_worktree": str(other / "notes.txt"),
        "admin_secret": str(ws.control_dir / "admin.secret"),
        "ledger": str(ws.ledger_path),
        "artifacts": str(ws.sub("artifacts")),
    }
    pool.settings = settings.model_copy(update={"task_prompt": json.dumps(list(wanted.values()))})
    pool.start()
    try:
        wait_for(pool, lambda ev: bool(named(ev, "exited")), timeout_s=60)
        lines = [
            json.loads(line)
            for line in pool.worker("boxed-1").log_path.read_text().splitlines()
            if line.startswith("{")
        ]
        seen = next(line["seen"] for line in lines if line.get("type") == "probe")
    finally:
        pool.stop()
    assert seen["healthz"] is True
    assert seen[wanted["own"]] and seen[wanted["task"]] and seen[wanted["memory"]] is not None
    for name in ("private", "other_worktree", "admin_secret", "ledger", "artifacts"):
        assert seen[wanted[name]] is None, (name, seen[wanted[name]])
    assert (ws.control_dir / "admin.secret").is_file()  # it exists: the sandbox hid it
