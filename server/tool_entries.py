"""The tool manifest as the server reads it: `tool_manifest.json` (written by `python -m
amid.server.tool_manifest`, which imports every tool module to derive it) lists each tool, and a tool's
module is imported at that tool's first call. Nothing here imports a tool module by name, so the tool
modules, the toolkit they build on and this reader import one way (docs/ARCHITECTURE.md, layers).
"""

from __future__ import annotations

import gc
import importlib
import json
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from amid.server.ledger import Role
    from amid.server.toolkit import ToolSpec

MANIFEST_PATH = Path(__file__).with_name("tool_manifest.json")
# One first-call import at a time: calls of different tools arriving together at start must not
# import modules that import each other from two threads at once.
_RESOLVING = threading.Lock()


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
                        "run `python -m amid.server.tool_manifest`"
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
