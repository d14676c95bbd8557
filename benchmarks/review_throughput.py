"""Review throughput on the demo task: 8 concurrent submitters, each submitting attempts, requesting
their reviews and waiting for the verdicts through the in-memory MCP client.

Each attempt is a real one (worktree, commit, NIfTI predictions of one fold, training manifest,
logs, checkpoint); predictions are written before the clock starts. Reported: reviews per minute
over the whole timed phase, per-review latency (request → verdict), the review process's own
compute time, submit latency, and the pool's one-off start (the fork server importing the
reviewer), measured separately.

Three modes, each on a fresh demo workspace and pool: `replay-bwrap` (honest model attempts whose
inference command the reviewer replays in the bubblewrap sandbox: the production path),
`replay-none` (the same, replay_sandbox=none: the sandbox's own cost) and `no-replay` (the same
predictions without an inference command: PRED_NOT_REPRODUCED fires at once, nothing is replayed,
so the latency is that of every other check).

    python benchmarks/review_throughput.py [--submitters 8] [--attempts 4] [--workers 2] [--modes ...]
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

from amid.server.context import Services
from amid.server.ledger import Ledger
from amid.server.reviewer import reviewer, stop_reviewer
from amid.server.sandbox import SandboxSetting
from amid.server.settings import Settings
from benchmarks._common import demo_workspace, write_result
from tests.server.reviewer.sandbox import AgentSandbox, call, client_for

MODES = ("no-replay", "replay-none", "replay-bwrap")


def _prepare(
    services: Services,
    submitters: int,
    attempts: int,
    prefix: str = "bench",
    replay: bool = True,
    first_seed: int = 0,
    code: dict[str, str] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Honest model attempts, one checkpoint seed each (distinct seeds: no two attempts duplicate).
    `code`: files committed over the sandbox's own (its model, predict.py, unless replaced)."""
    k = services.workspace.folds().k
    plans: dict[str, list[dict[str, Any]]] = {}
    for agent in range(submitters):
        box = AgentSandbox(services.workspace, f"{prefix}-{agent}")
        sha = box.commit(code)
        plans[box.agent_id] = []
        for index in range(attempts):
            seed, fold = first_seed + agent * attempts + index, (agent + index) % k
            payload = box.model_payload(sha, fold, seed)
            if not replay:
                payload.pop("inference_command")
            plans[box.agent_id].append(payload)
        services.ledger.identities.create_token(box.agent_id, "agent")
    return plans


async def _submitter(services: Services, agent_id: str, payloads: list[dict[str, Any]]) -> list[dict[str, float]]:
    expected = "accepted" if payloads[0].get("inference_command") else "rejected"  # no-replay: PRED_NOT_REPRODUCED
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
            assert review["verdict"] == expected, review
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


def _measure(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    ws = demo_workspace()
    sandbox: SandboxSetting = "none" if mode == "replay-none" else "bwrap" if mode == "replay-bwrap" else "auto"
    settings = Settings(workspace=ws.root, port=0, review_workers=args.workers, replay_sandbox=sandbox)
    services = Services(settings=settings, workspace=ws, ledger=Ledger(ws.ledger_path))
    replay = mode != "no-replay"
    try:
        plans = _prepare(services, args.submitters, args.attempts, replay=replay)
        boot = time.monotonic()
        reviewer(services)
        warmup = _prepare(services, 1, 1, "warmup", replay, first_seed=args.submitters * args.attempts)
        asyncio.run(_run(services, warmup))  # boots the fork server before the clock
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
    return {
        "attempts": n,
        "wall_s": round(wall_s, 2),
        "reviews_per_minute": round(60 * n / wall_s, 1),
        "review_latency_s": _quantiles([t["review_s"] for t in timings]),
        "review_compute_s": _quantiles(compute),
        "submit_latency_s": _quantiles([t["submit_s"] for t in timings]),
        "pool_start_and_first_review_s": round(boot_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--submitters", type=int, default=8)
    parser.add_argument("--attempts", type=int, default=4, help="attempts per submitter")
    parser.add_argument("--workers", type=int, default=2, help="review_workers (the setting's default is 2)")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    args = parser.parse_args()
    modes = {mode: _measure(mode, args) for mode in args.modes}
    payload: dict[str, Any] = {
        "task": "demo-liver-lesion-ct (64x64x20, 4 validation cases per fold, Dice + HD95 per label)",
        "submitters": args.submitters,
        "review_workers": args.workers,
        "replayed_cases": "every validation case with a frozen prediction, then again on perturbed copies",
        "modes": modes,
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),  # other processes on the machine
    }
    if "no-replay" in modes:
        base = modes["no-replay"]["review_compute_s"]["median"]
        payload["replay_cost_compute_median_s"] = {
            m: round(v["review_compute_s"]["median"] - base, 3) for m, v in modes.items() if m != "no-replay"
        }
    path = write_result("review_throughput", payload)
    print(json.dumps(payload, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
