"""What `tools/list` publishes, derived from the tool modules once and kept in `tool_manifest.json`.

Building every tool's input schema means importing every tool module (≈140 pydantic models) and
deriving 30 argument models; the server did that before it could answer its first call. It now
lists tools from this file and imports a tool's module at that tool's first call. The file is
generated, not written by hand:

    python -m amid.server.tool_manifest            # rewrite server/tool_manifest.json
    python -m amid.server.tool_manifest --check    # exit 1 if it differs from the tool modules

and a contract test fails when it is stale. The published schemas do not depend on it: they are
the ones the modules derive, byte for byte. Role checks and argument validation always use the
tool module's own `ToolSpec` (the manifest only lists).
"""

from __future__ import annotations

import json
import sys

from amid.server.tool_entries import MANIFEST_PATH, ToolEntry, load
from amid.server.toolkit import ToolSpec, published_annotations, published_schema
from amid.tools import (
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

__all__ = ["MANIFEST_PATH", "ToolEntry", "derive", "load", "main", "render", "tool_specs"]


def tool_specs() -> list[ToolSpec]:
    """Every tool of the server, in the order clients list them. Keep it fixed. (This module imports
    every tool module: the server itself lists from the manifest, server/tool_entries.py.)"""
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


def derive() -> list[ToolEntry]:
    """The manifest as the tool modules describe it now."""
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
    body = {"generated_by": "python -m amid.server.tool_manifest", "tools": [e.as_json() for e in entries]}
    return json.dumps(body, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m amid.server.tool_manifest", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render(derive())
    current = MANIFEST_PATH.read_text(encoding="utf-8") if MANIFEST_PATH.is_file() else ""
    if args.check:
        if text != current:
            print(f"{MANIFEST_PATH.name} is stale: run `python -m amid.server.tool_manifest`", file=sys.stderr)
            return 1
        return 0
    if text != current:
        MANIFEST_PATH.write_text(text, encoding="utf-8")
        print(f"written {MANIFEST_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
