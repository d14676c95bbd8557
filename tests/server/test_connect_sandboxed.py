"""`amid connect … --sandboxed` prints a start command that puts an attached agent inside the managed
workers' boundary: run for real (a stand-in client that probes what it can read), it reaches its
worktree, its own home and its token, and none of private/, the server's files, another agent's
worktree or the user's environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from amid.server.sandbox import bwrap_problem
from amid.server.workspace import Workspace

pytestmark = pytest.mark.skipif(bwrap_problem() is not None, reason=f"bubblewrap cannot run: {bwrap_problem()}")

PROBE = """#!/bin/sh
for f in {targets}; do
  if cat "$f" > /dev/null 2>&1; then echo "READ $f"; else echo "DENIED $f"; fi
done
echo "HOME=$HOME"
echo "TOKEN=${{AMID_TOKEN:+set}}"
echo "USER_SECRET=${{USER_SECRET:-absent}}"
cat AGENTS.md > /dev/null && echo "WORKTREE readable"
touch written-here && echo "WORKTREE writable"
for f in {plants}; do {{ echo cheat >> "$f"; }} 2> /dev/null && echo "WROTE $f"; done
exit 0
"""


def _amid(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "amid", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)


def test_the_sandboxed_start_command_shows_the_agent_its_own_and_nothing_of_the_server(
    workspace: Workspace, tmp_path: Path
) -> None:
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    ws = str(workspace.root)
    assert _amid("connect", "opencode", "--agent", "other", "-w", ws, env=env).returncode == 0
    secret = next(p for p in sorted(workspace.private_dir.rglob("*")) if p.is_file())
    (workspace.control_dir / "admin.secret").write_text("s3cret", encoding="utf-8")  # as a running server's
    targets = [secret, workspace.control_dir / "admin.secret", workspace.ledger_path]
    targets += [
        workspace.worktrees_dir / "other" / "AGENTS.md",
        workspace.worktrees_dir / "other" / ".amid-local/token",
    ]
    assert [t for t in targets if not t.is_file()] == []  # each is there to read, outside the sandbox
    probe = tmp_path / "bin" / "opencode"
    probe.parent.mkdir()
    config = workspace.repo_dir / ".git" / "config"
    before = config.read_bytes()
    plants = [config, workspace.private_dir / "planted", workspace.control_dir / "planted"]
    listed = {name: " ".join(f"'{t}'" for t in paths) for name, paths in (("targets", targets), ("plants", plants))}
    probe.write_text(PROBE.format(**listed), encoding="utf-8")
    probe.chmod(0o755)

    printed = _amid("connect", "opencode", "--agent", "ann", "-w", ws, "--sandboxed", env=env)
    assert printed.returncode == 0, printed.stderr
    assert "start the agent inside the sandbox" in printed.stdout
    command = printed.stdout.strip().splitlines()[-1]
    assert "bwrap" in command and "env -i" in command
    ran = subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, timeout=60, env={**env, "USER_SECRET": "x"}
    )

    out = ran.stdout
    assert ran.returncode == 0, ran.stderr
    assert all(f"DENIED {t}" in out for t in targets), out
    assert "READ" not in out and "WROTE" not in out
    assert f"HOME={workspace.sub('workers') / 'ann' / 'home'}" in out
    assert "TOKEN=set" in out and "USER_SECRET=absent" in out
    assert "WORKTREE readable" in out and "WORKTREE writable" in out
    assert (workspace.worktrees_dir / "ann" / "written-here").is_file()
    assert config.read_bytes() == before  # the run's repository is not writable from inside …
    assert not (workspace.private_dir / "planted").exists() and not (workspace.control_dir / "planted").exists()


def test_the_plain_start_command_says_it_is_unconfined(workspace: Workspace) -> None:
    printed = _amid("connect", "opencode", "--agent", "ann", "-w", str(workspace.root), env=dict(os.environ))
    assert printed.returncode == 0, printed.stderr
    assert "unconfined: it can read what this OS user can, private/ too" in printed.stdout
