"""Benchmark folds are laid out like submissions: `submission.csv` names each case's file. These
helpers map cases to their files and compare two predictions of one case, for the replay check
(PRED_NOT_REPRODUCED) and the duplicate check on such folds."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path, PurePosixPath
from typing import Any

from amid.server.errors import DataUnreadable
from amid.server.reviewer.agreement import LABEL_AGREEMENT, label_agreement, value_agreement, values_agree
from amid.server.reviewer.context import ReviewContext
from amid.tools.metrics.images import read_volume
from amid.tools.task.answers_layout import IMAGE_ENDINGS

IMAGE_SUFFIXES = IMAGE_ENDINGS  # files a prediction may be an image in
LABEL_TASKS = ("segmentation", "instance_segmentation")


def read_submission(text: str, id_column: str) -> dict[str, dict[str, str]]:
    """case id → its row (the first row of a repeated id)."""
    rows: dict[str, dict[str, str]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        rows.setdefault(row.get(id_column) or "", row)
    return rows


def case_members(ctx: ReviewContext, text: str) -> dict[str, str]:
    """case id → the member path (relative to the submission folder) its row names."""
    column = ctx.contract.submission.file_column
    if column is None:
        return {}
    rows = read_submission(text, ctx.contract.submission.id_column)
    return {case: str(PurePosixPath(row.get(column) or "")) for case, row in rows.items() if row.get(column)}


def agreement(ctx: ReviewContext, replayed: Path, frozen: Path, name: str) -> tuple[float, float]:
    """(agreement, threshold) of two files holding a prediction of one case; `name` (the file's name
    in the submission) says how to decode them (frozen files carry no ending)."""
    ending = next((e for e in IMAGE_SUFFIXES if name.lower().endswith(e)), None)
    if ending is None:
        return (1.0 if _same_content(replayed, frozen) else 0.0), 1.0
    try:
        a, b = read_volume(replayed, ending).array, read_volume(frozen, ending).array
    except DataUnreadable:
        return 0.0, LABEL_AGREEMENT
    if ctx.contract.task_type in LABEL_TASKS:
        return label_agreement(a, b), LABEL_AGREEMENT
    return value_agreement(a, b), LABEL_AGREEMENT


def rows_agree(ctx: ReviewContext, replayed: dict[str, str] | None, frozen: dict[str, str] | None) -> bool:
    """Table predictions: every non-id column equal within the tolerance of `values_agree`."""
    if replayed is None or frozen is None:
        return False
    id_column = ctx.contract.submission.id_column
    return all(_value_same(replayed.get(k), v) for k, v in frozen.items() if k != id_column)


def _value_same(replayed: str | None, frozen: str | None) -> bool:
    try:
        return values_agree(replayed, frozen)
    except (TypeError, ValueError):
        return (replayed or "").strip() == (frozen or "").strip()


def _same_content(a: Path, b: Path) -> bool:
    """JSON compared as parsed values (key order and spacing aside); anything else byte for byte."""
    try:
        left, right = a.read_bytes(), b.read_bytes()
    except OSError:
        return False
    if left == right:
        return True
    try:
        return bool(_parsed(left) == _parsed(right))
    except ValueError:
        return False


def _parsed(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"))


def earlier_case_files(ctx: ReviewContext, rows: list[Any], fold: int) -> dict[str, dict[str, Any]]:
    """Earlier attempts' frozen predictions of `fold`, by attempt and case (via their submission.csv):
    attempt → case → the EarlierPrediction of the case's file (or of the table, for table tasks)."""
    by_attempt: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.fold == fold:
            by_attempt.setdefault(row.attempt_id, {})[row.member or PurePosixPath(row.frozen_path).name] = row
    table_name = ctx.contract.submission.filename
    found: dict[str, dict[str, Any]] = {}
    for attempt_id, members in by_attempt.items():
        table = members.get(table_name)
        if table is None or not ctx.path(table.frozen_path).is_file():
            continue
        text = ctx.path(table.frozen_path).read_text(encoding="utf-8", errors="replace")
        if ctx.contract.submission.file_column is None:
            found[attempt_id] = {case: table for case in read_submission(text, ctx.contract.submission.id_column)}
            continue
        files = case_members(ctx, text)
        found[attempt_id] = {case: members[m] for case, m in files.items() if m in members}
    return found
