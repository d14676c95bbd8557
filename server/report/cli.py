"""`amid report`: write the run's report page (through the running server, or from the file itself);
`amid dashboard`: a one-time browser login link to the live page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from amid.server.cli_options import workspace_option

REPORT_FILE = "report.html"


@click.command("report")
@workspace_option
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help=f"where to write the page [WORKSPACE/{REPORT_FILE}]",
)
def report_command(workspace: Path, out: Path | None) -> None:
    """Write one self-contained HTML page of the run: plots of scores, lanes, agents, checks and
    lineage, the leaderboard and the final package. No script, font or network is needed to read it."""
    from amid.server.local_client import call
    from amid.server.workspace import Workspace

    ws = Workspace.open(workspace)
    html = str(call(ws, "report", {})["html"])
    target = (out or ws.root / REPORT_FILE).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    click.echo(f"report written to {target} ({len(html.encode()):,} bytes)")


@click.command("dashboard")
@workspace_option
@click.option(
    "--as",
    "as_name",
    default="human",
    show_default=True,
    help="the human the browser session is for (registered as a human when new; never an agent)",
)
@click.option(
    "--valid-s",
    type=click.FloatRange(0, 86_400, min_open=True),
    default=600.0,
    show_default=True,
    help="seconds the one-time link stays usable",
)
@click.option("--port", default=None, type=int, help="port when this command starts the server [8765] (AMID_PORT)")
def dashboard_command(workspace: Path, as_name: str, valid_s: float, port: int | None) -> None:
    """Print a one-time login link to the live dashboard (Jupyter style). Opening it in a browser
    sets a session cookie and consumes the link. When no server runs, this command serves the
    workspace itself until Ctrl-C."""
    from amid.server.local_client import call
    from amid.server.workspace import Workspace, read_server_marker

    ws = Workspace.open(workspace)
    body = {"as": as_name, "valid_s": valid_s}
    marker = read_server_marker(ws)
    if marker:
        _echo_link(str(marker["url"]), call(ws, "dashboard_login", body), served_here=False)
        return
    _refuse_non_human(ws, as_name)  # before serving: an agent's name would get no link from the server either
    _serve_with_link(ws.root, port, lambda url: _echo_link(url, call(ws, "dashboard_login", body), served_here=True))


def _refuse_non_human(ws: Any, name: str) -> None:
    from amid.server.errors import Forbidden
    from amid.server.ledger import Ledger

    ledger = Ledger(ws.ledger_path, read_only=True)
    try:
        role = ledger.identities.role_of(name)
    finally:
        ledger.close()
    if role not in (None, "human"):
        raise Forbidden(
            f"as: got {name!r} with role {role}; expected a human identity (the dashboard is for people: "
            "amid token create NAME --role human)",
            field="as",
        )


def _echo_link(mcp_url: str, link: dict[str, object], *, served_here: bool) -> None:
    base = mcp_url.rsplit("/", 1)[0]
    click.echo(f"dashboard of {link['as']}: open this link once, within {float(str(link['valid_s'])):.0f} s:")
    click.echo(f"    {base}{link['path']}")
    if served_here:
        click.echo("serving the workspace until Ctrl-C")


def _serve_with_link(root: Path, port: int | None, announce_link: Callable[[str], None]) -> None:
    """`amid serve` in this process; once it listens, ask it for the link (the request waits in the
    socket's backlog until the server accepts it)."""
    import threading

    from amid.server.serve import serve_http
    from amid.server.settings import settings_from

    settings = settings_from({"workspace": root, "port": port})

    def announce(url: str) -> None:
        threading.Thread(target=_announce_safely, args=(announce_link, url), daemon=True).start()

    serve_http(settings, announce=announce)


def _announce_safely(announce_link: Callable[[str], None], url: str) -> None:
    from amid.server.errors import AmidError

    try:
        announce_link(url)
    except AmidError as exc:
        click.echo(f"amid: no login link: {exc.message}", err=True)
