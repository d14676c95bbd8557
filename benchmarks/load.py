"""64 agents calling ledger tools over real HTTP against a real `amid serve`, beside a bare SDK server.

Each agent has its own bearer token and sends raw JSON-RPC `tools/call` requests (the server is
stateless Streamable HTTP) in a fixed mix: get_task (include_case_ids: false), list_lanes,
list_jobs, read_notes, post_note (with an idempotency key; one in four is sent twice, as a client
retry), leaderboard, get_review of a known review. Two phases per server: paced (each agent once
per second) and unpaced (each agent back to back). Reported per phase: calls/s, p50/p99 per tool,
errors, and the server's CPU per call (utime + stime of its process from /proc, before and after).

Reference, in the same run: the MCP SDK's bare `MCPServer` with one trivial tool, same clients,
same load, as the SDK starts it by default (every answer a text/event-stream) and with
`json_response=True` (every answer one JSON body, as amid answers calls that ask for no progress).
Afterwards every acknowledged post_note is audited in the ledger: exactly one note per acknowledged
key, and a retried key answered with the same note.

    python benchmarks/load.py [--agents 64] [--seconds 15]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amid.server.demo import start_server, stop_server
from amid.server.ledger import Ledger
from amid.server.ledger.attempts import NewAttempt
from amid.server.local_client import call as admin_call
from amid.server.workspace import Workspace
from benchmarks._common import demo_workspace, write_result

BARE_SERVER = """
import sys
from mcp.server import MCPServer
mcp = MCPServer("bare")
@mcp.tool()
def ping() -> str:
    return "pong"
json_response = sys.argv[2] == "json"
mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), stateless_http=True, json_response=json_response)
"""
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
TICKS = os.sysconf("SC_CLK_TCK")
IDLE_S = 3.0
PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))  # the venv's, off PATH


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    first_error: dict[str, str] = field(default_factory=dict)
    acknowledged: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # key -> note ids
    late: list[float] = field(default_factory=list)  # paced: how late each call started against its tick (s)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of stat)


def _parse(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return dict(json.loads(data[-1]))
    return dict(response.json())


async def rpc(http: httpx.AsyncClient, url: str, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    response = await http.post(url, json=body, headers={**HEADERS, "authorization": f"Bearer {token}"})
    response.raise_for_status()
    reply = _parse(response)
    if "error" in reply or reply["result"].get("isError"):
        raise RuntimeError(json.dumps(reply)[:300])
    return dict(reply["result"].get("structuredContent") or {})


def ledger_mix(agent: str, review_id: str, start: int) -> itertools.cycle[tuple[str, dict[str, Any]]]:
    """The agent's calls in order, from `start` on (agents do not all call the same tool in the
    same second); post_note keys are numbered per agent (filled in at call time)."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_task", {"include_case_ids": False}),
        ("list_lanes", {}),
        ("read_notes", {}),
        ("post_note", {"kind": "observation", "body": f"{agent}: load benchmark note"}),
        ("list_jobs", {}),
        ("leaderboard", {}),
        ("get_review", {"review_id": review_id}),
    ]
    start %= len(calls)
    return itertools.cycle(calls[start:] + calls[:start])


async def _one(http: httpx.AsyncClient, url: str, token: str, agent: str, call: Any, tally: Tally, n: int) -> None:
    tool, arguments = call
    repeats = 1
    if tool == "post_note":
        key = f"{agent}-{n}"
        arguments = {**arguments, "title": f"load {key}", "idempotency_key": key}
        repeats = 2 if n % 4 == 0 else 1  # a client retry of the same call
    for _ in range(repeats):
        started = time.perf_counter()
        try:
            result = await rpc(http, url, token, tool, arguments)
        except Exception as exc:
            tally.errors[tool] += 1
            tally.first_error.setdefault(tool, str(exc)[:300])
            continue
        tally.latencies[tool].append(time.perf_counter() - started)
        if tool == "post_note":
            tally.acknowledged[arguments["idempotency_key"]].append(str(result["note_id"]))


async def _agent(
    url: str, token: str, agent: str, mix: Any, tally: Tally, until: float, paced: bool, http: httpx.AsyncClient
) -> None:
    n = 0
    tick = time.monotonic() + (hash(agent) % 1000) / 1000  # agents spread over the first second
    while time.monotonic() < until:
        if paced:
            await asyncio.sleep(max(0.0, tick - time.monotonic()))
            tally.late.append(max(0.0, time.monotonic() - tick))
            tick += 1.0
        await _one(http, url, token, agent, next(mix), tally, n)
        n += 1


async def _phase(url: str, agents: dict[str, str], mixes: dict[str, Any], seconds: float, paced: bool) -> Tally:
    tally = Tally()
    limits = httpx.Limits(max_connections=len(agents) + 8, max_keepalive_connections=len(agents) + 8)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        until = time.monotonic() + seconds
        await asyncio.gather(
            *(_agent(url, token, a, mixes[a], tally, until, paced, http) for a, token in agents.items())
        )
    return tally


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(tally: Tally, seconds: float, cpu_s: float) -> dict[str, Any]:
    calls = sum(len(v) for v in tally.latencies.values())
    everything = [x for v in tally.latencies.values() for x in v]
    per_tool = {
        tool: {
            "calls": len(v),
            "p50_ms": round(1000 * statistics.median(v), 1),
            "p99_ms": round(1000 * _quantile(v, 0.99), 1),
        }
        for tool, v in sorted(tally.latencies.items())
    }
    return {
        "calls": calls,
        "calls_per_s": round(calls / seconds, 1),
        "p50_ms": round(1000 * statistics.median(everything), 1) if everything else None,
        "p99_ms": round(1000 * _quantile(everything, 0.99), 1) if everything else None,
        "server_cpu_ms_per_call": round(1000 * cpu_s / max(calls, 1), 2),
        "errors": dict(tally.errors),
        "first_error": dict(tally.first_error),
        "per_tool": per_tool,
    }


async def _warm_up(url: str, agents: dict[str, str], mixes: dict[str, Any], tally: Tally) -> None:
    """One agent makes each call of its mix once (first calls import and cache); not measured."""
    agent, token = next(iter(agents.items()))
    async with httpx.AsyncClient(timeout=120) as http:
        for n in range(7):
            await _one(http, url, token, agent, next(mixes[agent]), tally, -1 - n)


async def _measure(
    url: str, pid: int, agents: dict[str, str], mixes: dict[str, Any], seconds: float, spy: Path | None = None
) -> dict:
    warm = Tally()
    await _warm_up(url, agents, mixes, warm)
    out: dict[str, Any] = {"warm_up": {"_tally": warm}}  # its notes are audited too
    before = cpu_seconds(pid)
    await asyncio.sleep(IDLE_S)  # the server's own background work (scheduler, reviewer pool)
    idle_per_s = (cpu_seconds(pid) - before) / IDLE_S
    out["idle"] = {"server_cpu_ms_per_s": round(1000 * idle_per_s, 2)}
    for name, paced in (("paced", True), ("unpaced", False)):
        recorder = _py_spy(pid, spy.with_suffix(f".{name}.txt"), seconds) if spy else None
        before = cpu_seconds(pid)
        started = time.monotonic()
        tally = await _phase(url, agents, mixes, seconds, paced)
        wall = time.monotonic() - started
        out[name] = summarize(tally, wall, cpu_seconds(pid) - before)
        calls = max(out[name]["calls"], 1)
        net = (cpu_seconds(pid) - before - idle_per_s * wall) / calls
        out[name]["server_cpu_ms_per_call_net_of_idle"] = round(1000 * net, 2)
        out[name]["_tally"] = tally
        if recorder is not None:
            recorder.wait()
        load = os.getloadavg()[0]
        print(f"  {name}: {json.dumps({k: v for k, v in out[name].items() if k not in ('_tally', 'per_tool')})}")
        print(f"    load average {load:.2f}")
    return out


def _py_spy(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    """Sample the server for the phase (collapsed stacks, one per line, count last)."""
    command = [PY_SPY, "record", "--pid", str(pid), "--format", "raw", "--duration", str(int(seconds)), "-o"]
    return subprocess.Popen([*command, str(out), "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _known_review(workspace: Workspace, agent: str) -> str:
    """A finished (failed) review in the ledger before the server starts: a known id for get_review."""
    ledger = Ledger(workspace.ledger_path)
    try:
        new = NewAttempt(agent, None, "0" * 40, [0], None, None, None, None, "load benchmark fixture")
        attempt_id, _ = ledger.attempts.create(new)
        review, _ = ledger.reviews.request(attempt_id, agent)
        ledger.reviews.fail(review["review_id"], "load benchmark fixture: no artifacts to review")
        return str(review["review_id"])
    finally:
        ledger.close()


def audit(workspace: Workspace, tallies: list[Tally]) -> dict[str, Any]:
    """Every acknowledged post_note: one row per key, and a retried key answered with the same note."""
    ledger = Ledger(workspace.ledger_path)
    try:
        rows = ledger.db.fetchall("SELECT note_id, title FROM notes WHERE title LIKE 'load %'")
    finally:
        ledger.close()
    by_title: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        by_title[row["title"]].append(str(row["note_id"]))
    acknowledged = {k: ids for t in tallies for k, ids in t.acknowledged.items()}
    lost = [k for k, ids in acknowledged.items() if set(by_title.get(f"load {k}", [])) != {ids[0]}]
    duplicated = [t for t, ids in by_title.items() if len(ids) > 1]
    split = [k for k, ids in acknowledged.items() if len(set(ids)) > 1]
    retried = sum(1 for ids in acknowledged.values() if len(ids) > 1)
    return {
        "acknowledged_keys": len(acknowledged),
        "retried_keys": retried,
        "notes_in_ledger": len(rows),
        "lost_or_mismatched": len(lost),
        "duplicated": len(duplicated),
        "retry_answered_with_another_note": len(split),
        "exactly_once": not lost and not duplicated and not split and len(rows) == len(acknowledged),
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_ready(url: str) -> None:
    async with httpx.AsyncClient(timeout=5) as http:
        for _ in range(600):
            try:
                await rpc(http, url, "none", "ping", {})
                return
            except Exception:
                await asyncio.sleep(0.05)


def start_bare(mode: str = "stream") -> tuple[subprocess.Popen[bytes], str]:
    """The bare SDK server (one trivial tool) on a free port, once it answers; `mode` "json" for JSON answers."""
    script = Path(tempfile.mkdtemp()) / "bare.py"
    script.write_text(BARE_SERVER, encoding="utf-8")
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(script), str(port), mode], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/mcp"
    asyncio.run(_wait_ready(url))
    return process, url


def run_bare(agents: int, seconds: float, mode: str = "stream") -> dict[str, Any]:
    process, url = start_bare(mode)
    try:
        names = {f"agent-{i:02d}": "none" for i in range(agents)}
        mixes: dict[str, Any] = {a: itertools.cycle([("ping", {})]) for a in names}
        return asyncio.run(_measure(url, process.pid, names, mixes, seconds))
    finally:
        stop_server(process)


def run_amid(agents: int, seconds: float, spy: Path | None) -> tuple[dict[str, Any], dict[str, Any]]:
    ws = demo_workspace()
    tokens = {
        f"agent-{i:02d}": admin_call(ws, "token_create", {"name": f"agent-{i:02d}", "role": "agent"})["token"]
        for i in range(agents)
    }
    review_id = _known_review(ws, "agent-00")
    process, url = start_server(ws.root)
    try:
        mixes = {a: ledger_mix(a, review_id, n) for n, a in enumerate(tokens)}
        phases = asyncio.run(_measure(url, process.pid, tokens, mixes, seconds, spy))
    finally:
        stop_server(process)
    return phases, audit(ws, [p.pop("_tally") for p in phases.values() if "_tally" in p])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--py-spy", type=Path, default=None, help="sample amid serve with py-spy into FILE.<phase>.txt")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    print(f"amid serve, {args.agents} agents, {args.seconds:.0f} s per phase")
    amid, exactly_once = run_amid(args.agents, args.seconds, args.py_spy)
    print(f"bare SDK server (one trivial tool, its default streamed answers), {args.agents} agents")
    bare = run_bare(args.agents, args.seconds)
    print(f"bare SDK server (one trivial tool, json_response=True), {args.agents} agents")
    bare_json = run_bare(args.agents, args.seconds, "json")
    for reference in (bare, bare_json):
        for phase in reference.values():
            phase.pop("_tally", None)
        reference.pop("warm_up", None)
    amid.pop("warm_up", None)
    print(f"exactly-once audit: {json.dumps(exactly_once)}")
    ratios = {
        phase: round(amid[phase]["server_cpu_ms_per_call"] / max(bare[phase]["server_cpu_ms_per_call"], 1e-9), 2)
        for phase in ("paced", "unpaced")
    }
    ratios_json = {
        phase: round(amid[phase]["server_cpu_ms_per_call"] / max(bare_json[phase]["server_cpu_ms_per_call"], 1e-9), 2)
        for phase in ("paced", "unpaced")
    }
    print(f"server CPU per call, amid / bare SDK: {ratios}; amid / bare SDK with JSON answers: {ratios_json}")
    path = write_result(
        "load",
        {
            "command": f"python benchmarks/load.py --agents {args.agents} --seconds {args.seconds:g}",
            "agents": args.agents,
            "seconds_per_phase": args.seconds,
            "load_average_1min_before": round(load_before, 2),
            "load_average_1min_after": round(os.getloadavg()[0], 2),
            "amid": amid,
            "bare_sdk": bare,
            "bare_sdk_json_response": bare_json,
            "cpu_per_call_ratio_amid_over_bare": ratios,
            "cpu_per_call_ratio_amid_over_bare_json_response": ratios_json,
            "post_note_audit": exactly_once,
            "before_issue_14": {"unpaced": {"server_cpu_ms_per_call": 17.6, "p50_ms": 1450, "p99_ms": 2500}},
        },
    )
    print(f"written {path}")


if __name__ == "__main__":
    main()
