"""What the report reads from the ledger: one SELECT per figure or table, through one query function.

Every query goes through `Query`, a function from SQL to rows: on a ledger it is the human read
path (`Database.human_query`: one SELECT on a snapshot, never on the agents' connection, with a
time and row limit), so the report runs what `amid sql` may run, and a slow page never stalls
agents. The figures read the researcher views of migration 0009 where one fits.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from server.ledger import Ledger

Row = dict[str, Any]
Query = Callable[[str], list[Row]]
ROW_LIMIT = 50_000


def ledger_query(ledger: Ledger) -> Query:
    """Rows of one read-only SELECT on the ledger, as dicts."""

    def run(sql: str) -> list[Row]:
        page = ledger.db.human_query(sql, limit=ROW_LIMIT)
        return [dict(zip(page.columns, row, strict=True)) for row in page.rows]

    return run


def _state(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


SQL: dict[str, str] = {
    "state": "SELECT key, value FROM run_state WHERE key IN ('task_id', 'stage', 'started_at', 'primary_metric', "
    "'primary_direction')",
    "counts": "SELECT 'attempts' AS what, status::VARCHAR AS status, count(*) AS n FROM attempts GROUP BY ALL "
    "UNION ALL SELECT 'lanes', status, count(*) FROM lanes GROUP BY ALL "
    "UNION ALL SELECT 'reviews', status, count(*) FROM reviews GROUP BY ALL "
    "UNION ALL SELECT 'jobs', status, count(*) FROM jobs GROUP BY ALL "
    "UNION ALL SELECT 'agents', role, count(*) FROM agents GROUP BY ALL "
    "UNION ALL SELECT 'notes', kind, count(*) FROM notes GROUP BY ALL "
    "UNION ALL SELECT 'heartbeats', kind, count(*) FROM heartbeats GROUP BY ALL",
    # the run's own span: an agent's first event, and the stage change to done (people reading the run,
    # new tokens and server restarts come later and are not run time)
    "span": "SELECT (SELECT min(e.occurred_at) FROM events e JOIN agents a USING (agent_id) WHERE a.role = 'agent') "
    "AS first_activity, (SELECT max(decided_at) FROM stage_transitions WHERE to_stage = 'done') AS done_at",
    "evidence": "SELECT attempt_id, agent_id, lane_id, status::VARCHAR AS status, reviewed_at, verified_score "
    "FROM v_score_over_time ORDER BY reviewed_at, attempt_id",
    "lanes": "SELECT l.lane_id, l.title, l.tier, l.status, l.rank, s.n_attempts, s.n_accepted, s.n_rejected, "
    "s.n_revoked FROM lanes l JOIN v_lane_summary s USING (lane_id) ORDER BY l.rank DESC, l.lane_id",
    "attempts": "SELECT attempt_id, agent_id, lane_id, status::VARCHAR AS status, parent_attempt_id, created_at "
    "FROM attempts ORDER BY created_at, attempt_id",
    "reviews": "SELECT r.review_id, r.attempt_id, r.requested_by, r.requested_at, r.finished_at, r.verdict "
    "FROM reviews r ORDER BY r.requested_at",
    "heartbeats": "SELECT heartbeat_id, agent_id, kind, created_at FROM heartbeats ORDER BY created_at",
    "failed_checks": "SELECT code, severity, sum(n_failures) AS n FROM v_check_failures_by_code GROUP BY ALL "
    "ORDER BY n DESC, code",
    "declared_verified": "SELECT attempt_id, fold, declared_value AS declared, verified_value AS verified, "
    "status::VARCHAR AS status FROM v_declared_vs_verified WHERE is_primary AND scope = 'fold' "
    "AND declared_value IS NOT NULL AND verified_value IS NOT NULL ORDER BY attempt_id, fold",
    "holdout": "SELECT s.attempt_id, s.lane_id, s.status::VARCHAR AS status, s.verified_score AS validation, "
    "h.verified_value AS holdout FROM v_score_over_time s JOIN v_declared_vs_verified h "
    "ON h.attempt_id = s.attempt_id AND h.scope = 'holdout' AND h.is_primary ORDER BY s.attempt_id",
    "leaderboard": "SELECT attempt_id, agent_id, lane_id, commit_sha, verified_score, n_folds, score_se, tries, "
    "created_at FROM v_leaderboard",
    "final": "SELECT attempt_id, lane_id, verified_score, reason, package_path, decided_at FROM v_final_choice "
    "ORDER BY choice_id DESC LIMIT 1",
    "notes": "SELECT note_id, agent_id, kind, lane_id, title, created_at FROM notes ORDER BY note_id DESC LIMIT 12",
    "workers": "SELECT w.agent_id, w.backend, w.state, w.session_id, (SELECT t.detail FROM worker_transitions t "
    "WHERE t.agent_id = w.agent_id AND t.detail LIKE '%\"sandbox\"%' ORDER BY t.transition_id DESC LIMIT 1) "
    "AS launch FROM workers w ORDER BY w.agent_id",
}


@dataclass(frozen=True)
class RunData:
    """Everything the page shows, read in one pass (rows as the ledger returned them)."""

    state: dict[str, Any]
    counts: dict[str, dict[str, int]]
    first_activity: datetime | None  # an agent's first event
    done_at: datetime | None  # when the run reached the stage done; None while it runs
    tables: dict[str, list[Row]]
    truncated: tuple[str, ...] = ()  # tables that reached ROW_LIMIT rows: the ledger holds more

    @property
    def higher_better(self) -> bool:
        return self.state.get("primary_direction") != "lower_better"

    @property
    def metric(self) -> str:
        return str(self.state.get("primary_metric") or "primary metric")

    def best(self, values: list[float]) -> float:
        return max(values) if self.higher_better else min(values)


def load_run(query: Query) -> RunData:
    """Read the run for the report through `query`."""
    state = {row["key"]: _state(row["value"]) for row in query(SQL["state"])}
    counts: dict[str, dict[str, int]] = {}
    for row in query(SQL["counts"]):
        counts.setdefault(row["what"], {})[str(row["status"])] = int(row["n"])
    tables = {name: query(sql) for name, sql in SQL.items() if name not in {"state", "counts", "span"}}
    span = (query(SQL["span"]) or [{}])[0]
    truncated = tuple(name for name, rows in tables.items() if len(rows) >= ROW_LIMIT)
    return RunData(state=state, counts=counts, first_activity=as_time(span.get("first_activity")),
                   done_at=as_time(span.get("done_at")), tables=tables, truncated=truncated)  # fmt: skip


def as_time(value: Any) -> datetime | None:
    """A ledger time (datetime, or ISO text when it came through JSON) as a naive UTC datetime."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))
