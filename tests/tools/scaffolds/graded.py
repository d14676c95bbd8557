"""Run a lane's scaffold steps as a worker would, and grade a submission with the task's own grader."""

from __future__ import annotations

import csv
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

from amid.server.reviewer.replay import fill
from amid.server.sandbox import Mounts, SandboxKind, placeholders, replay_env, resolve_kind, wrap
from amid.server.workspace import Workspace
from amid.tools.planning.portfolio import ScaffoldStep

# Small CPU runs: no torch.compile, few BLAS threads.
CPU_ENV = {"nnUNet_compile": "f", "OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
# nnU-Net training without data-augmentation worker processes (planning needs the default: it sizes threads by it).
NO_DA_WORKERS = {"nnUNet_n_proc_DA": "0"}


def run_step(
    step: ScaffoldStep,
    worktree: Path,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 900,
) -> str:
    """Run one step with cwd = the worktree, as run_gpu_job would; fail with its output."""
    env = {**os.environ, **CPU_ENV, **step.env, **(env or {})}
    done = subprocess.run(
        [*step.argv, *(extra or [])],
        cwd=worktree,
        env=env,
        capture_output=True,
        timeout=timeout,
        encoding="utf-8",
        errors="replace",  # progress bars print UTF-8 whatever the locale
    )
    assert done.returncode == 0, (
        f"{step.name} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


FrozenCheckpoint = tuple[str, dict[str, Path]]  # declared name, path inside it → frozen file


def freeze_like_submit(checkpoint: Path, tmp: Path) -> FrozenCheckpoint:
    """Copies of the declared checkpoint file or folder, as submit_attempt freezes them."""
    frozen = tmp / "frozen"
    frozen.mkdir(parents=True)
    if checkpoint.is_file():
        return checkpoint.name, {"": Path(shutil.copyfile(checkpoint, frozen / checkpoint.name))}
    copy = Path(shutil.copytree(checkpoint, frozen / checkpoint.name))
    return checkpoint.name, {p.relative_to(copy).as_posix(): p for p in sorted(copy.rglob("*")) if p.is_file()}


def moved_away(folder: Path, tmp: Path) -> Path:
    """Move `folder` (the worktree's training data and models) where no replay command could name it."""
    return Path(shutil.move(folder, tmp / f"moved-{folder.name}"))


def replay_like_the_reviewer(
    step: ScaffoldStep, checkpoint: FrozenCheckpoint, images: list[Path], tmp: Path, *, fold: int = 0
) -> tuple[Path, SandboxKind]:
    """Run a declared inference command as the reviewer does (server/sandbox.py): from an empty
    checkout, with the frozen checkpoint alone at {checkpoint}, and no worktree or workspace in sight
    (bubblewrap where it runs; callers also move their worktree's models away)."""
    inputs, outputs, code, home = (tmp / name for name in ("inputs", "outputs", "code", "home"))
    for folder in (inputs, outputs, code, home):
        folder.mkdir(parents=True)
    for image in images:
        shutil.copyfile(image, inputs / image.name)
    mounts = Mounts(code, inputs, outputs, *checkpoint)
    kind = resolve_kind("auto")
    argv = fill(step.argv, {**placeholders(kind, mounts, sys.executable), "{fold}": str(fold)})
    assert not [part for part in argv if "{" in part or "<" in part], argv  # every placeholder filled
    command, cwd = wrap(kind, argv, mounts)
    env = {**replay_env(home, kind), **CPU_ENV}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"replay failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return outputs, kind


def worktree_of(workspace: Workspace, agent: str = "w1") -> Path:
    folder = workspace.worktrees_dir / agent
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def grade_with_task_grader(workspace: Workspace, submission_dir: Path) -> dict[str, float]:
    """The demo challenge's own grade.py on the submission (tests may read private/; agents never do)."""
    spec = importlib.util.spec_from_file_location("demo_grade", workspace.private_dir / "grader" / "grade.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    submission = pd.read_csv(submission_dir / "submission.csv")
    answers = pd.read_csv(workspace.private_dir / "answers.csv")
    return dict(module.grade(submission, answers, str(submission_dir), str(workspace.private_dir / "labels")))


def submission_rows(submission_dir: Path) -> list[dict[str, str]]:
    with (submission_dir / "submission.csv").open() as handle:
        return list(csv.DictReader(handle))
