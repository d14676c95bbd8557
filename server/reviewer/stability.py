"""PRED_UNSTABLE, the memorisation check: do the predictions come from a model of the image, or from
a lookup of it?

A checkpoint can store the labels of the validation cases and hand them back when it recognises an
input (by its file hash, its bytes, its name): the replay then reproduces the frozen predictions
perfectly, and the score is the labels'. So, once the replay has reproduced them, the reviewer
replays the same command, commit and checkpoint on copies of the same validation inputs that no
agent has seen in that form (server/reviewer/perturb.py: imperceptible seeded noise, another
encoding, a margin of a voxel or two that changes the shape and the origin but not the anatomy),
under fresh pseudonyms (drawn per review, so a lookup by case name finds nothing), two copies
per case, and requires every label of every case, cropped back to the source's voxels, to stay
what the frozen prediction says: Dice at least `STABLE_DICE`, or no more than `CHANGE_ALLOWANCE`
voxels changed (a structure of three voxels may gain or lose one under noise), or a frozen label
no further from the copies' than twice the copies are from each other (a fragile honest model's
small lesion flickers between the two copies as much; a stored label stands apart from both), or
the copies scoring as well against the reference as the frozen label does, less SCORE_SLACK (an
honest model's output can flip the same way on both copies: a hole that closes under the noise,
then a 21-voxel lesion is 76, demo case p007s1; a lookup's stored label scores better than what
its model says of inputs it does not know, and that gain is what the check is for), and the whole
foreground, every label merged, agreeing at STABLE_DICE or scoring as well (a lookup that answers
unknown inputs with noise agrees with nothing and scores nothing).
The seed of the noise and the pseudonyms is fresh per review and recorded.

A replay that fails, times out, writes what is not a plain file or leaves a copy without output
fires the check too: a lookup that crashes on an input it does not know must not dodge it.
"""

from __future__ import annotations

import re
import secrets
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from amid.server.errors import DataUnreadable
from amid.server.reviewer.agreement import label_agreements, mask_dice
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.perturb import Margin, can_perturb, crop, draw_margin, perturb_file
from amid.server.reviewer.replay import ReplayCase, replay, replay_failed, replay_verdict
from amid.server.reviewer.report import Check, unverifiable
from amid.server.reviewer.reproduce import IMAGE_TYPES, counted_cases, frozen_files, replay_groups, replay_inputs
from amid.server.reviewer.staging import input_names
from amid.server.reviewer.task_grader import scores_folds
from amid.tools.metrics.images import read_reference, read_volume
from amid.tools.metrics.scoring import foreground_labels

CODE = "PRED_UNSTABLE"
STABLE_DICE = 0.95
CHANGE_ALLOWANCE = 10  # voxels of one label that may change in one case
FLICKER_SLACK = 0.02  # disagreement with the frozen prediction allowed beyond twice the copies' own
SCORE_SLACK = 0.02  # Dice against the reference by which the copies may fall short of the frozen prediction


def stability_check(ctx: ReviewContext, reproduced: Check) -> Check:
    if not reproduced.passed:
        return unverifiable(CODE, "not judged: the replay does not reproduce the frozen predictions first")
    if why := _not_applicable(ctx):
        return unverifiable(CODE, why)
    seed = secrets.randbits(32)
    rng = np.random.default_rng(seed)
    counted = counted_cases(ctx)
    ctx.progress(0.76, "stability replay on perturbed copies")
    compared: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="amid-perturbed-") as tmp:
        for folds in replay_groups(ctx):
            cases = [case for fold in folds for case in counted[fold]]
            copies = _draw(rng, cases)
            inputs = [_copy(ctx, case, copy, Path(tmp), rng) for case in cases for copy in copies[case]]
            with replay(ctx, inputs, "stability", fold=folds[0]) as run:
                if not run.succeeded:
                    failed = replay_failed(ctx, run, cases, code=CODE)
                    return failed.model_copy(update={"evidence": {**failed.evidence, "seed": seed}})
                compared += [
                    _compare(ctx, fold, case, copies[case], run.outputs) for fold in folds for case in counted[fold]
                ]
    verdict = replay_verdict(compared, run, code=CODE, what="perturbed-copy")
    return verdict.model_copy(
        update={
            "evidence": {
                **verdict.evidence,
                "seed": seed,
                "stable_dice": STABLE_DICE,
                "change_allowance_voxels": CHANGE_ALLOWANCE,
            }
        }
    )


Copy = tuple[str, Margin]  # a pseudonym and the margin added around the case's images


def _draw(rng: np.random.Generator, cases: list[str]) -> dict[str, tuple[Copy, Copy]]:
    """Two copies per case, each under a fresh opaque name (no case id, no order to recover it from)."""
    names = [f"x{rng.integers(0, 2**48):012x}" for _ in range(2 * len(cases))]
    if len(set(names)) < len(names):
        return _draw(rng, cases)
    return {
        case: ((names[2 * i], draw_margin(rng, 3)), (names[2 * i + 1], draw_margin(rng, 3)))
        for i, case in enumerate(cases)
    }


def _not_applicable(ctx: ReviewContext) -> str | None:
    file_type = ctx.contract.prediction.file_type
    if scores_folds(ctx) or file_type not in IMAGE_TYPES or not foreground_labels(ctx.contract):
        return f"not judged for {file_type} predictions yet: only label maps are replayed on perturbed copies"
    images = [ctx.workspace.task_dir / rel for case in ctx.train_cases.values() for rel in case.image_paths]
    if images and images[0].is_dir():
        return "not judged: the input images are DICOM series folders, which have no perturbation yet"
    if not images or not all(can_perturb(path) for path in images[:1]):
        return "not judged: the input images are in a format without a perturbation (NIfTI, PNG, TIFF)"
    return None


def _copy(ctx: ReviewContext, case_id: str, copy: Copy, folder: Path, rng: np.random.Generator) -> ReplayCase:
    """The case's input files perturbed under the pseudonym (`CASE_0000.nii.gz` → `NAME_0000.nii.gz`)."""
    name, margin = copy
    files = []
    sources = replay_inputs(ctx, case_id).images
    for source, staged in zip(sources, input_names(case_id, sources), strict=True):  # as the replay names it
        target = folder / _pseudonymised(staged, case_id, name)
        perturb_file(source, target, rng, margin)
        files.append(target)
    return ReplayCase(name, tuple(files))


def _pseudonymised(staged: str, case_id: str, name: str) -> str:
    """The input's name with the case id replaced by the pseudonym where it stands as a word
    (`topcow_ct_ID_0000` → `topcow_ct_NAME_0000`: prefixing kept the real id in the name)."""
    if staged.startswith(case_id):
        return name + staged[len(case_id) :]
    word = re.compile(rf"(?<![A-Za-z0-9]){re.escape(case_id)}(?![A-Za-z0-9])")
    replaced, found = word.subn(name, staged, count=1)
    return replaced if found else f"{name}_{staged}"


def _compare(ctx: ReviewContext, fold: int, case_id: str, copies: tuple[Copy, Copy], outputs: Path) -> dict[str, Any]:
    item: dict[str, Any] = {
        "fold": fold,
        "case_id": case_id,
        "copies": [name for name, _ in copies],
        "threshold": STABLE_DICE,
    }
    ending = ctx.contract.layout.file_ending
    try:
        frozen = read_volume(frozen_files(ctx, fold)[case_id], ending).array
        first, second = (_cropped(outputs / f"{name}{ending}", ending, margin, frozen.shape) for name, margin in copies)
    except (DataUnreadable, OSError, ValueError) as exc:
        return {**item, "agreement": 0.0, "problem": f"no usable output for a copy: {exc}"[:200]}
    reference = read_reference(ctx.workspace.task_dir / str(ctx.train_cases[case_id].label_path), ending).array
    return {**item, **_judged(frozen, first, second, reference)}


def _cropped(path: Path, ending: str, margin: Margin, shape: tuple[int, ...]) -> np.ndarray:
    replayed = read_volume(path, ending).array
    expected = [n + a + b for n, (a, b) in zip(shape, [*margin, *[(0, 0)] * len(shape)], strict=False)]
    if list(replayed.shape) != expected:
        raise ValueError(f"{path.name}: shape {list(replayed.shape)}, expected {expected}")
    return np.rint(crop(replayed, margin[: len(shape)])).astype(np.int64)


def _judged(frozen: np.ndarray, first: np.ndarray, second: np.ndarray, reference: np.ndarray) -> dict[str, Any]:
    """Two rules, both needed.
    Per label: few voxels changed, or Dice against both copies at least STABLE_DICE, or the frozen
    prediction no further from the copies' (on average over the two) than twice as far as the two
    copies are from each other, plus FLICKER_SLACK, or the copies scoring as well as the frozen
    prediction against the reference. The frozen prediction is one more noise draw of an honest
    model, so it sits among its copies however much a small lesion flickers (an honest threshold
    model's lesion agreed at 0.43 with its copies and 0.43 copy to copy); a stored label stands
    apart from copies that agree with each other, and scores better than they do.
    The foreground as a whole (every label merged): few voxels changed, or Dice at least
    STABLE_DICE against both copies, or the copies scoring as well. A lookup that answers unknown
    inputs with noise (copies that agree with nothing, which would widen the per-label allowance
    without bound) fails here."""
    b = np.rint(frozen).astype(np.int64)
    to_first, to_second, between = (
        label_agreements(first, b),
        label_agreements(second, b),
        label_agreements(first, second),
    )
    scores = _Scores(b, (first, second), reference)
    labels: dict[str, Any] = {}
    worst: float = 1.0
    worst_label: int | str | None = None
    for label in sorted(set(to_first) | set(to_second)):
        dice = min(to_first.get(label, 1.0), to_second.get(label, 1.0))
        mean = (to_first.get(label, 1.0) + to_second.get(label, 1.0)) / 2.0
        copies = between.get(label, 1.0)
        changed = max(int(np.count_nonzero((c == label) != (b == label))) for c in (first, second))
        among = 1.0 - mean <= 2.0 * (1.0 - copies) + FLICKER_SLACK
        close = changed <= CHANGE_ALLOWANCE or dice >= STABLE_DICE or among
        scored = {} if close else scores.of(label)  # asked only where the other rules do not settle it
        labels[str(label)] = {
            "dice": round(dice, 6),
            "copies_dice": round(copies, 6),
            "changed_voxels": changed,
            **scored,
        }
        if not (close or scored["scores_as_well"]) and dice < worst:
            worst, worst_label = dice, label
    foreground = _foreground(b, first, second, scores)
    if not foreground["agrees"] and foreground["dice"] < worst:
        worst, worst_label = foreground["dice"], "foreground"
    found: dict[str, Any] = {"agreement": round(worst, 6), "labels": labels, "foreground": foreground}
    return {**found, "worst_label": worst_label} if worst_label is not None else found


class _Scores:
    """The frozen prediction's and the copies' Dice against the reference, for one mask at a time.
    The copies are predictions of inputs no agent has seen: if they score as well as the frozen
    prediction (less SCORE_SLACK), the frozen score is the model's, whatever flickered. A reference
    of another shape excuses nothing."""

    def __init__(self, frozen: np.ndarray, copies: tuple[np.ndarray, np.ndarray], reference: np.ndarray) -> None:
        self.frozen, self.copies = frozen, copies
        self.reference = np.rint(reference).astype(np.int64) if reference.shape == frozen.shape else None

    def of(self, label: int | None) -> dict[str, Any]:
        """For one label, or for the whole foreground (None)."""
        if self.reference is None:
            return {"scores_as_well": False, "reference": "of another shape than the prediction"}

        def mask(values: np.ndarray) -> np.ndarray:
            return values > 0 if label is None else values == label

        truth = mask(self.reference)
        frozen = mask_dice(mask(self.frozen), truth)
        copies = sum(mask_dice(mask(c), truth) for c in self.copies) / len(self.copies)
        return {
            "reference_dice": round(frozen, 6),
            "copies_reference_dice": round(copies, 6),
            "scores_as_well": copies >= frozen - SCORE_SLACK,
        }


def _foreground(frozen: np.ndarray, first: np.ndarray, second: np.ndarray, scores: _Scores) -> dict[str, Any]:
    """Every label merged: the frozen foreground against each copy's."""
    mask = frozen > 0
    dice = min(mask_dice(c > 0, mask) for c in (first, second))
    changed = max(int(np.count_nonzero((c > 0) != mask)) for c in (first, second))
    found: dict[str, Any] = {"dice": round(dice, 6), "changed_voxels": changed}
    if changed <= CHANGE_ALLOWANCE or dice >= STABLE_DICE:
        return {**found, "agrees": True}
    scored = scores.of(None)
    return {**found, **scored, "agrees": scored["scores_as_well"]}
