"""Attack suite against a real `amid serve` over HTTP: traversal and symlinks in every path argument
of the real tools/list schemas, roles, cross-agent actions, Host/Origin (DNS rebinding), oversize
bodies and arguments, a revoked token, replayed idempotency keys. Every attack must be refused with
a coded tool error or an HTTP 4xx and leave no trace in the ledger or the workspace."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from amid.server.workspace import Workspace
from benchmarks.reliability.attacks import ECHO_LIMIT, run

pytestmark = pytest.mark.slow

CLASSES = {"traversal", "symlink", "role", "cross_agent", "host_origin", "oversize", "revoked_token", "replayed_key"}


@pytest.fixture(scope="module")
def attacked(_pristine_workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("attacks") / "ws"
    shutil.copytree(_pristine_workspace, root, symlinks=True)
    return run(Workspace.open(root))


def test_every_path_argument_of_the_tool_list_is_attacked(attacked: dict[str, Any]) -> None:
    assert {"run_gpu_job.cwd", "submit_attempt.commit", "submit_attempt.artifacts.predictions"} <= set(
        attacked["path_fields"]
    )
    assert attacked["uncovered"] == []
    names = [o["name"] for o in attacked["outcomes"]]
    for field in attacked["path_fields"]:
        assert sum(n.startswith(f"{field} <- ") for n in names) >= 20, field


def test_every_class_is_attacked_and_the_same_request_with_good_headers_is_served(attacked: dict[str, Any]) -> None:
    assert set(attacked["by_class"]) == CLASSES
    assert attacked["control_http"]["name"].endswith("(HTTP 200)")
    assert attacked["server_exit"] == 0


def test_every_attack_is_refused_with_a_code_and_leaves_no_trace(attacked: dict[str, Any]) -> None:
    passed = [f"[{o['cls']}] {o['name']}: {o['trace'] or o['reply'][:120]}" for o in attacked["passed_through"]]
    assert passed == []
    assert attacked["refused"] == attacked["attacks"]


def test_refusals_do_not_echo_huge_arguments(attacked: dict[str, Any]) -> None:
    assert ECHO_LIMIT <= 4000
    assert attacked["echoed"] == []
