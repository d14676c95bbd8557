"""Finalization: the supervisor's (through `choose_final`, which calls `build_package`) and
`amid finalize`'s, which builds the package and records its choice in the same ledger table, under the
same rule (server/finality.py), so `v_final_choice` shows it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from amid.server.context import ToolContext
from amid.server.errors import Conflict
from amid.server.ledger import Ledger
from amid.server.ledger.packages import Packages
from amid.server.package.builder import BuiltPackage, build
from amid.server.package.evidence import best_eligible, gather
from amid.server.workspace import Workspace

CLI_AGENT = "amid-finalize"


def build_package(ctx: ToolContext, attempt_id: str) -> str:
    """The builder `choose_final` calls (`Services.build_package`). No final choice is
    recorded yet, so a package of another attempt in package/ is not final and is replaced."""
    return build(ctx.ledger, ctx.workspace, attempt_id, by=ctx.caller.agent_id, replace_other=True).path


def finalize(
    ledger: Ledger, workspace: Workspace, attempt_id: str | None = None, *, force: bool = False, by: str = CLI_AGENT
) -> dict[str, Any]:
    """Choose the final attempt (the given one, the recorded choice, or the best eligible) and build
    its package. Another attempt than the recorded choice is refused unless `force`."""
    known = ledger.supervision.final_choice()
    target = attempt_id or (str(known["attempt_id"]) if known else best_eligible(ledger))
    reason = _reason(ledger, target, named=attempt_id is not None, forced=known is not None)
    if known is None:
        return _choose(ledger, workspace, target, reason, force, by)
    if known["attempt_id"] == target:
        built = build(ledger, workspace, target, by=by, force=force)
        if known["package_path"] != built.path:
            Packages(ledger.db).set_choice_package(int(known["choice_id"]), built.path)
        return _result(int(known["choice_id"]), built, replaced=False)
    if not force:
        raise Conflict(
            f"attempt_id: the final choice is {known['attempt_id']} (by {known['decided_by']}); "
            f"pass --force to replace it with {target}",
            field="attempt_id",
        )
    evidence = gather(ledger, target)  # refuses before anything is rebuilt
    built = build(ledger, workspace, target, by=by, force=True)
    row = {**evidence.evidence, "reason": reason, "package_path": built.path}
    Packages(ledger.db).replace_final(int(known["choice_id"]), row, by)
    return _result(int(known["choice_id"]), built, replaced=True)


def _choose(ledger: Ledger, workspace: Workspace, attempt_id: str, reason: str, force: bool, by: str) -> dict[str, Any]:
    """Record the first final choice, as choose_final does: the builder refuses an attempt that cannot be
    final (server/finality.py) before anything is written, and the ledger keeps a choice made meanwhile."""
    built = build(ledger, workspace, attempt_id, by=by, force=force, replace_other=True)
    evidence = gather(ledger, attempt_id).evidence
    row = {**evidence, "reason": reason, "audit_id": None, "package_path": built.path}
    choice_id, _ = ledger.supervision.choose_final(row, by)
    return _result(choice_id, built, replaced=False)


def _reason(ledger: Ledger, attempt_id: str, *, named: bool, forced: bool) -> str:
    how = "amid finalize --force (replacing the earlier choice)" if forced else "amid finalize"
    if named:
        return f"{how}: {attempt_id}, named by the operator"
    metric = ledger.activity.get_state("primary_metric")
    return (
        f"{how}: {attempt_id}, best verified {metric} of the accepted, real, holdout-gated attempts of promoted lanes"
    )


def _result(choice_id: int, built: BuiltPackage, replaced: bool) -> dict[str, Any]:
    return {"choice_id": choice_id, **asdict(built), "replaced": replaced}
