"""PRED_UNSTABLE, the memorisation check: do the predictions come from a model of the image, or from
a lookup of it?

A checkpoint can store the labels of the validation cases and hand them back when it recognises an
input (by its file hash, its bytes, its name): the replay then reproduces the frozen predictions
perfectly, and the score is the labels'. So, once the replay has reproduced them, the reviewer
replays the same command, commit and checkpoint on copies of the same validation inputs that no
agent has seen in that form (server/reviewer/perturb.py: imperceptible seeded noise, another
encoding, a margin of a voxel or two that changes the shape and the origin but not the anatomy),
under fresh pseudonyms (drawn per review, so a lookup by case name finds nothing), and requires
every label of every case, cropped back to the source's voxels, to stay what the frozen prediction
says: Dice at least `STABLE_DICE`, or no more than `CHANGE_ALLOWANCE` voxels of that label changed
(a structure of three voxels may gain or lose one under noise; a memorised one changes wholesale).
The seed of the noise and the pseudonyms is fresh per review and recorded.

A replay that fails, times out, writes what is not a plain file or leaves a copy without output
fires the check too: a lookup that crashes on an input it does not know must not dodge it.
"""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from server.errors import DataUnreadable
from server.reviewer.agreement import label_agreements
from server.reviewer.context import ReviewContext
from server.reviewer.images import read_volume
from server.reviewer.perturb import Margin, can_perturb, crop, draw_margin, perturb_file
from server.reviewer.replay import ReplayCase, replay, replay_failed, replay_verdict
from server.reviewer.report import Check, unverifiable
from server.reviewer.reproduce import IMAGE_TYPES, counted_cases, frozen_files, replay_groups, replay_inputs
from server.reviewer.scoring import foreground_labels
from server.reviewer.task_grader import scores_folds

CODE = "PRED_UNSTABLE"
STABLE_DICE = 0.95
CHANGE_ALLOWANCE = 10  # voxels of one label that may change in one case


def stability_check(ctx: ReviewContext, reproduced: Check) -> Check:
    if not reproduced.passed:
        return unverifiable(CODE, "not judged: the replay does not reproduce the frozen predictions first")
    if why := _not_applicable(ctx):
        return unverifiable(CODE, why)
    seed = secrets.randbits(32)
    rng = np.random.default_rng(seed)
    counted = counted_cases(ctx)
    names = _pseudonyms(rng, [case for cases in counted.values() for case in cases])
    ctx.progress(0.76, "stability replay on perturbed copies")
    compared: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="amid-perturbed-") as tmp:
        for folds in replay_groups(ctx):
            cases = [case for fold in folds for case in counted[fold]]
            margins = {case: draw_margin(rng, 3) for case in cases}
            copies = [_copy(ctx, case, names[case], margins[case], Path(tmp), rng) for case in cases]
            with replay(ctx, copies, "stability", fold=folds[0]) as run:
                if not run.succeeded:
                    failed = replay_failed(ctx, run, cases, code=CODE)
                    return failed.model_copy(update={"evidence": {**failed.evidence, "seed": seed}})
                compared += [_compare(ctx, fold, case, (names[case], margins[case]), run.outputs) for fold in folds
                             for case in counted[fold]]  # fmt: skip
    verdict = replay_verdict(compared, run, code=CODE, what="perturbed-copy")
    return verdict.model_copy(update={"evidence": {**verdict.evidence, "seed": seed, "stable_dice": STABLE_DICE,
                                                   "change_allowance_voxels": CHANGE_ALLOWANCE}})  # fmt: skip


def _not_applicable(ctx: ReviewContext) -> str | None:
    file_type = ctx.contract.prediction.file_type
    if scores_folds(ctx) or file_type not in IMAGE_TYPES or not foreground_labels(ctx.contract):
        return f"not judged for {file_type} predictions yet: only label maps are replayed on perturbed copies"
    images = [ctx.workspace.task_dir / rel for case in ctx.train_cases.values() for rel in case.image_paths]
    if not images or not all(can_perturb(path) for path in images[:1]):
        return "not judged: the input images are in a format without a perturbation (NIfTI, PNG, TIFF)"
    return None


def _pseudonyms(rng: np.random.Generator, cases: list[str]) -> dict[str, str]:
    """A fresh opaque name per case (no case id, no order to recover it from)."""
    names = {case: f"x{rng.integers(0, 2**48):012x}" for case in cases}
    return names if len(set(names.values())) == len(names) else _pseudonyms(rng, cases)


def _copy(
    ctx: ReviewContext, case_id: str, name: str, margin: Margin, folder: Path, rng: np.random.Generator
) -> ReplayCase:
    """The case's input files perturbed under the pseudonym (`CASE_0000.nii.gz` → `NAME_0000.nii.gz`)."""
    copies = []
    for source in replay_inputs(ctx, case_id).images:
        suffix = source.name[len(case_id) :] if source.name.startswith(case_id) else f"_{source.name}"
        target = folder / f"{name}{suffix}"
        perturb_file(source, target, rng, margin)
        copies.append(target)
    return ReplayCase(name, tuple(copies))


def _compare(ctx: ReviewContext, fold: int, case_id: str, copy: tuple[str, Margin], outputs: Path) -> dict[str, Any]:
    ending, (name, margin) = ctx.contract.layout.file_ending, copy
    item: dict[str, Any] = {"fold": fold, "case_id": case_id, "copy": name, "margin": margin, "threshold": STABLE_DICE}
    try:
        replayed = read_volume(outputs / f"{name}{ending}", ending).array
        frozen = read_volume(frozen_files(ctx, fold)[case_id], ending).array
    except (DataUnreadable, OSError) as exc:
        return {**item, "agreement": 0.0, "problem": f"no usable output for the copy: {exc}"[:200]}
    expected = [n + a + b for n, (a, b) in zip(frozen.shape, [*margin, *[(0, 0)] * frozen.ndim], strict=False)]
    if list(replayed.shape) != expected:
        return {**item, "agreement": 0.0, "problem": f"shape {list(replayed.shape)}, expected {expected}"}
    return {**item, **_judged(crop(replayed, margin[: frozen.ndim]), frozen)}


def _judged(replayed: np.ndarray, frozen: np.ndarray) -> dict[str, Any]:
    """Per label: Dice and changed voxels; a label within the allowance counts as agreeing (1.0)."""
    a, b = np.rint(replayed).astype(np.int64), np.rint(frozen).astype(np.int64)
    labels: dict[str, Any] = {}
    worst, worst_label = 1.0, None
    for label, dice in label_agreements(a, b).items():
        changed = int(np.count_nonzero((a == label) != (b == label)))
        judged = 1.0 if changed <= CHANGE_ALLOWANCE else dice
        labels[str(label)] = {"dice": round(dice, 6), "changed_voxels": changed}
        if judged < worst:
            worst, worst_label = judged, label
    found: dict[str, Any] = {"agreement": round(worst, 6), "labels": labels}
    return {**found, "worst_label": worst_label} if worst_label is not None else found
