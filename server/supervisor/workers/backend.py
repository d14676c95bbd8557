"""A worker backend's data made concrete: argv, config files, session ids and exit classes.

Pure functions over `amid.registry.schemas.WorkerBackend`; nothing here starts a process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from amid.registry.schemas import WorkerBackend
from amid.server.errors import NotFound

ExitClass = Literal["clean", "no_result", "session_error", "usage_limit"]
PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
# Where the CLIs' JSON events say what went wrong: OpenCode's error.data.message, Codex's error.message and
# message, Claude Code's result text (its failed result repeats the error, "Invalid API key · …").
MESSAGE_FIELDS = ("error.data.message", "error.message", "message", "result")


def fill(template: str, values: Mapping[str, str]) -> str:
    """Replace the known {name} placeholders; other braces (a CLI's own ${VAR} syntax) stay."""
    return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def fill_tree(content: Any, values: Mapping[str, str]) -> Any:
    """`fill` on every string leaf (and key) of a config file's content."""
    if isinstance(content, str):
        return fill(content, values)
    if isinstance(content, dict):
        return {fill(str(k), values): fill_tree(v, values) for k, v in content.items()}
    if isinstance(content, list):
        return [fill_tree(item, values) for item in content]
    return content


def find_binary(backend: WorkerBackend, npm_prefix: Path | None, cli_path: Path | None = None) -> str:
    """The CLI's executable: `cli_path` as given, this interpreter, on PATH, or under the npm prefix
    (its local node_modules/.bin, or bin/ of a global `npm install -g --prefix`)."""
    if cli_path is not None:
        if not (cli_path.is_file() and os.access(cli_path, os.X_OK)):
            message = f"cli_path: {cli_path} is not an executable file; give the path of the CLI's binary"
            raise NotFound(message, field="cli_path")
        return str(cli_path.absolute())
    if backend.binary == "{python}":
        return sys.executable
    folders = [str(npm_prefix / "node_modules" / ".bin"), str(npm_prefix / "bin")] if npm_prefix else []
    found = shutil.which(backend.binary)
    if found is None and folders:
        found = shutil.which(backend.binary, path=os.pathsep.join(folders))
    if found is None:
        where = f" (looked on PATH and under {npm_prefix})" if npm_prefix else " (looked on PATH; --npm-prefix DIR)"
        raise NotFound(
            f"backend {backend.id}: {backend.binary} is not installed{where}: {backend.install}, or pass --cli-path",
            field="backend",
        )
    return found


def argv(backend: WorkerBackend, values: Mapping[str, str], *, resume: bool) -> list[str]:
    """The command line of a first run, or of a resume (values must then hold session_id)."""
    merged = {**values, "deny_tools": ",".join(backend.deny_tools)}
    return [fill(arg, merged) for arg in (backend.resume if resume else backend.start)]


def write_config_files(backend: WorkerBackend, values: Mapping[str, str], worktree: Path, home: Path) -> list[Path]:
    """Write every config file the CLI reads; returns their paths."""
    written = []
    for spec in backend.config_files:
        path = home / spec.path[2:] if spec.path.startswith("~/") else worktree / spec.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_render(spec.format, fill_tree(spec.content, values)), encoding="utf-8")
        written.append(path)
    return written


def _render(kind: str, content: dict[str, Any]) -> str:
    if kind == "json":
        return json.dumps(content, indent=2) + "\n"
    return "".join(_toml_table(name, table) for name, table in content.items())


def _toml_table(name: str, table: Any) -> str:
    rows = "".join(f"{key} = {json.dumps(value)}\n" for key, value in table.items())
    return f"[{name}]\n{rows}\n"


def session_id_in(backend: WorkerBackend, event: Mapping[str, Any]) -> str | None:
    """The session id an event of the CLI's JSON output names, if any."""
    for rule in backend.session_id:
        if _matches(event, rule.match):
            value = _dotted(event, rule.field)
            if isinstance(value, str) and value:
                return value
    return None


def readable(line: str) -> str:
    """An output line as a person reads it: a JSON event's message, "" for an event without one (an init,
    a usage count), a plain line as it is. A failure's reason is read from these, not from raw JSON."""
    try:
        event = json.loads(line)
    except ValueError:
        return line
    if not isinstance(event, dict):
        return line
    for path in MESSAGE_FIELDS:
        value = _dotted(event, path)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def reason_lines(tail: list[str], n: int) -> list[str]:
    """The last `n` distinct readable lines of a CLI's output (a message its next event repeats, once)."""
    lines: list[str] = []
    for text in filter(None, map(readable, tail)):
        if text not in lines[-1:]:
            lines.append(text)
    return lines[-n:]


def is_result(backend: WorkerBackend, event: Mapping[str, Any]) -> bool:
    marker = backend.result_event
    return marker is not None and _matches(event, marker)


def _matches(event: Mapping[str, Any], fields: Mapping[str, str]) -> bool:
    """Every field (a dotted path reaches into nested objects: `part.reason`) has the given value."""
    return all(str(_dotted(event, k)) == v for k, v in fields.items())


def _dotted(event: Mapping[str, Any], path: str) -> Any:
    value: Any = event
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def classify_exit(
    backend: WorkerBackend,
    *,
    returncode: int,
    saw_result: bool,
    output_tail: str,
    uptime_s: float,
    min_uptime_s: float,
    resumed: str | None,
    reported: str | None,
) -> ExitClass:
    """Why a worker's CLI ended (docs/ARCHITECTURE.md §9 exit classes). Usage limits are never crashes; a resume that
    came back under another session id (Codex with an unknown id starts afresh) is a session error."""
    if any(re.search(p, output_tail, re.IGNORECASE) for p in backend.usage_limit_patterns):
        return "usage_limit"
    lost_session = resumed is not None and reported is not None and reported != resumed
    if lost_session or any(re.search(p, output_tail, re.IGNORECASE) for p in backend.session_error_patterns):
        return "session_error"
    if returncode != 0:
        return "no_result"
    if backend.result_event is not None:
        return "clean" if saw_result else "no_result"
    return "clean" if uptime_s >= min_uptime_s else "no_result"
