"""Are the predictions complete, well-formed and on the declared fold? PRED_INCOMPLETE, PRED_SCHEMA,
FOLD_MISMATCH (from the fold pass) and SPLIT_LEAK (from the training manifest)."""

from __future__ import annotations

from typing import Any

from amid.server.reviewer.context import ReviewContext
from amid.server.reviewer.predictions import FoldResult
from amid.server.reviewer.report import Check, fired, head, ok, unverifiable


def incomplete_check(results: list[FoldResult], missing_test: list[str]) -> Check:
    missing = [{"fold": r.fold, "cases": head(r.missing), "n_missing": len(r.missing)} for r in results if r.missing]
    total = sum(len(r.val_cases) for r in results)
    if not missing and not missing_test:
        return ok("PRED_INCOMPLETE", f"every case has a prediction ({total} validation cases)")
    parts = [f"fold {m['fold']}: {m['n_missing']} of {len(r.val_cases)}" for m, r in _pairs(missing, results)]
    if missing_test:
        parts.append(f"test submission: {len(missing_test)}")
    return fired(
        "PRED_INCOMPLETE",
        "cases without a usable prediction (scored as empty): " + "; ".join(parts),
        folds=missing,
        test_cases=head(missing_test),
        n_test_missing=len(missing_test),
    )


def _pairs(missing: list[dict], results: list[FoldResult]) -> list[tuple[dict, FoldResult]]:
    by_fold = {r.fold: r for r in results}
    return [(m, by_fold[m["fold"]]) for m in missing]


def schema_check(results: list[FoldResult]) -> Check:
    problems = [{"fold": r.fold, **p} for r in results for p in r.schema]
    if not problems:
        return ok("PRED_SCHEMA", "file type, shape, spacing, affine and label values match the contract")
    kinds = sorted({p["problem"] for p in problems})
    first = problems[0]
    where = first.get("case_id") or first.get("file")
    return fired(
        "PRED_SCHEMA",
        f"{len(problems)} prediction problems ({', '.join(kinds)}); first: {where} {first['problem']} "
        f"expected {first.get('expected')} got {first.get('got')}",
        problems=head(problems),
        n_problems=len(problems),
    )


def fold_check(results: list[FoldResult]) -> Check:
    outside = [{"declared_fold": r.fold, **o} for r in results for o in r.outside]
    if not outside:
        return ok("FOLD_MISMATCH", "predictions cover only the declared folds' validation cases")
    owners = sorted({str(o["belongs_to_fold"]) for o in outside})
    return fired(
        "FOLD_MISMATCH",
        f"{len(outside)} predictions are for cases outside the declared fold (they belong to: {', '.join(owners)})",
        cases=head(outside),
        n_outside=len(outside),
    )


def split_leak_check(ctx: ReviewContext) -> Check:
    manifest, why = ctx.training_manifest
    if manifest is None:
        return unverifiable("SPLIT_LEAK", f"split leakage not checked: {why}")
    groups = ctx.folds.case_groups
    leaks: list[dict[str, Any]] = []
    for fold in ctx.job.folds:
        val = set(ctx.folds.val_cases(fold))
        val_groups = {groups.get(c, c) for c in val}
        trained = manifest.get(fold, [])
        same_case = sorted(c for c in trained if c in val)
        same_group = sorted(c for c in trained if c not in val and _group(ctx, c) in val_groups)
        if same_case or same_group:
            leaked_groups = sorted({_group(ctx, c) for c in same_case + same_group})
            leaks.append(
                {
                    "fold": fold,
                    "validation_cases_trained_on": head(same_case),
                    "same_group_cases": head(same_group),
                    "groups": head(leaked_groups),
                    "group_key": ctx.folds.group_key or "case",
                }
            )
    if not leaks:
        return ok("SPLIT_LEAK", "no validation case or its group is in the training manifest")
    first = leaks[0]
    return fired(
        "SPLIT_LEAK",
        f"fold {first['fold']}: the training manifest holds validation data "
        f"({first['group_key']} {', '.join(first['groups'][:5])})",
        leaks=leaks,
    )


def _group(ctx: ReviewContext, case_id: str) -> str:
    if case_id in ctx.folds.case_groups:
        return ctx.folds.case_groups[case_id]
    for cases in (ctx.test_cases, ctx.train_cases):
        if case_id in cases:
            return cases[case_id].group or case_id
    return case_id
