"""The `amid` command line, run as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import git

from amid.server.workspace import Workspace
from tests.factories import make_nnunet_dataset


def amid(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "amid", *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_make_demo_task_then_init_reports_cases_and_folds(tmp_path: Path) -> None:
    made = amid("make-demo-task", str(tmp_path / "task"))
    assert made.returncode == 0, made.stderr
    created = amid("init", str(tmp_path / "task"), "-w", str(tmp_path / "ws"))
    assert created.returncode == 0, created.stderr
    assert "20 training cases in 5 locked folds" in created.stdout
    again = amid("make-demo-task", str(tmp_path / "task"))
    assert again.returncode == 2 and "exists and is not empty" in again.stderr


def test_init_into_a_non_empty_folder_fails_with_a_message_and_no_traceback(
    demo_challenge: Path, tmp_path: Path
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "keep.txt").write_text("x", encoding="utf-8")
    result = amid("init", str(demo_challenge), "-w", str(tmp_path / "ws"))
    assert result.returncode == 2
    assert "exists and is not empty" in result.stderr and "Traceback" not in result.stderr


def test_init_imports_an_nnunet_raw_dataset(tmp_path: Path) -> None:
    folder = make_nnunet_dataset(tmp_path, n_cases=6)
    result = amid("init", str(folder), "-w", str(tmp_path / "ws"))
    assert result.returncode == 0, result.stderr
    assert "dataset042_tiny (segmentation, MRI), 6 training cases" in result.stdout


def test_commands_on_a_folder_that_is_not_a_workspace_explain_how_to_make_one(tmp_path: Path) -> None:
    result = amid("status", "-w", str(tmp_path))
    assert result.returncode == 2 and "amid init" in result.stderr


def test_token_create_list_revoke_without_a_server(workspace: Workspace) -> None:
    ws = str(workspace.root)
    token = amid("token", "create", "eve", "--role", "human", "-w", ws).stdout.strip()
    assert token.startswith("amid_")
    listed = amid("token", "list", "-w", ws).stdout
    assert "eve" in listed and "human" in listed and token not in listed
    assert "revoked 1 token(s) of eve" in amid("token", "revoke", "eve", "-w", ws).stdout
    assert "revoked" in amid("token", "list", "-w", ws).stdout


def test_connect_writes_each_client_config_into_the_agents_worktree(workspace: Workspace) -> None:
    ws = str(workspace.root)
    claude = amid("connect", "claude", "--agent", "ann", "-w", ws, "--url", "http://127.0.0.1:9999/mcp")
    assert claude.returncode == 0, claude.stderr
    worktree = workspace.worktrees_dir / "ann"
    config = json.loads((worktree / ".mcp.json").read_text(encoding="utf-8"))
    assert config["mcpServers"]["amid"] == {
        "type": "http",
        "url": "http://127.0.0.1:9999/mcp",
        "headers": {"Authorization": "Bearer ${AMID_TOKEN}"},
    }
    assert (worktree / ".amid-local" / "token").read_text(encoding="utf-8").startswith("amid_")
    assert "AGENTS.md" in {p.name for p in worktree.iterdir()}
    assert f"cd {worktree}" in claude.stdout
    codex = amid("connect", "codex", "--agent", "cody", "-w", ws)
    toml = tomllib.loads((workspace.worktrees_dir / "cody/.amid-local/codex-mcp.toml").read_text(encoding="utf-8"))
    assert toml["mcp_servers"]["amid"]["bearer_token_env_var"] == "AMID_TOKEN"
    assert "CODEX_HOME=" not in codex.stdout  # the user's own Codex login and settings stay in use
    assert "mcp_servers.amid.bearer_token_env_var=" in codex.stdout
    again = amid("connect", "codex", "--agent", "cody", "-w", ws)  # re-running connect: one live token
    listed = amid("token", "list", "-w", ws).stdout.splitlines()
    tokens = [line.split()[-1] for line in listed if line.startswith("cody ")]
    assert len(tokens) == 2 and tokens.count("live") == 1, (again.stdout, tokens)
    amid("connect", "cursor", "--agent", "cur", "-w", ws)
    assert "${env:AMID_TOKEN}" in (workspace.worktrees_dir / "cur/.cursor/mcp.json").read_text(encoding="utf-8")
    for agent in ("ann", "cody", "cur"):  # each agent's own repository, on its own branch
        with git.Repo(workspace.worktrees_dir / agent) as own:
            assert own.active_branch.name == f"agent/{agent}"
    with git.Repo(workspace.repo_dir) as repo:
        assert repo.git.status("--porcelain", untracked_files="all") == ""
    with git.Repo(worktree) as agent_repo:
        assert agent_repo.git.status("--porcelain", untracked_files="all") == ""


def test_help_is_fast_because_heavy_modules_are_not_imported() -> None:
    heavy = "('torch', 'monai', 'nibabel', 'duckdb', 'mcp')"
    probe = f"import sys, amid.server.cli; print(sorted(m for m in {heavy} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "[]"


def test_serve_refuses_a_job_backend_it_cannot_use_before_it_listens(workspace: Workspace) -> None:
    # The scheduler is built beside the first calls; its settings are still checked at start.
    env = {**os.environ, "AMID_JOB_BACKEND": "ray"}
    result = subprocess.run(
        [sys.executable, "-m", "amid", "serve", "-w", str(workspace.root), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 2 and "setting ray_address: needed for job_backend=ray" in result.stderr
    assert "Traceback" not in result.stderr and not workspace.server_file.exists()
