"""How the task is judged and where validation can leak: metric, folds, groups, cross-split duplicates."""

from __future__ import annotations

from collections import Counter, defaultdict

from pydantic import BaseModel

from amid.tools.profiling.casework import CaseResult
from amid.tools.profiling.duplicates import crosses_splits
from amid.tools.profiling.inputs import ProfileRequest
from amid.tools.profiling.models import MAX_LISTED, ProfileIssue, capped, top_counts


class Evaluation(BaseModel):
    primary_metric: str | None
    metric_direction: str | None
    n_folds: int | None
    cases_per_fold: dict[str, int]
    train_cases_without_fold: int
    group_key: str | None
    n_groups: int
    max_cases_per_group: int
    groups_with_several_cases: int
    groups_split_across_folds: list[str]
    n_groups_split_across_folds: int
    groups_in_train_and_test: list[str]
    n_groups_in_train_and_test: int
    duplicates_across_splits: list[list[str]]
    near_duplicates_across_splits: list[list[str]]
    class_counts_per_fold: dict[str, dict[str, int]]
    submission_columns: list[str]
    n_test_cases: int


def _groups(request: ProfileRequest) -> dict[str, list[tuple[str, str]]]:
    """group -> [(case_id, split)] for cases that name a group."""
    members: defaultdict[str, list[tuple[str, str]]] = defaultdict(list)
    for case in request.cases:
        if case.group is not None:
            members[case.group].append((case.case_id, case.split))
    return members


def _split_groups(request: ProfileRequest, groups: dict[str, list[tuple[str, str]]]) -> dict[str, list[int]]:
    folds = request.folds or {}
    split: dict[str, list[int]] = {}
    for group, members in groups.items():
        seen = sorted({folds[c] for c, _ in members if c in folds})
        if len(seen) > 1:
            split[group] = seen
    return split


def _fold_classes(request: ProfileRequest, targets: dict[str, str]) -> dict[str, dict[str, int]]:
    if not request.folds or request.task_type not in ("classification", "graph_classification"):
        return {}
    per_fold: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for case_id, fold in request.folds.items():
        if case_id in targets:
            per_fold[str(fold)][targets[case_id]] += 1
    return {fold: top_counts(counts) for fold, counts in sorted(per_fold.items())[:MAX_LISTED]}


def _issues(
    request: ProfileRequest,
    split_groups: dict[str, list[int]],
    shared: list[str],
    leaks: list[list[CaseResult]],
) -> list[ProfileIssue]:
    key = request.group_key or "group"
    issues = [
        ProfileIssue(
            code="group_split_across_folds",
            severity="error",
            message=f"{key} {group!r} has cases in folds {folds}: validation would see a training {key}",
        )
        for group, folds in split_groups.items()
    ]
    issues += [
        ProfileIssue(
            code="group_in_train_and_test",
            severity="warning",
            message=f"{key} {group!r} has cases in both train and test",
        )
        for group in shared
    ]
    issues += [
        ProfileIssue(
            code="duplicate_across_splits",
            severity="error",
            case_id=group[0].case_id,
            message=f"identical images in train and test: {sorted(r.case_id for r in group)[:MAX_LISTED]}",
        )
        for group in leaks
    ]
    return issues


def build_evaluation(
    request: ProfileRequest,
    targets: dict[str, str],
    duplicates: list[list[CaseResult]],
    near_duplicates: list[list[CaseResult]],
) -> tuple[Evaluation, list[ProfileIssue]]:
    groups = _groups(request)
    split_groups = _split_groups(request, groups)
    shared = sorted(g for g, members in groups.items() if len({s for _, s in members}) > 1)
    leaks = [g for g in duplicates if crosses_splits(g)]
    near_leaks = [g for g in near_duplicates if crosses_splits(g)]
    folds = request.folds or {}
    train_ids = [c.case_id for c in request.cases if c.split == "train"]
    evaluation = Evaluation(
        primary_metric=request.primary_metric,
        metric_direction=request.metric_direction,
        n_folds=len(set(folds.values())) if folds else None,
        cases_per_fold={str(k): v for k, v in sorted(Counter(folds.values()).items())},
        train_cases_without_fold=sum(c not in folds for c in train_ids) if folds else 0,
        group_key=request.group_key,
        n_groups=len(groups),
        max_cases_per_group=max((len(m) for m in groups.values()), default=0),
        groups_with_several_cases=sum(len(m) > 1 for m in groups.values()),
        groups_split_across_folds=capped(sorted(split_groups)),
        n_groups_split_across_folds=len(split_groups),
        groups_in_train_and_test=capped(shared),
        n_groups_in_train_and_test=len(shared),
        duplicates_across_splits=[capped(sorted(r.case_id for r in g)) for g in leaks[:MAX_LISTED]],
        near_duplicates_across_splits=[capped(sorted(r.case_id for r in g)) for g in near_leaks[:MAX_LISTED]],
        class_counts_per_fold=_fold_classes(request, targets),
        submission_columns=request.submission_columns,
        n_test_cases=sum(c.split == "test" for c in request.cases),
    )
    return evaluation, _issues(request, split_groups, shared, leaks)
