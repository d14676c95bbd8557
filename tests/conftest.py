"""Shared fixtures: tiny real tasks from seeded factories, real workspaces, real servers."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from server.context import Services
from server.ledger import Ledger
from server.settings import Settings
from server.workspace import Workspace, init_workspace
from tools.task.demo_task import make_demo_task
from tools.task.importers import import_task


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


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """`amid demo` run once per session, as the README runs it (a real subprocess). Read-only: tests
    that change the run copy `demo_run.root` first (with symlinks=True)."""
    root = tmp_path_factory.mktemp("demo") / "run"
    result = subprocess.run([sys.executable, "-m", "server.cli", "demo", "-w", str(root)],
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return DemoRun(root, result.stdout, result.stderr)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
