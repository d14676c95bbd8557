"""The JSON documents of a package (scores, lineage, manifest), made from its evidence."""

from __future__ import annotations

from typing import Any

from amid.server import __version__
from amid.server.ledger import utcnow
from amid.server.package.evidence import PackageEvidence

FORMAT = "amid-package/1"


def scores(ev: PackageEvidence) -> dict[str, Any]:
    """Per-fold verified scores, their means, and the holdout result, all from the reviewer's rows."""
    folds: dict[str, dict[str, float | None]] = {}
    for row in ev.verified:
        if row["scope"] == "fold":
            folds.setdefault(str(row["fold"]), {})[row["metric"]] = row["value"]
    metrics = sorted({m for per_fold in folds.values() for m in per_fold})
    return {
        "attempt_id": ev.attempt_id,
        "source": "reviewer",
        "review_id": ev.review["review_id"],
        "primary_metric": ev.run["primary_metric"],
        "direction": ev.run["primary_direction"],
        "folds": folds,
        "mean": {m: _mean([f.get(m) for f in folds.values()]) for m in metrics},
        "fold_rows": [_plain(r) for r in ev.verified if r["scope"] == "fold"],
        "holdout": {
            "metrics": {r["metric"]: r["value"] for r in ev.verified if r["scope"] == "holdout"},
            "rows": [_plain(r) for r in ev.verified if r["scope"] == "holdout"],
            "check": _plain(ev.holdout_check) if ev.holdout_check else None,
        },
    }


def lineage(ev: PackageEvidence) -> dict[str, Any]:
    return {
        "attempt_id": ev.attempt_id,
        "commit": ev.commit,
        "parents": [_plain(p) for p in ev.lineage],
    }


def manifest(ev: PackageEvidence, files: list[dict[str, Any]], environment: dict[str, Any], by: str) -> dict[str, Any]:
    lane = ev.lane or {}
    return {
        "format": FORMAT,
        "task_id": ev.run["task_id"],
        "contract_hash": ev.run["contract_hash"],
        "attempt_id": ev.attempt_id,
        "commit": ev.commit,
        "lane_id": ev.attempt["lane_id"],
        "lane_status": lane.get("status"),
        "agent_id": ev.attempt["agent_id"],
        "budget_class": ev.evidence["budget_class"],
        "review_id": ev.review["review_id"],
        "verdict": ev.evidence["verdict"],
        "primary_metric": ev.run["primary_metric"],
        "direction": ev.run["primary_direction"],
        "verified_primary_score": ev.evidence["verified_score"],
        "verified_metrics": scores(ev)["mean"],
        "inference_command": ev.attempt["inference_command"],
        "folds": ev.attempt["folds"],
        "built_at": utcnow().isoformat(),
        "built_by": by,
        "amid_version": __version__,
        "environment": environment,
        "artifacts": [
            {key: a[key] for key in ("role", "fold", "member", "declared_path", "sha256", "size_bytes")}
            | {"path": a["path"]}
            for a in ev_artifacts_with_paths(ev)
        ],
        "files": files,
    }


def ev_artifacts_with_paths(ev: PackageEvidence) -> list[dict[str, Any]]:
    from amid.server.package.layout import package_path

    return [{**a, "path": package_path(a)} for a in ev.artifacts]


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in row.items()}
