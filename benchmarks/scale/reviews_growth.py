"""Reviews at scale: verdict latency and reviews per minute with 1, 2 and 4 reviewer processes,
and the replay sandbox's own cost, on the demo task.

The reviews are those of benchmarks/review_throughput.py (whose attempt, submitter and timing
pieces this reuses): S concurrent submitters each submit honest model attempts, request their
review and wait for the verdict through the MCP client; every review replays the attempt's
inference command (PRED_NOT_REPRODUCED and the perturbed-copy stability check). Reported:

    workers_N        review_workers = N, replay in bubblewrap (the production path): verdict
                     latency p50/p99 (request -> verdict), reviews per minute, the review process's
                     own compute, each replay's wall time as the review report records it, and the
                     peak RSS of the server process and of its review workers
    sandbox_none     review_workers = 2, replay_sandbox = none: the same reviews unconfined (the
                     reference for the sandbox's cost inside a review)
    sandbox_direct   the same replay command (the demo model on one fold's validation cases) run
                     directly, wrapped by amid.server.sandbox.wrap('bwrap') and unwrapped ('none'),
                     alternated, R times each; and `python -c pass` the same way (bwrap's fixed cost)

The sandbox share is (bwrap - none) / bwrap of the replay's wall time, median over runs: target
<= 10 %. The reviewer fails closed without bubblewrap by design; `none` is its explicit setting.

The large-volume task of issue 25: `--scale K` runs all of it on the demo task written K times finer
per axis (tools/task/demo_task.py: the same patients, (64K, 64K, 20K) voxels, K³ times the demo's),
`--large` at K = 4 (256 x 256 x 80); `volume` records the shape, voxels and bytes per case, and the
result is benchmarks/results/reviews_growth_large.json unless --name says otherwise.

    python benchmarks/scale/reviews_growth.py [--workers 1 2 4] [--submitters 8] [--attempts 3] [--direct 10]
        [--scale K | --large]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nibabel as nib

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from amid.server.context import Services
from amid.server.ledger import Ledger
from amid.server.reviewer import reviewer, stop_reviewer
from amid.server.reviewer.bounded import run_bounded
from amid.server.reviewer.replay import fill
from amid.server.reviewer.staging import stage_case
from amid.server.sandbox import Mounts, SandboxKind, SandboxSetting, placeholders, replay_env, wrap
from amid.server.settings import Settings
from amid.tools.task.demo_task import make_demo_task
from benchmarks._common import demo_workspace, write_result
from benchmarks.review_throughput import _prepare, _run
from benchmarks.scale.jobs_growth import quantiles
from tests.server.reviewer.sandbox import MODEL_REPLAY, PREDICT_PY, AgentSandbox

LARGE_SCALE = 4  # --large: 256 x 256 x 80 voxels of 0.2 x 0.2 x 1 mm, 64 times the demo's
MARK = "label[x : x + 4, y : y + 4, z : z + 2] = 1"  # the checkpoint's block in the sandbox's model


def model_code(scale: int) -> dict[str, str] | None:
    """The submitters' model at `scale` (None: the sandbox's own, unchanged). Its checkpoint marks a
    4 x 4 x 2-voxel block of air so that honest attempts never near-duplicate each other (two marks
    agree at ~0.997 < 0.999 on the demo); on a grid k times finer that block shrinks k³ times against
    the organ and two attempts on one fold agree at 0.9994 at scale 2 (DUPLICATE_PAYLOAD rejects
    them), so there the same model marks the same block in mm: k times the size and the offsets."""
    if scale == 1:
        return None
    if MARK not in PREDICT_PY:
        raise RuntimeError("the sandbox's model no longer marks its checkpoint as reviews_growth expects")
    x, y, z = (f"{scale} * {axis} : {scale} * ({axis} + {size})" for axis, size in (("x", 4), ("y", 4), ("z", 2)))
    return {"predict.py": PREDICT_PY.replace(MARK, f"label[{x}, {y}, {z}] = 1")}


def descendants_peak_rss_mb(root: int) -> dict[str, float]:
    """VmHWM (peak resident set) of `root` and, summed and largest, of every process below it."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    below, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        below += children
        frontier += children

    def hwm(pid: int) -> float:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    peaks = [hwm(pid) for pid in below]
    return {
        "server_mb": round(hwm(root), 1),
        "workers": len(below),
        "workers_sum_mb": round(sum(peaks), 1),
        "worker_max_mb": round(max(peaks, default=0.0), 1),
    }


def replay_seconds(services: Services) -> dict[str, list[float]]:
    """Each replay's wall time, by sandbox, from the review reports the reviewer wrote."""
    found: dict[str, list[float]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "replay_seconds" in node and node.get("sandbox"):
                found.setdefault(str(node["sandbox"]), []).append(float(node["replay_seconds"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(services.workspace.sub("reviews").glob("*.json")):
        if not path.name.endswith(".progress.json"):
            walk(json.loads(path.read_text(encoding="utf-8")))
    return found


def volume(scale: int) -> dict[str, Any]:
    """The task's volumes at `scale`: shape, spacing, voxels per case, and bytes per case (the decoded
    image, and the image and label files as stored, gzip-compressed NIfTI: means over training cases)."""
    with tempfile.TemporaryDirectory(prefix="amid-volume-") as tmp:
        task = make_demo_task(Path(tmp) / "challenge", scale=scale)
        return volume_of(sorted(task.glob("public/train/images/*.nii.gz")), sorted(task.glob("public/train/labels/*")))


def volume_of(images: list[Path], labels: list[Path]) -> dict[str, Any]:
    header = nib.load(images[0]).header
    shape = tuple(int(n) for n in header.get_data_shape())
    voxels = math.prod(shape)
    return {
        "shape": list(shape),
        "spacing_mm": [round(float(z), 4) for z in header.get_zooms()[:3]],
        "voxels_per_case": voxels,
        "image_bytes_per_case_decoded": voxels * header.get_data_dtype().itemsize,
        "image_bytes_per_case_file": round(statistics.mean(p.stat().st_size for p in images)),
        "label_bytes_per_case_file": round(statistics.mean(p.stat().st_size for p in labels)),
    }


def reviews(
    workers: int, sandbox: SandboxSetting, submitters: int, attempts: int, warm: bool = True, scale: int = 1
) -> dict[str, Any]:
    """One fresh demo workspace (at `scale`) and review pool; the pool is booted (one warm-up review)
    before the clock unless `warm` is False (the smoke test: then the first verdict includes the pool's start)."""
    ws = demo_workspace(scale)
    settings = Settings(workspace=ws.root, port=0, review_workers=workers, replay_sandbox=sandbox)
    services = Services(settings=settings, workspace=ws, ledger=Ledger(ws.ledger_path))
    code = model_code(scale)
    load = os.getloadavg()[0]  # the machine's load before (and, below, after): 2 cores are easily shared
    try:
        plans = _prepare(services, submitters, attempts, code=code)
        boot = time.monotonic()
        reviewer(services)
        if warm:
            warmup = _prepare(services, 1, 1, "warmup", first_seed=submitters * attempts, code=code)
            asyncio.run(_run(services, warmup))
        boot_s = time.monotonic() - boot
        wall_s, timings = asyncio.run(_run(services, plans))
        memory = descendants_peak_rss_mb(os.getpid())
        compute = [
            float(json.loads(row["payload"])["s"])
            for row in services.ledger.db.fetchall(
                f"SELECT payload FROM events WHERE kind = 'review_done' ORDER BY event_id OFFSET {int(warm)}"
            )
        ]
        replays = replay_seconds(services)
    finally:
        stop_reviewer(services)
        services.ledger.close()
        shutil.rmtree(ws.root.parent, ignore_errors=True)
    n = len(timings)
    return {
        "review_workers": workers,
        "replay_sandbox": sandbox,
        "reviews": n,
        "wall_s": round(wall_s, 2),
        "reviews_per_minute": round(60 * n / wall_s, 1),
        "verdict_latency_s": quantiles([t["review_s"] for t in timings], digits=3),
        "review_compute_s": quantiles(compute, digits=3),
        "replay_s": {kind: quantiles(values, digits=3) for kind, values in replays.items()},
        "submit_latency_s": quantiles([t["submit_s"] for t in timings], digits=3),
        "pool_start_and_first_review_s": round(boot_s, 2) if warm else None,
        "peak_rss": memory,
        "load_average_1m_before_after": [round(load, 2), round(os.getloadavg()[0], 2)],
    }


def direct(repeats: int, scale: int = 1) -> dict[str, Any]:
    """The demo model's replay command, wrapped and unwrapped, alternated; and an empty Python."""
    ws = demo_workspace(scale)
    try:
        box = AgentSandbox(ws, "direct")
        box.commit(model_code(scale))
        checkpoint = ws.root.parent / "checkpoint.json"
        checkpoint.write_text(json.dumps({"mark": 0}), encoding="utf-8")
        cases = [box.cases[case_id] for case_id in box.folds.val_cases(0)]
        code = ws.root.parent / "code"  # the checkout a replay gets (outside the hidden workspace)
        shutil.copytree(box.worktree, code, ignore=shutil.ignore_patterns(".git"))
        times: dict[str, dict[str, list[float]]] = {"replay": {}, "python_pass": {}}
        for index in range(repeats):
            for kind in ("bwrap", "none") if index % 2 == 0 else ("none", "bwrap"):
                for what, argv in (("replay", MODEL_REPLAY), ("python_pass", ["{python}", "-c", "pass"])):
                    seconds = one_replay(kind, argv, code, cases, ws.task_dir, checkpoint, ws.root)
                    times[what].setdefault(kind, []).append(seconds)
    finally:
        shutil.rmtree(ws.root.parent, ignore_errors=True)
    out: dict[str, Any] = {"repeats": repeats, "cases": len(cases)}
    for what, by_kind in times.items():
        bwrap, none = statistics.median(by_kind["bwrap"]), statistics.median(by_kind["none"])
        out[what] = {
            "bwrap_s": quantiles(by_kind["bwrap"]),
            "none_s": quantiles(by_kind["none"]),
            "sandbox_cost_s": round(bwrap - none, 4),
            "sandbox_share": round((bwrap - none) / bwrap, 4),
        }
    return out


def one_replay(
    kind: SandboxKind, argv: list[str], code: Path, cases: list[Any], task_dir: Path, checkpoint: Path, hidden: Path
) -> float:
    with tempfile.TemporaryDirectory(prefix="amid-direct-replay-") as tmp:
        inputs, outputs, home = Path(tmp) / "inputs", Path(tmp) / "outputs", Path(tmp) / "home"
        for folder in (inputs, outputs, home):
            folder.mkdir()
        for case in cases:
            stage_case(case.case_id, tuple(task_dir / p for p in case.image_paths), inputs)
        mounts = Mounts(code, inputs, outputs, checkpoint.name, {"": checkpoint}, hidden=(hidden,))
        filled = fill(argv, placeholders(kind, mounts, sys.executable))
        command, cwd = wrap(kind, filled, mounts)
        outcome = run_bounded(command, cwd, 300, replay_env(home, kind))
        if outcome.returncode != 0:
            raise RuntimeError(f"{kind} replay failed: {outcome.stderr_tail[-500:]}")
        if argv[1] == "predict.py" and len(list(outputs.iterdir())) != len(cases):
            raise RuntimeError(f"{kind} replay wrote {len(list(outputs.iterdir()))} of {len(cases)} predictions")
        return outcome.seconds


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--submitters", type=int, default=8)
    parser.add_argument("--attempts", type=int, default=3, help="attempts per submitter")
    parser.add_argument("--direct", type=int, default=10, help="repeats of the direct wrapped/unwrapped replay")
    parser.add_argument("--no-warmup", action="store_true", help="no warm-up review before the clock (smoke)")
    parser.add_argument("--skip-none", action="store_true", help="no replay_sandbox=none review run")
    parser.add_argument("--scale", type=int, help="the demo task on a grid this many times finer per axis [1]")
    parser.add_argument(
        "--large", action="store_true", help=f"the large-volume task: --scale {LARGE_SCALE} unless given"
    )
    names = "[reviews_growth; reviews_growth_large above scale 1]"
    parser.add_argument("--name", help=f"result file name (benchmarks/results/NAME.json) {names}")
    args = parser.parse_args(argv)
    scale = args.scale or (LARGE_SCALE if args.large else 1)
    shape = volume(scale)
    payload: dict[str, Any] = {
        "task": f"demo-liver-lesion-ct{f' at scale {scale}' if scale > 1 else ''} "
        f"({'x'.join(map(str, shape['shape']))}, 4 validation cases per fold, Dice + HD95 per label)",
        "scale": scale,
        "volume": shape,
        "submitters": args.submitters,
        "attempts_per_submitter": args.attempts,
        "sandbox_direct": direct(args.direct, scale),
    }
    for workers in args.workers:
        run = reviews(workers, "bwrap", args.submitters, args.attempts, not args.no_warmup, scale)
        payload[f"workers_{workers}"] = run
    if not args.skip_none:
        payload["sandbox_none"] = reviews(2, "none", args.submitters, args.attempts, scale=scale)
    payload["summary"] = summary(payload, args.workers)
    payload["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)  # other processes on the machine
    path = write_result(args.name or ("reviews_growth_large" if scale > 1 else "reviews_growth"), payload)
    print(json.dumps(payload["summary"], indent=2))
    print(f"wrote {path}")
    return payload


def summary(payload: dict[str, Any], workers: list[int]) -> dict[str, Any]:
    runs = {w: payload[f"workers_{w}"] for w in workers}
    base = runs[workers[0]]["reviews_per_minute"]
    out: dict[str, Any] = {
        "reviews_per_minute": {w: r["reviews_per_minute"] for w, r in runs.items()},
        "speedup_vs_first": {w: round(r["reviews_per_minute"] / base, 3) for w, r in runs.items()},
        "verdict_latency_p50_p99_s": {
            w: [r["verdict_latency_s"]["p50"], r["verdict_latency_s"]["p99"]] for w, r in runs.items()
        },
        "sandbox_share_direct_replay": payload["sandbox_direct"]["replay"]["sandbox_share"],
        "sandbox_cost_direct_python_pass_s": payload["sandbox_direct"]["python_pass"]["sandbox_cost_s"],
    }
    none = payload.get("sandbox_none")
    bwrap = runs.get(2)
    if none and bwrap and "bwrap" in bwrap["replay_s"] and "none" in none["replay_s"]:
        b, n = bwrap["replay_s"]["bwrap"]["p50"], none["replay_s"]["none"]["p50"]
        out["sandbox_share_in_reviews_replay_p50"] = round((b - n) / b, 4) if b else None
        out["review_compute_p50_bwrap_vs_none"] = round(
            bwrap["review_compute_s"]["p50"] / none["review_compute_s"]["p50"], 3
        )
    return out


if __name__ == "__main__":
    main()
