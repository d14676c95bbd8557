"""Benchmark: AMID's profile_dataset against nnU-Net's fingerprint extractor and MONAI's DataAnalyzer (CPU).

One generated CT-like 3-D dataset (anisotropic spacing, int16 Hounsfield units, an organ and a lesion
label) is written once as an nnU-Net raw dataset and read by all three, each as a fresh subprocess
(imports and worker start-up included) with the same number of processes:

    nnUNetv2_extract_fingerprint -d ID -np N
    profile_dataset(request with n_workers=N)
    DataAnalyzer(device="cpu", worker=N).get_all_case_stats()

Agreement with nnU-Net's dataset_fingerprint.json: median spacing must be identical, foreground
intensity statistics within 1 %.

The floor, in a child started as AMID's is, after each AMID run: read and inflate every file once
(ISA-L, and zlib for reference) in a pool like the profiler's (spawned, the same number of
processes and initializer), the pool's start timed apart. Every tool is a multiple of it.

    python benchmarks/profile_vs_nnunet.py            # 40 cases of 256 x 256 x 80-120
    python benchmarks/profile_vs_nnunet.py --quick    # 10 small cases, a smoke run (no JSON unless --output)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "benchmarks" / "results" / "profile_vs_nnunet.json"
DATASET_ID, DATASET_NAME = 987, "Dataset987_AmidCT"
IN_PLANE_MM = (0.703125, 0.78125, 0.859375)
SLICE_MM = (2.5, 3.0, 5.0)
LABELS = {"background": 0, "organ": 1, "lesion": 2}
STATS = ("mean", "median", "std", "min", "max", "percentile_00_5", "percentile_99_5")
RELATIVE_TOLERANCE = 0.01


def synthetic_ct(index: int, size: int, depth: tuple[int, int], seed: int) -> tuple[np.ndarray, np.ndarray, tuple]:
    """An abdomen-like int16 volume: air, fat rim, soft tissue, spine, an organ with a lesion, noise."""
    rng = np.random.default_rng([seed, index])
    nz = int(rng.integers(*depth))
    x, y, z = np.ogrid[:size, :size, :nz]
    u, v, w = (x - size / 2) / (size / 2), (y - size / 2) / (size / 2), (z - nz / 2) / (nz / 2)
    a, b = rng.uniform(0.75, 0.92), rng.uniform(0.6, 0.8)
    body = (u / a) ** 2 + (v / b) ** 2 <= 1
    inner = (u / (a - 0.08)) ** 2 + (v / (b - 0.08)) ** 2 <= 1
    spine = (u / 0.09) ** 2 + ((v - 0.6 * b) / 0.09) ** 2 <= 1
    centre = rng.uniform([-0.3, -0.25, -0.3], [0.3, 0.15, 0.3])
    radii = rng.uniform([0.18, 0.15, 0.25], [0.3, 0.25, 0.45])
    organ = sum(((g - c) / r) ** 2 for g, c, r in zip((u, v, w), centre, radii, strict=True)) <= 1
    lesion = sum(((g - c) / (0.3 * r)) ** 2 for g, c, r in zip((u, v, w), centre, radii, strict=True)) <= 1
    image = np.full((size, size, nz), -1000.0, np.float32)
    image[np.broadcast_to(body, image.shape)] = -100.0
    image[np.broadcast_to(inner, image.shape)] = 40.0
    image[np.broadcast_to(spine, image.shape)] = 600.0
    image[organ] = rng.uniform(80, 110)
    image[lesion & organ] = rng.uniform(20, 45)
    image += rng.normal(0, 12, image.shape).astype(np.float32)
    label = np.zeros(image.shape, np.uint8)
    label[organ] = 1
    label[lesion & organ] = 2
    spacing = (float(rng.choice(IN_PLANE_MM)),) * 2 + (float(rng.choice(SLICE_MM)),)
    return np.rint(image).astype(np.int16), label, spacing


def _write_case(job: tuple[Path, int, int, tuple[int, int], int]) -> None:
    # nibabel here, not at the top: spawned workers (the profiler's and the floor's) run this script's
    # top level again as their __main__, and the server's workers would not pay for nibabel
    import nibabel as nib

    folder, index, size, depth, seed = job
    image, label, spacing = synthetic_ct(index, size, depth, seed)
    affine = np.diag([-spacing[0], -spacing[1], spacing[2], 1.0])  # LPS, as DICOM converters write
    nib.save(nib.Nifti1Image(image, affine), folder / "imagesTr" / f"ct_{index:03d}_0000.nii.gz")
    nib.save(nib.Nifti1Image(label, affine), folder / "labelsTr" / f"ct_{index:03d}.nii.gz")


def make_raw_dataset(raw: Path, n_cases: int, size: int, depth: tuple[int, int], workers: int) -> Path:
    folder = raw / DATASET_NAME
    (folder / "imagesTr").mkdir(parents=True, exist_ok=True)
    (folder / "labelsTr").mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_write_case, [(folder, i, size, depth, 0) for i in range(n_cases)]))
    spec = {"channel_names": {"0": "CT"}, "labels": LABELS, "numTraining": n_cases, "file_ending": ".nii.gz"}
    (folder / "dataset.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
    return folder


def _timed(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def run_nnunet(work: Path, workers: int) -> tuple[float, dict[str, Any]]:
    env = {**os.environ, "nnUNet_raw": str(work / "raw"), "nnUNet_preprocessed": str(work / "preprocessed")}
    env["nnUNet_results"] = str(work / "results")
    command = str(Path(sys.executable).parent / "nnUNetv2_extract_fingerprint")
    args = [command, "-d", str(DATASET_ID), "-np", str(workers), "--clean", "--no_pbar"]
    seconds = _timed(args, env)
    fingerprint = work / "preprocessed" / DATASET_NAME / "dataset_fingerprint.json"
    return seconds, json.loads(fingerprint.read_text(encoding="utf-8"))


def run_amid(work: Path, workers: int) -> tuple[float, dict[str, Any]]:
    out = work / "amid_profile.json"
    args = [sys.executable, __file__, "--amid-child", str(work / "raw" / DATASET_NAME), str(workers), str(out)]
    seconds = _timed(args, {**os.environ, "PYTHONPATH": str(ROOT)})
    return seconds, json.loads(out.read_text(encoding="utf-8"))


def run_monai(work: Path, workers: int) -> tuple[float, dict[str, Any]]:
    out = work / "monai_datastats.yaml"
    args = [sys.executable, __file__, "--monai-child", str(work / "raw" / DATASET_NAME), str(workers), str(out)]
    seconds = _timed(args, dict(os.environ))
    import yaml

    return seconds, yaml.safe_load(out.read_text(encoding="utf-8"))


def _inflate_file(job: tuple[str, str]) -> int:
    """Read one file and inflate all of it (the floor's unit of work); the inflated size."""
    path, how = job
    with open(path, "rb") as handle:
        raw = handle.read()
    if how == "isal":
        from isal import isal_zlib

        return len(isal_zlib.decompress(raw, wbits=31))
    import zlib

    return len(zlib.decompress(raw, wbits=31))


def read_floor(folder: Path, workers: int) -> dict[str, float]:
    """Seconds to read and inflate every file of the dataset once, in a pool like the profiler's
    (spawned, `workers` processes, its initializer), with ISA-L and with zlib; the pool's start apart."""
    import multiprocessing

    from amid.tools.profiling.pool import _quiet_worker

    files = sorted(str(p) for p in folder.rglob("*.nii.gz"))
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_quiet_worker) as pool:
        list(pool.map(_ready_all, [None] * workers))
        floor = {"pool_start_s": time.perf_counter() - started}
        for how in ("isal", "zlib"):
            started = time.perf_counter()
            total = sum(pool.map(_inflate_file, [(f, how) for f in files]))
            floor[f"read_inflate_{how}_s"] = time.perf_counter() - started
        floor["inflated_bytes"] = total
    return floor


def _ready_all(_: None) -> bool:
    from amid.tools.profiling import casework  # noqa: F401  the profiler's workers import it too

    time.sleep(0.05)  # every worker gets one
    return True


def floor_child(folder: Path, workers: int, out: Path) -> None:
    """Child process (started as AMID's is): the read floor."""
    out.write_text(json.dumps(read_floor(folder, workers)), encoding="utf-8")


def run_floor(work: Path, workers: int) -> dict[str, float]:
    out = work / "floor.json"
    args = [sys.executable, __file__, "--floor-child", str(work / "raw" / DATASET_NAME), str(workers), str(out)]
    _timed(args, {**os.environ, "PYTHONPATH": str(ROOT)})
    return dict(json.loads(out.read_text(encoding="utf-8")))


def amid_child(folder: Path, workers: int, out: Path) -> None:
    """Child process: profile the raw dataset as the profile_data tool would."""
    from amid.tools.profiling import ProfileCase, ProfileRequest, profile_dataset

    cases = [
        ProfileCase(
            case_id=label.name.removesuffix(".nii.gz"),
            image_paths=[str(folder / "imagesTr" / label.name.replace(".nii.gz", "_0000.nii.gz"))],
            label_path=str(label),
        )
        for label in sorted((folder / "labelsTr").glob("*.nii.gz"))
    ]
    values = {v: k for k, v in LABELS.items()}
    request = ProfileRequest(task_type="segmentation", cases=cases, label_values=values, n_workers=workers)
    out.write_text(profile_dataset(request).model_dump_json(), encoding="utf-8")


def monai_child(folder: Path, workers: int, out: Path) -> None:
    from monai.apps.auto3dseg import DataAnalyzer

    items = [
        {"image": f"imagesTr/{p.name.replace('.nii.gz', '_0000.nii.gz')}", "label": f"labelsTr/{p.name}"}
        for p in sorted((folder / "labelsTr").glob("*.nii.gz"))
    ]
    datalist = {"training": [{**item, "fold": 0} for item in items]}
    analyzer = DataAnalyzer(datalist, str(folder), output_path=str(out), device="cpu", worker=workers)
    analyzer.get_all_case_stats()


def _relative(ours: float, reference: float) -> float:
    return abs(ours - reference) / abs(reference) if reference else abs(ours - reference)


def agreement(fingerprint: dict[str, Any], profile: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows (quantity, nnU-Net, AMID, relative difference, pass) for spacing and intensity."""
    nn_spacing = [float(v) for v in np.median(np.asarray(fingerprint["spacings"]), axis=0)]
    ours_spacing = list(reversed(profile["representation"]["median_spacing"]))  # nnU-Net lists (z, y, x)
    rows = [
        {
            "quantity": "median spacing (z, y, x)",
            "nnunet": nn_spacing,
            "amid": ours_spacing,
            "relative_difference": 0.0 if nn_spacing == ours_spacing else 1.0,
            "pass": nn_spacing == ours_spacing,
        }
    ]
    reference = fingerprint["foreground_intensity_properties_per_channel"]["0"]
    ours = profile["representation"]["intensity"]["channels"][0]
    for name in STATS:
        difference = _relative(ours[name], reference[name])
        rows.append(
            {
                "quantity": f"foreground {name}",
                "nnunet": reference[name],
                "amid": ours[name],
                "relative_difference": difference,
                "pass": difference <= RELATIVE_TOLERANCE,
            }
        )
    return rows


def _table(rows: list[dict[str, Any]], timings: dict[str, float]) -> str:
    lines = [f"{'quantity':28s} {'nnU-Net':>22s} {'AMID':>22s} {'rel. diff':>10s}  ok"]
    for row in rows:
        nn, ours = (str(row[k]) if isinstance(row[k], list) else f"{row[k]:.6g}" for k in ("nnunet", "amid"))
        lines.append(f"{row['quantity']:28s} {nn:>22s} {ours:>22s} {row['relative_difference']:10.2e}  {row['pass']}")
    lines += [f"{name:28s} {seconds:8.2f} s" for name, seconds in timings.items()]
    return "\n".join(lines)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 cases of 96 x 96 x 24-40")
    parser.add_argument("--cases", type=int, default=None, help="number of cases (default 40, quick 10)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes for every tool")
    parser.add_argument("--repeats", type=int, default=1, help="alternating nnU-Net / AMID runs; the best counts")
    parser.add_argument("--skip-monai", action="store_true", help="leave MONAI's DataAnalyzer out")
    parser.add_argument("--keep", action="store_true", help="keep the generated data and outputs")
    parser.add_argument("--output", type=Path, default=None, help=f"result JSON (default {RESULT} for full runs)")
    parser.add_argument("--amid-child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--monai-child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--floor-child", nargs=3, help=argparse.SUPPRESS)
    return parser.parse_args()


def _measure(work: Path, args: argparse.Namespace) -> tuple[dict[str, list[float]], dict[str, Any], dict[str, Any]]:
    """Seconds of every run per tool (nnU-Net and AMID alternate), with the last outputs of both."""
    runs: dict[str, list[float]] = {
        "nnU-Net fingerprint": [],
        "AMID profile_dataset": [],
        "AMID in-process": [],
        "read floor (ISA-L)": [],
        "read floor (zlib)": [],
        "pool start": [],
    }
    fingerprint: dict[str, Any] = {}
    profile: dict[str, Any] = {}
    for _ in range(args.repeats):
        seconds, fingerprint = run_nnunet(work, args.workers)
        runs["nnU-Net fingerprint"].append(seconds)
        seconds, profile = run_amid(work, args.workers)
        runs["AMID profile_dataset"].append(seconds)
        runs["AMID in-process"].append(profile["seconds"])  # profile_dataset alone, without interpreter start
        floor = run_floor(work, args.workers)  # a child like AMID's, a pool like the profiler's
        runs["read floor (ISA-L)"].append(floor["read_inflate_isal_s"])
        runs["read floor (zlib)"].append(floor["read_inflate_zlib_s"])
        runs["pool start"].append(floor["pool_start_s"])
    if not args.skip_monai:
        runs["MONAI DataAnalyzer (cpu)"] = [run_monai(work, args.workers)[0]]
    return runs, fingerprint, profile


def main() -> None:
    args = _arguments()
    children = ((args.amid_child, amid_child), (args.monai_child, monai_child), (args.floor_child, floor_child))
    for flag, child in children:
        if flag:
            child(Path(flag[0]), int(flag[1]), Path(flag[2]))
            return
    n_cases = args.cases or (10 if args.quick else 40)
    size, depth = (96, (24, 40)) if args.quick else (256, (80, 121))
    work = Path(tempfile.mkdtemp(prefix="amid-profile-bench-"))
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    folder = make_raw_dataset(work / "raw", n_cases, size, depth, args.workers)
    dataset = {"cases": n_cases, "shape": [size, size, list(depth)], "bytes": _bytes(folder)}
    dataset["generate_seconds"] = round(time.perf_counter() - start, 2)
    runs, fingerprint, profile = _measure(work, args)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    best = {name: min(seconds) for name, seconds in runs.items()}
    rows = agreement(fingerprint, profile)
    amid = best["AMID profile_dataset"]
    monai = best.get("MONAI DataAnalyzer (cpu)")
    payload = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_1min": load_before,
            "load_average_1min_after": os.getloadavg()[0],  # other work on the machine during the runs
        },
        "command": " ".join(["python", "benchmarks/profile_vs_nnunet.py", *sys.argv[1:]]),
        "dataset": dataset,
        "workers": args.workers,
        "seconds_best": {k: round(v, 3) for k, v in best.items()},
        "seconds_all_runs": {k: [round(v, 3) for v in seconds] for k, seconds in runs.items()},
        "speedup_vs_nnunet": round(best["nnU-Net fingerprint"] / amid, 2),
        "speedup_vs_monai": round(monai / amid, 2) if monai else None,
        "read_floor_s": round(best["read floor (ISA-L)"], 3),
        "multiples_of_read_floor": {
            name: round(best[name] / best["read floor (ISA-L)"], 2)
            for name in ("AMID in-process", "AMID profile_dataset", "nnU-Net fingerprint", "MONAI DataAnalyzer (cpu)")
            if name in best
        },
        "amid_in_process_minus_pool_start_over_floor": round(
            (best["AMID in-process"] - best["pool start"]) / best["read floor (ISA-L)"], 2
        ),
        "agreement": rows,
        "all_agree": all(row["pass"] for row in rows),
    }
    print(_table(rows, best))
    print(f"speed-up vs nnU-Net: {payload['speedup_vs_nnunet']}x; vs MONAI: {payload['speedup_vs_monai']}x")
    print(f"multiples of the read floor ({payload['read_floor_s']} s): {payload['multiples_of_read_floor']}")
    output = args.output or (None if args.quick else RESULT)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {output}")


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


if __name__ == "__main__":
    main()
