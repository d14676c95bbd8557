"""Crash suite: kill a real `amid serve` under concurrent writers, restart it, audit exactly-once.

N writer agents run a realistic mix over real HTTP through the real MCP client (claim_lane,
post_note, submit_attempt, request_review, run_gpu_job of a short CPU job), every write with an
idempotency key. The server is killed with SIGKILL or SIGTERM at chosen moments (submit calls in
flight, note calls in flight, run_gpu_job calls in flight, a review running, a job running, during
start-up) and restarted on the same port; clients retry every unanswered call with the same key
until it is answered. After each restart settles, /proc is walked for processes the killed server
left behind. At the end, with the server stopped, the DuckDB ledger and the artifact store are
audited: every acknowledged write is present exactly once (attempts, notes, artifacts re-hashed,
claims, reviews, jobs; crash_audit.py), no review finished twice, every job ended (survived or was
reconciled), no process is left.

    python benchmarks/reliability/crash.py [--agents 8] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from amid.server.local_client import call as admin_call
from amid.server.mcp_client import ToolCallFailed, call, connect
from amid.server.workspace import Workspace
from benchmarks.reliability._server import SIGNALS, Server, descendants, settle_leftovers
from benchmarks.reliability.crash_audit import Ledgerless, audit

MOMENTS = ("submit", "startup", "note", "review", "job", "run_job")
CALL_TIMEOUT_S = 45.0
GIVE_UP_S = 240.0  # a client stops retrying a call after this long (the server never came back)
JOB_S = 1.5
SETTINGS = {"AMID_MAX_PENDING_REVIEWS": "1000", "AMID_REVIEW_WORKERS": "1"}


@dataclass(frozen=True)
class Kill:
    moment: str  # what was going on: submit | note | run_job calls in flight, a review | job running, or startup
    signal: str  # SIGKILL | SIGTERM


def plan(rounds: int) -> list[Kill]:
    """Seven kills a round: every moment, SIGKILL and SIGTERM alternating (swapped in odd rounds);
    a start-up kill is the restart that follows the kill before it."""
    moments = ("submit", "startup", "note", "review", "job", "startup", "run_job")
    kills = []
    for r in range(rounds):
        for i, moment in enumerate(moments):
            kills.append(Kill(moment, ("SIGKILL", "SIGTERM")[(i + r) % 2]))
    return kills


@dataclass
class Agent:
    agent_id: str
    token: str
    lane_id: str
    payload: dict[str, Any]


class Writers:
    def __init__(self, url: str, acked: Ledgerless, python: str, keyed: set[str]) -> None:
        self.url, self.acked, self.python = url, acked, python
        self.keyed = keyed  # tools whose input has an idempotency_key
        self.stop = asyncio.Event()

    def _keyed(self, tool: str, arguments: dict[str, Any], key: str) -> dict[str, Any]:
        return {**arguments, "idempotency_key": key} if tool in self.keyed else arguments

    async def op(self, agent: Agent, tool: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """Call until answered: an unanswered call (server down, connection cut) is retried as it was."""
        first, give_up = True, time.monotonic() + GIVE_UP_S
        while time.monotonic() < give_up:
            try:
                result = await asyncio.wait_for(self._once(agent, tool, arguments), CALL_TIMEOUT_S)
                self.acked.calls[tool] += 1
                return result
            except ToolCallFailed as exc:  # an answer: a write that must succeed was refused
                self.acked.errors.append(f"{agent.agent_id} {tool}: {exc}"[:500])
                return None
            except Exception:  # no answer (refused, reset, timed out): retry with the same arguments
                if not first:
                    await asyncio.sleep(0.2)
                first = False
                self.acked.retries[tool] += 1
        self.acked.errors.append(f"{agent.agent_id} {tool}: no answer within {GIVE_UP_S:.0f} s of retries")
        return None

    async def _once(self, agent: Agent, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        async with connect(self.url, agent.token) as client:
            self.acked.inflight[tool] += 1
            try:
                result = await client.call_tool(tool, arguments)
            finally:
                self.acked.inflight[tool] -= 1
        if result.is_error:  # raised here, outside the client's task group (which would wrap it)
            raise ToolCallFailed(f"{tool}: {' '.join(getattr(b, 'text', '') for b in result.content)}")
        return dict(result.structured_content or {})

    async def run(self, agent: Agent) -> None:
        a = agent.agent_id
        if await self.op(agent, "claim_lane", self._keyed("claim_lane", {"lane_id": agent.lane_id}, f"{a}-claim")):
            self.acked.claims[a] = agent.lane_id
        i = 0
        while not self.stop.is_set():
            await self._note(agent, f"{a}-note-{i}")
            attempt_id = await self._submit(agent, f"{a}-attempt-{i}")
            if attempt_id and i % 3 == 0:
                review = await self.op(agent, "request_review", {"attempt_id": attempt_id})
                if review:
                    self.acked.reviews[attempt_id] = review["review_id"]
            if i % 2 == 1:
                await self._job(agent, f"{a}-job-{i}")
            i += 1

    async def _note(self, agent: Agent, key: str) -> None:
        body = f"what {agent.agent_id} saw"
        arguments = {"kind": "observation", "title": key, "body": body, "lane_id": agent.lane_id}
        note = await self.op(agent, "post_note", self._keyed("post_note", arguments, key))
        if note:
            self.acked.notes[key] = int(note["note_id"])

    async def _submit(self, agent: Agent, key: str) -> str | None:
        arguments = {**agent.payload, "summary": key, "lane_id": agent.lane_id}
        attempt = await self.op(agent, "submit_attempt", self._keyed("submit_attempt", arguments, key))
        if attempt is None:
            return None
        self.acked.attempts[key] = {"attempt_id": attempt["attempt_id"], "n_files": attempt["n_files"]}
        return str(attempt["attempt_id"])

    async def _job(self, agent: Agent, key: str) -> None:
        command = [self.python, "-c", f"import time; time.sleep({JOB_S})", key]
        arguments = {"command": command, "time_limit_s": 120}
        job = await self.op(agent, "run_gpu_job", self._keyed("run_gpu_job", arguments, key))
        if job:
            self.acked.jobs[key] = str(job["job_id"])


# --- the controller: kill at a moment, restart, check for leftovers ---------------------------------


def _sql(workspace: Workspace, query: str) -> int:
    try:
        rows = admin_call(workspace, "sql", {"query": query})["rows"]
    except Exception:  # the server is between lives
        return 0
    return int(rows[0][0]) if rows else 0


def _moment_reached(kill: Kill, workspace: Workspace, acked: Ledgerless) -> bool:
    if kill.moment == "submit":
        return acked.inflight["submit_attempt"] > 0
    if kill.moment == "note":
        return acked.inflight["post_note"] > 0
    if kill.moment == "run_job":
        return acked.inflight["run_gpu_job"] > 0
    if kill.moment == "review":
        return _sql(workspace, "SELECT count(*) FROM reviews WHERE status = 'running'") > 0
    return _sql(workspace, "SELECT count(*) FROM jobs WHERE status = 'running'") > 0


@dataclass
class KillRecord:
    moment: str
    signal: str
    reached: bool
    exit_code: int
    inflight: dict[str, int]
    orphans: list[str]
    stuck: str = ""  # a SIGTERM that did not stop it: serve.log's end, with every thread's stack


def _stopped(server: Server, signal_name: str) -> tuple[int, str]:
    code = server.stop(SIGNALS[signal_name])
    return code, server.log_tail(12000) if signal_name == "SIGTERM" and code != 0 else ""


async def _kill_at(server: Server, kill: Kill, acked: Ledgerless, timeout_s: float) -> tuple[KillRecord, set[int]]:
    deadline = time.monotonic() + timeout_s
    reached = False
    while time.monotonic() < deadline and not (reached := _moment_reached(kill, server.workspace, acked)):
        await asyncio.sleep(0.01)
    if kill.moment in ("submit", "note", "run_job"):
        await asyncio.sleep(0.05)  # let the request reach the tool
    return await asyncio.to_thread(_kill_now, server, kill, reached, dict(acked.inflight))


def _kill_now(server: Server, kill: Kill, reached: bool, inflight: dict[str, int]) -> tuple[KillRecord, set[int]]:
    """Kill the server; returns the record and the pids of the server and its descendants then."""
    assert server.process is not None
    old = {server.process.pid, *descendants(server.process.pid)}
    code, stuck = _stopped(server, kill.signal)
    return KillRecord(kill.moment, kill.signal, reached, code, {k: v for k, v in inflight.items() if v}, [], stuck), old


def _restart(server: Server, record: KillRecord, old: set[int], settle_s: float) -> None:
    server.start()
    assert server.process is not None
    found = settle_leftovers(server.workspace, old, server.process.pid, settle_s)
    record.orphans = [f"{p.pid} {p.cmdline[:200]}" for p in found]


def _startup_kill(server: Server, kill: Kill) -> KillRecord:
    """Start the server and kill it as soon as it has bound its port and written its marker."""
    process = server.spawn()
    server.wait_for_marker()
    old = {process.pid, *descendants(process.pid)}
    code, stuck = _stopped(server, kill.signal)
    record = KillRecord(kill.moment, kill.signal, True, code, {}, [], stuck)
    record.orphans = [f"{p.pid} {p.cmdline[:200]}" for p in settle_leftovers(server.workspace, old, None, 30.0)]
    return record


async def _controller(server: Server, kills: list[Kill], acked: Ledgerless, moment_s: float) -> list[KillRecord]:
    records: list[KillRecord] = []
    for index, kill in enumerate(kills):
        if kill.moment == "startup":
            continue  # done as the restart of the kill before it
        record, old = await _kill_at(server, kill, acked, moment_s)
        records.append(record)
        follow = kills[index + 1] if index + 1 < len(kills) else None
        if follow is not None and follow.moment == "startup":
            records.append(await asyncio.to_thread(_startup_kill, server, follow))
        await asyncio.to_thread(_restart, server, record, old, 30.0)
        await asyncio.sleep(1.0)  # let the writers get going again before the next kill
    return records


# --- settling before the audit (crash_audit.py) ----------------------------------------------------


def _wait_settled(workspace: Workspace, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    query = (
        "SELECT (SELECT count(*) FROM reviews WHERE status IN ('queued', 'running')) + "
        "(SELECT count(*) FROM jobs WHERE status IN ('queued', 'running'))"
    )
    while time.monotonic() < deadline:
        if _sql(workspace, query) == 0 and _sql(workspace, "SELECT 1") == 1:
            return True
        time.sleep(0.5)
    return False


# --- the whole run ---------------------------------------------------------------------------------


def prepare(workspace: Workspace, n_agents: int) -> list[Agent]:
    """Tokens, worktrees, one commit and one fold's predictions per agent (before any server runs)."""
    from tests.server.reviewer.sandbox import AgentSandbox

    folds = workspace.folds().k
    agents = []
    for index in range(n_agents):
        box = AgentSandbox(workspace, f"writer-{index}")
        fold = index % folds
        folder = box.write_predictions(fold)
        payload = box.payload(box.commit(), fold, folder)
        token = admin_call(workspace, "token_create", {"name": box.agent_id, "role": "agent"})["token"]
        agents.append(Agent(box.agent_id, token, "", payload))
    return agents


async def _assign_lanes(url: str, agents: list[Agent]) -> set[str]:
    """Spread the agents over the planned lanes; returns the tools that take an idempotency key."""
    async with connect(url, agents[0].token) as client:
        lanes = [x["lane_id"] for x in (await call(client, "list_lanes"))["lanes"]]
        tools = (await client.list_tools()).tools
    for index, agent in enumerate(agents):
        agent.lane_id = lanes[index % len(lanes)]
    return {t.name for t in tools if "idempotency_key" in (t.input_schema.get("properties") or {})}


async def _drive(
    server: Server, agents: list[Agent], kills: list[Kill], keyed: set[str], moment_s: float
) -> tuple[Ledgerless, list[KillRecord]]:
    acked = Ledgerless()
    writers = Writers(server.url, acked, sys.executable, keyed)
    tasks = [asyncio.create_task(writers.run(agent)) for agent in agents]
    try:
        records = await _controller(server, kills, acked, moment_s)
    finally:
        writers.stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    return acked, records


def run(workspace: Workspace, n_agents: int, kills: list[Kill], moment_s: float = 60.0) -> dict[str, Any]:
    """The whole suite on `workspace` (a fresh copy: it is changed); returns the result record."""
    agents = prepare(workspace, n_agents)
    env = {**SETTINGS, "AMID_MAX_CLAIMANTS": str(n_agents)}
    server = Server(workspace, env=env)
    started = time.monotonic()
    server.start()
    try:
        keyed = asyncio.run(_assign_lanes(server.url, agents))
        acked, records = asyncio.run(_drive(server, agents, kills, keyed, moment_s))
        settled = _wait_settled(workspace, 300.0)
    finally:
        pid = server.process.pid if server.process else None
        old = {pid, *descendants(pid)} if pid else set()
        final_exit = server.stop(signal.SIGINT) if server.process else None
    final = settle_leftovers(workspace, old, None, 30.0)
    result = audit(workspace, acked)
    result.update(
        agents=n_agents,
        seconds=round(time.monotonic() - started, 1),
        settled=settled,
        final_exit=final_exit,
        kills=[asdict(r) for r in records],
        kills_by=dict(Counter(f"{r.moment}/{r.signal}" for r in records)),
        orphans=sum(len(r.orphans) for r in records) + len(final),
        final_orphans=[p.cmdline[:200] for p in final],
        calls=dict(acked.calls),
        retries=dict(acked.retries),
        errors=acked.errors,
        tools_without_key=sorted({"claim_lane", "post_note", "submit_attempt", "run_gpu_job"} - keyed),
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2, help="seven kills a round")
    args = parser.parse_args()
    from benchmarks._common import demo_workspace, write_result

    workspace = demo_workspace()
    try:
        result = run(workspace, args.agents, plan(args.rounds))
    finally:
        shutil.rmtree(workspace.root.parent, ignore_errors=True)
    summary = {k: result[k] for k in ("acknowledged", "kills_by", "orphans")}
    summary.update(lost=len(result["lost"]), duplicated=len(result["duplicated"]))
    print(json.dumps(summary, indent=1))
    print(f"wrote {write_result('crash', result)}")


if __name__ == "__main__":
    main()
