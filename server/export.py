"""`amid export`: a Parquet snapshot of the ledger for humans, and the run as MLflow runs.

The Parquet export runs where the ledger is open (in the server through the admin action `export`,
or on the file when no server runs): the ledger is copied after a CHECKPOINT and every table and
view of the copy is written to `<out>/<name>.parquet` with a `manifest.json` of row counts. The
folder appears whole (written under a `.partial` name, then renamed), so a reader never sees half an
export. Token hashes are never exported (server/ledger/parquet.py).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from amid.server.errors import InvalidInput
from amid.server.ledger import Ledger, utcnow
from amid.server.ledger.parquet import write_parquet
from amid.server.workspace import Workspace

MANIFEST = "manifest.json"


def default_folder(workspace: Workspace) -> Path:
    return workspace.root / "exports" / utcnow().strftime("%Y%m%dT%H%M%S%fZ")


def export_parquet(ledger: Ledger, workspace: Workspace, out: Path | None = None) -> dict[str, Any]:
    """Write every table and view as Parquet into `out` (default exports/<UTC timestamp>/)."""
    target = (out or default_folder(workspace)).resolve()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InvalidInput(f"out: {target} exists and is not empty; pick a new folder", field="out")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        manifest = _write(ledger, workspace, partial)
        if target.is_dir():
            target.rmdir()  # empty (checked above)
        partial.rename(target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return {"folder": str(target), **manifest}


def _write(ledger: Ledger, workspace: Workspace, folder: Path) -> dict[str, Any]:
    workspace.control_dir.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=workspace.control_dir, prefix="export-") as scratch:
        snapshot = Path(scratch) / "ledger.duckdb"
        ledger.db.snapshot_to(snapshot)
        relations = write_parquet(snapshot, folder)
    manifest = {
        "exported_at": utcnow().isoformat(),
        "task_id": ledger.activity.get_state("task_id"),
        "relations": [asdict(r) for r in relations],
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest
