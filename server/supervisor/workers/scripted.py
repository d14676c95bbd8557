"""The built-in scripted worker: a deterministic headless "agent CLI" with sessions, no model service.

    python -m amid.server.supervisor.workers.scripted --url URL --prompt TEXT [--resume SESSION_ID]

It prints Claude-style stream-json: `system/init` with its session id, one line per finished step,
and a closing `result`. Each session keeps its prompts and its plan under $HOME/.amid-scripted/, so
a resume sees the whole conversation and continues where it stopped; an unknown session id fails as
a real CLI's would. It reaches the server through the real MCP client with the token in $AMID_TOKEN.

What it plays ($AMID_SCRIPTED_PLAY):
- `lane` (default): the scripted agent of `amid.server.demo_worker` — claims a lane, trains and predicts
  through `run_gpu_job`, submits, requests review, answers heartbeats (focus note after a plateau,
  another attempt as optimizer) and follows the run until it is done. Workers named in
  $AMID_SCRIPTED_CHEAT (comma-separated agent ids) copy the validation labels as their predictions.
- `echo`: calls get_task once and ends its turn (tests of the worker lifecycle).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from amid.server.mcp_client import call, connect

FOLLOW_S = 3600.0  # a lane session follows the run this long at most before ending its turn


def _say(event: dict[str, object]) -> None:
    print(json.dumps(event), flush=True)


class Session:
    """$HOME/.amid-scripted/<id>.json: the prompts of the conversation and the worker's plan."""

    def __init__(self, resume: str | None) -> None:
        store = Path(os.environ.get("HOME", ".")) / ".amid-scripted"
        store.mkdir(parents=True, exist_ok=True)
        self.session_id = resume or f"scripted-{uuid.uuid4().hex[:12]}"
        self.path = store / f"{self.session_id}.json"
        if resume and not self.path.is_file():
            print(f"No conversation found with session ID: {resume}", file=sys.stderr, flush=True)
            raise SystemExit(1)
        self.data: dict[str, Any] = (
            json.loads(self.path.read_text(encoding="utf-8")) if resume else {"prompts": [], "plan": None}
        )

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1), encoding="utf-8")
        tmp.replace(self.path)


async def _echo(url: str, token: str) -> dict[str, object]:
    async with connect(url, token) as client:
        task = await call(client, "get_task", {"include_case_ids": False})
    return {"type": "tool_result", "tool": "get_task", "task_id": task.get("task_id"), "inbox": task.get("inbox")}


async def _lane(url: str, token: str, session: Session, prompt: str | None) -> str:
    from amid.server.demo_worker import WorkerPlan, default_plan, run_worker

    async with connect(url, token) as client:
        if session.data["plan"] is None:
            worktree = (await call(client, "get_task", {"include_case_ids": False}))["worktree"]
            cheaters = {x.strip() for x in os.environ.get("AMID_SCRIPTED_CHEAT", "").split(",") if x.strip()}
            session.data["plan"] = asdict(default_plan(Path(str(worktree)).name, cheaters))
        plan = WorkerPlan(**session.data["plan"])
        reported = set(plan.steps)

        def save(changed: WorkerPlan) -> None:
            session.data["plan"] = asdict(changed)
            session.save()
            for step in [s for s in changed.steps if s not in reported]:
                reported.add(step)
                _say({"type": "step", "step": step, "detail": changed.steps[step]})

        await run_worker(client, plan, prompt=prompt, follow_s=FOLLOW_S, save=save)
        return str(plan.steps.get("stage seen", ""))


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="amid-scripted-worker")
    parser.add_argument("--url", required=True)
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--resume", default=None)
    options = parser.parse_args(args)
    session = Session(options.resume)
    session.data["prompts"].append(options.prompt)
    session.save()  # the prompt is in the conversation before the session id is announced
    _say({"type": "system", "subtype": "init", "session_id": session.session_id})
    token = os.environ["AMID_TOKEN"]
    if os.environ.get("AMID_SCRIPTED_PLAY", "lane") == "echo":
        _say(asyncio.run(_echo(options.url, token)))
        _say({"type": "result", "session_id": session.session_id, "prompts": session.data["prompts"]})
        return
    # every prompt of the session, answered once each: a new session's first prompt holds the task's text and
    # the heartbeats given with it (a heartbeat given as a prompt is not given again in a tool result)
    heartbeats = "\n\n".join(session.data["prompts"])
    stage = asyncio.run(_lane(options.url, token, session, heartbeats or None))
    _say({"type": "result", "session_id": session.session_id, "stage": stage, "prompts": session.data["prompts"]})


if __name__ == "__main__":
    main()
