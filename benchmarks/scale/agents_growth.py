"""How one `amid serve` grows with agents: 16, 64, 128 and 256 paced agents over HTTP, beside a bare SDK server.

Reuses benchmarks/load.py's pieces (the same agents, the same mix of ledger tools, the same raw JSON-RPC
`tools/call` over stateless Streamable HTTP, each agent with its own bearer token). Every agent calls
once per second (paced), each size for `--seconds`. Reference in the same run: the MCP SDK's bare
`MCPServer` with one trivial tool, answering JSON (as amid answers calls that ask for no progress),
under the same agents. The two servers run side by side and take turns at each size (amid, then
the bare server), so both meet the machine as it is in the same minute.

Per size: errors (must be 0), calls/s against the calls due, how far behind its pace an agent's
call starts (a server that keeps up keeps it near 0), p50/p99 per tool, the server's CPU per call
and in cores (utime + stime from /proc), how long its threads waited for a CPU (schedstat: other
processes had it), and the client's own CPU, run-queue wait and event-loop lag (one loop, one
connection pool with keep-alive for all agents: a client that saturates shows here, not as
server latency).

Where one server stops scaling: the first size at which the agents fall behind their pace, its
p99 climbs past 5x the smallest size's and past 1 s, or it uses most of one core (a Python
process handles its requests on one core), and which side ran out. Two separate, unmeasured
phases at the largest size sample the server with py-spy (when installed): every busy thread,
and the GIL holder only. Afterwards every acknowledged post_note is audited in the ledger.

    python benchmarks/scale/agents_growth.py [--agents 16 64 128 256] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from amid.server import admin
from amid.server.demo import start_server, stop_server
from amid.server.ledger import Ledger
from amid.server.workspace import Workspace
from benchmarks import load
from benchmarks._common import demo_workspace, write_result

SIZES = (16, 64, 128, 256)  # 128: between the last size one server keeps up with and the first it does not
PROBE_S = 0.01  # the client's event-loop lag probe: how late a 10 ms sleep wakes
RETRY_SHARE = 1 / 28  # one call in 7 is post_note, one post_note in 4 is sent twice
BEHIND_LIMIT_MS = 250.0  # a paced call starting this late (p99): the agents no longer keep their pace
P99_GROWTH_LIMIT, P99_LIMIT_MS = 5.0, 1000.0  # p99 climbing: past 5x the smallest size's and past 1 s
SATURATED_CORES = 0.85  # of the one core a Python server's event loop and GIL give it
AMID_PACKAGES = ("server", "tools")
SDK_PACKAGES: tuple[str, ...] = ("mcp", "starlette", "uvicorn", "anyio", "pydantic", "pydantic_core", "httptools")
SDK_PACKAGES += ("h11", "sse_starlette", "jsonschema", "opentelemetry", "typing_extensions", "json", "email", "http")


class _Reply:
    """What load.rpc reads of an httpx.Response: status, headers, text, json()."""

    def __init__(self, status: int, headers: Any, body: bytes) -> None:
        self.status_code, self.headers, self.content = status, headers, body

    @property
    def text(self) -> str:
        return self.content.decode("utf-8")

    def json(self) -> Any:
        return json.loads(self.content)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise RuntimeError(f"HTTP {self.status_code}: {self.text[:200]}")


class AiohttpClient:
    """load.rpc's `http.post(url, json=, headers=)` on one aiohttp session: one pooled keep-alive
    connection per agent, less client CPU per call than httpx (256 agents share one process)."""

    def __init__(self, connections: int) -> None:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections, keepalive_timeout=60)
        self.session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120))

    async def post(self, url: str, json: Any, headers: dict[str, str]) -> _Reply:
        async with self.session.post(url, json=json, headers=headers) as response:
            return _Reply(response.status, response.headers, await response.read())

    async def __aenter__(self) -> AiohttpClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()


async def _phase(url: str, agents: dict[str, str], mixes: dict[str, Any], seconds: float, client: str) -> load.Tally:
    """load._phase with the client chosen: `httpx` (load.py's own) or `aiohttp`."""
    if client == "httpx":
        return await load._phase(url, agents, mixes, seconds, paced=True)
    tally = load.Tally()
    async with AiohttpClient(len(agents) + 8) as http:
        until = time.monotonic() + seconds
        await asyncio.gather(
            *(load._agent(url, t, a, mixes[a], tally, until, True, http) for a, t in agents.items())  # type: ignore[arg-type]
        )
    return tally


def _run(coroutine: Any, loop: str) -> Any:
    if loop == "uvloop":
        import uvloop

        return uvloop.run(coroutine)
    return asyncio.run(coroutine)


def run_delay_s(pid: int) -> float:
    """Seconds the process's threads spent runnable but waiting for a CPU (/proc/PID/task/*/schedstat, field 2):
    time lost to other processes on the machine, not to the work itself."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[1])
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
    return total / 1e9


def make_tokens(workspace: Workspace, count: int) -> dict[str, str]:
    """Agent tokens through the ledger's own write path (one open, not one CLI call each)."""
    ledger = Ledger(workspace.ledger_path)
    try:
        return {f"agent-{i:03d}": admin.token_create(ledger, f"agent-{i:03d}", "agent")["token"] for i in range(count)}
    finally:
        ledger.close()


async def _paced_size(
    url: str, pid: int, agents: dict[str, str], mixes: dict[str, Any], seconds: float, idle_per_s: float, client: str
) -> tuple[dict[str, Any], load.Tally]:
    lag: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(PROBE_S)
            lag.append(time.perf_counter() - started - PROBE_S)

    server_before, client_before, started = load.cpu_seconds(pid), time.process_time(), time.monotonic()
    server_waited, client_waited = run_delay_s(pid), run_delay_s(os.getpid())
    prober = asyncio.create_task(probe())
    tally = await _phase(url, agents, mixes, seconds, client)
    wall = time.monotonic() - started
    done.set()
    await prober
    server_cpu, client_cpu = load.cpu_seconds(pid) - server_before, time.process_time() - client_before
    server_waited, client_waited = run_delay_s(pid) - server_waited, run_delay_s(os.getpid()) - client_waited
    out = load.summarize(tally, wall, server_cpu)
    out.pop("per_tool")
    calls = max(out["calls"], 1)
    retries = RETRY_SHARE if "post_note" in tally.latencies or "post_note" in tally.errors else 0
    late = tally.late or [0.0]
    out.update(
        agents=len(agents),
        wall_s=round(wall, 2),
        calls_due_per_s=round(len(agents) * (1 + retries), 1),
        behind_pace_p50_ms=round(1000 * statistics.median(late), 1),
        behind_pace_p99_ms=round(1000 * load._quantile(late, 0.99), 1),
        behind_pace_max_ms=round(1000 * max(late), 1),
        server_cores=round(server_cpu / wall, 3),
        server_cpu_ms_per_call_net_of_idle=round(1000 * (server_cpu - idle_per_s * wall) / calls, 2),
        server_waiting_for_cpu_share=round(server_waited / wall, 3),
        client_cores=round(client_cpu / wall, 3),
        client_waiting_for_cpu_share=round(client_waited / wall, 3),
        client_cpu_ms_per_call=round(1000 * client_cpu / calls, 2),
        client_loop_lag_p50_ms=round(1000 * statistics.median(lag), 1) if lag else None,
        client_loop_lag_p99_ms=round(1000 * load._quantile(lag, 0.99), 1) if lag else None,
        load_average_1min=round(os.getloadavg()[0], 2),
        per_tool=load.summarize(tally, wall, server_cpu)["per_tool"],
    )
    return out, tally


@dataclass
class Target:
    """One server under test: where it answers, its process, its agents' tokens and their call mix."""

    name: str
    url: str
    pid: int
    tokens: dict[str, str]
    mix_for: Any
    rows: list[dict[str, Any]] = field(default_factory=list)
    tallies: list[load.Tally] = field(default_factory=list)
    idle_per_s: float = 0.0


async def _interleaved(targets: list[Target], sizes: list[int], seconds: float, idle_s: float, client: str) -> None:
    """Each size against each server in turn (amid, then the bare server, then the next size): both
    see the machine as it is in the same minute, whatever else runs on it."""
    for t in targets:
        warm = load.Tally()
        first = next(iter(t.tokens))
        label = f"{first}@warm"
        await load._warm_up(t.url, {label: t.tokens[first]}, {label: t.mix_for(label, 0)}, warm)
        t.tallies.append(warm)
    for t in targets:
        before = load.cpu_seconds(t.pid)
        await asyncio.sleep(idle_s)  # the server's own background work (scheduler, reviewer pool)
        t.idle_per_s = (load.cpu_seconds(t.pid) - before) / idle_s
    for size in sizes:
        for t in targets:
            # a label per size keeps post_note keys distinct between sizes (the token, the identity, is the same)
            agents = {f"{a}@{size}": t.tokens[a] for a in list(t.tokens)[:size]}
            mixes = {a: t.mix_for(a, n) for n, a in enumerate(agents)}
            row, tally = await _paced_size(t.url, t.pid, agents, mixes, seconds, t.idle_per_s, client)
            row["idle_server_cpu_ms_per_s"] = round(1000 * t.idle_per_s, 2)
            t.rows.append(row)
            t.tallies.append(tally)
            keys = ("calls_per_s", "calls_due_per_s", "behind_pace_p99_ms", "p50_ms", "p99_ms", "server_cores")
            brief = {k: row[k] for k in keys} | {"errors": row["errors"], "client_cores": row["client_cores"]}
            print(f"  {t.name}, {size} agents: {json.dumps(brief)}", flush=True)


async def _profiled(
    url: str, pid: int, tokens: dict[str, str], mix_for: Any, seconds: float, out: Path, client: str, gil: bool
) -> load.Tally:
    """An extra paced phase at the largest size with py-spy sampling the server (not measured: py-spy takes CPU).
    Without `gil` every thread that is not idle is sampled (a thread queued on a lock counts: where the
    threads are); with `gil` only the thread holding the GIL (where the Python CPU goes)."""
    agents = {f"{a}@spy{'-gil' if gil else ''}": t for a, t in tokens.items()}
    mixes = {a: mix_for(a, n) for n, a in enumerate(agents)}
    command = [load.PY_SPY, "record", "--pid", str(pid), "--format", "raw", "--duration", str(int(seconds))]
    command += ["--nonblocking", "-o", str(out), *(["--gil"] if gil else [])]
    recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tally = await _phase(url, agents, mixes, seconds, client)
    recorder.wait()
    return tally


def hot_spots(raw: Path, top: int = 12) -> dict[str, Any]:
    """py-spy's raw output (one collapsed stack a line, outermost frame first, sample count last; file
    names shortened to their import path, `server/…` and `tools/…` being AMID's): self samples by
    layer, by module and by function, and inclusive samples of AMID's own functions."""
    by_layer: Counter[str] = Counter()
    by_module: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        leaf = _path(frames[-1])
        by_layer[_layer(frames)] += count
        by_module[leaf] += count
        by_function[frames[-1].rsplit(":", 1)[0] + ")"] += count
        for name in {f.rsplit(":", 1)[0] + ")" for f in frames if _path(f).split("/")[0] in AMID_PACKAGES}:
            inclusive[name] += count

    def share(counter: Counter[str]) -> list[dict[str, Any]]:
        return [{"frame": k, "share": round(v / max(total, 1), 3)} for k, v in counter.most_common(top)]

    return {
        "samples": total,
        "self_by_layer": share(by_layer),
        "self_by_module": share(by_module),
        "self_by_function": share(by_function),
        "inclusive_amid": share(inclusive),
    }


def _path(frame: str) -> str:
    """The frame's file as py-spy names it (its import path), AMID's without the `amid/` namespace."""
    return frame.partition(" (")[2].rsplit(":", 1)[0].removeprefix("amid/")


def _layer(frames: list[str]) -> str:
    """Where a sample's own time goes: the ledger (AMID's DuckDB layer), AMID's tools and server code,
    the MCP SDK's HTTP stack, or the event loop and threads themselves."""
    top = _path(frames[-1]).split("/")[0].removesuffix(".py")
    if _path(frames[-1]).startswith("server/ledger/") or top == "duckdb":
        return "ledger (server/ledger, DuckDB)"
    if top in AMID_PACKAGES:
        return "AMID tools and server code"
    if top in SDK_PACKAGES:
        return "MCP SDK and its HTTP stack (mcp, starlette, uvicorn, anyio, pydantic, ...)"
    if top in ("asyncio", "threading", "selectors", "concurrent", "queue", "socket"):
        return "event loop and worker threads (asyncio, threading)"
    return f"other ({top})"


def scaling(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Growth against the smallest size, and the first size where the one server stops keeping up."""
    base = rows[0]
    growth = [
        {
            "agents": r["agents"],
            "calls_per_s_x": round(r["calls_per_s"] / max(base["calls_per_s"], 1e-9), 2),
            "p99_x": round(r["p99_ms"] / max(base["p99_ms"], 1e-9), 2) if r["p99_ms"] and base["p99_ms"] else None,
            "server_cpu_per_call_x": round(
                r["server_cpu_ms_per_call_net_of_idle"] / max(base["server_cpu_ms_per_call_net_of_idle"], 1e-9), 2
            ),
        }
        for r in rows
    ]
    stops = None
    for r, g in zip(rows, growth, strict=True):
        reasons = []
        if r["behind_pace_p99_ms"] > BEHIND_LIMIT_MS:
            reasons.append(f"agents fell behind their pace (p99 {r['behind_pace_p99_ms']:.0f} ms late)")
        if g["p99_x"] is not None and g["p99_x"] > P99_GROWTH_LIMIT and r["p99_ms"] > P99_LIMIT_MS:
            reasons.append(f"p99 {r['p99_ms']:.0f} ms, {g['p99_x']}x the smallest size's")
        if r["server_cores"] >= SATURATED_CORES:
            reasons.append(f"server at {r['server_cores']} cores")
        if reasons:
            stops = {"agents": r["agents"], "why": reasons, "limited_by": _limited_by(r)}
            break
    cpu_ms = statistics.median(max(r["server_cpu_ms_per_call_net_of_idle"], 1e-3) for r in rows)
    return {
        "growth_vs_smallest": growth,
        "stops_scaling_at": stops,
        "one_core_capacity_calls_per_s": round(1000 / cpu_ms, 1),
        "one_core_capacity_paced_agents": int(1000 / cpu_ms / (1 + RETRY_SHARE)),
    }


def _limited_by(row: dict[str, Any]) -> str:
    """Which side ran out: the server's one core, the machine's CPUs (the server runnable but not
    running: other processes had them), or the client."""
    if row["client_cores"] >= SATURATED_CORES or row["client_loop_lag_p99_ms"] > BEHIND_LIMIT_MS:
        return f"the client ({row['client_cores']} cores, loop lag p99 {row['client_loop_lag_p99_ms']} ms)"
    if row["server_cores"] >= SATURATED_CORES:
        return f"the server's one core ({row['server_cores']} cores for its event loop and GIL)"
    if row["server_waiting_for_cpu_share"] >= 0.5:
        return (
            f"the machine's CPUs: the server ran {row['server_cores']} cores and its threads waited"
            f" {row['server_waiting_for_cpu_share']}x the wall time, together, for a CPU (other processes had them;"
            f" load average {row['load_average_1min']})"
        )
    return "not attributed (neither side saturated nor waiting for a CPU)"


def run(
    sizes: list[int],
    seconds: float,
    idle_s: float = load.IDLE_S,
    spy: bool = False,
    client: str = "aiohttp",
    loop: str = "uvloop",
) -> dict[str, Any]:
    """Both servers at every size; returns the result payload (main writes it)."""
    sizes = sorted(sizes)
    ws = demo_workspace()
    tokens = make_tokens(ws, sizes[-1])
    review_id = load._known_review(ws, "agent-000")

    def amid_mix(agent: str, n: int) -> Any:
        return load.ledger_mix(agent, review_id, n)

    def bare_mix(agent: str, n: int) -> Any:
        return itertools.cycle([("ping", {})])

    process, url = start_server(ws.root)
    profile: dict[str, Any] | None = None
    try:
        bare_process, bare_url = load.start_bare("json")
        try:
            amid = Target("amid", url, process.pid, tokens, amid_mix)
            bare = Target("bare SDK", bare_url, bare_process.pid, {a: "none" for a in tokens}, bare_mix)
            print(f"amid serve and the bare SDK server (json_response=True), paced agents {sizes}, {seconds:g} s each")
            _run(_interleaved([amid, bare], sizes, seconds, idle_s, client), loop)
        finally:
            stop_server(bare_process)
        if spy and Path(load.PY_SPY).is_file():
            profile = {}
            for view, gil in (("threads", False), ("gil", True)):
                raw = Path(tempfile.mkdtemp()) / f"amid.{view}.txt"
                print(f"  profiling {sizes[-1]} agents with py-spy ({view})", flush=True)
                profiled = _profiled(url, process.pid, tokens, amid_mix, seconds, raw, client, gil)
                amid.tallies.append(_run(profiled, loop))
                profile[view] = hot_spots(raw) if raw.is_file() else {"error": "py-spy wrote nothing"}
    finally:
        stop_server(process)
    exactly_once = load.audit(ws, amid.tallies)
    ratios = {
        str(a["agents"]): {
            "server_cpu_per_call": round(
                a["server_cpu_ms_per_call_net_of_idle"] / max(b["server_cpu_ms_per_call_net_of_idle"], 1e-9), 2
            ),
            "p99": round(a["p99_ms"] / max(b["p99_ms"], 1e-9), 2) if a["p99_ms"] and b["p99_ms"] else None,
        }
        for a, b in zip(amid.rows, bare.rows, strict=True)
    }
    print(f"exactly-once audit: {json.dumps(exactly_once)}")
    return {
        "command": f"python benchmarks/scale/agents_growth.py --agents {' '.join(map(str, sizes))}"
        f" --seconds {seconds:g} --client {client} --loop {loop}",
        "sizes": sizes,
        "seconds_per_size": seconds,
        "pacing": "each agent one call per second, agents spread over the first second",
        "reference": "MCP SDK MCPServer, one trivial tool (ping), stateless HTTP, json_response=True",
        "client": f"one process, one {loop} event loop, one {client} connection pool (keep-alive) for all agents",
        "order": "interleaved: at each size amid, then the bare server (both running throughout)",
        "errors_total": sum(sum(r["errors"].values()) for r in amid.rows + bare.rows),
        "amid": amid.rows,
        "bare_sdk_json_response": bare.rows,
        "ratio_amid_over_bare": ratios,
        "amid_scaling": scaling(amid.rows),
        "bare_scaling": scaling(bare.rows),
        "amid_hot_spots_at_largest": profile,
        "post_note_audit": exactly_once,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--idle-s", type=float, default=load.IDLE_S, help="idle CPU measured before the sizes")
    parser.add_argument("--no-py-spy", action="store_true", help="skip the profiled phase at the largest size")
    parser.add_argument("--client", choices=("aiohttp", "httpx"), default="aiohttp", help="the agents' HTTP client")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop", help="the client's event loop")
    parser.add_argument("--name", default="agents_growth", help="result file benchmarks/results/NAME.json")
    args = parser.parse_args(argv)
    started = time.monotonic()
    payload = run(args.agents, args.seconds, args.idle_s, not args.no_py_spy, args.client, args.loop)
    payload["wall_s"] = round(time.monotonic() - started, 1)
    print(f"scaling: {json.dumps(payload['amid_scaling']['stops_scaling_at'])}")
    print(f"written {write_result(args.name, payload)}")


if __name__ == "__main__":
    main()
