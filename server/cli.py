"""The `amid` command line. Heavy modules are imported inside each command so `amid --help` is fast."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from amid.server.cli_options import workspace_option
from amid.server.errors import AmidError

F = TypeVar("F", bound=Callable[..., Any])


def _friendly(command: F) -> F:
    """Turn AmidError into a one-line message and exit status 2, never a traceback."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except AmidError as exc:
            click.echo(f"amid: {exc.message}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def _workspace(path: Path) -> Any:
    from amid.server.workspace import Workspace

    return Workspace.open(path)


@click.group()
@click.version_option(package_name="amid")
def main() -> None:
    """AMID: an MCP tool server for auditable medical-imaging model development."""


@main.command("make-demo-task")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--seed", default=7, show_default=True, help="random seed of the generated data")
@_friendly
def make_demo_task(directory: Path, seed: int) -> None:
    """Generate the embedded demo task (ReX-MLE layout) into DIRECTORY."""
    from amid.tools.task.demo_task import make_demo_task as make

    click.echo(f"demo task written to {make(directory, seed=seed)}")


@main.command()
@click.argument("task", type=click.Path(path_type=Path, exists=True))
@workspace_option
@click.option("--link", is_flag=True, help="hard-link the public data instead of copying it (never symlinks)")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="ReX-MLE / MLE-bench: the data folder the benchmark's prepare step filled (holds ID/prepared/)",
)
@click.option(
    "--grader-python",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="interpreter where the task grader's imports resolve (e.g. rexmle's environment) [this one]",
)
@click.option("--primary-metric", default=None, help="the metric to optimise, when the task's own choice is unclear")
@click.option(
    "--holdout-fraction",
    type=click.FloatRange(0.0, 0.5),
    default=None,
    help="fraction of training groups the server holds out (seeded, whole groups) [the task's, usually 0]",
)
@_friendly
def init(
    task: Path,
    workspace: Path,
    link: bool,
    data_dir: Path | None,
    grader_python: Path | None,
    primary_metric: str | None,
    holdout_fraction: float | None,
) -> None:
    """Create a workspace from TASK: a task.yaml, a ReX-MLE / MLE-bench challenge folder (with
    --data-dir), an nnU-Net raw dataset or a Medical Segmentation Decathlon task folder."""
    from amid.server.workspace import check_target, init_workspace
    from amid.tools.task.importers import import_task

    check_target(workspace.expanduser().resolve())
    imported = import_task(task, data_dir=data_dir, primary_metric=primary_metric)
    if holdout_fraction is not None:
        from amid.server.holdout_split import with_holdout_fraction

        imported.contract = with_holdout_fraction(imported.contract, holdout_fraction)
    ws = init_workspace(imported, workspace, link_data=link, grader_python=grader_python)
    contract = ws.contract()
    folds = ws.folds()
    click.echo(
        f"workspace {ws.root}: task {contract.id} ({contract.task_type}, {contract.modality}), "
        f"{len(folds.case_groups)} training cases in {folds.k} locked folds"
    )
    from amid.server.reviewer.holdout_power import init_warning

    if warning := init_warning(ws):
        click.echo(f"amid: warning: {warning}", err=True)
    rule = contract.source.metadata.get("primary_metric_rule")
    click.echo(f"primary metric: {contract.primary_metric} ({contract.primary.direction}{'; ' + rule if rule else ''})")
    if contract.grader is not None:
        python = ws.grader_python() or "this interpreter"
        click.echo(f"task grader: private/{contract.grader.file}:{contract.grader.function}, run with {python}")
    _profile_now(ws)


def _profile_now(ws: Any) -> None:
    """Profile the data at init so the first profile_data call and lane planning find it cached."""
    from amid.tools.profile_data import REPORT_DIR, build_request, compute_profile

    try:
        profile = compute_profile(ws, build_request(ws, ws.contract(), ws.folds()))
    except AmidError as exc:
        click.echo(f"amid: profiling skipped ({exc.message}); profile_data will retry", err=True)
        return
    raised = sorted(p.name for p in profile.predicates if p.value)
    click.echo(
        f"data profile in {REPORT_DIR}/ ({profile.seconds:.1f} s): {', '.join(raised) or 'no predicates'}; "
        f"{len(profile.issues)} issue(s)"
    )


@main.command()
@workspace_option
@click.option("--host", default=None, help="bind address [127.0.0.1] (AMID_HOST)")
@click.option("--port", default=None, type=int, help="port [8765]; 0 picks a free one (AMID_PORT)")
@click.option("--stdio", is_flag=True, help="serve one local agent over stdio instead of HTTP")
@click.option("--agent", default=None, help="the agent name for --stdio")
@click.option(
    "--replay-sandbox",
    type=click.Choice(["bwrap", "none"]),
    default=None,
    help="replay isolation [bwrap: required, no bubblewrap, no server]; none: unconfined (AMID_REPLAY_SANDBOX)",
)
@click.option(
    "--job-sandbox",
    type=click.Choice(["bwrap", "none"]),
    default=None,
    help="run_gpu_job isolation [bwrap: required, no bubblewrap, no job]; none: unconfined (AMID_JOB_SANDBOX)",
)
@click.option(
    "--job-network",
    type=click.Choice(["none", "host"]),
    default=None,
    help="a sandboxed job's network [none]; host: the host's (AMID_JOB_NETWORK)",
)
@_friendly
def serve(
    workspace: Path,
    host: str | None,
    port: int | None,
    stdio: bool,
    agent: str | None,
    replay_sandbox: str | None,
    job_sandbox: str | None,
    job_network: str | None,
) -> None:
    """Serve the workspace to agents over Streamable HTTP (or --stdio for one local agent)."""
    from amid.server.serve import serve_http, serve_stdio
    from amid.server.settings import settings_from

    values = {"workspace": workspace, "host": host, "port": port, "replay_sandbox": replay_sandbox}
    settings = settings_from({**values, "job_sandbox": job_sandbox, "job_network": job_network})
    if stdio:
        if not agent:
            raise click.UsageError("--stdio needs --agent NAME")
        serve_stdio(settings, agent)
        return
    serve_http(settings, announce=lambda url: click.echo(f"amid: serving {settings.workspace} at {url}", err=True))


@main.group()
def token() -> None:
    """Create, list and revoke bearer tokens (one per agent)."""


@token.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(["agent", "supervisor", "human"]), default="agent", show_default=True)
@workspace_option
@_friendly
def token_create(name: str, role: str, workspace: Path) -> None:
    """Issue a token for agent NAME and print it once."""
    from amid.server.local_client import call

    click.echo(call(_workspace(workspace), "token_create", {"name": name, "role": role})["token"])


@token.command("list")
@workspace_option
@_friendly
def token_list(workspace: Path) -> None:
    """List tokens (hints only: tokens are stored hashed)."""
    from amid.server.local_client import call

    for row in call(_workspace(workspace), "token_list", {})["tokens"]:
        state = f"revoked {row['revoked_at']}" if row["revoked_at"] else "live"
        click.echo(f"{row['agent_id']:<24} {row['role']:<10} {row['token_hint']:<12} {state}")


@token.command("revoke")
@click.argument("name")
@workspace_option
@_friendly
def token_revoke(name: str, workspace: Path) -> None:
    """Revoke every live token of agent NAME."""
    from amid.server.local_client import call

    result = call(_workspace(workspace), "token_revoke", {"name": name})
    click.echo(f"revoked {result['revoked']} token(s) of {name}")


@main.command()
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@_friendly
def status(workspace: Path, as_json: bool) -> None:
    """Stage, agents, attempts, lanes and jobs of the run."""
    from amid.server.local_client import call

    result = call(_workspace(workspace), "status", {})
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(f"task {result['task_id']}  stage {result['stage']}  started {result['started_at']}")
    click.echo(f"  imported  {', '.join(f'{k} {v}' for k, v in (result.get('task_origin') or {}).items()) or '-'}")
    for key in ("agents", "attempts", "lanes", "jobs"):
        value = result[key]
        shown = ", ".join(a["agent_id"] + "/" + a["role"] for a in value) if key == "agents" else value
        click.echo(f"  {key:<9} {shown or '-'}")
    for worker in result.get("workers", []):  # managed workers, each with the sandbox of its last start
        click.echo(
            f"  worker    {worker['agent_id']} {worker['backend']} {worker['state']} "
            f"sandbox {worker['sandbox'] or '?'} session {worker['session_id'] or '-'}"
            + (f"\n            why: {worker['reason']}" if worker.get("reason") else "")  # a stuck worker says why
        )


@main.command()
@click.argument("query")
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="print JSON rows")
@click.option("--csv", "as_csv", is_flag=True, help="print CSV with a header row")
@click.option("--limit", default=1000, show_default=True, help="most rows to return (a page)")
@click.option("--offset", default=0, show_default=True, help="rows to skip first (the next page)")
@click.option("--time-limit", default=10.0, show_default=True, help="seconds before the query is stopped")
@_friendly
def sql(query: str, workspace: Path, as_json: bool, as_csv: bool, limit: int, offset: int, time_limit: float) -> None:
    """Run one read-only SELECT against a snapshot of the ledger (through the server when it runs).
    Files, writes, settings and sequences are refused; see README "Querying the ledger"."""
    from amid.server import queries
    from amid.server.errors import InvalidInput
    from amid.server.ledger.readonly import SqlRefused

    paging: dict[str, Any] = {"limit": limit, "offset": offset, "time_limit_s": time_limit}
    try:
        result = queries.page(_workspace(workspace), query, (), **paging)
    except SqlRefused as exc:  # the server's answer carries the code already; say it here too
        raise InvalidInput(f"{exc.code}: {exc.message}", field="sql") from None
    columns, rows = result["columns"], result["rows"]
    more = f"more rows: run again with --offset {offset + len(rows)}" if result["has_more"] else ""
    if as_json or as_csv:
        click.echo(queries.as_json(columns, rows) if as_json else queries.as_csv(columns, rows))
        if more:
            click.echo(f"amid: {more}", err=True)
        return
    click.echo(queries.as_table(columns, rows))
    click.echo(f"({len(rows)} row{'' if len(rows) == 1 else 's'}{'; ' + more if more else ''})")


@main.command()
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="print the audit report as JSON")
@_friendly
def audit(workspace: Path, as_json: bool) -> None:
    """Re-hash the frozen files and check the stored commit of every accepted attempt; revoke those
    whose evidence changed or vanished. Exit status 1 when an attempt was revoked."""
    from amid.server.local_client import call

    report = call(_workspace(workspace), "audit", {})
    if as_json:
        click.echo(json.dumps(report, indent=1))
    else:
        _print_audit(report)
    if report["n_revoked"]:
        sys.exit(1)


def _print_audit(report: dict[str, Any]) -> None:
    click.echo(f"{'attempt':<12} {'agent':<16} {'lane':<24} {'commit':<12} {'files':>5}  result")
    for row in report["attempts"]:
        result = ("revoked: " if row["revoked"] else "failed: ") + ", ".join(row["failed"]) if row["failed"] else "ok"
        click.echo(
            f"{row['attempt_id']:<12} {row['agent_id']:<16} {row['lane_id'] or '-':<24} {row['commit'][:12]:<12} "
            f"{row['n_files']:>5}  {result}"
        )
    click.echo(
        f"audit {report['audit_id']}: {report['n_checked']} accepted attempt(s) checked, {report['n_revoked']} revoked"
    )


@main.command()
@click.argument("client", type=click.Choice(["claude", "codex", "cursor", "opencode"]))
@click.option("--agent", required=True, help="the agent's name (its worktree and token)")
@workspace_option
@click.option("--url", default=None, help="server URL [the running server's, else http://127.0.0.1:8765/mcp]")
@click.option("--sandboxed", is_flag=True, help="print a start command inside bubblewrap (the managed workers' view)")
@_friendly
def connect(client: str, agent: str, workspace: Path, url: str | None, sandboxed: bool) -> None:
    """Create AGENT's worktree and token, write CLIENT's MCP config there, print the start command."""
    from amid.server.connect import connect as do_connect
    from amid.server.connect import issue_token
    from amid.server.workspace import read_server_marker

    ws = _workspace(workspace)
    marker = read_server_marker(ws)
    url = url or (marker["url"] if marker else "http://127.0.0.1:8765/mcp")
    issued = issue_token(ws, agent)  # revokes the agent's earlier tokens
    conn = do_connect(ws, client, agent, url, issued["token"], ws.contract().title)  # type: ignore[arg-type]
    click.echo(f"# {client} configuration written to {conn.config_path}:")
    click.echo(conn.config_text)
    click.echo(f"# token for {agent}: {issued['token']}")
    if sandboxed:
        from amid.server.connect_sandbox import sandboxed_command

        click.echo("# start the agent inside the sandbox (its worktree and own home; no private/, no server files):")
        click.echo(sandboxed_command(ws, client, agent, url, conn.worktree))  # type: ignore[arg-type]
        return
    click.echo("# start the agent with (unconfined: it can read what this OS user can, private/ too):")
    click.echo(conn.command)


@main.command()
@click.option(
    "--workspace",
    "-w",
    type=click.Path(path_type=Path),
    default=None,
    help="where to build the demo run [a new temporary folder]",
)
@_friendly
def demo(workspace: Path | None) -> None:
    """Run the embedded demo end to end: make the task, init, serve, drive scripted agents."""
    from amid.server.demo import run_demo

    run_demo(workspace)


# Commands that live in their own modules ("module:attribute"); each is imported when `amid` starts.
COMMAND_MODULES = (
    "amid.server.supervisor.cli:supervise_command",
    "amid.server.package.cli:finalize_command",
    "amid.server.package.cli:verify_package_command",
    "amid.server.report.cli:report_command",
    "amid.server.report.cli:dashboard_command",
    "amid.server.export_cli:export_command",
)


def _add_commands() -> None:
    import importlib

    for spec in COMMAND_MODULES:
        module, _, name = spec.partition(":")
        command = getattr(importlib.import_module(module), name)
        if command.callback is not None:
            command.callback = _friendly(command.callback)
        main.add_command(command)


_add_commands()


@main.group()
def registry() -> None:
    """The foundation-model registry shipped with AMID."""


@registry.command("search")
@click.argument("keywords", nargs=-1)
@click.option("--modality", default=None, help="CT, MRI, PET, X-ray, ultrasound, pathology, microscopy, fundus, …")
@click.option("--dims", "dimensionality", type=click.Choice(["2d", "3d"]), default=None)
@click.option("--task-family", default=None, help="segmentation, detection, classification, feature_extraction, …")
@click.option("--access", type=click.Choice(["open", "gated", "on_request"]), default=None)
@click.option("--licence", default=None, help="substring of the licence, e.g. apache")
@click.option("--limit", default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@_friendly
def registry_search(keywords: tuple[str, ...], as_json: bool, **filters: Any) -> None:
    """Find foundation models by filters and ranked KEYWORDS, with local availability (never downloads)."""
    from amid.tools.fm_registry import query_input, search

    given = {name: value for name, value in filters.items() if value is not None}
    hits = search(query_input({"keywords": " ".join(keywords), **given}))
    if as_json:
        click.echo(json.dumps([h.model_dump() for h in hits], indent=1))
        return
    if not hits:
        click.echo("no model matches")
        return
    rows = [("model", "availability", "access", "why it matched", "licence")]
    rows += [(hit.id, hit.availability, hit.access, "; ".join(hit.why), hit.licence) for hit in hits]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:  # the licence last and whole: it decides whether a model may be used at all
        click.echo("  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[4]]))


if __name__ == "__main__":
    main()
