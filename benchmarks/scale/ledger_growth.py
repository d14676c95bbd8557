"""How tool calls, `amid report`, `amid export` and a supervisor tick grow with the ledger's history.

For each size N (attempts) a fresh demo workspace gets a generated run through the ledger's own
write path (amid.server.ledger: `Attempts.create`, `Reviews.request/start/finish`, `Notes.add`,
`Activity.log`, `Lanes.claim`): 8 agents on 6 lanes, N attempts, 10 events per attempt (deferred
`tool_call` events, as the server writes them), 1 note per 10 attempts, 1 review per 10 attempts
(two accepted, one rejected in three). Then a real `amid serve` is started on it and, over HTTP
(raw JSON-RPC `tools/call`, as benchmarks/load.py sends them):

- warm: get_task, list_lanes, leaderboard, run_evidence, read_notes, C calls each back to back
  (run_evidence as the supervisor calls it: with the previous answer's cursor; run_evidence_window: the
  whole window, the first read of a started supervisor)
  (repeated reads are answered from the server's in-memory cache while nothing is written);
- after a write: the same tools, each call preceded (untimed) by a withdraw_attempt and a
  post_note of another agent, so every cached answer that reads attempts or notes is stale;
- `amid report` and `amid export` as CLI subprocesses (through the running server);
- one supervisor tick (amid.server.supervisor.loop.Supervisor.tick over an MCP client, as `amid supervise`).

Reference in the same run: the MCP SDK's bare server with one trivial tool (`ping`), same client,
same calls; figures are also given as ratios to its p50. Growth: each figure at the largest size
over the smallest.

    python benchmarks/scale/ledger_growth.py [--sizes 1000 10000 100000] [--calls 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from amid.server.demo import start_server, stop_server
from amid.server.ledger import Ledger
from amid.server.ledger.attempts import NewAttempt
from amid.server.ledger.database import utcnow
from amid.server.ledger.lanes import LaneRow
from amid.server.ledger.reviews import CheckRow, MetricRow, ReviewOutcome, Verdict
from amid.server.local_client import call as admin_call
from amid.server.mcp_client import call as mcp_call
from amid.server.mcp_client import connect
from amid.server.supervisor.loop import Supervisor
from amid.server.workspace import Workspace
from benchmarks._common import demo_workspace, write_result
from benchmarks.load import BARE_SERVER, _free_port, _wait_ready, cpu_seconds, rpc

AGENTS = [f"agent-{i}" for i in range(8)]
LANES = ["baseline", "nnunet-2d", "nnunet-3d", "unet-monai", "swin-unetr", "calibration"]
EVENTS_PER_ATTEMPT = 10
NOTE_EVERY = 10
REVIEW_EVERY = 20
CURSOR = "<the previous run_evidence answer's cursor>"
# label -> (tool, arguments). run_evidence as the supervisor calls it each tick (since: the cursor of its
# previous answer: only what changed), and its whole window (the first read of a started supervisor).
TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "get_task": ("get_task", {"include_case_ids": False}),
    "list_lanes": ("list_lanes", {}),
    "leaderboard": ("leaderboard", {}),
    "run_evidence": ("run_evidence", {"since": CURSOR}),
    "run_evidence_window": ("run_evidence", {}),
    "read_notes": ("read_notes", {}),
}
SUPERVISOR_TOOLS = frozenset({"run_evidence"})
LEASE_S = 7 * 24 * 3600  # claims held for the whole generated week


def _lanes(ledger: Ledger) -> None:
    tiers = ["primary", "primary", "primary", "secondary", "secondary", "fallback"]
    rows = [
        LaneRow(
            lane_id=lane,
            title=lane,
            family="bench",
            tier=tier,
            origin="planner",
            rank=float(-i),
            lane_file=f"memory/lanes/{lane}.md",
            spec={"lane_id": lane},
        )
        for i, (lane, tier) in enumerate(zip(LANES, tiers, strict=True))
    ]
    ledger.lanes.add(rows, utcnow())


def _review(ledger: Ledger, attempt_id: str, agent: str, fold: int, score: float, accepted: bool) -> None:
    review, _ = ledger.reviews.request(attempt_id, agent, agent)
    ledger.reviews.start(review["review_id"])
    checks = [
        CheckRow("PREDICTIONS_PRESENT", True, "error", "every case predicted", {}),
        CheckRow("SCORE_MATCHES", accepted, "error", "declared vs verified", {"delta": 0.0 if accepted else 0.2}),
    ]
    metric = MetricRow("fold", fold, "dice", score, n_cases=4, n_valid=4, n_nan=0, n_capped=0, case_se=0.02)
    verdict: Verdict = "accepted" if accepted else "rejected"
    ledger.reviews.finish(review["review_id"], ReviewOutcome(verdict=verdict, checks=checks, metrics=[metric]))


def _new(i: int) -> NewAttempt:
    agent, lane, fold = AGENTS[i % len(AGENTS)], LANES[i % len(LANES)], i % 5
    return NewAttempt(
        agent,
        lane,
        f"{i:040x}",
        [fold],
        "real",
        None,
        None,
        f"key-{i}",
        f"attempt {i} on {lane}",
        declared={fold: {"dice": _score(i)}},
    )


def _score(i: int) -> float:
    return 0.5 + 0.4 * ((i * 7919) % 1000) / 1000


def _events(i: int, attempt_id: str) -> list[tuple[str, str | None, str | None, str | None, dict[str, Any]]]:
    agent = AGENTS[i % len(AGENTS)]
    payload = {"outcome": "ok", "ms": 1.0, "attempt": attempt_id}
    return [("tool_call", agent, "tool", f"tool-{e}", payload) for e in range(EVENTS_PER_ATTEMPT)]


def _after(ledger: Ledger, i: int, attempt_id: str) -> None:
    """Attempt i's note (1 in NOTE_EVERY) and review (1 in REVIEW_EVERY), through their own methods."""
    agent, lane, fold = AGENTS[i % len(AGENTS)], LANES[i % len(LANES)], i % 5
    if i % NOTE_EVERY == 0:
        body = f"{attempt_id} scored {_score(i):.3f} on fold {fold}"
        ledger.notes.add(agent, "observation", lane, f"note {i} on {attempt_id}", body, {})
    if i % REVIEW_EVERY == 0:
        _review(ledger, attempt_id, agent, fold, _score(i), accepted=(i // REVIEW_EVERY) % 3 != 2)


BATCH = 2000  # attempts (with their events, notes and reviews) per `Database.batch`
SINGLE = 30  # attempts written as the server writes them, after the history, timed at that size


def _single(ledger: Ledger, first: int, n: int) -> dict[str, float]:
    """The plain write path, one transaction per write (as tool calls write), at this history size."""
    spent = dict.fromkeys(("create", "events", "note", "review"), 0.0)
    for i in range(first, n):
        t0 = time.perf_counter()
        attempt_id, _ = ledger.attempts.create(_new(i))
        t1 = time.perf_counter()
        for kind, agent, s_type, s_id, payload in _events(i, attempt_id):
            ledger.activity.log(
                kind, agent_id=agent, subject_type=s_type, subject_id=s_id, payload=payload, deferred=True
            )
        t2 = time.perf_counter()
        ledger.notes.add(AGENTS[0], "observation", None, f"single {i}", "plain path", {})
        t3 = time.perf_counter()
        _review(ledger, attempt_id, AGENTS[i % len(AGENTS)], i % 5, _score(i), accepted=True)
        t4 = time.perf_counter()
        for key, value in zip(spent, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            spent[key] += value
    ledger.db.flush()
    count = max(n - first, 1)
    return {f"ms_per_{key}": round(1000 * value / count, 2) for key, value in spent.items()}


def populate(ws: Workspace, n: int, single_n: int = SINGLE) -> dict[str, Any]:
    """The generated history, through the ledger's write path (no server runs yet): per BATCH
    attempts, `Attempts.create_many` and `Activity.log_many` (the ledger's bulk methods), then each
    note and review through `Notes.add` and `Reviews.request/start/finish`, all in one
    `Database.batch`; then SINGLE more attempts written one transaction per write and timed."""
    ledger = Ledger(ws.ledger_path)
    spent = dict.fromkeys(("attempts_s", "events_s", "notes_and_reviews_s"), 0.0)
    started = time.perf_counter()
    bulk = max(n - single_n, 0)
    try:
        _lanes(ledger)
        now = utcnow()
        for agent, lane in zip(AGENTS, LANES + LANES, strict=False):
            ledger.lanes.claim(lane, agent, now=now, lease_s=LEASE_S, max_claimants=4)
        for first in range(0, bulk, BATCH):
            numbers = range(first, min(first + BATCH, bulk))
            with ledger.db.batch():
                t0 = time.perf_counter()
                ids = [attempt_id for attempt_id, _ in ledger.attempts.create_many([_new(i) for i in numbers])]
                t1 = time.perf_counter()
                ledger.activity.log_many([e for i, a in zip(numbers, ids, strict=True) for e in _events(i, a)])
                t2 = time.perf_counter()
                for i, attempt_id in zip(numbers, ids, strict=True):
                    _after(ledger, i, attempt_id)
                spent["notes_and_reviews_s"] += time.perf_counter() - t2
                spent["attempts_s"] += t1 - t0
                spent["events_s"] += t2 - t1
        bulk_s = time.perf_counter() - started
        single = _single(ledger, bulk, n)
        counts = {
            table: int(ledger.db.scalar(f"SELECT count(*) FROM {table}"))
            for table in ("attempts", "events", "notes", "reviews", "metrics", "check_results")
        }
        counts["accepted"] = int(ledger.db.scalar("SELECT count(*) FROM attempts WHERE status = 'accepted'"))
    finally:
        ledger.close()
    return {
        "counts": counts,
        "write_s": round(time.perf_counter() - started, 2),
        "bulk_attempts_per_s": round(bulk / max(bulk_s, 1e-9), 1),
        "bulk": {k: round(v, 2) for k, v in spent.items()},
        "single_write_path": single,
        "ledger_bytes": ws.ledger_path.stat().st_size,
    }


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "calls": len(ordered),
        "p50_ms": round(1000 * statistics.median(ordered), 2),
        "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 2),
        "max_ms": round(1000 * ordered[-1], 2),
    }


async def _timed(http: httpx.AsyncClient, url: str, token: str, tool: str, args: dict[str, Any]) -> float:
    t0 = time.perf_counter()
    await rpc(http, url, token, tool, args)
    return time.perf_counter() - t0


class _Caller:
    """Calls one labelled tool; a CURSOR argument is filled with the cursor of this caller's previous answer
    (the first call reads the whole window, as a starting supervisor does)."""

    def __init__(self, http: httpx.AsyncClient, url: str, tokens: dict[str, str], label: str) -> None:
        self.http, self.url, self.label = http, url, label
        self.tool, self.args = TOOLS[label]
        self.token = tokens["supervisor" if self.tool in SUPERVISOR_TOOLS else AGENTS[0]]
        self.cursor: str | None = None
        self.answer_bytes = 0

    async def __call__(self) -> float:
        args = {k: v for k, v in self.args.items() if v != CURSOR or self.cursor is not None}
        args = {k: self.cursor if v == CURSOR else v for k, v in args.items()}
        t0 = time.perf_counter()
        answer = await rpc(self.http, self.url, self.token, self.tool, args)
        spent = time.perf_counter() - t0
        self.cursor = answer.get("cursor", self.cursor)
        self.answer_bytes = len(json.dumps(answer))
        return spent


async def _tool_calls(
    url: str, pid: int, tokens: dict[str, str], pending: list[tuple[str, str]], calls: int
) -> dict[str, Any]:
    """Per tool: wall time per call (p50/p99) and the server's CPU per call (warm phase: utime +
    stime of `amid serve` over the calls, which a busy machine inflates less than wall time)."""
    out: dict[str, Any] = {"warm": {}, "after_write": {}}
    async with httpx.AsyncClient(timeout=300) as http:
        callers = {label: _Caller(http, url, tokens, label) for label in TOOLS}
        for label, caller in callers.items():
            await caller()  # the first call imports the tool's module (and reads run_evidence's window)
            cpu = cpu_seconds(pid)
            out["warm"][label] = _stats([await caller() for _ in range(calls)])
            out["warm"][label]["server_cpu_ms_per_call"] = round(1000 * (cpu_seconds(pid) - cpu) / calls, 2)
            out["warm"][label]["answer_bytes"] = caller.answer_bytes
        for label, caller in callers.items():
            times = []
            for k in range(max(calls // 2, 5)):
                agent, attempt_id = pending.pop()
                await rpc(http, url, tokens[agent], "withdraw_attempt", {"attempt_id": attempt_id})
                body = {"kind": "observation", "title": f"bench {label} {k}", "body": f"withdrew {attempt_id}"}
                await rpc(http, url, tokens[AGENTS[1]], "post_note", body)
                times.append(await caller())
            out["after_write"][label] = {**_stats(times), "answer_bytes": caller.answer_bytes}
    return out


async def _supervisor_ticks(url: str, token: str) -> list[dict[str, Any]]:
    """Two ticks of the real supervisor loop over MCP (the first may decide and send heartbeats)."""
    async with connect(url, token) as client:

        async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            return await mcp_call(client, tool, arguments)

        supervisor = Supervisor(call)
        ticks = []
        for _ in range(2):
            t0 = time.perf_counter()
            report = await supervisor.tick()
            ticks.append(
                {
                    "s": round(time.perf_counter() - t0, 3),
                    "stage": report.stage,
                    "heartbeats": len(report.heartbeats),
                    "lane_changes": len(report.lane_changes),
                    "stage_changes": len(report.stage_changes),
                }
            )
    return ticks


def _settle(pid: int, timeout_s: float = 60.0) -> float:
    """Seconds until the new server is idle (under 5 % of a core over half a second): it starts its
    job scheduler and reviewer pool in a thread beside the first calls, which are not what we time."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        before = cpu_seconds(pid)
        time.sleep(0.5)
        if cpu_seconds(pid) - before < 0.025:
            break
    return round(time.monotonic() - started, 2)


def _cli(ws: Workspace, *args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "amid", *args, "-w", str(ws.root)], check=True, capture_output=True)
    return time.perf_counter() - t0


def measure_size(n: int, calls: int, single_n: int = SINGLE) -> dict[str, Any]:
    ws = demo_workspace()
    tokens = {a: admin_call(ws, "token_create", {"name": a, "role": "agent"})["token"] for a in AGENTS}
    tokens["supervisor"] = admin_call(ws, "token_create", {"name": "supervisor", "role": "supervisor"})["token"]
    print(f"  {n} attempts: writing the history through the ledger ...", flush=True)
    written = populate(ws, n, single_n)
    print(f"    {json.dumps(written)}", flush=True)
    ledger = Ledger(ws.ledger_path, read_only=True)
    try:
        rows = ledger.db.fetchall(
            "SELECT agent_id, attempt_id FROM attempts WHERE status = 'pending' ORDER BY attempt_id DESC LIMIT ?",
            [len(TOOLS) * max(calls // 2, 5) + 10],
        )
    finally:
        ledger.close()
    pending = [(str(r["agent_id"]), str(r["attempt_id"])) for r in rows]
    pending.reverse()  # pop() takes the newest
    process, url = start_server(ws.root)
    try:
        settled_s = _settle(process.pid)
        tools = asyncio.run(_tool_calls(url, process.pid, tokens, pending, calls))
        ticks = asyncio.run(_supervisor_ticks(url, tokens["supervisor"]))
        with tempfile.TemporaryDirectory() as scratch:
            report_s = _cli(ws, "report", "--out", str(Path(scratch) / "report.html"))
            report_bytes = (Path(scratch) / "report.html").stat().st_size
            export_s = _cli(ws, "export", "--out", str(Path(scratch) / "export"))
    finally:
        stop_server(process)
    result = {
        "attempts": n,
        "history": written,
        **tools,
        "server_settled_after_s": settled_s,
        "supervisor_ticks": ticks,
        "report_s": round(report_s, 3),
        "report_bytes": report_bytes,
        "export_s": round(export_s, 3),
    }
    for phase in ("warm", "after_write"):
        print(
            f"    {phase}: " + ", ".join(f"{t} p50 {s['p50_ms']} p99 {s['p99_ms']} ms" for t, s in tools[phase].items())
        )
    print(f"    supervisor ticks {ticks}; report {report_s:.2f} s; export {export_s:.2f} s", flush=True)
    return result


def measure_bare(calls: int) -> dict[str, Any]:
    script = Path(tempfile.mkdtemp()) / "bare.py"
    script.write_text(BARE_SERVER, encoding="utf-8")
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(script), str(port), "json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/mcp"

    async def run() -> dict[str, Any]:
        await _wait_ready(url)
        async with httpx.AsyncClient(timeout=60) as http:
            await rpc(http, url, "none", "ping", {})
            cpu = cpu_seconds(process.pid)
            stats = _stats([await _timed(http, url, "none", "ping", {}) for _ in range(calls)])
            return {**stats, "server_cpu_ms_per_call": round(1000 * (cpu_seconds(process.pid) - cpu) / calls, 2)}

    try:
        return asyncio.run(run())
    finally:
        stop_server(process)


# Per call: every tool an agent or a ticking supervisor calls. The whole window is read once, when a
# supervisor starts (then only changes), so it has a bound of its own.
BOUNDS = {"tool_p99_ms": 50.0, "window_p99_ms": 1000.0, "report_s": 15.0}
ONCE = frozenset({"run_evidence_window"})


def summarize(sizes: list[dict[str, Any]], bare: dict[str, Any]) -> dict[str, Any]:
    small, large = sizes[0], sizes[-1]
    growth: dict[str, Any] = {}
    for phase in ("warm", "after_write"):
        for tool in TOOLS:
            a, b = small[phase][tool], large[phase][tool]
            growth[f"{phase}.{tool}.p99"] = round(b["p99_ms"] / max(a["p99_ms"], 1e-9), 2)
    for tool in TOOLS:
        a, b = small["warm"][tool], large["warm"][tool]
        growth[f"warm.{tool}.server_cpu"] = round(
            b["server_cpu_ms_per_call"] / max(a["server_cpu_ms_per_call"], 1e-9), 2
        )
    for key in ("report_s", "export_s"):
        growth[key] = round(large[key] / max(small[key], 1e-9), 2)
    growth["supervisor_tick"] = round(
        large["supervisor_ticks"][-1]["s"] / max(small["supervisor_ticks"][-1]["s"], 1e-9), 2
    )
    ratios = {
        f"{phase}.{tool}": [round(s[phase][tool]["p50_ms"] / bare["p50_ms"], 2) for s in sizes]
        for phase in ("warm", "after_write")
        for tool in TOOLS
    }
    cpu_ratios = {
        tool: [
            round(s["warm"][tool]["server_cpu_ms_per_call"] / max(bare["server_cpu_ms_per_call"], 1e-9), 2)
            for s in sizes
        ]
        for tool in TOOLS
    }

    def worst(tools: Iterable[str]) -> float:
        return max(s[phase][t]["p99_ms"] for s in sizes for phase in ("warm", "after_write") for t in tools)

    worst_p99, worst_window = worst([t for t in TOOLS if t not in ONCE]), worst(ONCE)  # lists: read per size
    return {
        "growth_largest_over_smallest": growth,
        "p50_over_bare_ping_p50": ratios,
        "warm_server_cpu_over_bare_ping": cpu_ratios,
        "bounds": BOUNDS,
        "worst_tool_p99_ms": worst_p99,
        "worst_window_p99_ms": worst_window,
        "worst_report_s": max(s["report_s"] for s in sizes),
        "bounds_held": worst_p99 <= BOUNDS["tool_p99_ms"]
        and worst_window <= BOUNDS["window_p99_ms"]
        and max(s["report_s"] for s in sizes) <= BOUNDS["report_s"],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--calls", type=int, default=50, help="timed calls per tool (half as many after writes)")
    parser.add_argument("--single", type=int, default=SINGLE, help="attempts written one write at a time, timed")
    parser.add_argument("--name", default="ledger_growth", help="results file name (benchmarks/results/NAME.json)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    print(f"bare SDK server, {args.calls} ping calls", flush=True)
    bare = measure_bare(args.calls)
    print(f"  {bare}", flush=True)
    sizes: list[dict[str, Any]] = []
    for n in args.sizes:
        sizes.append(measure_size(n, args.calls, args.single))
        payload = _payload(args, load_before, bare, sizes)
        write_result(args.name, payload)  # after each size: a long run that is stopped keeps what it measured
    path = write_result(args.name, payload)
    print(f"growth {args.sizes[0]} → {args.sizes[-1]}: {json.dumps(payload['growth_largest_over_smallest'])}")
    print(f"bounds held: {payload['bounds_held']}; written {path}")
    return payload


def _payload(args: argparse.Namespace, load_before: float, bare: dict[str, Any], sizes: list[dict[str, Any]]) -> dict:
    return {
        "command": f"python benchmarks/scale/ledger_growth.py --sizes {' '.join(map(str, args.sizes))} "
        f"--calls {args.calls} --single {args.single}",
        "load_average_1min_before": round(load_before, 2),
        "load_average_1min_after": round(os.getloadavg()[0], 2),
        "agents": len(AGENTS),
        "lanes": len(LANES),
        "per_attempt": {"events": EVENTS_PER_ATTEMPT, "notes": 1 / NOTE_EVERY, "reviews": 1 / REVIEW_EVERY},
        "bare_sdk_ping": bare,
        "sizes": sizes,
        "sizes_done": [s["attempts"] for s in sizes],
        **summarize(sizes, bare),
    }


if __name__ == "__main__":
    main()
