"""What `tools/list` publishes, derived from the tool modules once and kept in `tool_manifest.json`.

Building every tool's input schema means importing every tool module (≈140 pydantic models) and
deriving 30 argument models; the server did that before it could answer its first call. It now
lists tools from this file and imports a tool's module at that tool's first call. The file is
generated, not written by hand:

    python -m server.tool_manifest            # rewrite server/tool_manifest.json
    python -m server.tool_manifest --check    # exit 1 if it differs from the tool modules

and a contract test fails when it is stale. The published schemas do not depend on it: they are
the ones the modules derive, byte for byte. Role checks and argument validation always use the
tool module's own `ToolSpec` (the manifest only lists).
"""

from __future__ import annotations

import gc
import importlib
import json
import sys
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server.ledger import Role
    from server.toolkit import ToolSpec

MANIFEST_PATH = Path(__file__).with_name("tool_manifest.json")
# One first-call import at a time: calls of different tools arriving together at start must not
# import modules that import each other from two threads at once.
_RESOLVING = threading.Lock()


def tool_specs() -> list[ToolSpec]:
    """Every tool of the server, in the order clients list them. Keep it fixed. (Imports every
    tool module: the server itself lists from the manifest.)"""
    from tools import (
        attempts,
        decisions,
        fm_registry,
        get_task,
        jobs,
        lanes,
        notes,
        profile_data,
        reviews,
        roles,
        run_evidence,
        skills,
        supervision,
        workers,
    )

    return [
        get_task.TOOL,
        profile_data.TOOL,
        *lanes.TOOLS,
        fm_registry.TOOL,
        *jobs.TOOLS,
        *attempts.TOOLS,
        *reviews.TOOLS,
        *notes.TOOLS,
        *skills.TOOLS,
        supervision.SNAPSHOT,
        supervision.HEARTBEAT,
        workers.TOOL,
        run_evidence.TOOL,
        *decisions.TOOLS,
        roles.TOOL,
    ]


@dataclass(frozen=True)
class ToolEntry:
    """One listed tool, and where its `ToolSpec` lives (imported at its first call)."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any]
    roles: frozenset[Role]
    wants_progress: bool
    module: str
    attribute: str
    _found: list[ToolSpec] = field(default_factory=list, init=False, compare=False, repr=False)

    def spec(self) -> ToolSpec:
        """The tool module's own spec, imported once. A manifest that no longer matches the module
        is refused here rather than served (the contract test catches it first)."""
        if self._found:
            return self._found[0]
        with _RESOLVING:
            if not self._found:
                spec = getattr(importlib.import_module(self.module), self.attribute, None)
                facts = None if spec is None else (spec.name, spec.roles, spec.wants_progress)
                if spec is None or facts != (self.name, self.roles, self.wants_progress):
                    raise RuntimeError(
                        f"server/tool_manifest.json is stale for {self.name!r} ({self.module}.{self.attribute}); "
                        "run `python -m server.tool_manifest`"
                    )
                self._found.append(spec)
                gc.freeze()  # the module lives as long as the server: out of full collections (server/serve.py)
        return self._found[0]

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "input_schema": self.input_schema,
            "annotations": self.annotations,
            "roles": sorted(self.roles),
            "wants_progress": self.wants_progress,
            "module": self.module,
            "attribute": self.attribute,
        }


def _entry(raw: dict[str, Any]) -> ToolEntry:
    return ToolEntry(**{**raw, "roles": frozenset(raw["roles"])})


@lru_cache(maxsize=1)
def load() -> tuple[ToolEntry, ...]:
    """The committed manifest."""
    return tuple(_entry(raw) for raw in json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))["tools"])


def derive() -> list[ToolEntry]:
    """The manifest as the tool modules describe it now."""
    from server.toolkit import published_annotations, published_schema

    entries = []
    for spec in tool_specs():
        module = sys.modules[spec.run.__module__]
        attribute = next(name for name, value in vars(module).items() if value is spec)
        annotations = published_annotations(spec).model_dump(mode="json", by_alias=True, exclude_none=True)
        entries.append(
            ToolEntry(
                name=spec.name,
                title=spec.title,
                description=spec.description,
                input_schema=published_schema(spec),
                annotations=annotations,
                roles=spec.roles,
                wants_progress=spec.wants_progress,
                module=module.__name__,
                attribute=attribute,
            )
        )
    return entries


def render(entries: list[ToolEntry]) -> str:
    body = {"generated_by": "python -m server.tool_manifest", "tools": [e.as_json() for e in entries]}
    return json.dumps(body, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m server.tool_manifest", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render(derive())
    current = MANIFEST_PATH.read_text(encoding="utf-8") if MANIFEST_PATH.is_file() else ""
    if args.check:
        if text != current:
            print(f"{MANIFEST_PATH.name} is stale: run `python -m server.tool_manifest`", file=sys.stderr)
            return 1
        return 0
    if text != current:
        MANIFEST_PATH.write_text(text, encoding="utf-8")
        print(f"written {MANIFEST_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
