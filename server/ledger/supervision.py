"""The supervisor's ledger state (docs/ARCHITECTURE.md §9): stages, lane decisions, idempotent heartbeats, the
final choice, and the evidence the supervisor decides on.

Every decision is one transaction that checks the state it starts from, so a supervisor killed and
restarted (or two of them racing) can repeat a decision without duplicating or reversing it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from amid.server.errors import Conflict, NotFound
from amid.server.ledger.database import Database, utcnow

STAGES = ("exploration", "exploitation", "finalization", "done")
LANE_DECISIONS = ("covered", "plateaued", "promoted", "challenger", "waived", "retired")


def _rows(cursor: Any) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@dataclass(frozen=True)
class EvidenceCursor:
    """Where a reader of the evidence stands: the last attempt change, heartbeat and note it has seen.
    Written as `a<seq>.h<id>.n<id>` (opaque to the reader)."""

    attempts: int
    heartbeats: int
    notes: int

    def __str__(self) -> str:
        return f"a{self.attempts}.h{self.heartbeats}.n{self.notes}"

    def ahead_of(self, other: EvidenceCursor) -> bool:
        """Whether this cursor has seen more than `other` in any part (it is another ledger's)."""
        return self.attempts > other.attempts or self.heartbeats > other.heartbeats or self.notes > other.notes

    @classmethod
    def parse(cls, text: str) -> EvidenceCursor | None:
        found = _CURSOR.fullmatch(text)
        return cls(*(int(found.group(i)) for i in (1, 2, 3))) if found else None


@dataclass
class EvidenceChanges:
    attempts: list[dict[str, Any]]
    complete: bool
    cursor: EvidenceCursor
    causes: list[dict[str, Any]]
    plateaus: list[dict[str, Any]]
    focus_notes: list[dict[str, Any]]
    tries: list[dict[str, Any]]


_CURSOR = re.compile(r"a(\d{1,18})\.h(\d{1,18})\.n(\d{1,18})")
_HEADS = (
    "SELECT (SELECT coalesce(max(change_seq), 0) FROM attempts) AS attempts, "
    "(SELECT coalesce(max(heartbeat_id), 0) FROM heartbeats) AS heartbeats, "
    "(SELECT coalesce(max(note_id), 0) FROM notes) AS notes"
)
# The evidence rows (v_evidence's columns) of a list of attempts, computed for those attempts only.
# v_evidence filtered afterwards computed every attempt's fold scores, checks and tries first: at 100,000
# attempts 68 ms of CPU for a 2-attempt answer, this 18 ms (and nothing when no attempt changed).
# `test_evidence_rows_equal_v_evidence` holds the two to the same rows. A ranked attempt's tries are
# left NULL: they are its (agent, lane) count, from _TRIES.
_EVIDENCE = """
WITH ids AS (SELECT unnest(?::VARCHAR[]) AS attempt_id),
primary_metric AS (SELECT json_extract_string(value, '$') AS metric FROM run_state WHERE key = 'primary_metric'),
done AS (SELECT attempt_id, review_id, finished_at, verdict FROM reviews
         WHERE status = 'done' AND attempt_id IN (SELECT attempt_id FROM ids)),
last_review AS (SELECT attempt_id, arg_max(review_id, finished_at) AS review_id, max(finished_at) AS reviewed_at
                FROM done GROUP BY attempt_id),
primary_folds AS (SELECT attempt_id, review_id, fold, value, case_se FROM metrics
                  WHERE attempt_id IN (SELECT attempt_id FROM ids) AND source = 'reviewer' AND scope = 'fold'
                    AND metric = (SELECT metric FROM primary_metric)),
folds AS (SELECT attempt_id, avg(value) AS verified_score, coalesce(stddev_samp(value), 0) AS fold_spread,
                 count(*) AS n_folds, list(value ORDER BY fold) AS fold_scores FROM primary_folds GROUP BY attempt_id),
spread AS (SELECT f.attempt_id,
                  CASE WHEN count(f.case_se) = count(*) THEN sqrt(sum(f.case_se * f.case_se)) / count(*)
                       WHEN count(*) > 1 THEN stddev_samp(f.value) / sqrt(count(*)) END AS score_se
           FROM primary_folds f JOIN last_review l ON l.attempt_id = f.attempt_id AND l.review_id = f.review_id
           GROUP BY f.attempt_id),
checks AS (SELECT review_id, bool_or(code = 'HOLDOUT_GAP') AS holdout_checked,
                  bool_or(code = 'HOLDOUT_GAP' AND NOT passed AND severity = 'error') AS holdout_failed,
                  string_agg(code, ',' ORDER BY code) FILTER (WHERE NOT passed AND severity = 'error') AS failed_codes
           FROM check_results WHERE review_id IN (SELECT review_id FROM last_review) GROUP BY review_id)
SELECT a.attempt_id, a.agent_id, a.lane_id, coalesce(a.budget_class, 'real') AS budget_class, a.status, a.created_at,
       r.review_id, r.reviewed_at, d.verdict, f.verified_score, f.fold_spread, f.n_folds, f.fold_scores,
       coalesce(c.holdout_checked, false) AS holdout_checked, NOT coalesce(c.holdout_failed, false) AS holdout_gated,
       c.failed_codes, s.score_se, CASE WHEN s.attempt_id IS NULL THEN 1 END AS tries, a.commit_sha,
       a.parent_attempt_id, a.change_seq
FROM attempts a
LEFT JOIN last_review r USING (attempt_id)
LEFT JOIN done d ON d.review_id = r.review_id
LEFT JOIN folds f USING (attempt_id)
LEFT JOIN spread s USING (attempt_id)
LEFT JOIN checks c ON c.review_id = r.review_id
WHERE a.attempt_id IN (SELECT attempt_id FROM ids)
"""
# An attempt without a finished review has no verdict, verified score or checks (the reviewer writes them
# with the review's end, in one transaction): its v_evidence row is its attempts row and these constants.
_REVIEWED = (
    "SELECT DISTINCT attempt_id FROM reviews WHERE status = 'done' AND attempt_id IN (SELECT unnest(?::VARCHAR[]))"
)
_UNREVIEWED = """
SELECT attempt_id, agent_id, lane_id, coalesce(budget_class, 'real') AS budget_class, status, created_at,
       NULL AS review_id, NULL AS reviewed_at, NULL AS verdict, NULL AS verified_score, NULL AS fold_spread,
       NULL AS n_folds, NULL AS fold_scores, false AS holdout_checked, true AS holdout_gated, NULL AS failed_codes,
       NULL AS score_se, 1 AS tries, commit_sha, parent_attempt_id, change_seq
FROM attempts WHERE attempt_id IN (SELECT unnest(?::VARCHAR[]))
"""
_WINDOW = (
    "SELECT attempt_id FROM (SELECT attempt_id FROM attempts ORDER BY created_at DESC, attempt_id DESC LIMIT ?) "
    "UNION SELECT attempt_id FROM attempts WHERE status = 'accepted'"
)
_CHANGED = "SELECT attempt_id FROM attempts WHERE change_seq > ? ORDER BY change_seq LIMIT ?"
_CAUSES = (
    "SELECT agent_id, kind, cause_key, heartbeat_id FROM heartbeats WHERE cause_key IS NOT NULL "
    "AND heartbeat_id > ? AND heartbeat_id <= ? ORDER BY heartbeat_id"
)
_PLATEAUS = (
    "SELECT heartbeat_id, agent_id, cause_key, created_at FROM heartbeats WHERE kind = 'plateau' "
    "AND heartbeat_id > ? AND heartbeat_id <= ? ORDER BY heartbeat_id"
)
_FOCUS = (
    "SELECT note_id, agent_id, lane_id, created_at FROM notes WHERE kind = 'focus' AND note_id > ? AND note_id <= ? "
    "ORDER BY note_id"
)
# Scored attempts per (agent, lane), as v_ranking counts them: a verified primary fold score from the
# attempt's last finished review. Read only when an answer holds a scored attempt (a try was added).
_TRIES = """
WITH primary_metric AS (SELECT json_extract_string(value, '$') AS metric FROM run_state WHERE key = 'primary_metric'),
last_review AS (SELECT attempt_id, arg_max(review_id, finished_at) AS review_id FROM reviews WHERE status = 'done'
                GROUP BY attempt_id),
scored AS (SELECT DISTINCT m.attempt_id FROM metrics m JOIN last_review l USING (attempt_id)
           WHERE m.review_id = l.review_id AND m.source = 'reviewer' AND m.scope = 'fold'
             AND m.metric = (SELECT metric FROM primary_metric))
SELECT a.agent_id, a.lane_id, count(*) AS tries FROM attempts a JOIN scored USING (attempt_id)
GROUP BY a.agent_id, a.lane_id ORDER BY ALL
"""


def _evidence_rows(cur: Any, ids: list[str]) -> list[dict[str, Any]]:
    """v_evidence's rows of `ids`. Most changed attempts have no finished review yet (a submission, a
    review starting, a withdrawal): their rows are the attempts row alone, without the joins over every
    review, metric and check (at 100,000 attempts those cost 15-18 ms even for one attempt)."""
    if not ids:
        return []
    reviewed = [row[0] for row in cur.execute(_REVIEWED, [ids]).fetchall()]
    done = set(reviewed)
    rest = [attempt_id for attempt_id in ids if attempt_id not in done]
    rows = _rows(cur.execute(_EVIDENCE, [reviewed])) if reviewed else []
    return rows + (_rows(cur.execute(_UNREVIEWED, [rest])) if rest else [])


def final_choice_values(row: dict[str, Any], by: str) -> list[Any]:
    """A final choice's columns in the order both its INSERT and its forced UPDATE name them: attempt,
    lane, verified score, reason, audit, package, decided by (`by`), decided at (now)."""
    return [
        row["attempt_id"],
        row["lane_id"],
        row["verified_score"],
        row["reason"],
        row.get("audit_id"),
        row.get("package_path"),
        by,
        utcnow(),
    ]


class Supervision:
    def __init__(self, db: Database) -> None:
        self.db = db

    # --- stages --------------------------------------------------------------------------------
    def stage(self) -> str:
        # kept between writes, as the reads below: a supervisor asks every few seconds, mostly unchanged
        rows = self.db.cached_fetchall("SELECT value FROM run_state WHERE key = 'stage'")
        return str(json.loads(rows[0]["value"])) if rows else "exploration"

    def set_stage(self, from_stage: str, to_stage: str, reason: str, decided_by: str) -> bool:
        """Move the run from `from_stage` to `to_stage`; False when it is already there (a repeat).
        Stages only move forward; a move from a stage the run is not in is a Conflict."""
        with self.db.transaction() as cur:
            raw = cur.execute("SELECT value FROM run_state WHERE key = 'stage'").fetchone()
            current = str(json.loads(raw[0])) if raw else "exploration"
            if current == to_stage:
                return False
            if current != from_stage or STAGES.index(to_stage) <= STAGES.index(from_stage):
                raise Conflict(
                    f"to_stage: the run is in {current!r}; cannot move {from_stage!r} → {to_stage!r} "
                    f"(stages go forward: {' → '.join(STAGES)})",
                    field="to_stage",
                )
            now = utcnow()
            cur.execute("INSERT OR REPLACE INTO run_state VALUES ('stage', ?, ?)", [json.dumps(to_stage), now])
            cur.execute(
                "INSERT INTO stage_transitions (from_stage, to_stage, reason, decided_by, decided_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [current, to_stage, reason, decided_by, now],
            )
        return True

    def stage_transitions(self) -> list[dict[str, Any]]:
        return self.db.cached_fetchall("SELECT * FROM v_stage_transitions ORDER BY transition_id")

    # --- lanes ---------------------------------------------------------------------------------
    def decide_lane(self, lane_id: str, to_status: str, reason: str, evidence: dict[str, Any], by: str) -> bool:
        """Set a lane's status by a supervisor decision; False when it already has that status."""
        with self.db.transaction() as cur:
            row = cur.execute("SELECT status FROM lanes WHERE lane_id = ?", [lane_id]).fetchone()
            if row is None:
                raise NotFound(f"lane_id: no lane {lane_id!r}; see list_lanes", field="lane_id")
            if row[0] == to_status:
                return False
            now = utcnow()
            cur.execute("UPDATE lanes SET status = ?, updated_at = ? WHERE lane_id = ?", [to_status, now, lane_id])
            cur.execute(
                "INSERT INTO lane_decisions (lane_id, from_status, to_status, reason, evidence, decided_by, "
                "decided_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [lane_id, row[0], to_status, reason, json.dumps(evidence, default=str), by, now],
            )
        return True

    def lane_decisions(self) -> list[dict[str, Any]]:
        return self.db.fetchall("SELECT * FROM v_lane_decisions ORDER BY decision_id")

    # --- heartbeats ----------------------------------------------------------------------------
    def heartbeat_once(
        self, agent_id: str, kind: str, prompt: str, sent_by: str, cause_key: str | None
    ) -> tuple[int, bool]:
        """Queue a heartbeat; with a cause key, at most one per (agent, cause): (heartbeat_id, created)."""
        with self.db.transaction() as cur:
            if cause_key is not None:
                known = cur.execute(
                    "SELECT heartbeat_id FROM heartbeats WHERE agent_id = ? AND cause_key = ?", [agent_id, cause_key]
                ).fetchone()
                if known is not None:
                    return int(known[0]), False
            row = cur.execute(
                "INSERT INTO heartbeats (agent_id, kind, prompt, sent_by, trigger, created_at, cause_key) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING heartbeat_id",
                [agent_id, kind, prompt, sent_by, json.dumps({"cause": cause_key}), utcnow(), cause_key],
            ).fetchone()
            assert row is not None
        return int(row[0]), True

    def heartbeat_causes(self) -> list[dict[str, Any]]:
        return self.db.fetchall(
            "SELECT agent_id, kind, cause_key, heartbeat_id FROM heartbeats WHERE cause_key IS NOT NULL "
            "ORDER BY heartbeat_id"
        )

    def focus_required(self, agent_id: str) -> dict[str, Any] | None:
        """The plateau heartbeat an agent has not answered with a focus note yet, if any."""
        return self.db.fetchone(
            "SELECT h.heartbeat_id, h.created_at, h.cause_key FROM heartbeats h WHERE h.agent_id = ? "
            "AND h.kind = 'plateau' AND NOT EXISTS (SELECT 1 FROM notes n WHERE n.agent_id = h.agent_id "
            "AND n.kind = 'focus' AND n.created_at >= h.created_at) ORDER BY h.heartbeat_id DESC LIMIT 1",
            [agent_id],
        )

    def focus_notes(self) -> list[dict[str, Any]]:
        return self.db.fetchall(
            "SELECT note_id, agent_id, lane_id, created_at FROM notes WHERE kind = 'focus' ORDER BY note_id"
        )

    def plateau_heartbeats(self) -> list[dict[str, Any]]:
        return self.db.fetchall(
            "SELECT heartbeat_id, agent_id, cause_key, created_at FROM heartbeats WHERE kind = 'plateau' "
            "ORDER BY heartbeat_id"
        )

    # --- reviews in flight ---------------------------------------------------------------------
    def pending_reviews(self, agent_id: str, except_attempt: str | None = None) -> list[str]:
        """Attempts of the agent whose review is queued or running (the per-agent cap counts these)."""
        rows = self.db.fetchall(
            "SELECT DISTINCT r.attempt_id FROM reviews r JOIN attempts a USING (attempt_id) WHERE a.agent_id = ? "
            "AND r.status IN ('queued', 'running') AND (? IS NULL OR r.attempt_id <> ?) ORDER BY r.attempt_id",
            [agent_id, except_attempt, except_attempt],
        )
        return [str(r["attempt_id"]) for r in rows]

    # --- evidence and the final choice ---------------------------------------------------------
    def evidence_changes(self, since: EvidenceCursor | None, limit: int, page: int) -> EvidenceChanges:
        """What the supervisor's view needs, read in one snapshot. Without `since`: the window (the newest
        `limit` attempts and every accepted one) and every heartbeat cause and focus note. With it: only
        what changed after it, attempts in change order, at most `page` of them (`complete` False: ask
        again from the new cursor). The cursor is where this answer ends, so no change falls between
        two answers. The (agent, lane) try counts come whole whenever the answer holds a scored attempt (a
        new try moves the count of the older ones too); a ranked attempt's `tries` is None here, its pair's."""
        with self.db.transaction() as cur:
            head = _rows(cur.execute(_HEADS))[0]
            if since is None:
                ids = [row[0] for row in cur.execute(_WINDOW, [limit]).fetchall()]
                complete = True
            else:
                ids = [row[0] for row in cur.execute(_CHANGED, [since.attempts, page + 1]).fetchall()]
                complete = len(ids) <= page
                ids = ids[:page]
            attempts = _evidence_rows(cur, ids)
            if since is None:
                attempts.sort(key=lambda row: (row["created_at"], row["attempt_id"]))
            else:
                attempts.sort(key=lambda row: row["change_seq"])
            attempts_to = int(attempts[-1]["change_seq"]) if not complete else int(head["attempts"])
            cursor = EvidenceCursor(attempts_to, int(head["heartbeats"]), int(head["notes"]))
            after = since or EvidenceCursor(0, 0, 0)
            return EvidenceChanges(
                attempts=attempts,
                complete=complete,
                cursor=cursor,
                causes=_rows(cur.execute(_CAUSES, [after.heartbeats, cursor.heartbeats])),
                plateaus=_rows(cur.execute(_PLATEAUS, [after.heartbeats, cursor.heartbeats])),
                focus_notes=_rows(cur.execute(_FOCUS, [after.notes, cursor.notes])),
                tries=_rows(cur.execute(_TRIES)) if any(a["verified_score"] is not None for a in attempts) else [],
            )

    def choose_final(self, row: dict[str, Any], by: str) -> tuple[int, bool]:
        """Record the final choice once: a repeat returns the first (choice_id, created)."""
        with self.db.transaction() as cur:
            known = cur.execute("SELECT choice_id FROM final_choices ORDER BY choice_id LIMIT 1").fetchone()
            if known is not None:
                return int(known[0]), False
            chosen = cur.execute(
                "INSERT INTO final_choices (attempt_id, lane_id, verified_score, reason, audit_id, package_path, "
                "decided_by, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING choice_id",
                final_choice_values(row, by),
            ).fetchone()
        assert chosen is not None
        return int(chosen[0]), True

    def final_choice(self) -> dict[str, Any] | None:
        rows = self.db.cached_fetchall("SELECT * FROM v_final_choice ORDER BY choice_id LIMIT 1")
        return rows[0] if rows else None

    def agents(self) -> list[str]:
        rows = self.db.cached_fetchall("SELECT agent_id FROM agents WHERE role = 'agent' ORDER BY agent_id")
        return [str(r["agent_id"]) for r in rows]
