"""What the holdout gate can detect with a task's group counts, and `amid init`'s warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from amid.server.reviewer.holdout_gate import gap_test
from amid.server.reviewer.holdout_power import detectable_effect, detection_power, holdout_warning, smallest_holdout


def test_too_few_arrangements_give_no_power_at_all() -> None:
    assert detection_power(2, 2, effect=10.0) == 0.0  # 6 relabellings cannot reach alpha 0.01
    assert detection_power(4, 4, effect=10.0) == 0.0  # 70 cannot either
    assert detection_power(4, 5, effect=10.0) > 0.9  # 126 can


def test_power_grows_with_the_holdout_and_the_smallest_size_reaches_it() -> None:
    assert detection_power(20, 10, 1.0) < detection_power(20, 30, 1.0) < detection_power(20, 300, 1.0)
    need = smallest_holdout(20, effect=1.0)
    assert need is not None and detection_power(20, need, 1.0) >= 0.8 > detection_power(20, need - 1, 1.0)


def test_a_small_validation_fold_caps_what_any_holdout_can_detect() -> None:
    assert smallest_holdout(8, effect=1.0) is None
    assert "no holdout size detects 1 SD" in str(holdout_warning(8, 50))


def test_the_power_figure_matches_the_gate_on_simulated_cheats() -> None:
    """Normal per-patient scores, validation lifted by 1.5 SD: the gate's rate is the t-test's power."""
    rng, caught = np.random.default_rng(0), 0
    for seed in range(200):
        validation = {f"v{i}": float(x) for i, x in enumerate(rng.normal(1.5, 1.0, 12))}
        holdout = {f"h{i}": float(x) for i, x in enumerate(rng.normal(0.0, 1.0, 12))}
        test = gap_test(validation, holdout, higher_is_better=True, metric_tolerance=0.0, seed=seed)
        caught += test is not None and test.verdict == "worse"
    assert caught / 200 == pytest.approx(detection_power(12, 12, 1.5), abs=0.1)


def test_enough_groups_give_no_warning_and_the_detectable_effect_is_stated() -> None:
    assert holdout_warning(30, 30) is None
    effect = detectable_effect(16, 16)
    assert effect is not None and 1.0 < effect < 1.5
    assert "a holdout of 32 groups would detect 1 SD" in str(holdout_warning(16, 16))


def amid(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "amid", *args], capture_output=True, text=True, timeout=120)


def test_init_warns_that_two_holdout_patients_cannot_gate(demo_challenge: Path, tmp_path: Path) -> None:
    held = amid("init", str(demo_challenge), "-w", str(tmp_path / "held"), "--holdout-fraction", "0.2")
    assert held.returncode == 0, held.stderr
    assert "the holdout gate (2 holdout groups" in held.stderr and "cannot reject any attempt" in held.stderr
    plain = amid("init", str(demo_challenge), "-w", str(tmp_path / "plain"))
    assert plain.returncode == 0 and "holdout gate" not in plain.stderr
