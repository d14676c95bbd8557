"""Options every `amid` command module shares (kept apart from server/cli.py, which imports those modules)."""

from __future__ import annotations

from pathlib import Path

import click

workspace_option = click.option(
    "--workspace",
    "-w",
    type=click.Path(path_type=Path),
    envvar="AMID_WORKSPACE",
    required=True,
    help="the run's workspace folder (or AMID_WORKSPACE)",
)
