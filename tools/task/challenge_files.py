"""What every task importer shares: the imported task, and the reading of a challenge folder's own files
(YAML, JSON, its metric directions and description) with errors that name the file and the field."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from amid.server.errors import InvalidInput
from amid.tools.task.contract import TaskContract


@dataclass
class ImportedTask:
    contract: TaskContract
    public_copies: list[tuple[Path, str]] = field(default_factory=list)  # source → path under task/
    private_copies: list[tuple[Path, str]] = field(default_factory=list)  # source → path under private/
    description: str = ""
    # Where it came from ("task": the file or folder given, "data": a benchmark's data folder). These
    # hold what the public view leaves out, so `amid init` keeps them beside the server's files only.
    origin: dict[str, str] = field(default_factory=dict)


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{path.name}: not valid YAML ({exc})") from None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path.name}: not valid JSON ({exc})") from None


def _require(mapping: Any, key: str, file: str, where: str = "") -> Any:
    if not isinstance(mapping, dict) or key not in mapping or mapping[key] in (None, ""):
        raise InvalidInput(f"{file}: field {where}{key} is missing", field=f"{where}{key}")
    return mapping[key]


def _directions(folder: Path) -> dict[str, str]:
    path = folder / "metric_config.json"
    if not path.is_file():
        raise InvalidInput(f"metric_config.json: missing in {folder.name}; it must give metric_directions")
    directions = _require(_read_json(path), "metric_directions", "metric_config.json")
    for name, direction in directions.items():
        if direction not in ("higher_better", "lower_better"):
            raise InvalidInput(
                f"metric_config.json: field metric_directions.{name} is {direction!r}; "
                "expected higher_better or lower_better",
                field=f"metric_directions.{name}",
            )
    return dict(directions)


def _description(folder: Path, config: dict[str, Any]) -> str:
    """The description file: named by config.yaml (relative to the folder, or a repository path
    ending in the folder's own file, as MLE-bench writes it), else description.md."""
    name = str(config.get("description") or "description.md")
    for path in (folder / name, folder / Path(name).name, folder / "description.md"):
        if path.is_file() and path.suffix in (".md", ".txt"):
            return path.read_text(encoding="utf-8")
    return ""
