"""The profile itself: sections, predicates, issues and per-case rows; and its compact form for a tool reply."""

from __future__ import annotations

from collections import Counter

from pydantic import BaseModel, Field

from amid.tools.profiling.evaluation import Evaluation
from amid.tools.profiling.inventory import Inventory
from amid.tools.profiling.models import CaseRecord, Predicate, ProfileIssue
from amid.tools.profiling.representation import Representation
from amid.tools.profiling.supervision import Supervision

PROFILE_VERSION = 2
# Issues listed in the compact profile; the rest are counted by code and kept in profile.json.
COMPACT_ISSUES = 25
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


class CompactProfile(BaseModel):
    """The profile without per-case rows, with issues cut to the most severe; fits a tool reply."""

    profile_version: int
    fingerprint: str
    task_type: str
    inventory: Inventory
    representation: Representation
    supervision: Supervision
    evaluation: Evaluation
    predicates: dict[str, bool] = Field(description="Predicate name -> value (evidence below).")
    predicate_evidence: dict[str, dict[str, float | int | str]]
    issue_counts: dict[str, int]
    issues: list[ProfileIssue]
    issues_omitted: int
    seconds: float


class DataProfile(BaseModel):
    """An evidence-backed profile of a task's public data (AMID §2.3)."""

    profile_version: int = PROFILE_VERSION
    fingerprint: str
    task_type: str
    inventory: Inventory
    representation: Representation
    supervision: Supervision
    evaluation: Evaluation
    predicates: list[Predicate]
    issues: list[ProfileIssue]
    cases: list[CaseRecord]
    seconds: float
    n_workers: int

    def predicate(self, name: str) -> Predicate:
        """The predicate called name (KeyError if no rule has that name)."""
        for predicate in self.predicates:
            if predicate.name == name:
                return predicate
        raise KeyError(name)

    def issues_with(self, code: str) -> list[ProfileIssue]:
        return [issue for issue in self.issues if issue.code == code]

    def compact(self) -> CompactProfile:
        """Sections, predicates and the most severe issues; per-case rows stay in the full report."""
        ranked = sorted(self.issues, key=lambda i: (SEVERITY_ORDER[i.severity], i.code, i.case_id or ""))
        return CompactProfile(
            profile_version=self.profile_version,
            fingerprint=self.fingerprint,
            task_type=self.task_type,
            inventory=self.inventory,
            representation=self.representation,
            supervision=self.supervision,
            evaluation=self.evaluation,
            predicates={p.name: p.value for p in self.predicates},
            predicate_evidence={p.name: p.evidence for p in self.predicates},
            issue_counts=dict(Counter(i.code for i in self.issues)),
            issues=ranked[:COMPACT_ISSUES],
            issues_omitted=max(0, len(ranked) - COMPACT_ISSUES),
            seconds=self.seconds,
        )
