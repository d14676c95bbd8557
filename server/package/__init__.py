"""The final model package (docs/ARCHITECTURE.md §12): `package/` built from the final attempt, and its check.

    builder.py           builds package/ in a temporary folder, renamed into place; ledger record
    evidence.py          what it is built from (ledger rows); who may be final; the best eligible
    layout.py, content.py, readme.py, environment.py   the files it holds
    finalize.py          the supervisor's builder (choose_final) and `amid finalize`
    verify.py, workspace_checks.py, rescore.py          `amid verify-package`
    cli.py, actions.py   the commands and their admin actions

`read_package_summary(package_dir)` is what other surfaces (the HTML report) show of a package.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_package_summary(package_dir: Path) -> dict[str, Any] | None:
    """The package at a glance, from its manifest and scores.json (None: no package there). Reads
    only; says nothing about integrity (that is `amid verify-package`)."""
    manifest_path = package_dir / "manifest.json"
    if not manifest_path.is_file():
        return None
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    scores_path = package_dir / "scores.json"
    scores = json.loads(scores_path.read_text(encoding="utf-8")) if scores_path.is_file() else {}
    files = manifest.get("files", [])
    return {
        "path": str(package_dir),
        "attempt_id": manifest.get("attempt_id"),
        "task_id": manifest.get("task_id"),
        "lane_id": manifest.get("lane_id"),
        "agent_id": manifest.get("agent_id"),
        "commit": manifest.get("commit"),
        "contract_hash": manifest.get("contract_hash"),
        "primary_metric": manifest.get("primary_metric"),
        "direction": manifest.get("direction"),
        "verified_primary_score": manifest.get("verified_primary_score"),
        "verified_metrics": manifest.get("verified_metrics", {}),
        "fold_scores": scores.get("folds", {}),
        "holdout": (scores.get("holdout") or {}).get("metrics", {}),
        "built_at": manifest.get("built_at"),
        "n_files": len(files),
        "size_bytes": sum(int(f.get("size_bytes", 0)) for f in files),
        "environment": manifest.get("environment", {}),
        "folders": sorted({str(f["path"]).split("/")[0] for f in files if "/" in str(f.get("path"))}),
    }
