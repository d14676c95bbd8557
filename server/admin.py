"""Operations of the local CLI: tokens, status, read-only SQL, the re-audit.

They run in the server process (through the admin routes, because the server owns the DuckDB
file) or, when no server runs, directly on the file. Results are plain JSON-able dicts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from amid.server.context import Services
from amid.server.errors import InvalidInput
from amid.server.ledger import Ledger, utcnow
from amid.server.report.build import build_report
from amid.server.workspace import Workspace


def _jsonable(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


def status(ledger: Ledger, services: Services | None = None) -> dict[str, Any]:
    activity = ledger.activity
    return {
        "task_id": activity.get_state("task_id"),
        "stage": activity.get_state("stage"),
        "started_at": activity.get_state("started_at"),
        "contract_hash": activity.get_state("contract_hash"),
        "task_origin": activity.get_state("task_origin"),  # where it was imported from: never in task/
        "agents": [
            {k: _jsonable(v) for k, v in row.items()}
            for row in ledger.db.fetchall("SELECT agent_id, role FROM agents ORDER BY agent_id")
        ],
        "attempts": ledger.counts_by_status("attempts"),
        "lanes": ledger.counts_by_status("lanes"),
        "jobs": ledger.counts_by_status("jobs"),
        "events": int(ledger.db.scalar("SELECT count(*) FROM events") or 0),
        "workers": ledger.workers.summary(),  # managed workers: backend, state, session, sandbox
    }


def sql(ledger: Ledger, body: dict[str, Any]) -> dict[str, Any]:
    """One human SELECT on the ledger's read path (server/ledger/readonly.py), one page of rows."""
    params = body.get("params") or []
    if not isinstance(params, list):
        raise InvalidInput(f"params: got {params!r}; expected a list of values for ? placeholders", field="params")
    page = ledger.db.human_query(
        str(body.get("query", "")),
        params,
        limit=_number(body, "limit", int, 1000),
        offset=_number(body, "offset", int, 0),
        time_limit_s=_number(body, "time_limit_s", float, 10.0),
    )
    rows = [[_jsonable(v) for v in row] for row in page.rows]
    return {"columns": page.columns, "rows": rows, "offset": page.offset, "has_more": page.has_more}


def _number(body: dict[str, Any], name: str, kind: type[int] | type[float], default: float) -> Any:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{name}: got {value!r}; expected a number", field=name)
    return kind(value)


def export(ledger: Ledger, workspace: Workspace, body: dict[str, Any]) -> dict[str, Any]:
    """Parquet files of every table and view (server/export.py); `out`: an absolute folder or none."""
    from amid.server.export import export_parquet

    out = body.get("out")
    if out is not None and not (isinstance(out, str) and Path(out).is_absolute()):
        raise InvalidInput(f"out: got {out!r}; expected an absolute folder path", field="out")
    return export_parquet(ledger, workspace, Path(out) if out else None)


def token_create(ledger: Ledger, name: str, role: str) -> dict[str, Any]:
    token = ledger.identities.create_token(name, role)  # type: ignore[arg-type]
    ledger.activity.log("token_created", agent_id=None, subject_type="agent", subject_id=name, payload={"role": role})
    return {"agent_id": name, "role": role, "token": token}


def token_list(ledger: Ledger) -> dict[str, Any]:
    return {"tokens": [{k: _jsonable(v) for k, v in row.items()} for row in ledger.identities.list()]}


def token_revoke(ledger: Ledger, name: str) -> dict[str, Any]:
    revoked = ledger.identities.revoke(name)
    ledger.activity.log("token_revoked", agent_id=None, subject_type="agent", subject_id=name)
    return {"agent_id": name, "revoked": revoked}


def retire_agent(ledger: Ledger, name: str) -> dict[str, Any]:
    """A retired worker gives back its lane claims (each release an event) and loses its tokens."""
    now = utcnow()
    held = ledger.db.fetchall("SELECT DISTINCT lane_id FROM claims WHERE agent_id = ? AND released_at IS NULL", [name])
    released = sorted(str(row["lane_id"]) for row in held if ledger.lanes.release(row["lane_id"], name, now))
    for lane_id in released:
        ledger.activity.log(
            "lane_released",
            agent_id=None,
            subject_type="lane",
            subject_id=lane_id,
            payload={"agent_id": name, "reason": "worker retired"},
        )
    live = ledger.db.scalar("SELECT count(*) FROM tokens WHERE agent_id = ? AND revoked_at IS NULL", [name])
    revoked = token_revoke(ledger, name)["revoked"] if live else 0
    return {"agent_id": name, "released": released, "revoked": revoked}


def audit(ledger: Ledger, workspace: Workspace) -> dict[str, Any]:
    from amid.server.reviewer.audit import audit as run_audit

    return run_audit(ledger, workspace).model_dump(mode="json")


def package_action(name: str, ledger: Ledger, workspace: Workspace, body: dict[str, Any]) -> dict[str, Any]:
    """The final package's actions (server/package/actions.py): finalize, package_record."""
    from amid.server.package import actions

    result: dict[str, Any] = getattr(actions, name)(ledger, workspace, body)
    return result


ACTIONS: dict[str, Callable[[Ledger, Workspace, dict[str, Any]], dict[str, Any]]] = {
    "status": lambda ledger, ws, body: status(ledger),
    "sql": lambda ledger, ws, body: sql(ledger, body),
    "token_create": lambda ledger, ws, body: token_create(ledger, str(body.get("name")), str(body.get("role"))),
    "token_list": lambda ledger, ws, body: token_list(ledger),
    "token_revoke": lambda ledger, ws, body: token_revoke(ledger, str(body.get("name"))),
    "retire_agent": lambda ledger, ws, body: retire_agent(ledger, str(body.get("name"))),
    "audit": lambda ledger, ws, body: audit(ledger, ws),
    "finalize": lambda ledger, ws, body: package_action("finalize", ledger, ws, body),
    "package_record": lambda ledger, ws, body: package_action("package_record", ledger, ws, body),
    "report": lambda ledger, ws, body: {"html": build_report(ledger, ws)},
    "export": lambda ledger, ws, body: export(ledger, ws, body),
}
# seconds the CLI waits for the server (sql: its longest time limit); others get DEFAULT_WAIT_S
SLOW_ACTIONS = {"audit": 3600.0, "sql": 130.0, "finalize": 3600.0, "export": 3600.0}
DEFAULT_WAIT_S = 30.0
SERVER_ONLY_ACTION = "dashboard_login"  # `amid dashboard`: a one-time browser login link


def dispatch(services: Services, action: str, body: dict[str, Any]) -> dict[str, Any]:
    if action == SERVER_ONLY_ACTION:  # login codes live in the server's memory, so only a server mints them
        from amid.server.report.dashboard import logins
        from amid.server.report.login import login_link

        return login_link(services.ledger, logins(services), body)
    if action not in ACTIONS:
        raise InvalidInput(f"action: {action!r} is unknown; expected one of {sorted(ACTIONS)}", field="action")
    return ACTIONS[action](services.ledger, services.workspace, body)
