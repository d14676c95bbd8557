"""The holdout gate's measured error rates over many seeds, on synthetic per-case score distributions.

Honest attempts: one model, so every patient's score comes from one distribution; which patients
are validation and which holdout is chance (two scans per patient, correlated within the patient).
A rejection (`worse`) of an honest attempt is a false rejection. Cheats: the same, but k validation
cases are the copied labels (Dice 1.0; HD95 0 mm); an accepted cheat is a false acceptance.

Distributions: `dice` (patient means Beta(6, 4), scans ±0.03), `dice_failures` (15 % of patients
fail: Beta(1, 5)), `hd95` (log-normal, lower is better). Sizes: patients per validation fold and in
the holdout. `before` is the gate as it was before issue 21 (a two-sided case-level bootstrap, read
from git history), for comparison; `predicted_power` is `holdout_power.detection_power` at the
cheat's own effect size (its lift over the honest validation mean, in between-patient SDs).

    python benchmarks/holdout_gate_rates.py [--seeds 400]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amid.server.reviewer.holdout_gate import ALPHA, gap_test
from amid.server.reviewer.holdout_power import detection_power
from benchmarks._common import write_result

SIZES = [(2, 2), (4, 4), (6, 4), (8, 8), (12, 12), (20, 20), (40, 20)]
COPIES = {"1 case": lambda n: 1, "25 %": lambda n: max(1, n // 4), "50 %": lambda n: max(1, n // 2)}
SCANS = 2
BEFORE_COMMIT = "758a4df^"  # the last commit with the bootstrap gate

Draw = Callable[[np.random.Generator, int], np.ndarray]


def _dice(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.beta(6, 4, n)


def _dice_failures(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.where(rng.random(n) < 0.15, rng.beta(1, 5, n), rng.beta(8, 2, n))


def _hd95(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.lognormal(np.log(8.0), 0.6, n)


DISTRIBUTIONS: dict[str, tuple[Draw, bool, float, float]] = {
    # name: patient-mean draw, higher is better, within-patient scan SD (relative for hd95), copied value
    "dice": (_dice, True, 0.03, 1.0),
    "dice_failures": (_dice_failures, True, 0.03, 1.0),
    "hd95": (_hd95, False, 0.15, 0.0),
}


def _cases(rng: np.random.Generator, name: str, prefix: str, n_patients: int) -> dict[str, float]:
    draw, higher, within, _ = DISTRIBUTIONS[name]
    patients = draw(rng, n_patients)
    scans: dict[str, float] = {}
    for p, level in enumerate(patients):
        for s in range(SCANS):
            noise = rng.normal(0, within)
            value = level * np.exp(noise) if not higher else np.clip(level + noise, 0.0, 1.0)
            scans[f"{prefix}{p}s{s}"] = float(value)
    return scans


def _groups(*sides: dict[str, float]) -> dict[str, str]:
    return {case: case.split("s")[0] for side in sides for case in side}


def _old_gate() -> ModuleType | None:
    """The gate before issue 21, from git history (None outside a git checkout)."""
    root = Path(__file__).resolve().parent.parent
    shown = subprocess.run(
        ["git", "show", f"{BEFORE_COMMIT}:server/reviewer/holdout_gate.py"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if shown.returncode != 0:
        return None
    path = Path(tempfile.mkdtemp()) / "old_holdout_gate.py"
    path.write_text(shown.stdout, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_holdout_gate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def _rejected(test: Any) -> bool:
    return test is not None and test.verdict == "worse"


def _cell(name: str, n_v: int, n_h: int, seeds: int, old: ModuleType | None) -> dict[str, Any]:
    _, higher, _, copied_value = DISTRIBUTIONS[name]
    honest_new = honest_old = 0
    caught: dict[str, int] = dict.fromkeys(COPIES, 0)
    lifts: dict[str, list[float]] = {k: [] for k in COPIES}
    for seed in range(seeds):
        rng = np.random.default_rng([seed, n_v, n_h, len(name)])
        validation, holdout = _cases(rng, name, "v", n_v), _cases(rng, name, "h", n_h)
        options: dict[str, Any] = {"higher_is_better": higher, "metric_tolerance": 1e-3, "seed": seed}
        honest_new += _rejected(gap_test(validation, holdout, groups=_groups(validation, holdout), **options))
        if old is not None:
            honest_old += _rejected(old.gap_test(validation, holdout, **options))
        spread = float(np.std([*validation.values(), *holdout.values()], ddof=1)) or 1.0
        for label, k in COPIES.items():
            cheat = dict(validation)
            for case in sorted(cheat)[: k(len(cheat))]:
                cheat[case] = copied_value
            lifts[label].append(float(abs(np.mean(list(cheat.values())) - np.mean(list(validation.values()))) / spread))
            caught[label] += _rejected(gap_test(cheat, holdout, groups=_groups(cheat, holdout), **options))
    cell: dict[str, Any] = {
        "distribution": name,
        "validation_patients": n_v,
        "holdout_patients": n_h,
        "scans_per_patient": SCANS,
        "seeds": seeds,
        "false_rejection": honest_new / seeds,
        "false_rejection_before": honest_old / seeds if old is not None else None,
        "false_acceptance": {label: 1 - caught[label] / seeds for label in COPIES},
        "cheat_effect_sd": {label: round(float(np.mean(v)), 3) for label, v in lifts.items()},
        "predicted_power": {k: round(detection_power(n_v, n_h, float(np.mean(v))), 3) for k, v in lifts.items()},
    }
    return cell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=400)
    args = parser.parse_args()
    old, started = _old_gate(), time.monotonic()
    cells = [_cell(name, n_v, n_h, args.seeds, old) for name in DISTRIBUTIONS for n_v, n_h in SIZES]
    honest = [c["false_rejection"] for c in cells]
    before = [c["false_rejection_before"] for c in cells if c["false_rejection_before"] is not None]
    payload = {
        "alpha": ALPHA,
        "summary": {
            "max_false_rejection": max(honest),
            "max_false_rejection_before": max(before) if before else None,
            "seconds": round(time.monotonic() - started, 1),
        },
        "cells": cells,
    }
    path = write_result("holdout_gate_rates", payload)
    print(f"alpha {ALPHA}: false rejection ≤ {max(honest):.4f} (before: {max(before) if before else '-'}); {path}")
    for c in cells:
        fa = ", ".join(f"{k} {v:.2f}" for k, v in c["false_acceptance"].items())
        print(
            f"{c['distribution']:>13} {c['validation_patients']:>2}+{c['holdout_patients']:<2} "
            f"FR {c['false_rejection']:.3f} (before {c['false_rejection_before']}) FA copied: {fa}"
        )


if __name__ == "__main__":
    main()
