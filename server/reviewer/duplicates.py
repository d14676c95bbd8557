"""DUPLICATE_PAYLOAD: a fold's predictions byte-, value- or near-identical to an earlier attempt's.

Byte identity comes from the hashes recorded at submission. Value identity (the same voxels saved
again, e.g. with other compression) compares hashes of the decoded arrays; an earlier attempt
whose value hashes are not in the ledger yet is decoded here from its own frozen files.

Near identity (a copy with a few voxels or digits changed): every case of the fold agrees with the
earlier attempt's frozen prediction of the same case at or above `NEAR_AGREEMENT`. Label maps:
foreground Dice of one map against the other over all labels at once (`agreement.label_agreement`;
one changed voxel in a 10 000-voxel organ is 0.99995, two honest models rarely pass 0.98).
Tables: every value within 1e-3 absolute + 1e-3 relative (`agreement.values_agree`). A single
case below the threshold clears that earlier attempt (replay, PRED_NOT_REPRODUCED, is the defence
against a copy perturbed on purpose; this check catches the lazy one).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path, PurePath

import numpy as np

from amid.server.errors import DataUnreadable
from amid.server.reviewer.agreement import label_agreement, values_agree
from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.graded_duplicates import graded_duplicate_check
from amid.server.reviewer.job import ArtifactRef, EarlierPrediction
from amid.server.reviewer.predictions import FoldResult, case_of
from amid.server.reviewer.report import Check, fired, ok
from amid.server.reviewer.tabular import FILE_KEY, columns, read_rows, row_hash
from amid.server.reviewer.task_grader import scores_folds
from amid.tools.metrics.images import read_volume, value_hash

MAX_DECODED_ATTEMPTS = 50
NEAR_AGREEMENT = 0.999  # every case at or above this agreement with the same earlier attempt: a duplicate


def duplicate_check(ctx: ReviewContext, results: list[FoldResult]) -> Check:
    if scores_folds(ctx):  # benchmark folds: cases matched through each attempt's submission.csv
        return graded_duplicate_check(ctx, results)
    ending = ctx.contract.layout.file_ending
    earlier = _by_attempt_and_fold(ctx.job.earlier, ending)
    found = []
    decoded = 0
    for result in results:
        if not result.byte_hashes:
            continue
        for attempt_id, files in earlier.get(result.fold, {}).items():
            if _same(result.byte_hashes, {c: e.sha256 for c, e in files.items()}):
                found.append({"fold": result.fold, "earlier_attempt_id": attempt_id, "identical": "bytes"})
                continue
            if decoded >= MAX_DECODED_ATTEMPTS:
                continue
            decoded += 1
            if _same(result.value_hashes, _value_hashes(ctx, files, ending)):
                found.append({"fold": result.fold, "earlier_attempt_id": attempt_id, "identical": "values"})
            elif (lowest := _near(ctx, result, files, ending)) is not None:
                found.append(
                    {
                        "fold": result.fold,
                        "earlier_attempt_id": attempt_id,
                        "identical": "near",
                        "lowest_case_agreement": round(lowest, 6),
                        "threshold": NEAR_AGREEMENT,
                    }
                )
    if found:
        f = found[0]
        return fired(
            "DUPLICATE_PAYLOAD",
            f"fold {f['fold']}: predictions are {f['identical']}-identical to those of {f['earlier_attempt_id']}",
            duplicates=found,
        )
    return ok(
        "DUPLICATE_PAYLOAD",
        f"predictions differ from every earlier attempt's on the same folds (a case below {NEAR_AGREEMENT} agreement)",
    )


def _by_attempt_and_fold(
    rows: list[EarlierPrediction], ending: str
) -> dict[int, dict[str, dict[str, EarlierPrediction]]]:
    grouped: dict[int, dict[str, dict[str, EarlierPrediction]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        name = PurePath(row.member or "").name
        if name.endswith(ending):
            grouped[row.fold][row.attempt_id][name[: -len(ending)]] = row
        elif name.endswith(".csv"):
            grouped[row.fold][row.attempt_id][FILE_KEY] = row
    return grouped


def _same(mine: dict[str, str], theirs: dict[str, str | None]) -> bool:
    return bool(mine) and all(theirs.get(case) == digest for case, digest in mine.items())


def _value_hashes(ctx: ReviewContext, files: dict[str, EarlierPrediction], ending: str) -> dict[str, str | None]:
    hashes: dict[str, str | None] = {}
    if FILE_KEY in files:
        return _table_hashes(ctx, files[FILE_KEY])
    for case_id, row in files.items():
        if row.value_sha256:
            hashes[case_id] = row.value_sha256
            continue
        path = ctx.path(row.frozen_path)
        try:
            hashes[case_id] = value_hash(read_volume(path, ending).array) if path.is_file() else None
        except DataUnreadable:
            hashes[case_id] = None
    return hashes


def _table_hashes(ctx: ReviewContext, row: EarlierPrediction) -> dict[str, str | None]:
    path = ctx.path(row.frozen_path)
    if not path.is_file():
        return {}
    rows = read_rows(path.read_text(errors="replace"), *columns(ctx)) or {}
    return {case_id: row_hash(case_id, value) for case_id, value in rows.items()}


def _near(ctx: ReviewContext, result: FoldResult, files: dict[str, EarlierPrediction], ending: str) -> float | None:
    """The lowest per-case agreement with the earlier attempt when every case reaches NEAR_AGREEMENT, else None."""
    if FILE_KEY in files:
        return _near_table(ctx, result, files[FILE_KEY])
    mine = {case_of(ref, ending): ref for ref in ctx.files("predictions", result.fold) if ctx.usable(ref)}
    cases = sorted(c for c in result.value_hashes if c in mine)
    if not cases or any(c not in files for c in cases):
        return None
    lowest = 1.0
    for case_id in cases:
        theirs = _array(ctx.path(files[case_id].frozen_path), ending)
        if theirs is None:
            return None
        ours = _array(ctx.path(mine[case_id]), ending)
        lowest = min(lowest, label_agreement(ours, theirs) if ours is not None else 0.0)
        if lowest < NEAR_AGREEMENT:
            return None
    return lowest


def _array(path: Path, ending: str) -> np.ndarray | None:
    try:
        return read_volume(path, ending).array if path.is_file() else None
    except DataUnreadable:
        return None


def _near_table(ctx: ReviewContext, result: FoldResult, row: EarlierPrediction) -> float | None:
    """1.0 when every value of this fold's table agrees with the earlier table's value of the same case."""
    tables = [r for r in ctx.files("predictions", result.fold) if ctx.usable(r) and r.frozen_path and _is_csv(r)]
    theirs_path = ctx.path(row.frozen_path)
    if not tables or not theirs_path.is_file():
        return None
    names = columns(ctx)
    ours = read_rows(ctx.path(tables[0]).read_text(errors="replace"), *names) or {}
    theirs = read_rows(theirs_path.read_text(errors="replace"), *names) or {}
    cases = [c for c in result.val_cases if c in ours]
    if not cases or not all(values_agree(ours[c], theirs.get(c)) for c in cases):
        return None
    return 1.0


def _is_csv(ref: ArtifactRef) -> bool:
    return PurePath(ref.member or ref.declared_path).name.endswith(".csv")
