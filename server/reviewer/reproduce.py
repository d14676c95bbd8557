"""PRED_NOT_REPRODUCED: do the frozen predictions come from the committed code?

Validation labels are public, so a fold score proves nothing by itself. The reviewer replays the
declared inference command (server/reviewer/replay.py: frozen commit, frozen checkpoint, sandbox)
on a seeded sample of each declared fold's validation cases (`replay_cases_per_fold`, drawn among
the cases that have a frozen prediction; the seed is fresh per review and recorded, so the sample
cannot be foreseen at submission and can be redrawn after) and compares each output with the frozen
prediction of that case (server/reviewer/agreement.py). No command, a command that fails or times
out, a missing output or one case below the agreement threshold fires the check (an error).

`{fold}` in the command is the fold being replayed; without it, one replay covers all folds.
"""

from __future__ import annotations

import random
import secrets
from pathlib import Path
from typing import Any

from server.errors import DataUnreadable
from server.repo import resolve_commit
from server.reviewer.agreement import LABEL_AGREEMENT, VALUE_AGREEMENT, label_agreement, value_agreement, values_agree
from server.reviewer.context import ReviewContext
from server.reviewer.graded_replay import graded_reproduction_check
from server.reviewer.images import read_volume
from server.reviewer.predictions import case_of
from server.reviewer.replay import ReplayCase, replay, replay_failed, replay_verdict
from server.reviewer.report import Check, fired, unverifiable
from server.reviewer.scoring import foreground_labels
from server.reviewer.tabular import columns, read_rows
from server.reviewer.task_grader import scores_folds

CODE = "PRED_NOT_REPRODUCED"
IMAGE_TYPES = frozenset({"nifti", "png", "tiff"})


def reproduction_check(ctx: ReviewContext) -> Check:
    if not ctx.job.inference_command:
        why = "no inference_command declared: the predictions cannot be reproduced from the code"
        return fired(CODE, why, fix="declare the argv that writes your predictions (placeholders: {input_dir} …)")
    if resolve_commit(ctx.workspace.commit_store, ctx.job.commit) != ctx.job.commit:
        return fired(CODE, "the commit is not in the repository: nothing to replay", commit=ctx.job.commit)
    if scores_folds(ctx):  # benchmark folds: the replay writes a submission, compared case by case
        return graded_reproduction_check(ctx)
    file_type = ctx.contract.prediction.file_type
    if file_type not in IMAGE_TYPES and file_type != "csv":
        return unverifiable(CODE, f"{file_type} predictions are not compared with a replay yet")
    seed = secrets.randbits(32)
    sample = sample_cases(ctx, seed)
    if not any(sample.values()):
        return unverifiable(CODE, "no frozen prediction of a validation case to compare a replay with", seed=seed)
    ctx.progress(0.72, "validation replay")
    compared: list[dict[str, Any]] = []
    for folds in _replay_groups(ctx):
        cases = [case for fold in folds for case in sample[fold]]
        with replay(ctx, [_inputs(ctx, case) for case in cases], "validation", fold=folds[0]) as run:
            if not run.succeeded:
                return replay_failed(ctx, run, cases, seed)
            compared += [_compare(ctx, fold, case, run.outputs) for fold in folds for case in sample[fold]]
    return replay_verdict(compared, seed, run)


def sample_cases(ctx: ReviewContext, seed: int) -> dict[int, list[str]]:
    """fold → up to `replay_cases_per_fold` validation cases with a frozen prediction, drawn with `seed`."""
    rng, k = random.Random(seed), ctx.job.replay_cases_per_fold
    sample = {}
    for fold in ctx.job.folds:
        frozen = _frozen_ids(ctx, fold)
        candidates = [case for case in ctx.folds.val_cases(fold) if case in frozen]
        sample[fold] = sorted(rng.sample(candidates, min(k, len(candidates))))
    return sample


def _replay_groups(ctx: ReviewContext) -> list[list[int]]:
    uses_fold = any("{fold}" in part for part in ctx.job.inference_command or [])
    return [[fold] for fold in ctx.job.folds] if uses_fold else [list(ctx.job.folds)]


def _frozen_ids(ctx: ReviewContext, fold: int) -> set[str]:
    return set(_frozen_rows(ctx, fold) if ctx.contract.prediction.file_type == "csv" else _frozen_files(ctx, fold))


def _frozen_files(ctx: ReviewContext, fold: int) -> dict[str, Path]:
    ending = ctx.contract.layout.file_ending
    found = {}
    for ref in ctx.files("predictions", fold):
        case_id = case_of(ref, ending)
        if case_id is not None and ctx.usable(ref):
            found[case_id] = ctx.path(ref)
    return found


def _frozen_rows(ctx: ReviewContext, fold: int) -> dict[str, str]:
    id_column, value_column = columns(ctx)
    tables = [r for r in ctx.files("predictions", fold) if r.declared_path.endswith(".csv") and ctx.usable(r)]
    return read_rows(ctx.path(tables[0]).read_text(errors="replace"), id_column, value_column) or {} if tables else {}


def _inputs(ctx: ReviewContext, case_id: str) -> ReplayCase:
    case = ctx.train_cases[case_id]
    return ReplayCase(case_id, tuple(ctx.workspace.task_dir / rel for rel in case.image_paths))


def _compare(ctx: ReviewContext, fold: int, case_id: str, outputs: Path) -> dict[str, Any]:
    if ctx.contract.prediction.file_type == "csv":
        return _compare_row(ctx, fold, case_id, outputs)
    ending = ctx.contract.layout.file_ending
    item: dict[str, Any] = {"fold": fold, "case_id": case_id}
    try:
        replayed = read_volume(outputs / f"{case_id}{ending}", ending).array
        frozen = read_volume(_frozen_files(ctx, fold)[case_id], ending).array
    except (DataUnreadable, OSError) as exc:
        return {**item, "agreement": 0.0, "threshold": LABEL_AGREEMENT, "problem": f"no usable output: {exc}"[:200]}
    labelled = bool(foreground_labels(ctx.contract))
    agreement = label_agreement(replayed, frozen) if labelled else value_agreement(replayed, frozen)
    threshold = LABEL_AGREEMENT if labelled else VALUE_AGREEMENT
    if replayed.shape != frozen.shape:
        item["problem"] = f"shape {list(replayed.shape)} against frozen {list(frozen.shape)}"
    return {**item, "agreement": round(agreement, 6), "threshold": threshold}


def _compare_row(ctx: ReviewContext, fold: int, case_id: str, outputs: Path) -> dict[str, Any]:
    id_column, value_column = columns(ctx)
    replayed: dict[str, str] = {}
    for table in sorted(outputs.glob("*.csv")):
        replayed.update(read_rows(table.read_text(errors="replace"), id_column, value_column) or {})
    frozen = _frozen_rows(ctx, fold).get(case_id)
    same = values_agree(replayed.get(case_id), frozen)
    return {"fold": fold, "case_id": case_id, "agreement": 1.0 if same else 0.0, "threshold": 1.0,
            "replayed": replayed.get(case_id), "frozen": frozen}  # fmt: skip
