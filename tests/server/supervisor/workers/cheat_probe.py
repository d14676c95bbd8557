"""A cheating worker: its CLI's own shell tries to read what a worker must not see (private/, another agent's
worktree and branch, the server's .amid/ with the commit store and the admin secret, the ledger, the run's
repository) and to write into the run's repository and the commit store. What it may see (its worktree,
the public task) is probed too, so a probe that could not run is not mistaken for a sandbox that held.

Reads are judged inside (a covered folder lists as empty: nothing read); writes on the host (a write into
a covered folder lands in the sandbox's own tmpfs, never in the run's files).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from amid.server.connect import ensure_worktree
from amid.server.local_client import call
from amid.server.workspace import Workspace
from tests.server.supervisor.workers.attempt_script import Mcp, Script, Shell, Step

PROBE_FUNCTIONS = r"""
seen() { [ -n "$2" ] && echo "PROBE $1 read" || echo "PROBE $1 none"; }
try_read() {
  seen "$1" "$( (if [ -d "$2" ]; then ls -A "$2"; else head -c 64 "$2"; fi) 2>/dev/null )"
}
try_git() { seen "$1" "$(git -C "$2" "${@:3}" 2>/dev/null | head -c 200)"; }
try_write() {
  (mkdir -p "$(dirname "$2")" && echo cheat > "$2") 2>/dev/null && echo "PROBE $1 wrote" || echo "PROBE $1 refused"
}
"""
LEDGER_TABLES = ("attempts", "artifacts", "metrics", "reviews", "check_results", "jobs", "claims", "notes")


@dataclass(frozen=True)
class Probes:
    command: str
    reads: dict[str, str]  # name → path that must not be readable
    allowed: dict[str, str]  # name → path that must be readable (the probe works)
    writes: dict[str, Path]  # name → host path that must not exist afterwards


def other_agent(ws: Workspace, agent_id: str = "someone-else") -> Path:
    """Another agent's worktree with a committed idea on its branch and an uncommitted one beside it."""
    worktree = ensure_worktree(ws, agent_id)
    (worktree / "committed-idea.txt").write_text("a committed idea\n", encoding="utf-8")
    subprocess.run(["git", "-C", str(worktree), "add", "committed-idea.txt"], check=True)
    subprocess.run(["git", "-C", str(worktree), "commit", "-q", "-m", "another agent's idea"], check=True)
    (worktree / "uncommitted-idea.txt").write_text("an uncommitted idea\n", encoding="utf-8")
    return worktree


def probes(ws: Workspace, own: Path, other: Path) -> Probes:
    amid = ws.control_dir
    private_file = next(p for p in sorted(ws.private_dir.rglob("*")) if p.is_file())
    reads = {
        "private_dir": str(ws.private_dir),
        "private_file": str(private_file),
        "other_worktree": str(other),
        "other_uncommitted": str(other / "uncommitted-idea.txt"),
        "amid_dir": str(amid),
        "admin_secret": str(amid / "admin.secret"),
        "ledger": str(ws.ledger_path),
        "artifacts": str(ws.sub("artifacts")),
    }
    git_reads = {  # another agent's branch, through every repository a worker could name
        "other_branch_in_run_repo": (str(ws.repo_dir), "log", "--all", "--format=%H %s"),
        "other_branch_in_its_worktree": (str(other), "log", "--format=%H %s"),
        "commit_store": (str(ws.commit_store), "log", "--all", "--format=%H"),
        "other_branch_from_own": (str(own), "show", f"agent/{other.name}:committed-idea.txt"),
    }
    writes = {
        "write_run_repo_git": ws.repo_dir / ".git" / "cheat",
        "write_run_repo_ref": ws.repo_dir / ".git" / "refs" / "heads" / "cheat",
        "write_commit_store": ws.commit_store / "cheat",
        "write_commit_store_ref": ws.commit_store / "refs" / "heads" / "cheat",
        "write_other_worktree": other / "cheat.txt",
    }
    allowed = {"own_worktree": str(own / "AGENTS.md"), "task": str(ws.task_dir / "contract.yaml")}
    lines = [PROBE_FUNCTIONS.strip()]
    lines += [f"try_read {name} {shlex.quote(path)}" for name, path in {**reads, **allowed}.items()]
    lines += [f"try_git {name} {shlex.join(args)}" for name, args in git_reads.items()]
    lines += [f"try_write {name} {shlex.quote(str(path))}" for name, path in writes.items()]
    reads.update({name: " ".join(args) for name, args in git_reads.items()})
    command = "{\n" + "\n".join(lines) + f"\n}} > {shlex.quote(str(own / 'probe.txt'))} 2>&1; cat probe.txt"
    return Probes(command, reads, allowed, writes)


def cheat_script(command: str) -> Script:
    def script() -> Generator[Step, str, None]:
        yield Mcp("get_task", {"include_case_ids": False})
        yield Shell(command)

    return script


def ledger_counts(ws: Workspace) -> dict[str, Any]:
    return {t: call(ws, "sql", {"query": f"SELECT count(*) FROM {t}"})["rows"][0][0] for t in LEDGER_TABLES}


def results(own: Path) -> dict[str, str]:
    """name → what the probe saw (read / none, wrote / refused), from the probe's file in the worktree."""
    text = (own / "probe.txt").read_text(encoding="utf-8")
    return dict(re.findall(r"^PROBE (\S+) (\S+)$", text, re.MULTILINE))


def assert_boxed(ws: Workspace, checked: Probes, own: Path, before: dict[str, Any]) -> dict[str, str]:
    """Every forbidden read saw nothing, every write left the run's files alone, the ledger is unchanged; the
    allowed reads worked. Returns the probe table."""
    seen = results(own)
    assert {name: seen.get(name) for name in checked.allowed} == dict.fromkeys(checked.allowed, "read"), seen
    leaks = {name: checked.reads[name] for name in checked.reads if seen.get(name) != "none"}
    assert not leaks, f"the worker read what it must not: {leaks} (probe table: {seen})"
    landed = [str(path) for path in checked.writes.values() if path.exists()]
    assert not landed, f"the worker's writes reached the run's files: {landed} (probe table: {seen})"
    assert set(seen) >= set(checked.writes)  # every write was tried
    assert ledger_counts(ws) == before
    return seen
