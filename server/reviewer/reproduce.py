"""PRED_NOT_REPRODUCED: do the frozen predictions come from the committed code?

Validation labels are public, so a fold score proves nothing by itself. The reviewer replays the
declared inference command (server/reviewer/replay.py: frozen commit, frozen checkpoint, sandbox)
on every validation case of each declared fold that has a frozen prediction — all the cases that
count, so one memorised or copied case cannot hide outside a sample — and compares each output with
the frozen prediction of that case (server/reviewer/agreement.py): label maps per label value
(every label of every case must agree), continuous images per voxel, tables per row. No command,
a command that fails or times out, an output that is not a plain file, a missing output or one
case or label below the agreement threshold fires the check (an error).

`{fold}` in the command is the fold being replayed; without it, one replay covers all folds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amid.server.errors import DataUnreadable
from amid.server.repo import resolve_commit
from amid.server.reviewer.agreement import (
    LABEL_AGREEMENT,
    VALUE_AGREEMENT,
    label_agreements,
    value_agreement,
    values_agree,
)
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.graded_replay import graded_reproduction_check
from amid.server.reviewer.predictions import case_of
from amid.server.reviewer.replay import ReplayCase, replay, replay_failed, replay_verdict
from amid.server.reviewer.report import Check, fired, unverifiable
from amid.server.reviewer.tabular import columns, read_rows
from amid.server.reviewer.task_grader import scores_folds
from amid.tools.metrics.images import read_volume
from amid.tools.metrics.scoring import foreground_labels

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
    counted = counted_cases(ctx)
    if not any(counted.values()):
        return unverifiable(CODE, "no frozen prediction of a validation case to compare a replay with")
    ctx.progress(0.72, "validation replay")
    compared: list[dict[str, Any]] = []
    for folds in replay_groups(ctx):
        cases = [case for fold in folds for case in counted[fold]]
        with replay(ctx, [replay_inputs(ctx, case) for case in cases], "validation", fold=folds[0]) as run:
            if not run.succeeded:
                return replay_failed(ctx, run, cases)
            compared += [item for fold in folds for item in compare_cases(ctx, fold, counted[fold], run.outputs)]
    return replay_verdict(compared, run)


def counted_cases(ctx: ReviewContext) -> dict[int, list[str]]:
    """fold → every validation case of the fold with a frozen prediction (the cases its score counts)."""
    counted = {}
    for fold in ctx.job.folds:
        frozen = _frozen_ids(ctx, fold)
        counted[fold] = sorted(case for case in ctx.folds.val_cases(fold) if case in frozen)
    return counted


def replay_groups(ctx: ReviewContext) -> list[list[int]]:
    uses_fold = any("{fold}" in part for part in ctx.job.inference_command or [])
    return [[fold] for fold in ctx.job.folds] if uses_fold else [list(ctx.job.folds)]


def _frozen_ids(ctx: ReviewContext, fold: int) -> set[str]:
    return set(_frozen_rows(ctx, fold) if ctx.contract.prediction.file_type == "csv" else frozen_files(ctx, fold))


def frozen_files(ctx: ReviewContext, fold: int) -> dict[str, Path]:
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


def replay_inputs(ctx: ReviewContext, case_id: str) -> ReplayCase:
    case = ctx.train_cases[case_id]
    return ReplayCase(case_id, tuple(ctx.workspace.task_dir / rel for rel in case.image_paths))


def compare_cases(ctx: ReviewContext, fold: int, cases: list[str], outputs: Path) -> list[dict[str, Any]]:
    """Each case's replayed output (written under its own id) against its frozen prediction."""
    if ctx.contract.prediction.file_type == "csv":
        replayed, frozen = replayed_rows(ctx, outputs), _frozen_rows(ctx, fold)  # read once per replay
        return [_compare_row(fold, case, replayed.get(case), frozen.get(case)) for case in cases]
    files = frozen_files(ctx, fold)
    return [
        _compare_image(ctx, fold, case, outputs / f"{case}{ctx.contract.layout.file_ending}", files[case])
        for case in cases
    ]


def _compare_image(ctx: ReviewContext, fold: int, case_id: str, output: Path, frozen_file: Path) -> dict[str, Any]:
    ending = ctx.contract.layout.file_ending
    item: dict[str, Any] = {"fold": fold, "case_id": case_id}
    try:
        replayed = read_volume(output, ending).array
        frozen = read_volume(frozen_file, ending).array
    except (DataUnreadable, OSError) as exc:
        return {**item, "agreement": 0.0, "threshold": LABEL_AGREEMENT, "problem": f"no usable output: {exc}"[:200]}
    if replayed.shape != frozen.shape:
        item["problem"] = f"shape {list(replayed.shape)} against frozen {list(frozen.shape)}"
    if not foreground_labels(ctx.contract):
        return {**item, "agreement": round(value_agreement(replayed, frozen), 6), "threshold": VALUE_AGREEMENT}
    return {**item, **per_label(label_agreements(replayed, frozen)), "threshold": LABEL_AGREEMENT}


def per_label(agreements: dict[int, float]) -> dict[str, Any]:
    """A case's agreement is its worst label's; each label's Dice rides along as evidence."""
    if not agreements:
        return {"agreement": 1.0, "labels": {}}
    worst = min(agreements, key=lambda label: agreements[label])
    return {
        "agreement": round(agreements[worst], 6),
        "worst_label": worst,
        "labels": {str(label): round(value, 6) for label, value in agreements.items()},
    }


def _compare_row(fold: int, case_id: str, replayed: str | None, frozen: str | None) -> dict[str, Any]:
    same = values_agree(replayed, frozen)
    return {
        "fold": fold,
        "case_id": case_id,
        "agreement": 1.0 if same else 0.0,
        "threshold": 1.0,
        "replayed": replayed,
        "frozen": frozen,
    }


def replayed_rows(ctx: ReviewContext, outputs: Path) -> dict[str, str]:
    id_column, value_column = columns(ctx)
    rows: dict[str, str] = {}
    for table in sorted(outputs.glob("*.csv")):
        rows.update(read_rows(table.read_text(errors="replace"), id_column, value_column) or {})
    return rows
