"""What the report reads from the ledger: one SELECT per figure or table, through one query function.

Every query goes through `Query`, a function from SQL to rows: on a ledger it is the human read
path (`Database.human_query`: one SELECT on a snapshot, never on the agents' connection, with a
time and row limit), so the report runs what `amid sql` may run, and a slow page never stalls
agents. The figures read the researcher views of migration 0009 where one fits.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from amid.server.ledger import Ledger

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


# What the page shows at most, whatever the ledger's size: a page a person opens must not grow with
# the whole history (100,000 attempts made a 21 MB page). Summary counts are SQL aggregates over all of it.
RECENT = 500  # newest attempts listed
ACCEPTED = 500  # accepted attempts the leaderboard lists, best ranked first
LINEAGE = 150  # newest attempts the lineage plot draws
POINTS = 1000  # points a plot draws one by one; past it the ledger aggregates them into time buckets
BUCKETS = 60  # time buckets of an aggregated plot, per lane or agent and kind

# Every attempt, finished review and heartbeat with its agent and time: the agent timeline's events.
TIMELINE_EVENTS = (
    "WITH ev AS (SELECT agent_id, 'attempt:' || status::VARCHAR AS kind, created_at AS ts, "
    "attempt_id || ' ' || status::VARCHAR AS tip FROM attempts "
    "UNION ALL SELECT requested_by, 'review', coalesce(finished_at, requested_at), "
    "review_id || ' of ' || attempt_id || ': ' || coalesce(verdict, 'not finished') FROM reviews "
    "UNION ALL SELECT agent_id, 'heartbeat', created_at, 'heartbeat: ' || kind FROM heartbeats), "
    "events AS (SELECT * FROM ev WHERE agent_id IS NOT NULL AND ts IS NOT NULL) "
)
# Verified scores over time; `accepted` decides the mark's fill and whether it counts for the best so far.
SCORED = (
    "WITH scored AS (SELECT attempt_id, lane_id, status::VARCHAR AS status, reviewed_at AS ts, verified_score "
    "FROM v_score_over_time WHERE verified_score IS NOT NULL AND reviewed_at IS NOT NULL) "
)
# A bucket index of `ts` over the span of `source`: BUCKETS equal slices of the run's time.
BUCKET_OF = "least(floor((epoch(ts) - span.lo) * {buckets} / span.width), {buckets} - 1)"
SPAN = "(SELECT epoch(min(ts)) AS lo, greatest(epoch(max(ts)) - epoch(min(ts)), 1e-6) AS width FROM {source}) span"

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
    "evidence": SCORED + "SELECT * FROM (SELECT attempt_id, lane_id, status, ts AS reviewed_at, verified_score, "
    "1 AS n, count(*) OVER () AS total FROM scored ORDER BY ts DESC, attempt_id DESC LIMIT {points}) "
    "ORDER BY reviewed_at, attempt_id",
    # per lane, verdict and time bucket: the best verified score (direction-aware) at the bucket's last review
    "evidence_buckets": SCORED + "SELECT NULL AS attempt_id, lane_id, CASE WHEN bool_or(status = 'accepted') "
    "THEN 'accepted' ELSE 'not accepted' END AS status, max(ts) AS reviewed_at, "
    "any_value(p.sign) * max(p.sign * verified_score) AS verified_score, count(*) AS n "
    f"FROM scored, {SPAN.format(source='scored')}, v_primary p GROUP BY lane_id, status = 'accepted', {BUCKET_OF} "
    "ORDER BY reviewed_at, lane_id",
    "lanes": "SELECT l.lane_id, l.title, l.tier, l.status, l.rank, s.n_attempts, s.n_accepted, s.n_rejected, "
    "s.n_revoked FROM lanes l JOIN v_lane_summary s USING (lane_id) ORDER BY l.rank DESC, l.lane_id",
    "lane_best": "SELECT lane_id, max(verified_score) AS highest, min(verified_score) AS lowest FROM v_leaderboard "
    "GROUP BY lane_id",
    "attempts": "SELECT a.attempt_id, a.agent_id, a.lane_id, a.status::VARCHAR AS status, a.parent_attempt_id, "
    "a.created_at, p.verified_score FROM (SELECT * FROM attempts ORDER BY created_at DESC, attempt_id DESC "
    "LIMIT {recent}) a LEFT JOIN v_verified_primary p USING (attempt_id) ORDER BY a.created_at DESC, a.attempt_id DESC",
    "timeline": TIMELINE_EVENTS + "SELECT * FROM (SELECT agent_id, kind, ts, ts AS last_at, tip, 1 AS n, "
    "count(*) OVER () AS total FROM events ORDER BY ts DESC LIMIT {points}) ORDER BY ts",
    "timeline_buckets": TIMELINE_EVENTS + "SELECT agent_id, kind, min(ts) AS ts, max(ts) AS last_at, NULL AS tip, "
    f"count(*) AS n FROM events, {SPAN.format(source='events')} GROUP BY agent_id, kind, {BUCKET_OF} ORDER BY ts",
    "failed_checks": "SELECT code, severity, sum(n_failures) AS n FROM v_check_failures_by_code GROUP BY ALL "
    "ORDER BY n DESC, code",
    "declared_verified": "SELECT * FROM (SELECT v.attempt_id, v.fold, v.declared_value AS declared, "
    "v.verified_value AS verified, v.status::VARCHAR AS status, count(*) OVER () AS total "
    "FROM v_declared_vs_verified v JOIN attempts a USING (attempt_id) WHERE v.is_primary AND v.scope = 'fold' "
    "AND v.declared_value IS NOT NULL AND v.verified_value IS NOT NULL "
    "ORDER BY a.created_at DESC, v.attempt_id DESC, v.fold LIMIT {points}) ORDER BY attempt_id, fold",
    "holdout": "SELECT * FROM (SELECT s.attempt_id, s.lane_id, s.status::VARCHAR AS status, "
    "s.verified_score AS validation, h.verified_value AS holdout, count(*) OVER () AS total "
    "FROM v_score_over_time s JOIN v_declared_vs_verified h ON h.attempt_id = s.attempt_id "
    "AND h.scope = 'holdout' AND h.is_primary ORDER BY s.created_at DESC, s.attempt_id DESC LIMIT {points}) "
    "ORDER BY attempt_id",
    "leaderboard": "SELECT attempt_id, agent_id, lane_id, commit_sha, verified_score, n_folds, score_se, tries, "
    "created_at FROM v_leaderboard",
    "final": "SELECT attempt_id, lane_id, verified_score, reason, package_path, decided_at FROM v_final_choice "
    "ORDER BY choice_id DESC LIMIT 1",
    "notes": "SELECT note_id, agent_id, kind, lane_id, title, created_at FROM notes ORDER BY note_id DESC LIMIT 12",
    "workers": "SELECT w.agent_id, w.backend, w.state, w.session_id, (SELECT t.detail FROM worker_transitions t "
    "WHERE t.agent_id = w.agent_id AND t.detail LIKE '%\"sandbox\"%' ORDER BY t.transition_id DESC LIMIT 1) "
    "AS launch FROM workers w ORDER BY w.agent_id",
}
# Read instead of their one-by-one query when that one has more than POINTS rows.
BUCKETED = {"evidence": "evidence_buckets", "timeline": "timeline_buckets"}
# What the page reads once, not as a table of rows.
NOT_TABLES = {"state", "counts", "span", *BUCKETED.values()}


def sql(name: str) -> str:
    """The query `name` with the page's current limits (read now: tests lower them)."""
    return SQL[name].format(recent=RECENT, points=POINTS, buckets=BUCKETS)


@dataclass(frozen=True)
class RunData:
    """Everything the page shows, read in one pass (rows as the ledger returned them)."""

    state: dict[str, Any]
    counts: dict[str, dict[str, int]]
    first_activity: datetime | None  # an agent's first event
    done_at: datetime | None  # when the run reached the stage done; None while it runs
    tables: dict[str, list[Row]]
    truncated: tuple[str, ...] = ()  # tables that reached ROW_LIMIT rows: the ledger holds more
    totals: dict[str, int] = field(default_factory=dict)  # rows the ledger has, where a table shows fewer
    bucketed: tuple[str, ...] = ()  # tables read as time-bucket aggregates: one row per bucket, `n` in it

    @property
    def higher_better(self) -> bool:
        return self.state.get("primary_direction") != "lower_better"

    @property
    def metric(self) -> str:
        return str(self.state.get("primary_metric") or "primary metric")

    def best(self, values: list[float]) -> float:
        return max(values) if self.higher_better else min(values)

    @property
    def n_attempts(self) -> int:
        return sum(self.counts.get("attempts", {}).values())

    @property
    def n_accepted(self) -> int:
        return self.counts.get("attempts", {}).get("accepted", 0)

    def total(self, name: str) -> int:
        """How many rows the ledger has for table `name` (its rows on the page when it shows all)."""
        return self.totals.get(name, len(self.tables[name]))


def load_run(query: Query) -> RunData:
    """Read the run for the report through `query`: bounded reads, aggregates for the whole history."""
    state = {row["key"]: _state(row["value"]) for row in query(sql("state"))}
    counts: dict[str, dict[str, int]] = {}
    for row in query(sql("counts")):
        counts.setdefault(row["what"], {})[str(row["status"])] = int(row["n"])
    tables = {name: query(sql(name)) for name in SQL if name not in NOT_TABLES}
    totals = {name: int(rows[0]["total"]) for name, rows in tables.items() if rows and "total" in rows[0]}
    bucketed = tuple(name for name in BUCKETED if totals.get(name, 0) > len(tables[name]))
    for name in bucketed:  # too many points to draw one by one: the ledger aggregates them
        tables[name] = query(sql(BUCKETED[name]))
    span = (query(sql("span")) or [{}])[0]
    truncated = tuple(name for name, rows in tables.items() if len(rows) >= ROW_LIMIT)
    return RunData(
        state=state,
        counts=counts,
        first_activity=as_time(span.get("first_activity")),
        done_at=as_time(span.get("done_at")),
        tables=tables,
        truncated=truncated,
        totals=totals,
        bucketed=bucketed,
    )


def as_time(value: Any) -> datetime | None:
    """A ledger time (datetime, or ISO text when it came through JSON) as a naive UTC datetime."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))
