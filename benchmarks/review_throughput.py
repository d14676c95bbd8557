"""Review throughput on the demo task: 8 concurrent submitters, each submitting attempts, requesting
their reviews and waiting for the verdicts through the in-memory MCP client.

Each attempt is a real one (worktree, commit, NIfTI predictions of one fold, training manifest,
logs, checkpoint); predictions are written before the clock starts. Reported: reviews per minute
over the whole timed phase, per-review latency (request → verdict), the review process's own
compute time, submit latency, and the pool's one-off start (the fork server importing the
reviewer), measured separately.

    python benchmarks/review_throughput.py [--submitters 8] [--attempts 4] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import demo_workspace, write_result
from server.context import Services
from server.ledger import Ledger
from server.reviewer import reviewer, stop_reviewer
from server.settings import Settings
from tests.server.reviewer.sandbox import AgentSandbox, call, client_for, marked


def _prepare(
    services: Services, submitters: int, attempts: int, prefix: str = "bench"
) -> dict[str, list[dict[str, Any]]]:
    k = services.workspace.folds().k
    plans: dict[str, list[dict[str, Any]]] = {}
    for agent in range(submitters):
        box = AgentSandbox(services.workspace, f"{prefix}-{agent}")
        sha = box.commit()
        plans[box.agent_id] = []
        for index in range(attempts):
            seed, fold = (1000 if prefix == "bench" else 9000) + agent * attempts + index, (agent + index) % k
            folder = box.write_predictions(fold, marked(seed), folder=f"outputs/a{index}")
            plans[box.agent_id].append(box.payload(sha, fold, folder))
        services.ledger.identities.create_token(box.agent_id, "agent")
    return plans


async def _submitter(services: Services, agent_id: str, payloads: list[dict[str, Any]]) -> list[dict[str, float]]:
    timings = []
    async with client_for(services, agent_id) as client:
        for payload in payloads:
            started = time.monotonic()
            attempt = await call(client, "submit_attempt", payload)
            submitted = time.monotonic()
            queued = await call(client, "request_review", {"attempt_id": attempt["attempt_id"]})
            review = {"status": "queued"}
            while review["status"] not in ("done", "failed"):
                review = await call(client, "get_review", {"review_id": queued["review_id"], "wait_s": 30})
            assert review["verdict"] == "accepted", review
            timings.append({"submit_s": submitted - started, "review_s": time.monotonic() - submitted})
    return timings


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 3),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
        "max": round(ordered[-1], 3),
    }


async def _run(services: Services, plans: dict[str, list[dict[str, Any]]]) -> tuple[float, list[dict[str, float]]]:
    started = time.monotonic()
    results = await asyncio.gather(*(_submitter(services, agent, p) for agent, p in plans.items()))
    return time.monotonic() - started, [t for timings in results for t in timings]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--submitters", type=int, default=8)
    parser.add_argument("--attempts", type=int, default=4, help="attempts per submitter")
    parser.add_argument("--workers", type=int, default=2, help="review_workers (the setting's default is 2)")
    args = parser.parse_args()
    ws = demo_workspace()
    settings = Settings(workspace=ws.root, port=0, review_workers=args.workers)
    services = Services(settings=settings, workspace=ws, ledger=Ledger(ws.ledger_path))
    try:
        plans = _prepare(services, args.submitters, args.attempts)
        boot = time.monotonic()
        reviewer(services)
        asyncio.run(_run(services, _prepare(services, 1, 1, "warmup")))  # boots the fork server before the clock
        boot_s = time.monotonic() - boot
        wall_s, timings = asyncio.run(_run(services, plans))
        compute = [
            float(json.loads(row["payload"])["s"])
            for row in services.ledger.db.fetchall(
                "SELECT payload FROM events WHERE kind = 'review_done' ORDER BY event_id OFFSET 1"
            )
        ]
    finally:
        stop_reviewer(services)
        services.ledger.close()
    n = len(timings)
    payload = {
        "task": "demo-liver-lesion-ct (64x64x20, 4 validation cases per fold, Dice + HD95 per label)",
        "submitters": args.submitters,
        "attempts": n,
        "review_workers": args.workers,
        "wall_s": round(wall_s, 2),
        "reviews_per_minute": round(60 * n / wall_s, 1),
        "review_latency_s": _quantiles([t["review_s"] for t in timings]),
        "review_compute_s": _quantiles(compute),
        "submit_latency_s": _quantiles([t["submit_s"] for t in timings]),
        "pool_start_and_first_review_s": round(boot_s, 2),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),  # other processes on the machine
    }
    path = write_result("review_throughput", payload)
    print(json.dumps(payload, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
