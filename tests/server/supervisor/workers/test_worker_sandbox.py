"""A managed worker in bubblewrap sees its own repository, the public task, the shared memory and the
server's port — not private/, another agent's repository or branch, the run's repository, the commit
store, `.amid/`, the folder the task was imported from; it can write nothing of them. And the CLIs
start there as npm installs them (`node_modules/.bin` links, a global prefix)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import git
import pytest

from amid.registry.loader import worker_backend
from amid.registry.schemas import WorkerBackend
from amid.server import sandbox
from amid.server.connect import ensure_worktree
from amid.server.local_client import call as admin_call
from amid.server.supervisor.workers.install import cli_install
from amid.server.supervisor.workers.pool import WorkerPool
from amid.server.supervisor.workers.settings import WorkerSettings
from amid.server.workspace import Workspace
from tests.server.conftest import Running
from tests.server.supervisor.workers.conftest import named, wait_for

pytestmark = pytest.mark.skipif(sandbox.bwrap_problem() is not None, reason=f"no bubblewrap: {sandbox.bwrap_problem()}")

# The probe's "CLI": it tries every read, write and git command it is given, and reports each outcome.
PROBE = """
import json, os, subprocess, sys, urllib.request
spec = json.loads(sys.argv[1])
seen, wrote, ran = {}, {}, {}
for name, path in spec['read'].items():
    try:
        seen[name] = os.listdir(path) if os.path.isdir(path) else open(path, 'rb').read(64).decode('latin1')
    except OSError:
        seen[name] = None
for name, path in spec['write'].items():
    try:
        with open(path, 'w') as handle:
            handle.write('planted by the probe')
        wrote[name] = True
    except OSError:
        wrote[name] = False
for name, argv in spec['git'].items():
    done = subprocess.run(argv, capture_output=True, text=True)
    ran[name] = [done.returncode, done.stdout[-400:]]
url = os.environ['AMID_URL'].rsplit('/mcp', 1)[0] + '/healthz'
seen['healthz'] = json.loads(urllib.request.urlopen(url, timeout=10).read())['ok']
print(json.dumps({'type': 'probe', 'seen': seen, 'wrote': wrote, 'ran': ran}), flush=True)
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


def _victim(ws: Workspace) -> tuple[Path, str]:
    """Another agent's repository with a committed (and submitted-looking) file, and its commit."""
    other = ensure_worktree(ws, "someone-else")
    (other / "notes.txt").write_text("secret idea", encoding="utf-8")
    with git.Repo(other) as repo:
        repo.index.add(["notes.txt"])
        sha = str(repo.index.commit("someone else's idea").hexsha)
    subprocess.run(["git", "-C", str(ws.commit_store), "fetch", "-q", str(other), sha], check=True)
    subprocess.run(["git", "-C", str(ws.repo_dir), "fetch", "-q", str(ws.commit_store), sha], check=True)
    for repo_dir in (ws.commit_store, ws.repo_dir):
        subprocess.run(["git", "-C", str(repo_dir), "update-ref", "refs/amid/attempts/att-probe", sha], check=True)
    return other, sha


def _spec(ws: Workspace, mine: Path, other: Path, sha: str, origin: Path) -> dict[str, dict[str, Any]]:
    store_object = next(p for p in (ws.commit_store / "objects").rglob("*") if p.is_file())
    read = {
        "own": mine / "AGENTS.md",
        "task": ws.task_dir / "contract.yaml",
        "memory": ws.memory_dir,
        "private": ws.private_dir,
        "other_worktree": other / "notes.txt",
        "other_git": other / ".git/HEAD",
        "admin_secret": ws.control_dir / "admin.secret",
        "control": ws.control_dir,
        "ledger": ws.ledger_path,
        "artifacts": ws.sub("artifacts"),
        "run_repo": ws.repo_dir / ".git/HEAD",
        "store": ws.commit_store / "HEAD",
        "store_object": store_object,
        "origin": origin,
        "other_home": ws.sub("workers") / "someone-else",
    }
    write = {
        "own": mine / "probe.txt",
        "task": ws.task_dir / "planted.txt",
        "memory": ws.memory_dir / "planted.md",
        "store": ws.commit_store / "refs/heads/planted",
        "run_repo": ws.repo_dir / ".git/refs/heads/planted",
        "other_worktree": other / "planted.txt",
        "origin": origin / "planted.txt",
    }
    own_git = ["git", "-C", str(mine)]
    git_argv = {
        "log_all": [*own_git, "log", "--all", "--format=%an %s"],
        "show_other_branch": [*own_git, "show", "agent/someone-else:notes.txt"],
        "cat_other_commit": [*own_git, "cat-file", "-p", sha],
        "other_repo": ["git", f"--git-dir={other / '.git'}", "log", "--format=%s"],
        "run_repo": ["git", f"--git-dir={ws.repo_dir / '.git'}", "log", "--all", "--format=%s"],
        "store": ["git", f"--git-dir={ws.commit_store}", "log", "--all", "--format=%s"],
        "commit": [*own_git, "commit", "--allow-empty", "-q", "-m", "probe commit"],
        "author": [*own_git, "log", "-1", "--format=%an <%ae>"],
    }
    return {
        "read": {k: str(v) for k, v in read.items()},
        "write": {k: str(v) for k, v in write.items()},
        "git": git_argv,
    }


def _refs(repo_dir: Path) -> str:
    return subprocess.run(["git", "-C", str(repo_dir), "for-each-ref"], capture_output=True, text=True).stdout


def _ledger_counts(ws: Workspace) -> list[object]:
    query = "SELECT (SELECT count(*) FROM attempts), (SELECT count(*) FROM artifacts), (SELECT count(*) FROM reviews)"
    return list(admin_call(ws, "sql", {"query": query})["rows"][0])


def test_a_sandboxed_worker_reads_and_writes_only_its_own_repository(running: Running, demo_challenge: Path) -> None:
    ws = running.workspace
    other, sha = _victim(ws)
    (ws.sub("workers") / "someone-else").mkdir(parents=True, exist_ok=True)
    settings = WorkerSettings(sandbox="bwrap", restart_on_clean=False, agent_prefix="boxed")
    pool = WorkerPool(ws, running.url, _probe_backend(), 1, settings=settings)
    mine = ws.worktrees_dir / "boxed-1"
    spec = _spec(ws, mine, other, sha, demo_challenge)  # the folder the run's task was imported from
    before = (_refs(ws.repo_dir), _refs(ws.commit_store), _ledger_counts(ws))
    pool.settings = settings.model_copy(update={"task_prompt": json.dumps(spec)})
    pool.start()
    try:
        wait_for(pool, lambda ev: bool(named(ev, "exited")), timeout_s=60)
        output = pool.worker("boxed-1").log_path.read_text().splitlines()
        lines = [json.loads(line) for line in output if line.startswith("{")]
        probe = next((line for line in lines if line.get("type") == "probe"), None)
        assert probe is not None, output[-20:]
    finally:
        pool.stop()
    seen, wrote, ran = probe["seen"], probe["wrote"], probe["ran"]
    assert seen["healthz"] is True and seen["own"] and seen["task"] and seen["memory"] is not None
    denied = [name for name in spec["read"] if name not in ("own", "task", "memory") and seen[name] is not None]
    assert denied == [], {name: seen[name] for name in denied}
    assert wrote == {name: name == "own" for name in spec["write"]}
    failing = ("show_other_branch", "cat_other_commit", "other_repo", "run_repo", "store")
    assert all(ran[name][0] != 0 for name in failing), ran
    assert ran["log_all"][0] == 0 and "someone" not in ran["log_all"][1] and "idea" not in ran["log_all"][1]
    assert ran["commit"][0] == 0 and ran["author"][1].strip() == f"boxed-1 <boxed-1@{ws.contract().id}>"
    assert (_refs(ws.repo_dir), _refs(ws.commit_store), _ledger_counts(ws)) == before
    assert (ws.control_dir / "admin.secret").is_file() and (other / "notes.txt").is_file()  # hidden, not absent
    assert not any(Path(path).exists() for name, path in spec["write"].items() if name != "own")


NPM_PREFIX = Path(os.environ.get("AMID_NPM_PREFIX", Path.home() / ".cache" / "amid" / "npm"))
NPM_BIN = NPM_PREFIX / "node_modules" / ".bin"
CLIS = {"claude": "Claude Code", "codex": "codex-cli", "opencode": "."}


def _in_box(binary: str, search_path: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    install = cli_install(binary, search_path)
    (tmp_path / "wt").mkdir(parents=True, exist_ok=True)
    (tmp_path / "home").mkdir(parents=True, exist_ok=True)
    view = sandbox.WorkerView(tmp_path / "wt", tmp_path / "home", readable=install.folders, links=install.links)
    argv = sandbox.wrap_worker([binary, *args], view)
    env = {"PATH": search_path, "HOME": str(tmp_path / "home")}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("cli", sorted(CLIS))
def test_an_npm_installed_cli_starts_in_the_sandbox_through_its_bin_link(cli: str, tmp_path: Path) -> None:
    binary = NPM_BIN / cli
    if not binary.exists():
        pytest.skip(f"{cli} is not installed under {NPM_PREFIX} (.ci/setup installs it)")
    search_path = f"{NPM_BIN}:/usr/local/bin:/usr/bin:/bin"
    done = _in_box(str(binary), search_path, tmp_path, "--version")
    assert done.returncode == 0 and CLIS[cli] in done.stdout, done.stderr[-500:]
    # what the sandbox showed before: only the resolved binary's folder, so the .bin link was missing
    old = sandbox.WorkerView(tmp_path / "wt", tmp_path / "home", readable=(binary.resolve().parent,))
    env = {"PATH": search_path, "HOME": str(tmp_path / "home")}
    before = subprocess.run(sandbox.wrap_worker([str(binary), "--version"], old), capture_output=True, env=env)
    assert before.returncode != 0


def test_a_cli_in_a_global_prefix_starts_and_the_folder_above_its_packages_stays_hidden(tmp_path: Path) -> None:
    """npm install -g --prefix P: P/bin/codex links into P/lib/node_modules, where codex.js finds
    the platform package's binary; the prefix's other files are not shown."""
    source = NPM_PREFIX / "node_modules" / "@openai"
    if not (source / "codex").is_dir() or not (source / "codex-linux-x64").is_dir():
        pytest.skip(f"codex is not installed under {NPM_PREFIX}")
    prefix = tmp_path / "prefix"
    (prefix / "lib/node_modules").mkdir(parents=True)
    subprocess.run(["cp", "-al", str(source), str(prefix / "lib/node_modules/@openai")], check=True)  # hard links
    (prefix / "bin").mkdir()
    (prefix / "bin/codex").symlink_to("../lib/node_modules/@openai/codex/bin/codex.js")
    (prefix / "private-notes.txt").write_text("not for the worker", encoding="utf-8")
    search_path = f"{prefix / 'bin'}:/usr/bin:/bin"
    done = _in_box(str(prefix / "bin/codex"), search_path, tmp_path / "box", "--version")
    assert done.returncode == 0 and "codex-cli" in done.stdout, done.stderr[-500:]
    install = cli_install(str(prefix / "bin/codex"), search_path)
    assert install.folders[0] == (prefix / "lib/node_modules").resolve()
    shell = _in_box("/bin/sh", search_path, tmp_path / "box", "-c", f"cat {prefix / 'private-notes.txt'}")
    assert shell.returncode != 0 and "not for the worker" not in shell.stdout
