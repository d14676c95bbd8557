"""Assemble the report from a ledger and a workspace."""

from __future__ import annotations

from amid.server.ledger import Ledger, utcnow
from amid.server.report.page import RunFacts, render
from amid.server.report.queries import Query, ledger_query, load_run
from amid.server.report.tables import read_package
from amid.server.workspace import Workspace


def report_facts(workspace: Workspace) -> RunFacts:
    contract = workspace.contract()
    package_dir = workspace.sub("package")
    return RunFacts(
        title=contract.title,
        task_id=contract.id,
        metric=contract.primary_metric,
        direction=contract.primary.direction,
        package_dir=package_dir,
        package=read_package(package_dir),
    )


def build_report(
    ledger: Ledger,
    workspace: Workspace,
    *,
    refresh_s: int | None = None,
    query: Query | None = None,
    signed_in_as: str | None = None,
) -> str:
    """The report page of the run as HTML; `refresh_s` adds the dashboard's reload, `signed_in_as`
    its browser session's logout button."""
    run = load_run(query or ledger_query(ledger))
    facts = report_facts(workspace)
    return render(run, facts, generated_at=utcnow(), refresh_s=refresh_s, signed_in_as=signed_in_as)
