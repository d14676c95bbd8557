"""Benchmark: AMID's Dice + HD95 + NSD against MONAI (CPU) and medpy on generated 3-D pairs.

Each pair is a reference of a few irregular ellipsoidal blobs and a prediction that jitters their
centres, radii and boundaries, misses a blob now and then and adds a false positive, at anisotropic
spacing. Every library computes the same metrics under the same convention (HD95: max of directed
percentiles for MONAI, pooled for medpy; NSD counting boundary voxels, MONAI `use_subvoxels=False`)
and the largest absolute value difference is reported with the wall-time ratios.

    python benchmarks/metrics_vs_monai.py            # 20 pairs of 256x256x160
    python benchmarks/metrics_vs_monai.py --quick    # 3 small pairs, a smoke run (no JSON unless --output)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import ndimage

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amid.tools.metrics import MetricConvention, dice, hd_from_distances, nsd_from_distances, surface_distances

SPACING = (0.8, 0.8, 2.5)
TOLERANCE_MM = 2.0
HD95_MAX = MetricConvention(percentile=95, pooling="per_direction")
HD95_POOLED = MetricConvention(percentile=95, pooling="pooled")
NSD = MetricConvention(tolerance_mm=TOLERANCE_MM)
RESULT = Path(__file__).parent / "results" / "metrics_vs_monai.json"


def _blob(mask: np.ndarray, rng: np.random.Generator, centre: np.ndarray, radii: np.ndarray) -> None:
    """Paint one ellipsoid with a low-frequency wobble on its boundary into `mask`."""
    low = np.maximum(np.floor(centre - 1.3 * radii).astype(int), 0)
    high = np.minimum(np.ceil(centre + 1.3 * radii).astype(int) + 1, mask.shape)
    grids = np.ogrid[tuple(slice(a, b) for a, b in zip(low, high, strict=True))]
    level = sum(((g - c) / r) ** 2 for g, c, r in zip(grids, centre, radii, strict=True))
    wobble = ndimage.gaussian_filter(rng.normal(size=level.shape), 4)
    wobble *= 0.25 / max(float(np.abs(wobble).max()), 1e-9)
    region = tuple(slice(a, b) for a, b in zip(low, high, strict=True))
    mask[region] |= level <= 1 + wobble


def make_pair(seed: int, shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """A reference of 2-5 blobs and a plausible prediction of it."""
    rng = np.random.default_rng(seed)
    scale = np.array(shape) / np.array((256, 256, 160))
    reference, prediction = np.zeros(shape, bool), np.zeros(shape, bool)
    for _ in range(rng.integers(2, 6)):
        radii = rng.uniform((8, 8, 3), (30, 30, 12)) * scale
        centre = rng.uniform(radii * 1.3, np.array(shape) - radii * 1.3)
        _blob(reference, rng, centre, radii)
        if rng.random() > 0.1:  # now and then the model misses a blob
            _blob(prediction, rng, centre + rng.normal(0, 1.5, 3), radii * rng.uniform(0.85, 1.15, 3))
    if rng.random() < 0.5:  # and now and then it adds a false positive
        radii = np.array((4.0, 4.0, 2.0)) * scale
        _blob(prediction, rng, rng.uniform(radii * 1.3, np.array(shape) - radii * 1.3), radii)
    return prediction, reference


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def run_ours(prediction: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    """Dice, then one surface-distance pass shared by HD95 (both poolings) and NSD."""
    dice_value, dice_s = _timed(lambda: dice(prediction, reference))

    def surface_metrics() -> tuple[float, float, float]:
        distances = surface_distances(prediction, reference, SPACING)
        return (
            hd_from_distances(distances, HD95_MAX),
            hd_from_distances(distances, HD95_POOLED),
            nsd_from_distances(distances, NSD),
        )

    (hd95, hd95_pooled, nsd), surface_s = _timed(surface_metrics)
    return {
        "dice": dice_value,
        "hd95": hd95,
        "hd95_pooled": hd95_pooled,
        "nsd": nsd,
        "seconds": {"dice": dice_s, "hd95+nsd": surface_s, "total": dice_s + surface_s},
    }


def run_monai(prediction: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    """MONAI's functional metrics on CPU tensors (tensor conversion not timed)."""
    import torch
    from monai.metrics import compute_dice, compute_hausdorff_distance, compute_surface_dice

    pred, ref = (torch.from_numpy(m)[None, None].float() for m in (prediction, reference))
    with warnings.catch_warnings():  # MONAI warns about its own deprecated argument and empty masks
        warnings.simplefilter("ignore")
        dice_value, dice_s = _timed(lambda: compute_dice(pred, ref, include_background=True).item())
        hd95, hd_s = _timed(
            lambda: compute_hausdorff_distance(
                pred, ref, include_background=True, percentile=95, spacing=SPACING
            ).item()
        )
        nsd, nsd_s = _timed(
            lambda: compute_surface_dice(
                pred, ref, [TOLERANCE_MM], include_background=True, spacing=SPACING, use_subvoxels=False
            ).item()
        )
    seconds = {"dice": dice_s, "hd95": hd_s, "nsd": nsd_s, "total": dice_s + hd_s + nsd_s}
    return {"dice": dice_value, "hd95": hd95, "nsd": nsd, "seconds": seconds}


def run_medpy(prediction: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    """medpy's Dice and (pooled) HD95, which use a dense distance transform."""
    from medpy.metric import binary

    dice_value, dice_s = _timed(lambda: float(binary.dc(prediction, reference)))
    hd95, hd_s = _timed(lambda: float(binary.hd95(prediction, reference, SPACING)))
    return {
        "dice": dice_value,
        "hd95": hd95,
        "seconds": {"dice": dice_s, "hd95": hd_s, "total": dice_s + hd_s},
    }


def _warm_up() -> None:
    prediction, reference = make_pair(10_000, (32, 32, 20))
    run_ours(prediction, reference)
    run_monai(prediction, reference)
    run_medpy(prediction, reference)


def _max_difference(records: list[dict[str, Any]], ours_key: str, library: str, key: str) -> float:
    return max(abs(r["ours"][ours_key] - r[library][key]) for r in records)


def _total(records: list[dict[str, Any]], library: str, part: str) -> float:
    return sum(r[library]["seconds"][part] for r in records)


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals, time ratios (theirs / ours) and the largest value differences."""
    ours_total = _total(records, "ours", "total")
    monai_total, medpy_total = _total(records, "monai", "total"), _total(records, "medpy", "total")
    ours_surface = _total(records, "ours", "hd95+nsd")
    return {
        "seconds_total": {"ours": ours_total, "monai": monai_total, "medpy_dice_hd95": medpy_total},
        "speedup_vs_monai": {
            "dice+hd95+nsd": monai_total / ours_total,
            "dice": _total(records, "monai", "dice") / _total(records, "ours", "dice"),
            "hd95+nsd": (_total(records, "monai", "hd95") + _total(records, "monai", "nsd")) / ours_surface,
            "hd95_alone_vs_our_shared_pass": _total(records, "monai", "hd95") / ours_surface,
        },
        "speedup_vs_medpy_dice+hd95": medpy_total / ours_total,
        "max_abs_difference": {
            "monai_dice": _max_difference(records, "dice", "monai", "dice"),
            "monai_hd95_mm": _max_difference(records, "hd95", "monai", "hd95"),
            "monai_nsd": _max_difference(records, "nsd", "monai", "nsd"),
            "medpy_dice": _max_difference(records, "dice", "medpy", "dice"),
            "medpy_hd95_pooled_mm": _max_difference(records, "hd95_pooled", "medpy", "hd95"),
        },
    }


def _environment(args: argparse.Namespace, shape: tuple[int, int, int]) -> dict[str, Any]:
    import medpy
    import monai
    import scipy
    import torch

    return {
        "pairs": args.pairs,
        "shape": list(shape),
        "spacing_mm": list(SPACING),
        "nsd_tolerance_mm": TOLERANCE_MM,
        "quick": args.quick,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "versions": {
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "torch": torch.__version__,
            "monai": monai.__version__,
            "medpy": getattr(medpy, "__version__", "unknown"),
        },
    }


def _print_table(records: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    print(f"{'pair':>4} {'ours s':>8} {'monai s':>8} {'medpy s':>8}  {'dice':>7} {'hd95 mm':>8} {'nsd':>6}")
    for r in records:
        s = [r[lib]["seconds"]["total"] for lib in ("ours", "monai", "medpy")]
        o = r["ours"]
        values = f"{o['dice']:7.4f} {o['hd95']:8.3f} {o['nsd']:6.4f}"
        print(f"{r['pair']:>4} {s[0]:8.3f} {s[1]:8.3f} {s[2]:8.3f}  {values}")
    print(json.dumps({k: summary[k] for k in ("speedup_vs_monai", "speedup_vs_medpy_dice+hd95")}, indent=2))
    print(json.dumps(summary["max_abs_difference"], indent=2))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="3 pairs of 64x64x40, for a smoke run")
    parser.add_argument("--output", type=Path, help=f"JSON report (default {RESULT}; none with --quick)")
    args = parser.parse_args(argv)
    shape = (64, 64, 40) if args.quick else (256, 256, 160)
    args.pairs = 3 if args.quick else args.pairs
    _warm_up()
    records = []
    for seed in range(args.pairs):
        prediction, reference = make_pair(seed, shape)
        runs = {
            lib: fn(prediction, reference)
            for lib, fn in (("ours", run_ours), ("monai", run_monai), ("medpy", run_medpy))
        }
        records.append({"pair": seed, "foreground_voxels": int(reference.sum()), **runs})
    summary = summarise(records)
    _print_table(records, summary)
    output = args.output or (None if args.quick else RESULT)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        report = {"environment": _environment(args, shape), "summary": summary, "pairs": records}
        output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {output}")


if __name__ == "__main__":
    main()
