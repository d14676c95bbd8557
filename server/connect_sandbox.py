"""`amid connect … --sandboxed`: the start command of an attached agent inside the managed workers'
boundary (bubblewrap: its worktree and a home of its own, writable; the public task view, the shared
memory and the client's installation read-only; private/, the server's files, the run's repository
and other agents' folders hidden), with a clean environment: only PATH, TERM, LANG, its HOME and
its token reach the client.

The home is `<workspace>/workers/<agent>/home` with the client's login files copied in (the ones its
worker backend names), so the user's own home, and whatever else lies in it, stays outside.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from amid.registry.loader import worker_backend
from amid.server import sandbox
from amid.server.connect import TOKEN_FILE, WRITERS, Client
from amid.server.errors import NotFound
from amid.server.supervisor.workers.install import cli_install
from amid.server.workspace import Workspace

BACKENDS: dict[Client, str] = {
    "claude": "claude-code",
    "codex": "codex",
    "cursor": "cursor-agent",
    "opencode": "opencode",
}


def sandboxed_command(ws: Workspace, client: Client, agent_id: str, url: str, worktree: Path) -> str:
    """A shell line that starts `client` for `agent_id` in bubblewrap (refused where it cannot run)."""
    problem = sandbox.bwrap_problem()
    if problem is not None:
        raise sandbox.SandboxUnavailable(
            f"--sandboxed needs bubblewrap, but {problem}; install bubblewrap: apt-get install bubblewrap, or leave "
            "out --sandboxed and run the agent as another OS user than the server's",
            field="sandboxed",
        )
    start = WRITERS[client](url, worktree)[2]
    binary = shutil.which(start[0])
    if binary is None:
        raise NotFound(f"client: {start[0]} is not on PATH; install it ({worker_backend(BACKENDS[client]).install})")
    home = _home(ws, agent_id, BACKENDS[client])
    argv = sandbox.wrap_worker([binary, *start[1:]], _view(ws, agent_id, worktree, home, binary))
    env = [f"HOME={shlex.quote(str(home))}", f"XDG_CONFIG_HOME={shlex.quote(str(home / '.config'))}"]
    env += ['PATH="$PATH"', 'TERM="${TERM:-xterm}"', 'LANG="${LANG:-C.UTF-8}"', f'AMID_TOKEN="$(cat {TOKEN_FILE})"']
    return f"cd {shlex.quote(str(worktree))} && env -i {' '.join(env)} {shlex.join(argv)}"


def _home(ws: Workspace, agent_id: str, backend_id: str) -> Path:
    home = ws.sub("workers") / agent_id / "home"
    home.mkdir(parents=True, exist_ok=True)
    for name in worker_backend(backend_id).login_files:
        source, target = Path.home() / name, home / name
        if source.is_file() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return home


def _view(ws: Workspace, agent_id: str, worktree: Path, home: Path, binary: str) -> sandbox.WorkerView:
    """The same boundary as a managed worker's (server/supervisor/workers/pool.py `_view`)."""
    others = [p for p in ws.worktrees_dir.iterdir() if p.name != agent_id]
    others += [p for p in ws.sub("workers").iterdir() if p.name != agent_id]
    server = (ws.private_dir, ws.control_dir, ws.ledger_path, ws.sub("artifacts"), ws.sub("reviews"))
    hidden = (*server, ws.repo_dir, ws.commit_store, *(Path(p) for p in ws.origin().values()), *others)
    install = cli_install(binary, os.environ.get("PATH", os.defpath))
    readable = (ws.task_dir, ws.memory_dir, *install.folders)
    return sandbox.WorkerView(worktree=worktree, home=home, readable=readable, hidden=hidden, links=install.links)
