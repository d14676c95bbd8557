"""What an agent's jobs run with, said to the agent in `get_task`.

The local job backend starts each `run_gpu_job` command in the agent's worktree, inside its agent's
boundary (job_sandbox=bwrap, server/jobs/boxing.py): a clean environment whose PATH starts with the
job interpreter's bin folder, the job's `env` on top, AMID_JOB_ID / AMID_JOB_DIR, HOME and TMPDIR in
its own scratch folder, CUDA_VISIBLE_DEVICES pinned by GPU UUID when it asked for GPUs, no network.
Unboxed (job_sandbox=none) it gets the server's own environment, so a bare `python3` is whatever the
server's PATH finds first, which need not be the interpreter AMID runs in (the one with nibabel,
numpy and, where installed, torch); the exact path of that one is what a command should start.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel, Field

PACKAGES = ("nibabel", "numpy", "scipy", "scikit-image", "SimpleITK", "torch", "monai", "nnunetv2")
ENV = (
    "the server's environment (its PATH; no shell), your run_gpu_job `env` on top, AMID_JOB_ID and "
    "AMID_JOB_DIR, CUDA_VISIBLE_DEVICES pinned by GPU UUID when gpus > 0; cwd: your worktree"
)


class JobEnvironment(BaseModel):
    python: str = Field(description="the interpreter to start Python jobs with: AMID's own, with the packages below")
    packages: dict[str, str] = Field(description="versions of the imaging and ML packages that interpreter has")
    bare_python3: str | None = Field(description="what a bare `python3` in a job command resolves to")
    env: str = Field(description="how a job's environment is built")
    backend: str = Field(description="the job backend: local, ray or slurm (ray/slurm: the cluster's environment)")


BOXED_ENV = (
    "your sandbox: a clean env (PATH starts with this python's folder), your `env` on top, AMID_JOB_ID, "
    "HOME/TMPDIR in a scratch folder, CUDA_VISIBLE_DEVICES pinned by GPU UUID; cwd: your worktree (write outputs "
    "there); no private/, no other worktree; network: "
)


@functools.cache
def job_environment(backend: str, job_sandbox: str = "none", job_network: str = "none") -> JobEnvironment:
    """Computed once per server: the interpreter, the PATH jobs get (the box's, or the server's own as
    the job runner passes it unboxed) and the packages do not change while it runs."""
    if job_sandbox == "none":
        return describe(backend, sys.executable, os.environ.get("PATH", os.defpath))
    from amid.server.sandbox import job_path

    network = "the host's" if job_network == "host" else "none"
    return describe(backend, sys.executable, job_path(), env=BOXED_ENV + network)


def describe(backend: str, python: str, search_path: str, env: str = ENV) -> JobEnvironment:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    bare = shutil.which("python3", path=search_path)
    return JobEnvironment(python=python, packages=found, bare_python3=bare, env=env, backend=backend)


def job_rule(jobs: JobEnvironment) -> str:
    """One line for get_task's rules: which interpreter to start, and why not a bare python3."""
    # The same bin folder is the same environment (a venv's python links to a base one without its packages).
    same = jobs.bare_python3 is not None and Path(jobs.bare_python3).parent == Path(jobs.python).parent
    bare = "is the same one" if same else f"is {jobs.bare_python3 or 'not on PATH'} and may lack these packages"
    return (
        f"run_gpu_job: start Python as {jobs.python} (it has {', '.join(jobs.packages) or 'no imaging packages'}); "
        f"a bare python3 {bare}. Jobs get {jobs.env}."
    )
