"""`amid report`: write the run's report page (through the running server, or from the file itself)."""

from __future__ import annotations

from pathlib import Path

import click

from server.cli_options import workspace_option

REPORT_FILE = "report.html"


@click.command("report")
@workspace_option
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help=f"where to write the page [WORKSPACE/{REPORT_FILE}]")  # fmt: skip
def report_command(workspace: Path, out: Path | None) -> None:
    """Write one self-contained HTML page of the run: plots of scores, lanes, agents, checks and
    lineage, the leaderboard and the final package. No script, font or network is needed to read it."""
    from server.local_client import call
    from server.workspace import Workspace

    ws = Workspace.open(workspace)
    html = str(call(ws, "report", {})["html"])
    target = (out or ws.root / REPORT_FILE).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(html, encoding="utf-8")
    click.echo(f"report written to {target} ({len(html.encode()):,} bytes)")
