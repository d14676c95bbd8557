"""`amid export --mlflow DIR`: every attempt as an MLflow run, read back by MLflow's own client.

One experiment per task in `DIR/mlflow.db` (MLflow's SQLite tracking store; its file store is in
maintenance mode) with artifacts under `DIR/artifacts/`. A run per attempt: the commit as
`mlflow.source.git.commit`, the parent attempt's run as `mlflow.parentRunId`, tags (agent, lane,
status, budget class, verdict), params, and metrics keyed by their source: `declared.<metric>` (the
agent's claim) and `verified.<metric>` (the reviewer's recomputation) per fold as the step,
`holdout.<metric>` and `test.<metric>`. Evidence goes by reference: `evidence.json` lists each frozen
file's sha256 and path in the workspace, never a copy. Exporting again into the same DIR adds the
new attempts and refreshes the status tags of the earlier ones.

Rows come from the human read path (server/queries.py), through the server when it runs.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from amid.server import queries
from amid.server.errors import InvalidInput
from amid.server.ledger.readonly import MAX_LIMIT
from amid.server.workspace import Workspace

RUN_STATUS = {"pending": "RUNNING", "in_review": "RUNNING", "withdrawn": "KILLED"}  # others: FINISHED
METRIC_PREFIX = {
    ("agent", "fold"): "declared",
    ("reviewer", "fold"): "verified",
    ("reviewer", "holdout"): "holdout",
    ("reviewer", "test"): "test",
}
MAX_PARAM_CHARS = 6000  # MLflow's limit on a param value

_ATTEMPTS = (
    "SELECT a.attempt_id, a.agent_id, a.lane_id, a.commit_sha, CAST(a.status AS VARCHAR) AS status, "
    "coalesce(a.budget_class, 'real') AS budget_class, a.parent_attempt_id, a.created_at, a.updated_at, "
    "CAST(a.folds AS VARCHAR) AS folds, CAST(a.inference_command AS VARCHAR) AS inference_command, "
    "CAST(a.claims AS VARCHAR) AS claims, a.summary, a.manifest_path, v.verdict, v.revoked_codes "
    "FROM attempts a JOIN v_attempts v USING (attempt_id) ORDER BY a.created_at, a.attempt_id"
)
_METRICS = (
    "SELECT m.attempt_id, m.source, m.scope, m.fold, m.metric, m.value, m.recorded_at FROM metrics m "
    "JOIN attempts a USING (attempt_id) LEFT JOIN v_last_review r USING (attempt_id) "
    "WHERE m.value IS NOT NULL AND isfinite(m.value) AND (m.source = 'agent' OR m.review_id = r.review_id) "
    "ORDER BY m.attempt_id, m.source, m.scope, m.metric, m.fold"
)
_ARTIFACTS = (
    "SELECT attempt_id, role, fold, member, declared_path, sha256, size_bytes, frozen_path FROM artifacts "
    "ORDER BY attempt_id, role, fold, member, declared_path"
)


def export_mlflow(workspace: Workspace, folder: Path) -> dict[str, Any]:
    """Write the run's attempts as MLflow runs into `folder`; the experiment and the runs made."""
    client = _client(folder)
    task_id = str(
        _rows(workspace, "SELECT json_extract_string(value, '$') AS v FROM run_state WHERE key = 'task_id'")[0]["v"]
    )
    experiment_id = _experiment(client, f"amid/{task_id}", folder)
    known = {
        run.data.tags["amid.attempt_id"]: run.info.run_id
        for run in client.search_runs([experiment_id], max_results=50_000)
    }
    metrics = _grouped(_rows(workspace, _METRICS))
    artifacts = _grouped(_rows(workspace, _ARTIFACTS))
    created = []
    for attempt in _rows(workspace, _ATTEMPTS):
        attempt_id = attempt["attempt_id"]
        tags = _tags(attempt, task_id, known)
        if attempt_id in known:
            client.log_batch(known[attempt_id], tags=[_tag(k, v) for k, v in tags.items()])
            continue
        known[attempt_id] = _new_run(client, experiment_id, attempt, tags, metrics[attempt_id], artifacts[attempt_id])
        created.append(attempt_id)
    return {
        "tracking_uri": _tracking_uri(folder),
        "experiment_id": experiment_id,
        "runs_created": created,
        "runs": len(known),
    }


def _client(folder: Path) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise InvalidInput("--mlflow: MLflow is not installed; pip install 'amid[mlflow]'", field="mlflow") from None
    folder.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=_tracking_uri(folder))


def _tracking_uri(folder: Path) -> str:
    return f"sqlite:///{(folder / 'mlflow.db').resolve()}"


def _experiment(client: Any, name: str, folder: Path) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    return str(client.create_experiment(name, artifact_location=(folder / "artifacts").resolve().as_uri()))


def _rows(workspace: Workspace, sql: str) -> list[dict[str, Any]]:
    """Every row, page by page (the read path returns at most MAX_LIMIT at once)."""
    out: list[dict[str, Any]] = []
    while True:
        page = queries.page(workspace, sql, (), limit=MAX_LIMIT, offset=len(out), time_limit_s=60.0)
        out += [dict(zip(page["columns"], row, strict=True)) for row in page["rows"]]
        if not page["has_more"]:
            return out


def _grouped(rows: list[dict[str, Any]]) -> defaultdict[str, list[dict[str, Any]]]:
    grouped: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[row["attempt_id"]].append(row)
    return grouped


def _tags(attempt: dict[str, Any], task_id: str, known: dict[str, str]) -> dict[str, str]:
    tags = {
        "mlflow.runName": attempt["attempt_id"],
        "mlflow.source.git.commit": attempt["commit_sha"],
        "mlflow.source.type": "JOB",
        "amid.task_id": task_id,
        "amid.attempt_id": attempt["attempt_id"],
        "agent": attempt["agent_id"],
        "lane": attempt["lane_id"] or "",
        "status": attempt["status"],
        "budget_class": attempt["budget_class"],
        "verdict": attempt["verdict"] or "",
        "revoked_codes": attempt["revoked_codes"] or "",
        "mlflow.note.content": attempt["summary"] or "",
    }
    parent = attempt["parent_attempt_id"]
    if parent and parent in known:
        tags["mlflow.parentRunId"] = known[parent]
    return tags


def _new_run(
    client: Any,
    experiment_id: str,
    attempt: dict[str, Any],
    tags: dict[str, str],
    metric_rows: list[dict[str, Any]],
    artifact_rows: list[dict[str, Any]],
) -> str:
    from mlflow.entities import Param

    run = client.create_run(experiment_id, start_time=_ms(attempt["created_at"]), tags=tags)
    run_id = str(run.info.run_id)
    params = {
        "folds": attempt["folds"],
        "parent_attempt_id": attempt["parent_attempt_id"] or "",
        "inference_command": attempt["inference_command"] or "",
        "claims": attempt["claims"] or "[]",
        "manifest_path": attempt["manifest_path"] or "",
    }
    client.log_batch(run_id, params=[Param(key, str(value)[:MAX_PARAM_CHARS]) for key, value in params.items()])
    metrics = _metrics(metric_rows)
    for start in range(0, len(metrics), 1000):  # MLflow takes at most 1000 metrics per batch
        client.log_batch(run_id, metrics=metrics[start : start + 1000])
    with tempfile.TemporaryDirectory() as scratch:
        listing = Path(scratch) / "evidence.json"
        listing.write_text(json.dumps({"attempt_id": attempt["attempt_id"], "artifacts": artifact_rows}, indent=1))
        client.log_artifact(run_id, str(listing))
    client.set_terminated(run_id, RUN_STATUS.get(attempt["status"], "FINISHED"), end_time=_ms(attempt["updated_at"]))
    return run_id


def _metrics(rows: list[dict[str, Any]]) -> list[Any]:
    from mlflow.entities import Metric

    out = []
    for row in rows:
        prefix = METRIC_PREFIX.get((row["source"], row["scope"]))
        if prefix is not None:
            step = row["fold"] if row["fold"] is not None else 0
            out.append(Metric(f"{prefix}.{row['metric']}", float(row["value"]), _ms(row["recorded_at"]), step))
    return out


def _tag(key: str, value: str) -> Any:
    from mlflow.entities import RunTag

    return RunTag(key, value)


def _ms(iso: str) -> int:
    """A ledger timestamp (naive UTC, ISO text on the read path) in epoch milliseconds."""
    return int(datetime.fromisoformat(iso).replace(tzinfo=UTC).timestamp() * 1000) if iso else 0
