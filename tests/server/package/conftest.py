"""Copies of the session's demo run (`demo_run`, tests/conftest.py), whose supervisor built package/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from amid.server.cli import main
from amid.server.workspace import Workspace
from tests.conftest import DemoRun


@pytest.fixture
def run_copy(demo_run: DemoRun, tmp_path: Path) -> Workspace:
    """A private copy of the demo workspace (the fixture's run stays read-only)."""
    root = tmp_path / "run"
    shutil.copytree(demo_run.root, root, symlinks=True)
    return Workspace(root / "workspace")


@pytest.fixture
def package_copy(demo_run: DemoRun, tmp_path: Path) -> Path:
    """A copy of the demo's package alone, as a reviewer receives it."""
    target = tmp_path / "package"
    shutil.copytree(demo_run.workspace / "package", target, symlinks=True)
    return target


def amid(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)
