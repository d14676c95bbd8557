"""The built-in scripted worker: a deterministic headless "agent CLI" with sessions, no model service.

    python -m server.supervisor.workers.scripted --url URL --prompt TEXT [--resume SESSION_ID]

It prints Claude-style stream-json: `system/init` with its session id, one line per tool call, and a
closing `result`. Each session keeps its prompts under $HOME/.amid-scripted/, so a resume sees the
whole conversation; an unknown session id fails as a real CLI's would. It calls `get_task` through
the real MCP client with the token in $AMID_TOKEN.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

from server.mcp_client import call, connect


def _say(event: dict[str, object]) -> None:
    print(json.dumps(event), flush=True)


def _session(resume: str | None) -> tuple[str, Path]:
    store = Path(os.environ.get("HOME", ".")) / ".amid-scripted"
    store.mkdir(parents=True, exist_ok=True)
    session_id = resume or f"scripted-{uuid.uuid4().hex[:12]}"
    path = store / f"{session_id}.jsonl"
    if resume and not path.is_file():
        print(f"No conversation found with session ID: {resume}", file=sys.stderr, flush=True)
        raise SystemExit(1)
    return session_id, path


async def _get_task(url: str) -> dict[str, object]:
    async with connect(url, os.environ["AMID_TOKEN"]) as client:
        return await call(client, "get_task", {"include_case_ids": False})


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="amid-scripted-worker")
    parser.add_argument("--url", required=True)
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--resume", default=None)
    options = parser.parse_args(args)
    session_id, path = _session(options.resume)
    _say({"type": "system", "subtype": "init", "session_id": session_id})
    with path.open("a", encoding="utf-8") as store:
        store.write(json.dumps({"prompt": options.prompt}) + "\n")
    task = asyncio.run(_get_task(options.url))
    _say({"type": "tool_result", "tool": "get_task", "task_id": task.get("task_id"), "inbox": task.get("inbox")})
    prompts = [json.loads(line)["prompt"] for line in path.read_text(encoding="utf-8").splitlines()]
    _say({"type": "result", "session_id": session_id, "prompts": prompts})


if __name__ == "__main__":
    main()
