"""A run_gpu_job job runs inside its agent's boundary (real bubblewrap, the real local backend, the
tools over the in-memory MCP client): it cannot read private/, .amid/ or another agent's worktree,
cannot write the run's repository, its commit store or the ledger, and reaches no network; an honest
job writes its outputs in its worktree as before. Without bubblewrap a job is refused, naming the
fix, unless `job_sandbox: none`, and then its record says `sandbox: none`."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server import runtime, sandbox
from amid.server.connect import ensure_worktree
from amid.server.context import Services
from amid.server.jobs.backend import JobHandle
from amid.server.jobs.boxing import JobBoxing, boxed
from amid.server.jobs.ray_backend import entrypoint
from amid.server.jobs.slurm import _batch_script
from amid.server.jobs.spec import JobSpec
from amid.server.ledger import Ledger
from amid.server.settings import Settings
from amid.server.workspace import Workspace
from tests.clients import error, local_client, ok

pytestmark = pytest.mark.skipif(sandbox.bwrap_problem() is not None, reason="bubblewrap cannot run here")

# Each probe prints "NAME ok" when it got through, "NAME denied <error>" when it was kept out.
PROBE = """
import os, socket, sys
def attempt(name, action):
    try:
        action()
        print(name, "ok")
    except Exception as exc:
        print(name, "denied", type(exc).__name__)
read = lambda p: (lambda: open(p).read())
def write(p):
    def go():
        with open(p, "a") as f:
            f.write("x")
    return go
def connect():
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2).close()
a = dict(arg.split("=", 1) for arg in sys.argv[2:])
attempt("answers_relative", read("../../private/answers.csv"))
attempt("answers", read(a["answers"]))
attempt("secret", read(a["secret"]))
attempt("other_worktree", read(a["other"]))
attempt("ledger", read(a["ledger"]))
attempt("store_write", write(a["store"]))
attempt("repo_write", write(a["repo"]))
attempt("workspace_write", write(a["planted"]))
attempt("network", connect)
attempt("task_view", read(a["task"]))
attempt("own_output", write("out/predictions.txt"))
"""
PROBES = ("answers_relative", "answers", "secret", "other_worktree", "ledger", "store_write", "repo_write", "network")


@pytest.fixture
def agent_services(services: Services) -> Iterator[Services]:
    services.ledger.identities.create_token("worker", "agent")
    ensure_worktree(services.workspace, "worker")
    yield services
    runtime.shutdown(services)


def _plant(ws: Workspace) -> dict[str, Path]:
    """The files a cheating job goes for; each is real and readable by the server's user."""
    other = ensure_worktree(ws, "other") / "uncommitted.txt"
    targets = {"answers": ws.private_dir / "answers.csv", "secret": ws.control_dir / "admin.secret", "other": other}
    for path in targets.values():
        path.write_text("the-secret-value\n", encoding="utf-8")
    targets["store"] = ws.commit_store / "HEAD"
    targets["repo"] = ws.repo_dir / ".git" / "HEAD" if (ws.repo_dir / ".git").is_dir() else ws.repo_dir / "HEAD"
    targets["ledger"] = ws.ledger_path
    targets["planted"] = ws.root / "planted-by-job.txt"  # beside the ledger, in the workspace's root
    targets["task"] = ws.task_dir / "contract.yaml"
    return targets


def _digests(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


async def _run_probe(services: Services, targets: dict[str, Path], port: int) -> dict[str, object]:
    worktree = services.workspace.worktrees_dir / "worker"
    (worktree / "probe.py").write_text(PROBE, encoding="utf-8")
    (worktree / "out").mkdir(exist_ok=True)
    args = [f"{name}={path}" for name, path in targets.items()]
    async with local_client(services, "worker") as client:
        started = await ok(client, "run_gpu_job", {"command": [sys.executable, "probe.py", str(port), *args]})
        return await ok(client, "get_job", {"job_id": started["job_id"], "wait_s": 50, "tail_bytes": 4000})


@pytest.mark.anyio
async def test_a_cheating_job_reads_no_private_file_writes_no_store_and_reaches_no_network(
    agent_services: Services,
) -> None:
    ws = agent_services.workspace
    targets = _plant(ws)
    kept = [targets[n] for n in ("answers", "secret", "other", "store", "repo")]
    before = _digests(kept)
    with socket.create_server(("127.0.0.1", 0)) as listener:  # a host service the job must not reach
        done = await _run_probe(agent_services, targets, listener.getsockname()[1])
    lines = dict(line.split(" ", 1) for line in str(done["stdout_tail"]).splitlines() if " " in line)
    assert done["status"] == "succeeded" and done["sandbox"] == "bwrap", done
    assert {name: lines.get(name, "?")[:6] for name in PROBES} == dict.fromkeys(PROBES, "denied"), lines
    assert "the-secret-value" not in str(done["stdout_tail"]) + str(done["stderr_tail"])
    # the honest half of the same job: the public task view reads, its own output lands in its worktree
    assert lines["task_view"] == "ok" and lines["own_output"] == "ok"
    assert (ws.worktrees_dir / "worker" / "out" / "predictions.txt").read_text(encoding="utf-8") == "x"
    assert _digests(kept) == before
    # the box's view of the workspace root is its own throwaway folder: what it writes there is not the host's
    assert not targets["planted"].exists()
    row = agent_services.ledger.jobs.get(str(done["job_id"]))
    assert row is not None and json.loads(row["tags"])["sandbox"] == "bwrap"


@pytest.mark.anyio
async def test_an_honest_job_trains_in_its_worktree_with_the_jobs_interpreter_and_its_files_stay(
    agent_services: Services,
) -> None:
    worktree = agent_services.workspace.worktrees_dir / "worker"
    code = "import numpy, pathlib; pathlib.Path('model.npy').write_bytes(numpy.arange(3).tobytes()); print('trained')"
    async with local_client(agent_services, "worker") as client:
        started = await ok(client, "run_gpu_job", {"command": ["python", "-c", code]})  # a bare python: the job's
        done = await ok(client, "get_job", {"job_id": started["job_id"], "wait_s": 50, "tail_bytes": 2000})
    assert done["status"] == "succeeded" and done["sandbox"] == "bwrap", done
    assert "trained" in str(done["stdout_tail"]) and (worktree / "model.npy").stat().st_size == 24


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    empty = tmp_path / "bin-without-bwrap"
    empty.mkdir()
    (empty / "git").symlink_to(str(shutil.which("git")))  # worktrees are still made with git
    monkeypatch.setenv("PATH", str(empty))  # no bwrap on PATH
    sandbox.bwrap_problem.cache_clear()
    yield
    sandbox.bwrap_problem.cache_clear()  # the next test sees the real PATH again


@pytest.mark.anyio
@pytest.mark.usefixtures("no_bwrap")
async def test_without_bubblewrap_a_job_is_refused_naming_the_fix_and_nothing_is_recorded(
    agent_services: Services,
) -> None:
    async with local_client(agent_services, "worker") as client:
        refused = await error(client, "run_gpu_job", {"command": [sys.executable, "-c", "print(1)"]})
        listed = await ok(client, "list_jobs", {})
    assert refused.startswith("CONFLICT: job_sandbox=bwrap needs a working sandbox, but bwrap is not installed")
    assert "install bubblewrap: apt-get install bubblewrap, or pass --job-sandbox none to run unconfined" in refused
    assert listed["jobs"] == [] and agent_services.ledger.jobs.count_active("worker") == 0


@pytest.fixture
def unboxed(workspace: Workspace) -> Iterator[Services]:
    ledger = Ledger(workspace.ledger_path)
    settings = Settings(workspace=workspace.root, port=0, job_sandbox="none")
    services = Services(settings=settings, workspace=workspace, ledger=ledger)
    ledger.identities.create_token("worker", "agent")
    ensure_worktree(workspace, "worker")
    yield services
    runtime.shutdown(services)
    ledger.close()


@pytest.mark.anyio
@pytest.mark.usefixtures("no_bwrap")
async def test_job_sandbox_none_runs_the_job_plainly_and_its_record_says_sandbox_none(unboxed: Services) -> None:
    answers = unboxed.workspace.private_dir / "answers.csv"
    answers.write_text("the-secret-value\n", encoding="utf-8")
    code = f"print(open({str(answers)!r}).read())"  # unconfined by choice: the host's files, as the README says
    async with local_client(unboxed, "worker") as client:
        started = await ok(client, "run_gpu_job", {"command": [sys.executable, "-c", code]})
        done = await ok(client, "get_job", {"job_id": started["job_id"], "wait_s": 50, "tail_bytes": 2000})
    assert done["status"] == "succeeded" and done["sandbox"] == "none", done
    assert "the-secret-value" in str(done["stdout_tail"])
    row = unboxed.ledger.jobs.get(str(done["job_id"]))
    assert row is not None and json.loads(row["tags"])["sandbox"] == "none"


NODE_PROBE = "import sys; print(open(sys.argv[1]).read())"


def _node_handle(ws: Workspace, job_id: str, code: str, target: Path) -> JobHandle:
    """A job of agent `worker` as a cluster backend is given it (its folder made as the scheduler does)."""
    worktree = ensure_worktree(ws, "worker")
    spec = JobSpec.create(command=[sys.executable, "-c", code, str(target)], cwd=str(worktree))
    job_dir = ws.sub("jobs") / job_id
    job_dir.mkdir(parents=True)
    return JobHandle(job_id, job_dir, spec, agent_id="worker")


@pytest.mark.parametrize("backend", ["slurm", "ray"])
def test_a_cluster_backend_runs_the_same_box_on_the_node_and_it_keeps_private_out(
    workspace: Workspace, backend: str
) -> None:
    answers = workspace.private_dir / "answers.csv"
    answers.write_text("the-secret-value\n", encoding="utf-8")
    boxing = JobBoxing(workspace)
    handle = _node_handle(workspace, f"job-{backend}", NODE_PROBE, answers)
    command, box = boxed(boxing, handle)
    assert box is not None and command[0] == shutil.which("bwrap")
    # what the node runs: Slurm's generated batch script, Ray's entrypoint line (here on this machine)
    if backend == "slurm":
        script = handle.job_dir / "slurm.sh"
        script.write_text(_batch_script(handle, command), encoding="utf-8")
        done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60, check=False)
    else:
        line = entrypoint(handle.spec.cwd, command)
        done = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode != 0 and "FileNotFoundError" in done.stderr, done
    assert "the-secret-value" not in done.stdout
    honest = _node_handle(workspace, f"honest-{backend}", NODE_PROBE, workspace.task_dir / "contract.yaml")
    line = entrypoint(honest.spec.cwd, boxed(boxing, honest)[0])
    seen = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=60, check=False)
    assert seen.returncode == 0 and seen.stdout.strip(), seen  # the public task view is there
