"""Protocol tokens of one attempt cycle on the demo task, counted with a real offline tokenizer.

The scripted demo agent (`amid.server.demo_worker`) runs its first attempt against a real `amid serve`
over HTTP: get_task → profile_data → list_lanes → claim_lane → run_gpu_job / get_job (train, two
predictions) → submit_attempt → request_review → get_review. Every call's arguments and result text
are recorded as the client received them; a client that hands text to the model (OpenCode) pays
for exactly these. Counted with o200k_base (npm `gpt-tokenizer`, `benchmarks/count_tokens.cjs`):

- after: the compact result text the server sends now, and the tools/list an agent token sees;
- before (same run): the same structured results as the SDK's former indented text, and the
  tools/list of the revision before issue 14 (`--before`, exported with `git archive` and listed
  by its own code), which sent every tool with its output schema to every caller.

    python benchmarks/protocol_tokens.py [--before REV]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pydantic_core

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp import Client

from amid.server.connect import ensure_worktree
from amid.server.demo import start_server, stop_server
from amid.server.demo_worker import ScriptedWorker, default_plan
from amid.server.local_client import call as admin_call
from amid.server.mcp_client import ToolCallFailed, connect
from benchmarks._common import demo_workspace, write_result

ROOT = Path(__file__).resolve().parent.parent
CYCLE = (
    "get_task",
    "profile_data",
    "list_lanes",
    "claim_lane",
    "run_gpu_job",
    "get_job",
    "submit_attempt",
    "request_review",
    "get_review",
)
BEFORE_REV = "3699b99"  # main before the issue-14 changes
LISTING = """
import asyncio, json, sys
sys.path.insert(0, ".")
from mcp import Client
from benchmarks._common import demo_workspace
from amid.server.app import build_app
from amid.server.context import Services
from amid.server.ledger import Identity, Ledger
from amid.server.settings import Settings
ws = demo_workspace()
services = Services(Settings(workspace=ws.root), ws, Ledger(ws.ledger_path))
app = build_app(services, local_identity=Identity(agent_id="bench", role="agent"), with_auth=False)
async def listed():
    async with Client(app.mcp, mode="legacy") as client:
        return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools]
print(json.dumps(asyncio.run(listed())))
"""


class RecordingWorker(ScriptedWorker):
    """The demo agent, recording each call's arguments, result text and structured content."""

    def __init__(self, client: Client, agent_id: str) -> None:
        super().__init__(client, default_plan(agent_id, set()))
        self.calls: list[dict[str, Any]] = []

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments or {})
        text = " ".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            raise ToolCallFailed(tool, text)
        structured = dict(result.structured_content or {})
        self.calls.append({"tool": tool, "arguments": arguments or {}, "text": text, "structured": structured})
        self.inbox.extend(structured.get("inbox", []))
        return structured


async def _cycle(url: str, token: str) -> list[dict[str, Any]]:
    async with connect(url, token) as client:
        worker = RecordingWorker(client, "worker-1")
        worker.task = await worker.call("get_task")
        await worker.first_attempt()
    return [c for c in worker.calls if c["tool"] in CYCLE]


def count_tokens(texts: list[str]) -> list[int]:
    node = subprocess.run(
        ["node", str(ROOT / "benchmarks" / "count_tokens.cjs")],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
    )
    return list(json.loads(node.stdout))


def listing(tree: Path) -> list[dict[str, Any]]:
    """tools/list for an agent token, as the code in `tree` answers it."""
    done = subprocess.run([sys.executable, "-c", LISTING], cwd=tree, capture_output=True, text=True, check=True)
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def before_tree(rev: str) -> Path:
    target = Path(tempfile.mkdtemp(prefix="amid-before-"))
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _per_tool(calls: list[dict[str, Any]], arguments: list[int], compact: list[int], indented: list[int]) -> dict:
    """Tokens per tool of the cycle: arguments plus the result, as compact (after) and indented (before) text."""
    per_tool: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "after": 0, "before": 0})
    for call, a, c, i in zip(calls, arguments, compact, indented, strict=True):
        row = per_tool[call["tool"]]
        row["calls"] += 1
        row["after"] += a + c
        row["before"] += a + i
    return dict(per_tool)


def _measure(before_rev: str) -> tuple[list[dict[str, Any]], list[int], list[Any], list[Any]]:
    """One attempt cycle on a fresh demo server, and the token counts of every text beside it."""
    ws = demo_workspace()
    token = admin_call(ws, "token_create", {"name": "worker-1", "role": "agent"})["token"]
    ensure_worktree(ws, "worker-1")  # as `amid connect` makes one
    process, url = start_server(ws.root)
    try:
        calls = asyncio.run(_cycle(url, token))
    finally:
        stop_server(process)
    after_list, before_list = listing(ROOT), listing(before_tree(before_rev))
    texts = [_compact(c["arguments"]) for c in calls]
    texts += [c["text"] for c in calls]
    texts += [pydantic_core.to_json(c["structured"], indent=2).decode() for c in calls]
    texts += [_compact({"tools": after_list}), _compact({"tools": before_list})]
    return calls, count_tokens(texts), after_list, before_list


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default=BEFORE_REV, help="revision whose tools/list is the 'before'")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    calls, counts, after_list, before_list = _measure(args.before)
    n = len(calls)
    arguments, compact, indented = counts[:n], counts[n : 2 * n], counts[2 * n : 3 * n]
    list_after, list_before = counts[3 * n], counts[3 * n + 1]
    per_tool = _per_tool(calls, arguments, compact, indented)
    cycle_after, cycle_before = sum(arguments) + sum(compact), sum(arguments) + sum(indented)
    exact = all(json.loads(c["text"]) == c["structured"] for c in calls)
    print(f"attempt cycle, {n} calls: {cycle_before} → {cycle_after} o200k tokens (results as compact JSON)")
    tools = f"{len(before_list)} → {len(after_list)} tools"
    print(f"tools/list an agent sees: {list_before} → {list_after} tokens ({tools})")
    print(f"cycle + definitions: {cycle_before + list_before} → {cycle_after + list_after}")
    for tool in CYCLE:
        row = per_tool.get(tool)
        if row:
            print(f"  {tool:<16} {row['calls']:>2} calls  {row['before']:>6} → {row['after']:>6}")
    path = write_result(
        "protocol_tokens",
        {
            "command": "python benchmarks/protocol_tokens.py",
            "tokenizer": "o200k_base (npm gpt-tokenizer 4.0.0)",
            "before_revision": args.before,
            "load_average_1min": round(load_before, 2),
            "cycle": list(CYCLE),
            "calls": n,
            "cycle_tokens": {"before_indented": cycle_before, "after_compact": cycle_after},
            "cycle_ratio_after_over_before": round(cycle_after / cycle_before, 3),
            "tools_list_tokens": {
                "before": list_before,
                "after": list_after,
                "tools_before": len(before_list),
                "tools_after": len(after_list),
            },
            "cycle_plus_definitions": {"before": cycle_before + list_before, "after": cycle_after + list_after},
            "text_is_the_structured_content": exact,
            "per_tool": per_tool,
        },
    )
    print(f"written {path}")


if __name__ == "__main__":
    main()
