"""DUPLICATE_PAYLOAD: a fold's predictions byte- or value-identical to an earlier attempt's.

Byte identity comes from the hashes recorded at submission. Value identity (the same voxels saved
again, e.g. with other compression) compares hashes of the decoded arrays; an earlier attempt
whose value hashes are not in the ledger yet is decoded here from its own frozen files.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import PurePath

from server.errors import DataUnreadable
from server.reviewer.context import ReviewContext
from server.reviewer.images import read_volume, value_hash
from server.reviewer.job import EarlierPrediction
from server.reviewer.predictions import FoldResult
from server.reviewer.report import Check, fired, ok
from server.reviewer.tabular import FILE_KEY, columns, read_rows, row_hash

MAX_DECODED_ATTEMPTS = 50


def duplicate_check(ctx: ReviewContext, results: list[FoldResult]) -> Check:
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
    if found:
        f = found[0]
        return fired(
            "DUPLICATE_PAYLOAD",
            f"fold {f['fold']}: predictions are {f['identical']}-identical to those of {f['earlier_attempt_id']}",
            duplicates=found,
        )
    return ok("DUPLICATE_PAYLOAD", "predictions differ from every earlier attempt's on the same folds")


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
