"""Read the registry YAML shipped in this package and validate every entry.

A file holds one entry (a mapping) or several (a list of mappings). A bad entry fails with a
message naming the file, the entry and the field, so the data can be fixed without guessing.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from amid.registry.schemas import FoundationModel, LabelAdapterEntry, LabelAdapterTable, LaneTemplate, WorkerBackend
from amid.server.errors import DataUnreadable, InvalidInput

REGISTRY_DIR = Path(__file__).parent
FOUNDATION_MODELS_DIR = REGISTRY_DIR / "foundation_models"
LANE_TEMPLATES_DIR = REGISTRY_DIR / "lane_templates"
LABEL_ADAPTERS_FILE = REGISTRY_DIR / "benchmarks" / "rexmle_label_adapters.yaml"
WORKER_BACKENDS_DIR = REGISTRY_DIR / "worker_backends"

EntryT = TypeVar("EntryT", bound=BaseModel)


def load_foundation_models(directory: Path | None = None) -> list[FoundationModel]:
    """Every foundation-model entry, validated, in file then entry order."""
    return list(_load_cached(FoundationModel, directory or FOUNDATION_MODELS_DIR))


def load_lane_templates(directory: Path | None = None) -> list[LaneTemplate]:
    """Every lane template, validated, in file then entry order."""
    return list(_load_cached(LaneTemplate, directory or LANE_TEMPLATES_DIR))


def load_worker_backends(directory: Path | None = None) -> list[WorkerBackend]:
    """Every worker backend (one headless agent CLI per file), validated."""
    return list(_load_cached(WorkerBackend, directory or WORKER_BACKENDS_DIR))


def worker_backend(name: str, directory: Path | None = None) -> WorkerBackend:
    """The backend called `name`; unknown names fail with the list of known ones."""
    backends = {backend.id: backend for backend in load_worker_backends(directory)}
    if name not in backends:
        raise InvalidInput(f"backend: {name!r} is unknown; expected one of {sorted(backends)}", field="backend")
    return backends[name]


def label_adapters(path: Path | None = None) -> dict[str, dict[str, LabelAdapterEntry]]:
    """Benchmark challenge id → answers column → how its training label is converted, validated."""
    table = _load_label_adapters(path or LABEL_ADAPTERS_FILE)
    return {challenge: dict(columns) for challenge, columns in table.items()}  # callers get their own copy


@cache
def _load_label_adapters(path: Path) -> dict[str, dict[str, LabelAdapterEntry]]:
    document = _read_entries(path)
    if len(document) != 1 or not isinstance(document[0], dict):
        raise DataUnreadable(f"{path.name}: expected one mapping of challenge id → answers column → adapter")
    try:
        return LabelAdapterTable.model_validate(document[0]).root
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(file)"
        raise DataUnreadable(f"{path.name}: {field}: {first['msg']}", field=field) from error


@cache
def _load_cached(schema: type[EntryT], directory: Path) -> tuple[EntryT, ...]:
    # The shipped files never change while the process runs; parse them once.
    entries = tuple(_load_directory(schema, directory))
    _require_unique_ids(entries, directory)
    return entries


def _load_directory(schema: type[EntryT], directory: Path) -> Iterator[EntryT]:
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise DataUnreadable(f"{directory}: no *.yaml registry files found", field="registry")
    for path in files:
        for index, raw in enumerate(_read_entries(path)):
            yield _validate(schema, raw, path, index)


def _read_entries(path: Path) -> list[Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise DataUnreadable(f"{path.name}: cannot be read as YAML: {error}", field=path.name) from error
    if isinstance(document, dict):
        return [document]
    if isinstance(document, list):
        return document
    raise DataUnreadable(
        f"{path.name}: expected a mapping or a list of mappings, got {type(document).__name__}",
        field=path.name,
    )


def _validate(schema: type[EntryT], raw: Any, path: Path, index: int) -> EntryT:
    try:
        return schema.model_validate(raw)
    except ValidationError as error:
        entry_id = raw.get("id", "?") if isinstance(raw, dict) else "?"
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "(entry)"
        raise DataUnreadable(
            f"{path.name}: entry {index} (id {entry_id!r}): field {field!r}: {first['msg']}"
            f" (got {first.get('input')!r:.120})",
            field=field,
        ) from error


def _require_unique_ids(entries: tuple[BaseModel, ...], directory: Path) -> None:
    seen: set[str] = set()
    for entry in entries:
        entry_id = str(getattr(entry, "id", ""))
        if entry_id in seen:
            raise DataUnreadable(f"{directory.name}: id {entry_id!r} appears more than once", field="id")
        seen.add(entry_id)
