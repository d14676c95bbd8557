"""A real `amid serve` subprocess shared by the tests of one module."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from amid.server.demo import start_server, stop_server
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace


@dataclass
class Running:
    workspace: Workspace
    url: str
    tokens: dict[str, str]


@pytest.fixture(scope="module")
def running(_pristine_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("http") / "ws"
    shutil.copytree(_pristine_workspace, root)
    workspace = Workspace.open(root)
    process, url = start_server(root)
    try:
        tokens = {
            name: admin_call(workspace, "token_create", {"name": name, "role": role})["token"]
            for name, role in (("alice", "agent"), ("bob", "agent"), ("boss", "supervisor"), ("hugo", "human"))
        }
        yield Running(workspace, url, tokens)
    finally:
        stop_server(process)
