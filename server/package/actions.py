"""The package's admin actions (server/admin.py `ACTIONS`): run in the server, or on the file when none runs."""

from __future__ import annotations

import math
from typing import Any

from amid.server.ledger import Ledger
from amid.server.ledger.packages import Packages
from amid.server.workspace import Workspace


def finalize(ledger: Ledger, workspace: Workspace, body: dict[str, Any]) -> dict[str, Any]:
    from amid.server.package.finalize import finalize as run

    attempt = body.get("attempt_id")
    return run(ledger, workspace, str(attempt) if attempt else None, force=bool(body.get("force")))


def package_record(ledger: Ledger, workspace: Workspace, body: dict[str, Any]) -> dict[str, Any]:
    """What verify-package compares a package with: the recorded builds, artifacts, commit, verified folds."""
    attempt_id = str(body.get("attempt_id", ""))
    if not ledger.attempts.exists(attempt_id):
        return {"builds": [], "artifacts": [], "commit": None, "verified_folds": {}}
    folds: dict[str, dict[str, float | None]] = {}
    for row in ledger.reviews.verified(attempt_id):
        if row["scope"] == "fold":
            value = None if row["value"] is None or math.isnan(row["value"]) else row["value"]
            folds.setdefault(str(row["fold"]), {})[row["metric"]] = value
    return {
        "builds": [_plain(b) for b in Packages(ledger.db).builds(attempt_id)],
        "artifacts": ledger.attempts.artifacts(attempt_id),
        "commit": ledger.attempts.get(attempt_id)["commit_sha"],
        "verified_folds": folds,
    }


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in row.items()}
