"""Shared fixtures: tiny real tasks from seeded factories, real workspaces, real servers."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from amid.server.context import Services
from amid.server.ledger import Ledger
from amid.server.settings import Settings
from amid.server.workspace import Workspace, init_workspace
from amid.tools.task.demo_task import make_demo_task
from amid.tools.task.importers import import_task


@pytest.fixture(scope="session")
def demo_challenge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded demo task, generated once per session (read-only for tests)."""
    return make_demo_task(tmp_path_factory.mktemp("challenge") / "demo")


@pytest.fixture(scope="session")
def _pristine_workspace(demo_challenge: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init_workspace(import_task(demo_challenge), tmp_path_factory.mktemp("pristine") / "ws").root


@pytest.fixture
def workspace(_pristine_workspace: Path, tmp_path: Path) -> Workspace:
    """A fresh copy of an initialised demo workspace."""
    target = tmp_path / "ws"
    shutil.copytree(_pristine_workspace, target, symlinks=True)
    return Workspace.open(target)


@pytest.fixture
def services(workspace: Workspace) -> Iterator[Services]:
    ledger = Ledger(workspace.ledger_path)
    yield Services(settings=Settings(workspace=workspace.root, port=0), workspace=workspace, ledger=ledger)
    ledger.close()


@dataclass(frozen=True)
class DemoRun:
    root: Path  # what `amid demo -w ROOT` built: ROOT/challenge, ROOT/workspace
    stdout: str
    stderr: str

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"


DEMO_LIMIT_S = 270


def _demo_state(root: Path, stdout: str, stderr: str) -> str:
    """What a demo that ran out of time printed, and the tail of its supervisor's log."""
    log = root / "workspace" / ".amid" / "supervise.log"
    tail = log.read_text(encoding="utf-8", errors="replace")[-6000:] if log.is_file() else "(no supervise.log)"
    return f"stdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-3000:]}\nsupervise.log:\n{tail}"


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """`amid demo` run once per session, as the README runs it (a real subprocess). Read-only: tests
    that change the run copy `demo_run.root` first (with symlinks=True)."""
    root = tmp_path_factory.mktemp("demo") / "run"
    demo = subprocess.Popen(
        [sys.executable, "-m", "amid", "demo", "-w", str(root)],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:  # under the test's 300 s limit, so that a demo that does not finish says where it stood
        stdout, stderr = demo.communicate(timeout=DEMO_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(demo.pid, signal.SIGKILL)  # the demo's server, supervisor and workers too
        stdout, stderr = demo.communicate()
        pytest.fail(f"amid demo did not finish in {DEMO_LIMIT_S} s\n{_demo_state(root, stdout, stderr)}")
    assert demo.returncode == 0, stdout[-3000:] + stderr[-3000:]
    return DemoRun(root, stdout, stderr)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
