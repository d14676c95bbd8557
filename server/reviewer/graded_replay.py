"""PRED_NOT_REPRODUCED on benchmark folds (laid out like submissions).

The replay machinery is the built-in one (server/reviewer/replay.py: frozen commit, frozen
checkpoint, sandbox, the input files of every validation case with a frozen prediction, under their
own names); what differs is the output contract: the command writes a submission for the cases it was given into
{output_dir} — `submission.csv` plus the files it names, as in the fold's frozen predictions — and
each validation case's replayed file (or row) is compared with its frozen one
(server/reviewer/submission_files.py: label agreement, value agreement, equal parsed JSON, equal
table values).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from amid.server.reviewer.agreement import LABEL_AGREEMENT
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.replay import ReplayCase, ReplayRun, replay, replay_failed, replay_verdict
from amid.server.reviewer.report import Check, unverifiable
from amid.server.reviewer.submission_files import agreement, case_members, read_submission, rows_agree

CODE = "PRED_NOT_REPRODUCED"


def graded_reproduction_check(ctx: ReviewContext) -> Check:
    compared: list[dict[str, Any]] = []
    last: ReplayRun | None = None
    for fold in ctx.job.folds:
        frozen = _frozen(ctx, fold)
        sample = sorted(frozen)  # every case that counts, not a sample
        if not sample:
            continue
        ctx.progress(0.72, f"validation replay, fold {fold}")
        cases = [
            ReplayCase(c, tuple(ctx.workspace.task_dir / p for p in ctx.train_cases[c].image_paths)) for c in sample
        ]
        with replay(ctx, cases, "validation", fold=fold) as run:
            last = run
            if not run.succeeded:
                return replay_failed(ctx, run, sample)
            compared += [_compare(ctx, fold, case, frozen[case], run.outputs) for case in sample]
    if last is None:
        return unverifiable(CODE, "no frozen prediction of a validation case to compare a replay with")
    return replay_verdict(compared, last)


def _frozen(ctx: ReviewContext, fold: int) -> dict[str, Any]:
    """case → its frozen file ref (files) or row (tables), from the fold's frozen submission.csv."""
    refs = {r.member or PurePosixPath(r.declared_path).name: r for r in ctx.files("predictions", fold) if ctx.usable(r)}
    table = refs.get(ctx.contract.submission.filename)
    if table is None:
        return {}
    text = ctx.path(table).read_text(encoding="utf-8", errors="replace")
    val = set(ctx.folds.val_cases(fold))
    if ctx.contract.submission.file_column is None:
        rows = read_submission(text, ctx.contract.submission.id_column)
        return {case: row for case, row in rows.items() if case in val}
    return {case: refs[m] for case, m in case_members(ctx, text).items() if case in val and m in refs}


def _compare(ctx: ReviewContext, fold: int, case_id: str, frozen: Any, outputs: Path) -> dict[str, Any]:
    item: dict[str, Any] = {"fold": fold, "case_id": case_id}
    table = outputs / ctx.contract.submission.filename
    if not table.is_file():
        return {**item, "agreement": 0.0, "threshold": 1.0, "problem": f"the replay wrote no {table.name}"}
    text = table.read_text(encoding="utf-8", errors="replace")
    if ctx.contract.submission.file_column is None:
        replayed_row = read_submission(text, ctx.contract.submission.id_column).get(case_id)
        same = rows_agree(ctx, replayed_row, frozen)
        return {**item, "agreement": 1.0 if same else 0.0, "threshold": 1.0, "replayed": replayed_row, "frozen": frozen}
    member = case_members(ctx, text).get(case_id)
    inside = member is not None and not PurePosixPath(member).is_absolute() and ".." not in PurePosixPath(member).parts
    if member is None or not inside or not (outputs / member).is_file():  # an absolute path would leave the copy
        return {**item, "agreement": 0.0, "threshold": LABEL_AGREEMENT, "problem": "no replayed file for the case"}
    name = frozen.member or frozen.declared_path
    value, threshold = agreement(ctx, outputs / member, ctx.path(frozen), name)
    return {**item, "agreement": round(value, 6), "threshold": threshold}
