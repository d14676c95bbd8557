"""DUPLICATE_PAYLOAD on benchmark folds (laid out like submissions): a fold's predictions byte- or
near-identical, case by case, to an earlier attempt's. Cases are matched through each attempt's own
`submission.csv`, not through file names (two attempts name their files alike). Near identity uses
the same rule as the built-in check: every case at or above NEAR_AGREEMENT (label maps: foreground
agreement; images: value agreement; JSON: equal parsed values; tables: every value within tolerance).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.predictions import FoldResult
from amid.server.reviewer.report import Check, fired, ok
from amid.server.reviewer.submission_files import (
    agreement,
    case_members,
    earlier_case_files,
    read_submission,
    rows_agree,
)

NEAR_AGREEMENT = 0.999


def graded_duplicate_check(ctx: ReviewContext, results: list[FoldResult]) -> Check:
    found: list[dict[str, Any]] = []
    for result in results:
        mine = _my_cases(ctx, result.fold)
        if not mine:
            continue
        for attempt_id, theirs in earlier_case_files(ctx, ctx.job.earlier, result.fold).items():
            common = [c for c in mine if c in theirs]
            if not common or len(common) < len(mine):
                continue
            if all(result.byte_hashes.get(c) == theirs[c].sha256 for c in common):
                found.append({"fold": result.fold, "earlier_attempt_id": attempt_id, "identical": "bytes"})
            elif (lowest := _near(ctx, mine, theirs, common)) is not None:
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
        first = found[0]
        return fired(
            "DUPLICATE_PAYLOAD",
            f"fold {first['fold']}: predictions are {first['identical']}-identical to those of "
            f"{first['earlier_attempt_id']}",
            duplicates=found,
        )
    return ok("DUPLICATE_PAYLOAD", "predictions differ from every earlier attempt's on the same folds")


def _my_cases(ctx: ReviewContext, fold: int) -> dict[str, Any]:
    """case → my frozen file (or my row, for tables) of the fold."""
    refs = {r.member or PurePosixPath(r.declared_path).name: r for r in ctx.files("predictions", fold) if ctx.usable(r)}
    table = refs.get(ctx.contract.submission.filename)
    if table is None:
        return {}
    text = ctx.path(table).read_text(encoding="utf-8", errors="replace")
    if ctx.contract.submission.file_column is None:
        return read_submission(text, ctx.contract.submission.id_column)
    return {case: refs[m] for case, m in case_members(ctx, text).items() if m in refs}


def _near(ctx: ReviewContext, mine: dict[str, Any], theirs: dict[str, Any], cases: list[str]) -> float | None:
    tables = ctx.contract.submission.file_column is None
    their_rows: dict[str, dict[str, str]] = {}
    if tables:
        table = ctx.path(theirs[cases[0]].frozen_path).read_text(encoding="utf-8", errors="replace")
        their_rows = read_submission(table, ctx.contract.submission.id_column)
    lowest = 1.0
    for case in cases:
        if tables:
            value = 1.0 if rows_agree(ctx, mine[case], their_rows.get(case)) else 0.0
        else:
            name = mine[case].member or mine[case].declared_path
            value, _ = agreement(ctx, ctx.path(mine[case].frozen_path), ctx.path(theirs[case].frozen_path), name)
        lowest = min(lowest, value)
        if lowest < NEAR_AGREEMENT:
            return None
    return lowest
