"""Schema-driven fuzzing of a real `amid serve` over HTTP with the real MCP client.

Arguments come from each tool's published inputSchema (a real `tools/list`), in five kinds:
valid-shaped (the schema's own types and bounds), wrong-typed (one argument of another JSON type,
"yes" and "1" among them), oversized (a 300 000-character string, a 10 000-item list), unknown-key
(one name the schema does not have) and nested garbage (deep lists and objects where a value
goes). Every reply must be a result or a coded tool error; a refused call must leave the ledger's
row counts and the workspace's files as they were. Shared by tests/reliability/test_fuzz.py (a few
hundred calls) and benchmarks/reliability/fuzz.py (≥ 1,000 calls, figures).

The fuzzer never starts a real program: `command` items are one path that does not exist.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError

from amid.server.mcp_client import connect
from amid.server.tool_manifest import tool_specs

CODES = "INVALID_INPUT|NOT_FOUND|CONFLICT|FORBIDDEN|DATA_UNREADABLE|JOB_FAILED"
CODED = re.compile(rf"^Error executing tool [a-z_]+: ({CODES}): \S")
INTERNALS = ("Traceback", "Arguments", "validation error", "Input should be", "pydantic", "errors.pydantic.dev")
KINDS = ("valid_shaped", "wrong_typed", "oversized", "unknown_key", "nested_garbage")
NO_PROGRAM = "/nonexistent/amid-fuzz-program"
IGNORED_FILES = ("jobs", ".amid", "amid.duckdb", "amid.duckdb.wal")  # jobs run on; logs grow; the ledger is counted
PATHS = (
    ".",
    "preds",
    "preds/case_000.nii.gz",
    "loop",
    "loop/x",
    "fifo",
    "a" * 300,
    "../outside",
    "/etc/passwd",
    "private",
    ".git/config",
    "x/" * 200,
    "dir-link",
    "\u00e9\u00e8/\u4e2d",
)


def _json_scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(10**20), 10**20),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
        st.sampled_from(["yes", "no", "1", "1.0", "true", "null", "[1]", "{}"]),
    )


GARBAGE = st.recursive(
    _json_scalars(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)


def deep(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


OVERSIZED = st.sampled_from(["x" * 300_000, list(range(10_000)), {f"k{i}": i for i in range(5_000)}, 10**60])
NESTED = st.one_of(GARBAGE, st.sampled_from([deep(40), deep(120)]))


def value_for(schema: dict[str, Any], defs: dict[str, Any], name: str = "") -> st.SearchStrategy[Any]:
    """Values the schema accepts by shape (the tool may still refuse them by meaning)."""
    if "$ref" in schema:
        return value_for(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, name)
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return st.one_of([value_for(o, defs, name) for o in options])
    kinds = schema.get("type", "string")
    if isinstance(kinds, list):
        return st.one_of([value_for({**schema, "type": k}, defs, name) for k in kinds])
    return _typed(kinds, schema, defs, name)


def _typed(kind: str, schema: dict[str, Any], defs: dict[str, Any], name: str) -> st.SearchStrategy[Any]:
    if kind == "string":
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 24), 24)
        return st.text(min_size=low, max_size=max(low, high)) | st.sampled_from(PATHS).filter(
            lambda p: low <= len(p) <= schema.get("maxLength", 10**9)
        )
    if kind == "integer":
        return st.integers(schema.get("minimum", -3), schema.get("maximum", max(schema.get("minimum", 0), 0) + 40))
    if kind == "number":
        return st.floats(schema.get("minimum", -1e6), schema.get("maximum", 1e6), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = st.just(NO_PROGRAM) if name == "command" else value_for(schema.get("items", {}), defs)
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=max(schema.get("minItems", 0), 3))
    return _object(schema, defs)


def _object(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    properties: dict[str, Any] = schema.get("properties") or {}
    if not properties:
        values = schema.get("additionalProperties")
        inner = value_for(values, defs) if isinstance(values, dict) else _json_scalars()
        keys = st.sampled_from(["0", "1", "2", "dice", "x"]) | st.text(max_size=6)
        return st.dictionaries(keys, inner, max_size=3)
    required = set(schema.get("required") or [])
    return st.fixed_dictionaries(
        {k: value_for(v, defs, k) for k, v in properties.items() if k in required},
        optional={k: value_for(v, defs, k) for k, v in properties.items() if k not in required},
    )


def arguments_for(schema: dict[str, Any]) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """(kind, arguments): a valid-shaped call, or one mutated in one of four ways."""
    defs = schema.get("$defs") or {}
    valid = value_for({**schema, "type": "object"}, defs)
    names = sorted(schema.get("properties") or {})

    @st.composite
    def draw(draw_: Callable[..., Any]) -> tuple[str, dict[str, Any]]:
        kind = draw_(st.sampled_from(KINDS))
        arguments = dict(draw_(valid))
        if kind == "unknown_key" or (not names and kind != "valid_shaped"):
            extra = draw_(st.text(min_size=1, max_size=12).filter(lambda k: k not in names))
            arguments[extra] = draw_(GARBAGE)
            return "unknown_key", arguments
        if kind != "valid_shaped":
            target = draw_(st.sampled_from(names))
            pool = {"wrong_typed": GARBAGE, "oversized": OVERSIZED, "nested_garbage": NESTED}[kind]
            arguments[target] = draw_(pool)
        return kind, arguments

    return draw()


@dataclass
class Tally:
    """What the fuzzer saw, for the test's assertions and the benchmark's figures."""

    calls: int = 0
    by_tool: Counter[str] = field(default_factory=Counter)
    by_kind: Counter[str] = field(default_factory=Counter)
    codes: Counter[str] = field(default_factory=Counter)
    results: int = 0
    tracebacks: int = 0
    untyped: list[str] = field(default_factory=list)
    http_5xx: int = 0
    protocol_errors: list[str] = field(default_factory=list)
    partial_writes: list[str] = field(default_factory=list)
    longest_error: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "results": self.results,
            "by_tool": dict(sorted(self.by_tool.items())),
            "by_kind": dict(sorted(self.by_kind.items())),
            "codes": dict(sorted(self.codes.items())),
            "tracebacks": self.tracebacks,
            "untyped": len(self.untyped),
            "http_5xx": self.http_5xx,
            "protocol_errors": len(self.protocol_errors),
            "partial_writes": len(self.partial_writes),
            "longest_error_chars": self.longest_error,
        }

    def violations(self) -> list[str]:
        found = [*self.untyped, *self.protocol_errors, *self.partial_writes]
        if self.tracebacks:
            found.append(f"{self.tracebacks} replies carried a traceback")
        if self.http_5xx:
            found.append(f"{self.http_5xx} HTTP 5xx answers")
        return found


def prepare_worktree(worktree: Path) -> None:
    """Paths worth naming: a prediction folder, a symlink loop, a FIFO, a link to a folder."""
    (worktree / "preds").mkdir(exist_ok=True)
    (worktree / "preds" / "case_000.nii.gz").write_bytes(b"not really nifti")
    for link, target in (("loop", "loop"), ("dir-link", "preds")):
        if not (worktree / link).is_symlink():
            (worktree / link).symlink_to(target)
    if not (worktree / "fifo").exists():
        os.mkfifo(worktree / "fifo")


def file_state(root: Path) -> dict[str, tuple[int, int]]:
    state = {}
    for folder, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(folder, root)
        dirnames[:] = [d for d in dirnames if os.path.join(rel, d).removeprefix("./") not in IGNORED_FILES]
        for name in filenames:
            path = os.path.join(folder, name)
            if os.path.relpath(path, root) in IGNORED_FILES or not os.path.isfile(path):
                continue
            info = os.stat(path)
            state[os.path.relpath(path, root)] = (info.st_size, info.st_mtime_ns)
    return state


class Fuzzer:
    """One blocking portal holding one MCP client per role, calling a running server."""

    def __init__(self, url: str, tokens: dict[str, str], counts: Callable[[], dict[str, int]], root: Path) -> None:
        self.url, self.tokens, self.counts, self.root = url, tokens, counts, root
        self.tally = Tally()
        self.last_state: tuple[dict[str, int], dict[str, tuple[int, int]]] | None = None
        self.roles = {
            spec.name: ("agent" if "agent" in spec.roles else sorted(spec.roles)[-1]) for spec in tool_specs()
        }

    @contextmanager
    def session(self) -> Iterator[Fuzzer]:
        with start_blocking_portal() as portal:
            self.portal: BlockingPortal = portal
            managers: list[AbstractContextManager[Client]] = []
            try:
                self.clients: dict[str, Client] = {}
                for role, token in self.tokens.items():
                    manager = portal.wrap_async_context_manager(connect(self.url, token, event_hooks=self._hooks()))
                    self.clients[role] = manager.__enter__()
                    managers.append(manager)
                yield self
            finally:
                for manager in reversed(managers):
                    manager.__exit__(None, None, None)

    def _hooks(self) -> dict[str, list[Callable[..., Any]]]:
        async def on_response(response: httpx2.Response) -> None:
            if response.status_code >= 500:
                self.tally.http_5xx += 1

        return {"response": [on_response]}

    def schemas(self) -> dict[str, dict[str, Any]]:
        listed = self.portal.call(self.clients["supervisor"].list_tools)
        return {tool.name: tool.input_schema for tool in listed.tools}

    def fuzz(self, tool: str, schema: dict[str, Any], examples: int, *, strict: bool) -> None:
        """`examples` derandomised hypothesis examples for one tool; `strict` asserts on each."""

        @settings(
            max_examples=examples,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(call=arguments_for(schema))
        def one(call: tuple[str, dict[str, Any]]) -> None:
            problems = self.call(tool, *call)
            assert not (strict and problems), problems

        one()

    def call(self, tool: str, kind: str, arguments: dict[str, Any]) -> list[str]:
        """One call; the state after it is the next call's state before (the calls are sequential)."""
        before = self.last_state if self.last_state is not None else self.state()
        self.last_state = None
        client = self.clients[self.roles.get(tool, "agent")]
        self.tally.calls += 1
        self.tally.by_tool[tool] += 1
        self.tally.by_kind[kind] += 1
        try:
            reply = self.portal.call(client.call_tool, tool, arguments)
        except MCPError as exc:
            problem = f"{tool} ({kind}): protocol error {str(exc)[:200]}"
            self.tally.protocol_errors.append(problem)
            return [problem]
        if not reply.is_error:
            self.tally.results += 1
            return []
        return self._refused(tool, kind, reply, before)

    def state(self) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
        return self.counts(), file_state(self.root)

    def _refused(self, tool: str, kind: str, reply: Any, before: Any) -> list[str]:
        text = " ".join(getattr(block, "text", "") for block in reply.content)
        self.tally.longest_error = max(self.tally.longest_error, len(text))
        problems = []
        match = CODED.match(text)
        if match:
            self.tally.codes[match.group(1)] += 1
        if "Traceback" in text:
            self.tally.tracebacks += 1
        if not match or any(word in text for word in INTERNALS) or len(text) > 2100:
            problems.append(f"{tool} ({kind}): untyped or internal reply {text[:300]!r}")
            self.tally.untyped.extend(problems)
        after = self.last_state = self.state()
        if after != before:
            changed = _changes(before, after)
            self.tally.partial_writes.append(f"{tool} ({kind}) refused but changed {changed}: {text[:200]!r}")
            problems.append(self.tally.partial_writes[-1])
        return problems


def _changes(before: Any, after: Any) -> list[str]:
    (rows_before, files_before), (rows_after, files_after) = before, after
    changed = [f"table {t}" for t in rows_after if rows_after[t] != rows_before.get(t)]
    changed += [f"file {p}" for p in set(files_before) ^ set(files_after)]
    changed += [f"file {p}" for p in files_after if p in files_before and files_after[p] != files_before[p]]
    return sorted(changed)[:10]
