"""One demo workspace and one reviewer pool per test module: reviews are real (fork server, review
processes, git, NIfTI) and the pool's start-up is paid once per module."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from amid.server.context import Services
from amid.server.ledger import Ledger
from amid.server.reviewer import reviewer, stop_reviewer
from amid.server.settings import Settings
from amid.server.workspace import Workspace


def open_services(root: Path, **settings: object) -> Services:
    workspace = Workspace.open(root)
    return Services(
        settings=Settings(workspace=workspace.root, port=0, **settings),  # type: ignore[arg-type]
        workspace=workspace,
        ledger=Ledger(workspace.ledger_path),
    )


@pytest.fixture(scope="module")
def review_services(_pristine_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    target = tmp_path_factory.mktemp("review") / "ws"
    shutil.copytree(_pristine_workspace, target, symlinks=True)
    services = open_services(target, review_workers=2)
    reviewer(services)
    yield services
    stop_reviewer(services)
    services.ledger.close()
