"""Which box a job runs in: the same boundary as its agent's worker view (server/sandbox.py `wrap_job`).

A job an agent starts with run_gpu_job sees its own worktree (read-write), its own scratch folder,
the public task view and the shared memory (read-only) and the interpreter; never private/, .amid/,
the ledger, the run's repository or commit store, other agents' worktrees and homes, other jobs'
folders or the import's folders. Fail closed: where bubblewrap cannot run, a job is refused at
submit, naming the fix, unless the `job_sandbox` setting says `none`; the job's record says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from amid.server import sandbox
from amid.server.errors import JobFailed
from amid.server.jobs.backend import JobHandle
from amid.server.sandbox import JobBox, JobNetwork, SandboxKind, SandboxSetting

if TYPE_CHECKING:
    from amid.server.workspace import Workspace

SCRATCH = "scratch"  # in the job's folder: its HOME and TMPDIR inside the box


@dataclass(frozen=True)
class JobBoxing:
    """The job sandbox policy of one workspace: `setting` (job_sandbox) and `network` (job_network)."""

    workspace: Workspace
    setting: SandboxSetting = "bwrap"
    network: JobNetwork = "none"

    def kind(self) -> SandboxKind:
        """bwrap, or none by explicit setting; raises SandboxUnavailable (naming the fix) otherwise."""
        return sandbox.resolve_kind(self.setting, sandbox.JOB)

    def box(self, handle: JobHandle) -> JobBox:
        """The box of `handle`'s job; a cwd outside its agent's worktree is refused (never widened)."""
        ws = self.workspace
        worktree = (ws.worktrees_dir / handle.agent_id).resolve()
        cwd = Path(handle.spec.cwd).resolve()
        if not handle.agent_id or not worktree.is_dir() or (cwd != worktree and worktree not in cwd.parents):
            raise JobFailed(f"cwd: {cwd} is not inside the worktree of agent {handle.agent_id!r}; jobs run there")
        scratch = handle.job_dir / SCRATCH
        scratch.mkdir(parents=True, exist_ok=True)
        return JobBox(
            worktree=worktree,
            scratch=scratch,
            cwd=cwd,
            readable=(ws.task_dir, ws.memory_dir),
            hidden=self._hidden(handle),
            gpu=handle.spec.gpus > 0,
            network=self.network,
        )

    def _hidden(self, handle: JobHandle) -> tuple[Path, ...]:
        ws = self.workspace
        others = [p for p in _children(ws.worktrees_dir) if p.name != handle.agent_id]
        others += [*_children(ws.sub("workers")), *(p for p in _children(handle.job_dir.parent) if p != handle.job_dir)]
        server = (ws.private_dir, ws.control_dir, ws.ledger_path, ws.sub("artifacts"), ws.sub("reviews"))
        origin = (Path(p) for p in ws.origin().values())
        return (*server, ws.repo_dir, ws.commit_store, *origin, *others)


def _children(folder: Path) -> list[Path]:
    return list(folder.iterdir()) if folder.is_dir() else []


def admit(boxing: JobBoxing | None) -> str:
    """The sandbox a backend with this policy runs jobs in; no policy (a bare backend) is none."""
    return "none" if boxing is None else boxing.kind()


def boxed(boxing: JobBoxing | None, handle: JobHandle) -> tuple[list[str], JobBox | None]:
    """The job's argv as started (inside bubblewrap unless the policy says none) and its box."""
    if boxing is None or boxing.kind() == "none":
        return list(handle.spec.command), None
    box = boxing.box(handle)
    return sandbox.wrap_job(list(handle.spec.command), box), box
