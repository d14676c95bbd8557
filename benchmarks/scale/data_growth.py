"""Benchmark: how profile_data and the reviewer's scoring grow with the data (issue 25, "Data size").

Generated at run time (seeded, in a temporary folder): CT-like int16 NIfTI volumes with label maps and
2-D pathology-style RGB PNG tiles with nuclei masks, as nnU-Net raw datasets of 40, 400 and 2,000 cases
each (the smaller ones hard links of the first cases of the largest, so every size holds the same kind of
case), and one large case (a 512 x 512 x 600 int16 volume with its label map, beside four small ones).

Each dataset becomes a workspace (`init_workspace`, data linked) served by a real `amid serve`; an agent
calls `profile_data` over HTTP until it is ready (the computation), then once more (the cached answer).
Measured per dataset:
- the call's wall time and the profile's own seconds (profile.json), per byte of the files read;
- the read floor, in a child: every file read once and all of it inflated with ISA-L (zlib beside it) in a
  pool like the profiler's (spawned, as many processes, its initializer); the profile as a multiple of it;
- peak RSS of the server and of its workers, sampled from /proc every 50 ms (each process's VmHWM, and
  the largest sum of VmRSS over the server's whole process tree);
- the second call: its wall time, whether any worker process started, and whether profile.json was
  rewritten (the cache key is every file's size and mtime_ns, `amid.tools.profiling.profile.fingerprint`).

Then the reviewer's metric code (`amid.tools.metrics`: Dice, then one surface-distance pass for HD95 and NSD)
beside MONAI's CPU metrics (compute_dice, compute_hausdorff_distance, compute_surface_dice) on a few
512 x 512 x 400 uint8 mask pairs (benchmarks/metrics_vs_monai.py's generator), each library in its own
process: seconds per pair, the largest value difference, and the peak RSS each adds over the masks it
was given (VmHWM reset through /proc/self/clear_refs once the pair is built).

    python benchmarks/scale/data_growth.py                 # 40 / 400 / 2,000 cases, large case, 3 mask pairs
    python benchmarks/scale/data_growth.py --quick         # 5 / 12 cases, no large case, one 32^3 mask pair
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NAME = "data_growth"
PAGE = os.sysconf("SC_PAGE_SIZE")
LABELS = {"background": 0, "organ": 1, "lesion": 2}
TILE_LABELS = {"background": 0, "nucleus": 1}
SPACING = (0.8, 0.8, 2.5)
TOLERANCE_MM = 2.0
SAMPLE_S = 0.05
TICKS = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- data


def _ct_case(job: tuple[Path, int, int, tuple[int, int], int]) -> None:
    import nibabel as nib

    from benchmarks.profile_vs_nnunet import synthetic_ct

    folder, index, size, depth, seed = job
    image, label, spacing = synthetic_ct(index, size, depth, seed)
    affine = np.diag([-spacing[0], -spacing[1], spacing[2], 1.0])
    nib.save(nib.Nifti1Image(image, affine), folder / "imagesTr" / f"ct_{index:04d}_0000.nii.gz")
    nib.save(nib.Nifti1Image(label, affine), folder / "labelsTr" / f"ct_{index:04d}.nii.gz")


def synthetic_tile(index: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """An H&E-like RGB tile: pink stroma with texture, purple nuclei (the mask), noise."""
    rng = np.random.default_rng([seed, 7, index])
    y, x = np.ogrid[:size, :size]
    mask = np.zeros((size, size), bool)
    for _ in range(int(rng.integers(8, 30))):
        cy, cx = rng.uniform(0, size, 2)
        ry, rx = rng.uniform(size / 80, size / 25, 2)
        mask |= ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 <= 1
    stroma = np.array([232, 170, 200], np.float32)
    nucleus = np.array([110, 60, 160], np.float32)
    image = np.where(mask[..., None], nucleus, stroma) + rng.normal(0, 10, (size, size, 3)).astype(np.float32)
    image += 15 * np.sin(x / rng.uniform(3, 9))[..., None].astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8), mask.astype(np.uint8)


def _tile_case(job: tuple[Path, int, int, int]) -> None:
    from PIL import Image

    folder, index, size, seed = job
    image, mask = synthetic_tile(index, size, seed)
    Image.fromarray(image, "RGB").save(folder / "imagesTr" / f"tile_{index:04d}_0000.png")
    Image.fromarray(mask, "L").save(folder / "labelsTr" / f"tile_{index:04d}.png")


def _large_case(folder: Path, shape: tuple[int, int, int], seed: int) -> None:
    """One large CT-like volume built slab by slab (the generator's floats stay a slab's size)."""
    import nibabel as nib

    rng = np.random.default_rng([seed, 99])
    nx, ny, nz = shape
    image = np.empty(shape, np.int16)
    label = np.zeros(shape, np.uint8)
    x, y = np.ogrid[:nx, :ny]
    u, v = (x - nx / 2) / (nx / 2), (y - ny / 2) / (ny / 2)
    body = (u / 0.85) ** 2 + (v / 0.7) ** 2 <= 1
    for z0 in range(0, nz, 32):
        z1 = min(nz, z0 + 32)
        w = (np.arange(z0, z1) - nz / 2) / (nz / 2)
        slab = np.where(body, 40.0, -1000.0)[..., None] + rng.normal(0, 12, (nx, ny, z1 - z0))
        organ = (((u + 0.1) / 0.25) ** 2 + (v / 0.2) ** 2)[..., None] + (w / 0.4)[None, None, :] ** 2 <= 1
        slab[organ] = 95.0 + rng.normal(0, 12, int(organ.sum()))
        image[:, :, z0:z1] = np.rint(slab).astype(np.int16)
        label[:, :, z0:z1] = organ
    affine = np.diag([-0.8, -0.8, 1.0, 1.0])
    nib.save(nib.Nifti1Image(image, affine), folder / "imagesTr" / "big_0000_0000.nii.gz")
    nib.save(nib.Nifti1Image(label, affine), folder / "labelsTr" / "big_0000.nii.gz")


def _raw_folder(folder: Path, labels: dict[str, int], channels: dict[str, str], ending: str, n: int) -> Path:
    (folder / "imagesTr").mkdir(parents=True, exist_ok=True)
    (folder / "labelsTr").mkdir(parents=True, exist_ok=True)
    spec = {"channel_names": channels, "labels": labels, "numTraining": n, "file_ending": ending}
    (folder / "dataset.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return folder


def generate(root: Path, args: argparse.Namespace) -> dict[str, Path]:
    """The largest CT and tile datasets and the large-case one (generated), and every smaller size as
    hard links of the first cases of the largest."""
    n_max = max(args.sizes)
    ct_all = _raw_folder(root / "ct_all", LABELS, {"0": "CT"}, ".nii.gz", n_max)
    tiles_all = _raw_folder(root / "tiles_all", TILE_LABELS, {"0": "RGB"}, ".png", n_max)
    depth = (args.ct_depth[0], args.ct_depth[1] + 1)
    with ProcessPoolExecutor(args.workers) as pool:
        list(pool.map(_ct_case, [(ct_all, i, args.ct_size, depth, 0) for i in range(n_max)], chunksize=8))
        list(pool.map(_tile_case, [(tiles_all, i, args.tile_size, 0) for i in range(n_max)], chunksize=8))
    folders: dict[str, Path] = {}
    for kind, source, ending, labels, channels in (
        ("ct", ct_all, ".nii.gz", LABELS, {"0": "CT"}),
        ("tiles", tiles_all, ".png", TILE_LABELS, {"0": "RGB"}),
    ):
        for n in args.sizes if kind in args.kinds else []:
            folder = _raw_folder(root / f"{kind}_{n}", labels, channels, ending, n)
            for sub in ("imagesTr", "labelsTr"):
                for path in sorted((source / sub).iterdir())[:n]:
                    os.link(path, folder / sub / path.name)
            folders[f"{kind}_{n}"] = folder
    if args.large and not args.skip_large:
        large = _raw_folder(root / "large", LABELS, {"0": "CT"}, ".nii.gz", 5)
        _large_case(large, tuple(args.large), 0)
        for sub in ("imagesTr", "labelsTr"):
            for path in sorted((ct_all / sub).iterdir())[:4]:
                os.link(path, large / sub / path.name)
        folders["large"] = large
    return folders


def reuse(root: Path, args: argparse.Namespace) -> dict[str, Path] | None:
    """The datasets a previous run with --data generated in `root`, if all are there."""
    names = [f"{kind}_{n}" for kind in args.kinds for n in args.sizes]
    names += ["large"] if args.large and not args.skip_large else []
    if not all((root / name / "dataset.json").is_file() for name in names):
        return None
    print(f"reusing the datasets in {root}", flush=True)
    return {name: root / name for name in names}


def data_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith((".nii.gz", ".png")))


# ---------------------------------------------------------------- /proc sampling


def _status(pid: int) -> dict[str, int]:
    values = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                values[line.split(":")[0]] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return values


def _children() -> dict[int, int]:
    """pid -> parent pid of every process on the machine."""
    parents = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def tree_cpu_seconds(pid: int) -> float:
    """utime + stime of a process and of its children it has waited for (cutime, cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / TICKS


def _wait_workers_reaped(root: int, timeout_s: float = 20.0) -> None:
    """Until the profiler's pool workers have exited and been waited for (their CPU is in cstime then)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = []
        for pid in process_tree(root)[1:]:
            try:
                alive.append(b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes())
            except OSError:
                continue
        if not any(alive):
            return
        time.sleep(0.1)


def process_tree(root: int) -> list[int]:
    parents = _children()
    tree, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        tree += frontier
    return tree


class TreeSampler:
    """Samples a process tree's memory every 50 ms in a thread: each process's VmHWM, the tree's summed VmRSS."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.hwm: dict[int, int] = {}
        self.max_total_rss = 0
        self.pids_seen: set[int] = set()
        self.spawned: dict[int, bool] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._baseline = set(process_tree(self.root))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for pid in process_tree(self.root):
                status = _status(pid)
                self.pids_seen.add(pid)
                total += status.get("VmRSS", 0)
                self.hwm[pid] = max(self.hwm.get(pid, 0), status.get("VmHWM", 0))
            self._run_once()
            self.max_total_rss = max(self.max_total_rss, total)
            self._stop.wait(SAMPLE_S)

    def _run_once(self) -> None:
        for pid in self.pids_seen - set(self.spawned):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            self.spawned[pid] = b"spawn_main" in command  # the profiler's pool; not the reviewer's forkserver

    def summary(self) -> dict[str, Any]:
        workers = [v for pid, v in self.hwm.items() if self.spawned.get(pid)]
        helpers = [v for pid, v in self.hwm.items() if pid != self.root and not self.spawned.get(pid)]
        return {
            "server_peak_rss_bytes": self.hwm.get(self.root, 0),
            "worker_peak_rss_bytes": max(workers, default=0),
            "server_helpers_peak_rss_bytes": max(helpers, default=0),  # reviewer pool's forkserver, tracker
            "workers_seen": len(workers),
            "new_processes": len(self.pids_seen - self._baseline),
            "tree_peak_total_rss_bytes": self.max_total_rss,
        }


# ---------------------------------------------------------------- the read floor


def _idat(raw: bytes) -> bytes:
    """A PNG's compressed image data: its IDAT chunks joined."""
    chunks, at = [], 8
    while at < len(raw):
        (length,) = struct.unpack(">I", raw[at : at + 4])
        if raw[at + 4 : at + 8] == b"IDAT":
            chunks.append(raw[at + 8 : at + 8 + length])
        at += 12 + length
    return b"".join(chunks)


def _inflate_file(job: tuple[str, str]) -> int:
    """Read one file and inflate all of it: a .nii.gz's gzip stream, a PNG's zlib image data."""
    return _inflate_timed(job)[0]


def _inflate_timed(job: tuple[str, str]) -> tuple[int, float]:
    """The inflated size and the CPU seconds this process spent reading and inflating."""
    started = time.process_time()
    size = _inflate(job)
    return size, time.process_time() - started


def _inflate(job: tuple[str, str]) -> int:
    path, how = job
    with open(path, "rb") as handle:
        raw = handle.read()
    png = path.endswith(".png")
    data, wbits = (_idat(raw), 15) if png else (raw, 31)
    if how == "isal":
        from isal import isal_zlib

        return len(isal_zlib.decompress(data, wbits=wbits))
    import zlib

    return len(zlib.decompress(data, wbits=wbits))


def _ready_all(_: None) -> bool:
    from amid.tools.profiling import casework  # noqa: F401  the profiler's workers import it too

    time.sleep(0.05)
    return True


def floor_child(folder: Path, workers: int, out: Path) -> None:
    import multiprocessing

    from amid.tools.profiling.pool import _quiet_worker

    files = [str(p) for p in data_files(folder)]
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_quiet_worker) as pool:
        list(pool.map(_ready_all, [None] * workers))
        floor: dict[str, float] = {"pool_start_s": time.perf_counter() - started}
        for how in ("isal", "zlib"):
            started = time.perf_counter()
            done = list(pool.map(_inflate_timed, [(f, how) for f in files], chunksize=4))
            floor[f"read_inflate_{how}_s"] = time.perf_counter() - started
            floor[f"read_inflate_{how}_cpu_s"] = sum(cpu for _, cpu in done)
            total = sum(size for size, _ in done)
        floor["inflated_bytes"] = total
    out.write_text(json.dumps(floor), encoding="utf-8")


def run_floor(folder: Path, workers: int, work: Path) -> dict[str, float]:
    out = work / f"floor_{folder.name}.json"
    command = [sys.executable, __file__, "--floor-child", str(folder), str(workers), str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    floor = dict(json.loads(out.read_text(encoding="utf-8")))
    # the child's CPU, its pool included: interpreter and pool start, then the two passes (ISA-L, zlib)
    floor["child_cpu_s"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return floor


# ---------------------------------------------------------------- profile_data through amid serve


def _rpc(url: str, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "authorization": f"Bearer {token}",
    }
    response = httpx.post(url, json=body, headers=headers, timeout=120)
    response.raise_for_status()
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        lines = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        reply = json.loads(lines[-1])
    else:
        reply = response.json()
    if "error" in reply or reply["result"].get("isError"):
        raise RuntimeError(json.dumps(reply)[:500])
    return dict(reply["result"].get("structuredContent") or {})


def _until_ready(url: str, token: str) -> tuple[dict[str, Any], int]:
    calls = 0
    while True:
        calls += 1
        result = _rpc(url, token, "profile_data", {"wait_s": 55})
        if result["status"] == "ready":
            return result, calls
        if result["status"] == "failed":
            raise RuntimeError(result.get("message"))


def profile_through_server(folder: Path, work: Path) -> dict[str, Any]:
    from amid.server.demo import start_server, stop_server
    from amid.server.local_client import call as admin_call
    from amid.server.workspace import Workspace, init_workspace
    from amid.tools.task.importers import import_task

    ws_path = work / f"ws_{folder.name}"
    init_workspace(import_task(folder), ws_path, link_data=True)
    workspace = Workspace(ws_path)
    process, url = start_server(ws_path, timeout_s=120)
    try:
        token = admin_call(workspace, "token_create", {"name": "bench", "role": "agent"})["token"]
        _rpc(url, token, "get_task", {"include_case_ids": False})  # the server's own start, apart
        cpu_before = tree_cpu_seconds(process.pid)
        with TreeSampler(process.pid) as first_memory:
            started = time.perf_counter()
            first, calls = _until_ready(url, token)
            first_s = time.perf_counter() - started
            _wait_workers_reaped(process.pid)
        first_cpu = tree_cpu_seconds(process.pid) - cpu_before
        profile_json = ws_path / "memory" / "profile" / "profile.json"
        written = profile_json.stat().st_mtime_ns
        cpu_before = tree_cpu_seconds(process.pid)
        with TreeSampler(process.pid) as second_memory:
            started = time.perf_counter()
            second = _rpc(url, token, "profile_data", {"wait_s": 55})
            second_s = time.perf_counter() - started
        second_cpu = tree_cpu_seconds(process.pid) - cpu_before
        profile = json.loads(profile_json.read_text(encoding="utf-8"))
    finally:
        stop_server(process)
    cases = profile["cases"]
    return {
        "tool_first_call_s": first_s,
        "tool_first_call_cpu_s": first_cpu,  # the server and its pool workers, user + system
        "tool_calls_until_ready": calls,
        "profile_seconds": profile["seconds"],
        "profile_workers": profile.get("n_workers"),
        "cases_profiled": len(cases),
        "cases_with_issues": sum(1 for c in cases if c.get("n_issues")),
        "memory_first_call": first_memory.summary(),
        "cached_call_s": second_s,
        "cached_call_cpu_s": second_cpu,
        "cached_status": second["status"],
        "cached_same_fingerprint": second["fingerprint"] == first["fingerprint"],
        "cached_profile_rewritten": profile_json.stat().st_mtime_ns != written,
        "cached_new_processes": second_memory.summary()["new_processes"],
        "profile_json_bytes": profile_json.stat().st_size,
    }


def measure_dataset(name: str, folder: Path, work: Path, workers: int) -> dict[str, Any]:
    files = data_files(folder)
    size = sum(p.stat().st_size for p in files)
    row: dict[str, Any] = {"dataset": name, "files": len(files), "bytes": size}
    row.update(profile_through_server(folder, work))
    floor = run_floor(folder, workers, work)
    row["floor"] = floor
    row["inflated_bytes"] = floor["inflated_bytes"]
    row["ns_per_byte_profile"] = 1e9 * row["profile_seconds"] / size
    row["ns_per_byte_tool"] = 1e9 * row["tool_first_call_s"] / size
    row["ns_per_byte_floor_isal"] = 1e9 * floor["read_inflate_isal_s"] / size
    row["cpu_ns_per_byte_tool"] = 1e9 * row["tool_first_call_cpu_s"] / size
    row["cpu_ns_per_byte_floor_isal"] = 1e9 * floor["read_inflate_isal_cpu_s"] / size
    row["cpu_over_floor_cpu_isal"] = row["tool_first_call_cpu_s"] / floor["read_inflate_isal_cpu_s"]
    row["profile_over_floor_isal"] = row["profile_seconds"] / floor["read_inflate_isal_s"]
    row["profile_minus_pool_start_over_floor_isal"] = (row["profile_seconds"] - floor["pool_start_s"]) / floor[
        "read_inflate_isal_s"
    ]
    row["profile_over_floor_zlib"] = row["profile_seconds"] / floor["read_inflate_zlib_s"]
    print(
        f"{name:10s} {len(files):5d} files {size / 1e6:9.1f} MB  profile {row['profile_seconds']:7.2f} s "
        f"({row['ns_per_byte_profile']:.2f} ns/B, {row['profile_over_floor_isal']:.2f}x ISA-L floor)  "
        f"cpu {row['cpu_ns_per_byte_tool']:.1f} ns/B ({row['cpu_over_floor_cpu_isal']:.2f}x floor cpu)  "
        f"tool {first_s(row):7.2f} s  cached {row['cached_call_s'] * 1e3:7.1f} ms  "
        f"worker peak {row['memory_first_call']['worker_peak_rss_bytes'] / 2**20:7.0f} MiB  "
        f"server peak {row['memory_first_call']['server_peak_rss_bytes'] / 2**20:6.0f} MiB",
        flush=True,
    )
    return row


def first_s(row: dict[str, Any]) -> float:
    return float(row["tool_first_call_s"])


# ---------------------------------------------------------------- reviewer metrics on large masks


def _peak_reset() -> int:
    """Reset this process's VmHWM to its current RSS (Linux clear_refs 5); the RSS then."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    return _status(os.getpid()).get("VmRSS", 0)


def metrics_child(library: str, shape: tuple[int, int, int], pairs: int, out: Path) -> None:
    """One library on `pairs` seeded mask pairs, in this process: values, seconds, added peak RSS per pair."""
    from benchmarks import metrics_vs_monai as reference

    run = reference.run_ours if library == "ours" else reference.run_monai
    small = reference.make_pair(10_000, (32, 32, 20))
    run(*small)  # imports and first-call set-up, not timed
    rows = []
    for seed in range(pairs):
        prediction, truth = reference.make_pair(seed, shape)  # boolean masks, as the reviewer's loader gives
        held = _peak_reset()
        started = time.perf_counter()
        values = run(prediction, truth)
        seconds = time.perf_counter() - started
        peak = _status(os.getpid()).get("VmHWM", 0)
        values.pop("seconds", None)
        rows.append(
            {
                "seed": seed,
                "seconds": seconds,
                "rss_before_bytes": held,
                "peak_rss_bytes": peak,
                "added_peak_bytes": peak - held,
                "foreground_voxels": int(truth.sum()),
                **values,
            }
        )
        del prediction, truth
    rows_out = {"rows": rows, "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    out.write_text(json.dumps(rows_out), encoding="utf-8")


def measure_metrics(shape: tuple[int, int, int], pairs: int, work: Path) -> dict[str, Any]:
    runs = {}
    for library in ("ours", "monai"):
        out = work / f"metrics_{library}.json"
        dims = ",".join(map(str, shape))
        command = [sys.executable, __file__, "--metrics-child", library, dims, str(pairs), str(out)]
        subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        runs[library] = json.loads(out.read_text(encoding="utf-8"))
    ours, monai = runs["ours"]["rows"], runs["monai"]["rows"]
    voxels = int(np.prod(shape))
    summary: dict[str, Any] = {
        "shape": list(shape),
        "pairs": pairs,
        "mask_bytes_uint8_pair": 2 * voxels,
        "seconds_total": {k: sum(r["seconds"] for r in v["rows"]) for k, v in runs.items()},
        "max_added_peak_bytes": {k: max(r["added_peak_bytes"] for r in v["rows"]) for k, v in runs.items()},
        "max_added_peak_bytes_per_voxel": {
            k: max(r["added_peak_bytes"] for r in v["rows"]) / voxels for k, v in runs.items()
        },
        "process_peak_rss_bytes": {k: v["max_rss_bytes"] for k, v in runs.items()},
        "max_abs_difference": {
            key: max(abs(a[key] - b[key]) for a, b in zip(ours, monai, strict=True)) for key in ("dice", "hd95", "nsd")
        },
    }
    summary["monai_over_ours_seconds"] = summary["seconds_total"]["monai"] / summary["seconds_total"]["ours"]
    summary["pairs_detail"] = runs
    print(
        f"metrics {shape} x{pairs}: ours {summary['seconds_total']['ours']:.1f} s, "
        f"MONAI {summary['seconds_total']['monai']:.1f} s ({summary['monai_over_ours_seconds']:.2f}x); "
        f"added peak per voxel ours {summary['max_added_peak_bytes_per_voxel']['ours']:.1f} B, "
        f"MONAI {summary['max_added_peak_bytes_per_voxel']['monai']:.1f} B; "
        f"max diff {summary['max_abs_difference']}",
        flush=True,
    )
    return summary


# ---------------------------------------------------------------- summary and main


def growth(rows: dict[str, dict[str, Any]], kind: str, sizes: list[int]) -> dict[str, Any]:
    series = [rows[f"{kind}_{n}"] for n in sizes]
    small, big = series[0], series[-1]
    return {
        "cases": sizes,
        "bytes": [r["bytes"] for r in series],
        "profile_s": [round(r["profile_seconds"], 3) for r in series],
        "ns_per_byte_profile": [round(r["ns_per_byte_profile"], 3) for r in series],
        "ns_per_byte_tool": [round(r["ns_per_byte_tool"], 3) for r in series],
        "cpu_ns_per_byte_tool": [round(r["cpu_ns_per_byte_tool"], 3) for r in series],
        "cpu_ns_per_byte_floor_isal": [round(r["cpu_ns_per_byte_floor_isal"], 3) for r in series],
        "cpu_over_floor_cpu_isal": [round(r["cpu_over_floor_cpu_isal"], 3) for r in series],
        "cpu_ns_per_byte_largest_over_smallest": big["cpu_ns_per_byte_tool"] / small["cpu_ns_per_byte_tool"],
        "cached_call_cpu_ms": [round(1e3 * r["cached_call_cpu_s"], 1) for r in series],
        "profile_over_floor_isal": [round(r["profile_over_floor_isal"], 3) for r in series],
        "cached_call_ms": [round(1e3 * r["cached_call_s"], 1) for r in series],
        "worker_peak_rss_mib": [round(r["memory_first_call"]["worker_peak_rss_bytes"] / 2**20) for r in series],
        "server_peak_rss_mib": [round(r["memory_first_call"]["server_peak_rss_bytes"] / 2**20) for r in series],
        "tree_peak_rss_mib": [round(r["memory_first_call"]["tree_peak_total_rss_bytes"] / 2**20) for r in series],
        "ns_per_byte_largest_over_smallest": big["ns_per_byte_profile"] / small["ns_per_byte_profile"],
        "floor_ratio_largest_over_smallest": big["profile_over_floor_isal"] / small["profile_over_floor_isal"],
        # the slope between the two largest sizes: the cost of one more byte, the pool's start left out
        "marginal_ns_per_byte_last_step": 1e9
        * (series[-1]["profile_seconds"] - series[-2]["profile_seconds"])
        / max(series[-1]["bytes"] - series[-2]["bytes"], 1)
        if len(series) > 1
        else None,
        "marginal_cpu_ns_per_byte_last_step": 1e9
        * (series[-1]["tool_first_call_cpu_s"] - series[-2]["tool_first_call_cpu_s"])
        / max(series[-1]["bytes"] - series[-2]["bytes"], 1)
        if len(series) > 1
        else None,
        "marginal_floor_cpu_ns_per_byte_last_step": 1e9
        * (series[-1]["floor"]["read_inflate_isal_cpu_s"] - series[-2]["floor"]["read_inflate_isal_cpu_s"])
        / max(series[-1]["bytes"] - series[-2]["bytes"], 1)
        if len(series) > 1
        else None,
        "marginal_floor_ns_per_byte_last_step": 1e9
        * (series[-1]["floor"]["read_inflate_isal_s"] - series[-2]["floor"]["read_inflate_isal_s"])
        / max(series[-1]["bytes"] - series[-2]["bytes"], 1)
        if len(series) > 1
        else None,
    }


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 4 and 12 cases, small volumes")
    parser.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")], default=None)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes for generation, floor")
    parser.add_argument("--kinds", type=lambda s: s.split(","), default=["ct", "tiles"], help="ct,tiles")
    parser.add_argument("--skip-metrics", action="store_true")
    parser.add_argument("--data", type=Path, default=None, help="generate into (or reuse) this folder; kept")
    parser.add_argument("--skip-large", action="store_true", help="leave the large case out")
    parser.add_argument("--output", type=Path, default=None, help="result JSON (default benchmarks/results/)")
    parser.add_argument("--floor-child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--metrics-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quick = args.quick
    args.sizes = sorted(args.sizes or ([5, 12] if quick else [40, 400, 2000]))
    args.ct_size, args.ct_depth = (32, (8, 12)) if quick else (96, (32, 48))
    args.tile_size = 64 if quick else 256
    args.large = None if quick else [512, 512, 600]  # quick: the large case's generator is tested alone
    args.mask_shape = (32, 32, 32) if quick else (512, 512, 400)
    args.mask_pairs = 1 if quick else 3
    return args


def main(argv: list[str] | None = None) -> dict[str, Any] | None:
    args = _arguments(argv)
    if args.floor_child:
        floor_child(Path(args.floor_child[0]), int(args.floor_child[1]), Path(args.floor_child[2]))
        return None
    if args.metrics_child:
        library, shape, pairs, out = args.metrics_child
        metrics_child(library, tuple(int(v) for v in shape.split(",")), int(pairs), Path(out))  # type: ignore[arg-type]
        return None
    from benchmarks._common import write_result

    work = Path(tempfile.mkdtemp(prefix="amid-data-growth-"))
    load_before = os.getloadavg()[0]
    try:
        started = time.perf_counter()
        folders = reuse(args.data, args) if args.data else None
        folders = folders or generate(args.data or work / "raw", args)
        generate_s = time.perf_counter() - started
        print(f"generated {len(folders)} datasets in {generate_s:.1f} s", flush=True)
        rows = {name: measure_dataset(name, folder, work, args.workers) for name, folder in _ordered(folders)}
        metrics = None if args.skip_metrics else measure_metrics(args.mask_shape, args.mask_pairs, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    payload: dict[str, Any] = {
        "command": " ".join(["python", "benchmarks/scale/data_growth.py", *(sys.argv[1:] if argv is None else argv)]),
        "load_average_1min": [load_before, os.getloadavg()[0]],
        "python": platform.python_version(),
        "generate_s": generate_s,
        "shapes": {
            "ct": [args.ct_size, args.ct_size, list(args.ct_depth)],
            "tile": [args.tile_size, args.tile_size, 3],
            "large": args.large,
        },
        "growth": {kind: growth(rows, kind, args.sizes) for kind in args.kinds},
        "large": rows.get("large"),
        "datasets": rows,
        "metrics": metrics,
    }
    for kind, curve in payload["growth"].items():
        print(
            f"{kind}: ns/byte {curve['ns_per_byte_profile']} (largest/smallest "
            f"{curve['ns_per_byte_largest_over_smallest']:.2f}), x floor {curve['profile_over_floor_isal']}, "
            f"cached ms {curve['cached_call_ms']}, worker peak MiB {curve['worker_peak_rss_mib']}"
        )
    output = args.output
    if output is None and not args.quick:
        output = write_result(NAME, payload)
    elif output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    if output is not None:
        print(f"wrote {output}")
    return payload


def _ordered(folders: dict[str, Path]) -> Iterator[tuple[str, Path]]:
    def order(item: tuple[str, Path]) -> tuple[bool, str, int]:
        kind, _, n = item[0].partition("_")
        return kind == "large", kind, int(n or 0)

    yield from sorted(folders.items(), key=order)


if __name__ == "__main__":
    main()
