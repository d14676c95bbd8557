"""Helpers shared by the benchmark scripts: a throw-away demo workspace and result files."""

from __future__ import annotations

import json
import platform
import tempfile
from pathlib import Path
from typing import Any

from amid.server.workspace import Workspace, init_workspace
from amid.tools.task.demo_task import make_demo_task
from amid.tools.task.importers import import_task

RESULTS = Path(__file__).resolve().parent / "results"


def demo_workspace(scale: int = 1) -> Workspace:
    """A fresh workspace of the demo task (`scale` k: the same patients on a grid k times finer)."""
    root = Path(tempfile.mkdtemp(prefix="amid-bench-"))
    return init_workspace(import_task(make_demo_task(root / "challenge", scale=scale)), root / "ws")


def write_result(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    payload = {"machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()}, **payload}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return path
