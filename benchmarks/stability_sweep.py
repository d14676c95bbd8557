"""PRED_UNSTABLE's measured error rates over many seeds, on the demo task with the demo's own model.

The reviewer draws a fresh seed per review for the perturbed copies (noise, margin, encoding), so an
honest attempt meets a different pair of copies each time it is reviewed. This runs the stability
rule (`server/reviewer/stability.py` `_judged`, on copies written by `perturb.perturb_file` with
margins from `perturb.draw_margin`, cropped back with `perturb.crop`) for `--seeds` seeds on every
validation case of one fold, without the sandboxed replay (its cost is the review benchmarks'):

- honest: the scripted workers' threshold model (`demo_worker.MODEL_PY`, the same code, loaded
  in-process), its frozen predictions of the real inputs against its predictions of the copies;
  a flagged case is a false rejection of an honest attempt.
- lookup: the checkpoint that stores the validation labels and falls back to that same model on
  inputs it does not recognise (the hardest lookup: its fallback is a real model); the frozen
  predictions are the stored labels. An undetected review is a false acceptance.

Each rule's share is counted: which rule let an honest label through, and how many honest cases the
score rule (`SCORE_SLACK`, added in the red-team round 2 follow-up) alone saved.

    python benchmarks/stability_sweep.py [--seeds 200] [--fold 0]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amid.server.demo_model import MODEL_PY
from amid.server.reviewer.perturb import crop, draw_margin, perturb_file
from amid.server.reviewer.stability import CHANGE_ALLOWANCE, FLICKER_SLACK, SCORE_SLACK, STABLE_DICE, _judged
from amid.tools.metrics.images import read_reference, read_volume
from benchmarks._common import demo_workspace, write_result

NAME = "stability_sweep"
ENDING = ".nii.gz"


def threshold_model() -> ModuleType:
    """The demo workers' model file as a module (its train and predict functions)."""
    module = ModuleType("threshold_model")
    exec(compile(MODEL_PY, "threshold_model.py", "exec"), module.__dict__)
    return module


def _predict_one(model: ModuleType, model_json: Path, image: Path) -> np.ndarray:
    """The model's label map of one input file (written by the model's own predict, read back)."""
    with tempfile.TemporaryDirectory(prefix="amid-sweep-") as tmp:
        source, target = Path(tmp) / "in", Path(tmp) / "out"
        source.mkdir()
        (source / "case_0000.nii.gz").symlink_to(image)
        with contextlib.redirect_stdout(io.StringIO()):  # its "predicted NAME" lines
            model.predict(str(model_json), str(source), str(target))
        array = read_volume(target / "case.nii.gz", ENDING).array
    return np.rint(array).astype(np.int64)


def _rules(judged: dict[str, Any]) -> list[str]:
    """For each label and the foreground: the first rule that let it through ("flagged" if none)."""
    found = []
    for entry in judged["labels"].values():
        if entry["changed_voxels"] <= CHANGE_ALLOWANCE:
            found.append("voxels")
        elif entry["dice"] >= STABLE_DICE:
            found.append("dice")
        elif "scores_as_well" not in entry:
            found.append("among")  # close by the flicker rule (the score is asked only past it)
        else:
            found.append("score" if entry["scores_as_well"] else "flagged")
    foreground = judged["foreground"]
    if "scores_as_well" in foreground:
        found.append("foreground score" if foreground["scores_as_well"] else "foreground flagged")
    return found


def _copies_predicted(
    model: ModuleType, model_json: Path, image: Path, rng: np.random.Generator, folder: Path
) -> tuple[np.ndarray, np.ndarray]:
    """The model's predictions of two perturbed copies of `image`, cropped back to its voxels (as the
    reviewer draws, writes and crops them; the copies' files are removed once predicted)."""
    folder.mkdir(parents=True, exist_ok=True)
    predictions = []
    for copy in range(2):
        margin = draw_margin(rng, 3)
        target = folder / f"copy{copy}_0000{ENDING}"
        perturb_file(image, target, rng, margin)
        predictions.append(crop(_predict_one(model, model_json, target), margin[:3]).astype(np.int64))
        target.unlink()
    return predictions[0], predictions[1]


def sweep(seeds: int, fold: int) -> dict[str, Any]:
    workspace = demo_workspace()
    try:
        with tempfile.TemporaryDirectory(prefix="amid-sweep-") as work:
            return _sweep(workspace.task_dir, Path(work), seeds, fold)
    finally:
        shutil.rmtree(workspace.root.parent, ignore_errors=True)  # the demo_workspace() folder


class _Tally:
    """What the sweep counts: per case (flagged, saved by the score rule alone) and per review."""

    def __init__(self) -> None:
        self.honest_flags: Counter[str] = Counter()
        self.saved_by_score: Counter[str] = Counter()
        self.rules: Counter[str] = Counter()
        self.reviews: Counter[str] = Counter()
        self.lookup_flagged_cases = 0

    def review(self, judged: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> None:
        """One review: each case's honest and lookup judgements."""
        seen: set[str] = set()
        for case, (honest, lookup) in judged.items():
            found = _rules(honest)
            self.rules.update(found)
            if "worst_label" in honest:
                self.honest_flags[case] += 1
                seen.add("honest_flagged")
            elif "score" in found or "foreground score" in found:
                self.saved_by_score[case] += 1
                seen.add("honest_saved_by_score")
            if "worst_label" in lookup:
                self.lookup_flagged_cases += 1
                seen.add("lookup_detected")
        self.reviews.update(seen)

    def result(self, seeds: int, cases: int) -> dict[str, Any]:
        flagged = sum(self.honest_flags.values())
        return {
            "honest": {
                "flagged_cases": flagged,
                "flagged_case_rate": flagged / (seeds * cases),
                "flagged_by_case": dict(self.honest_flags),
                "flagged_reviews": self.reviews["honest_flagged"],
                "false_rejection_rate": self.reviews["honest_flagged"] / seeds,
                "cases_saved_by_the_score_rule_alone": sum(self.saved_by_score.values()),
                "saved_by_the_score_rule_by_case": dict(self.saved_by_score),
                "reviews_saved_by_the_score_rule_alone": self.reviews["honest_saved_by_score"],
                "rule_that_let_each_label_through": dict(self.rules),
            },
            "lookup": {
                "flagged_cases": self.lookup_flagged_cases,
                "detected_reviews": self.reviews["lookup_detected"],
                "detection_rate": self.reviews["lookup_detected"] / seeds,
            },
        }


def _sweep(task_dir: Path, work: Path, seeds: int, fold: int) -> dict[str, Any]:
    folds = json.loads((task_dir / "folds.json").read_text(encoding="utf-8"))
    val_cases = list(folds["folds"][fold]["val_cases"])
    model = threshold_model()
    with contextlib.redirect_stdout(io.StringIO()):
        model.train(str(task_dir), str(task_dir / "folds.json"), fold, str(work / "model"))
    model_json = work / "model" / "model.json"
    images = {case: task_dir / f"public/train/images/{case}_0000{ENDING}" for case in val_cases}
    truth = {case: read_reference(task_dir / f"public/train/labels/{case}{ENDING}", ENDING).array for case in val_cases}
    frozen = {case: _predict_one(model, model_json, images[case]) for case in val_cases}
    tally = _Tally()
    started = time.perf_counter()
    for seed in range(seeds):
        rng = np.random.default_rng([seed, fold])
        judged = {}
        for case in val_cases:
            first, second = _copies_predicted(model, model_json, images[case], rng, work / "copies")
            honest = _judged(frozen[case], first, second, truth[case])
            judged[case] = (honest, _judged(truth[case], first, second, truth[case]))  # the lookup: labels stored
        tally.review(judged)
    rule = {"stable_dice": STABLE_DICE, "change_allowance_voxels": CHANGE_ALLOWANCE}
    return {
        "command": f"python benchmarks/stability_sweep.py --seeds {seeds} --fold {fold}",
        "rule": {**rule, "flicker_slack": FLICKER_SLACK, "score_slack": SCORE_SLACK},
        "fold": fold,
        "val_cases": val_cases,
        "seeds": seeds,
        "judged_cases": seeds * len(val_cases),
        "seconds": round(time.perf_counter() - started, 1),
        **tally.result(seeds, len(val_cases)),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--fold", type=int, default=0)
    parser.add_argument("--output", default=NAME, help="result name under benchmarks/results/")
    args = parser.parse_args(argv)
    result = sweep(args.seeds, args.fold)
    path = write_result(args.output, result)
    honest, lookup = result["honest"], result["lookup"]
    cases, reviews = honest["cases_saved_by_the_score_rule_alone"], honest["reviews_saved_by_the_score_rule_alone"]
    saved = f"{cases} in {reviews} reviews"
    print(
        f"{args.seeds} seeds × {len(result['val_cases'])} cases: honest reviews flagged {honest['flagged_reviews']} "
        f"({honest['false_rejection_rate']:.2%}); cases saved by the score rule alone: {saved}; lookup reviews "
        f"detected {lookup['detected_reviews']} ({lookup['detection_rate']:.2%}); {result['seconds']} s → {path}"
    )


if __name__ == "__main__":
    main()
