-- Views for what researchers ask of a run (docs/ARCHITECTURE.md §11; README "Querying the ledger"). Read-only; each
-- reads only ledger tables, so `amid export` writes each as Parquet and the report plots them.

-- The primary metric and its direction, as `amid init` recorded them from the contract; sign turns
-- "better" into "larger" (lower_better metrics are negated before max, and back after).
CREATE VIEW v_primary AS
SELECT json_extract_string((SELECT value FROM run_state WHERE key = 'primary_metric'), '$') AS metric,
       coalesce(json_extract_string((SELECT value FROM run_state WHERE key = 'primary_direction'), '$'),
                'higher_better') AS direction,
       CASE WHEN json_extract_string((SELECT value FROM run_state WHERE key = 'primary_direction'), '$')
                 = 'lower_better' THEN -1 ELSE 1 END AS sign;

-- The last finished review of each attempt: its verified rows are the attempt's verified evidence.
CREATE VIEW v_last_review AS
SELECT attempt_id, arg_max(review_id, finished_at) AS review_id, max(finished_at) AS reviewed_at
FROM reviews WHERE status = 'done' GROUP BY attempt_id;

-- Verified primary score of every reviewed attempt in submission order, with the best accepted score so
-- far in its lane, for its agent and in the run (direction-aware; rejected and revoked never count).
CREATE VIEW v_score_over_time AS
WITH scored AS (
    SELECT a.attempt_id, a.agent_id, a.lane_id, a.status, coalesce(a.budget_class, 'real') AS budget_class,
           a.created_at, r.reviewed_at, p.metric, p.direction, p.sign, avg(m.value) AS verified_score,
           count(*) AS n_folds
    FROM attempts a JOIN v_last_review r USING (attempt_id)
    JOIN metrics m ON m.review_id = r.review_id AND m.attempt_id = a.attempt_id
    CROSS JOIN v_primary p
    WHERE m.source = 'reviewer' AND m.scope = 'fold' AND m.metric = p.metric
    GROUP BY ALL
), counted AS (
    SELECT *, CASE WHEN status = 'accepted' THEN sign * verified_score END AS signed FROM scored
)
SELECT attempt_id, agent_id, lane_id, status, budget_class, created_at, reviewed_at, metric, direction,
       verified_score, n_folds,
       sign * max(signed) OVER (PARTITION BY lane_id ORDER BY created_at, attempt_id) AS lane_best_so_far,
       sign * max(signed) OVER (PARTITION BY agent_id ORDER BY created_at, attempt_id) AS agent_best_so_far,
       sign * max(signed) OVER (ORDER BY created_at, attempt_id) AS run_best_so_far,
       coalesce(signed > max(signed) OVER (PARTITION BY lane_id ORDER BY created_at, attempt_id
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), signed IS NOT NULL)
           AS new_lane_best
FROM counted;

-- Parent edges (attempt → the attempt it builds on), with depth and root of each chain and the
-- direction-aware improvement of the verified primary score over the parent.
CREATE VIEW v_lineage AS
WITH RECURSIVE chain(attempt_id, root_attempt_id, depth) AS (
    SELECT attempt_id, attempt_id, 0 FROM attempts WHERE parent_attempt_id IS NULL
    UNION ALL
    SELECT a.attempt_id, c.root_attempt_id, c.depth + 1
    FROM attempts a JOIN chain c ON a.parent_attempt_id = c.attempt_id
), score AS (
    SELECT attempt_id, verified_score FROM v_score_over_time
)
SELECT a.attempt_id, a.parent_attempt_id, c.root_attempt_id, c.depth, a.agent_id, p.agent_id AS parent_agent_id,
       a.lane_id, p.lane_id AS parent_lane_id, a.lane_id IS NOT DISTINCT FROM p.lane_id AS same_lane,
       a.status, p.status AS parent_status, s.verified_score, ps.verified_score AS parent_verified_score,
       (SELECT sign FROM v_primary) * (s.verified_score - ps.verified_score) AS improvement, a.created_at
FROM attempts a
LEFT JOIN attempts p ON p.attempt_id = a.parent_attempt_id
LEFT JOIN chain c ON c.attempt_id = a.attempt_id
LEFT JOIN score s ON s.attempt_id = a.attempt_id
LEFT JOIN score ps ON ps.attempt_id = a.parent_attempt_id
WHERE a.parent_attempt_id IS NOT NULL;

-- What the agent declared next to what the reviewer recomputed (its last review), per metric, scope
-- and fold; agreement: match (within 1e-9 relative), differs, declared_only, verified_only.
CREATE VIEW v_declared_vs_verified AS
WITH declared AS (
    SELECT attempt_id, scope, fold, metric, value FROM metrics WHERE source = 'agent'
), verified AS (
    SELECT m.attempt_id, m.scope, m.fold, m.metric, m.value
    FROM metrics m JOIN v_last_review r ON m.review_id = r.review_id AND m.attempt_id = r.attempt_id
    WHERE m.source = 'reviewer' AND m.scope IN ('fold', 'test', 'holdout')
), paired AS (
    SELECT coalesce(d.attempt_id, v.attempt_id) AS attempt_id, coalesce(d.scope, v.scope) AS scope,
           coalesce(d.fold, v.fold) AS fold, coalesce(d.metric, v.metric) AS metric,
           d.value AS declared_value, v.value AS verified_value
    FROM declared d FULL JOIN verified v
      ON d.attempt_id = v.attempt_id AND d.scope = v.scope AND d.fold IS NOT DISTINCT FROM v.fold
     AND d.metric = v.metric
)
SELECT x.attempt_id, a.agent_id, a.lane_id, a.status, x.scope, x.fold, x.metric,
       x.metric = (SELECT metric FROM v_primary) AS is_primary, x.declared_value, x.verified_value,
       x.verified_value - x.declared_value AS difference,
       CASE WHEN x.declared_value IS NULL THEN 'verified_only'
            WHEN x.verified_value IS NULL THEN 'declared_only'
            WHEN abs(x.verified_value - x.declared_value) <= 1e-9 * greatest(1, abs(x.verified_value)) THEN 'match'
            ELSE 'differs' END AS agreement
FROM paired x JOIN attempts a USING (attempt_id);

-- Failed checks counted by code, from reviews and from re-audits.
CREATE VIEW v_check_failures_by_code AS
WITH failures AS (
    SELECT 'review' AS source, c.code, c.severity, c.attempt_id, c.message, r.finished_at AS failed_at
    FROM check_results c JOIN reviews r USING (review_id) WHERE NOT c.passed
    UNION ALL
    SELECT 'audit', c.code, 'error', c.attempt_id, c.message, au.finished_at
    FROM audit_checks c JOIN audits au USING (audit_id) WHERE NOT c.passed
)
SELECT f.source, f.code, f.severity, count(*) AS n_failures, count(DISTINCT f.attempt_id) AS n_attempts,
       count(DISTINCT a.agent_id) AS n_agents, string_agg(DISTINCT a.lane_id, ',' ORDER BY a.lane_id) AS lanes,
       min(f.failed_at) AS first_at, max(f.failed_at) AS last_at, arg_max(f.message, f.failed_at) AS last_message
FROM failures f JOIN attempts a USING (attempt_id)
GROUP BY f.source, f.code, f.severity;

-- Every change of every lane's status with the time it held (until the next change, NULL while current):
-- created (open), claimed and released (open while no claim is active, unless a decision moved the lane on),
-- and supervisor decisions with their reason.
CREATE VIEW v_lane_states_over_time AS
WITH changes AS (
    SELECT lane_id, created_at AS changed_at, 'created' AS event, 'open' AS decided_status, proposed_by AS actor,
           NULL AS reason, 0 AS ord
    FROM lanes
    UNION ALL
    SELECT lane_id, claimed_at, 'claimed', NULL, agent_id, NULL, 1 FROM claims
    UNION ALL
    SELECT lane_id, released_at, 'released', NULL, agent_id, NULL, 2 FROM claims WHERE released_at IS NOT NULL
    UNION ALL
    SELECT lane_id, decided_at, 'decision', to_status, decided_by, reason, 3 FROM lane_decisions
), ordered AS (
    SELECT c.*, last_value(decided_status IGNORE NULLS) OVER (
               PARTITION BY lane_id ORDER BY changed_at, ord ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS base,
           (SELECT count(*) FROM claims k WHERE k.lane_id = c.lane_id AND k.claimed_at <= c.changed_at
              AND (k.released_at IS NULL OR k.released_at > c.changed_at)) AS active_claims
    FROM changes c
)
SELECT lane_id, changed_at, event,
       CASE WHEN event IN ('claimed', 'released') AND base IN ('open', 'claimed')
            THEN CASE WHEN active_claims > 0 THEN 'claimed' ELSE 'open' END
            ELSE base END AS status,
       actor, reason, active_claims,
       lead(changed_at) OVER (PARTITION BY lane_id ORDER BY changed_at, ord) AS until
FROM ordered;

-- One agent's day: its events (tool calls with their outcome), the reviews of its attempts, and its
-- managed worker's transitions, in time order with the gap since the previous entry.
CREATE VIEW v_agent_timeline AS
WITH entries AS (
    SELECT agent_id, occurred_at, 'event' AS source, kind, subject_type, subject_id,
           CAST(payload AS VARCHAR) AS detail
    FROM events WHERE agent_id IS NOT NULL
    UNION ALL
    SELECT a.agent_id, r.finished_at, 'review', 'review_' || r.status, 'attempt', r.attempt_id,
           coalesce(r.verdict, r.error)
    FROM reviews r JOIN attempts a USING (attempt_id) WHERE r.finished_at IS NOT NULL
    UNION ALL
    SELECT agent_id, recorded_at, 'worker', 'worker_' || event, 'worker', to_state, CAST(detail AS VARCHAR)
    FROM worker_transitions
)
SELECT agent_id, row_number() OVER (PARTITION BY agent_id ORDER BY occurred_at, source) AS seq, occurred_at, source, kind,
       subject_type, subject_id, detail,
       epoch(occurred_at) - epoch(lag(occurred_at) OVER (PARTITION BY agent_id ORDER BY occurred_at, source)) AS since_previous_s
FROM entries;

-- Verified per-fold scores of every metric (the attempt's last review), with the fold's trivial baseline
-- of the same metric when the reviewer computed one.
CREATE VIEW v_fold_scores AS
SELECT m.attempt_id, a.agent_id, a.lane_id, a.status, r.review_id, m.fold, m.metric,
       m.metric = (SELECT metric FROM v_primary) AS is_primary, m.value, m.n_cases, m.n_valid, m.n_nan, m.n_capped,
       (SELECT list({'predictor': b.predictor, 'value': b.value} ORDER BY b.predictor) FROM metrics b
         WHERE b.scope = 'baseline' AND b.fold = m.fold AND b.metric = m.metric) AS baselines
FROM metrics m JOIN v_last_review r ON m.review_id = r.review_id AND m.attempt_id = r.attempt_id
JOIN attempts a ON a.attempt_id = m.attempt_id
WHERE m.source = 'reviewer' AND m.scope = 'fold';
