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

from server.workspace import Workspace
from tools.planning.portfolio import ScaffoldStep
from tools.scaffolds.nnunet_steps import WORKTREE

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
        [*step.command, *(extra or [])], cwd=worktree, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, (
        f"{step.name} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


def replay_like_the_reviewer(step: ScaffoldStep, worktree: Path, images: list[Path], tmp: Path) -> Path:
    """Fill the replay placeholders as the reviewer does and run the command from another folder."""
    inputs, outputs, elsewhere = tmp / "inputs", tmp / "outputs", tmp / "checkout"
    for folder in (inputs, outputs, elsewhere):
        folder.mkdir(parents=True)
    for image in images:
        shutil.copyfile(image, inputs / image.name)
    fill = {"{python}": sys.executable, "{input_dir}": str(inputs), "{output_dir}": str(outputs),
            WORKTREE: str(worktree)}  # fmt: skip
    argv = [_fill(part, fill) for part in step.command]
    run_step(step.model_copy(update={"command": argv}), elsewhere, ["--device", "cpu"])
    return outputs


def _fill(part: str, fill: dict[str, str]) -> str:
    for key, value in fill.items():
        part = part.replace(key, value)
    return part


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
