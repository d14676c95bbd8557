"""`amid export`: Parquet files of every ledger table and view, or the attempts as MLflow runs."""

from __future__ import annotations

import json
from pathlib import Path

import click

from amid.server.cli_options import workspace_option


@click.command("export")
@workspace_option
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="folder for the Parquet files [WORKSPACE/exports/<UTC timestamp>/]",
)
@click.option(
    "--mlflow",
    "mlflow_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="instead: write the attempts as MLflow runs into this folder (mlflow.db, artifacts/)",
)
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
def export_command(workspace: Path, out: Path | None, mlflow_dir: Path | None, as_json: bool) -> None:
    """Snapshot the ledger as Parquet (readable by duckdb and pandas while the server runs), or export
    it to MLflow with --mlflow DIR. Goes through the server when it runs; token hashes never leave."""
    from amid.server.local_client import call
    from amid.server.workspace import Workspace

    ws = Workspace.open(workspace)
    if mlflow_dir is not None:
        from amid.server.mlflow_export import export_mlflow

        result = export_mlflow(ws, mlflow_dir)
        summary = f"{len(result['runs_created'])} run(s) added, {result['runs']} in all: {result['tracking_uri']}"
    else:
        result = call(ws, "export", {"out": str(out.resolve()) if out else None})
        rows = sum(r["rows"] for r in result["relations"])
        summary = f"{len(result['relations'])} tables and views, {rows} rows: {result['folder']}"
    click.echo(json.dumps(result, indent=1) if as_json else summary)
