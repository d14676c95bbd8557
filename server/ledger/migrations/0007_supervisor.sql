-- The supervisor (docs/ARCHITECTURE.md §9): stage transitions, lane decisions, idempotent heartbeats and the final
-- choice, each with the reason it was made. The current stage stays in run_state('stage'); every
-- change of it is a row here, written in the same transaction.

CREATE SEQUENCE stage_transition_seq START 1;
CREATE TABLE stage_transitions (
    transition_id BIGINT PRIMARY KEY DEFAULT nextval('stage_transition_seq'),
    from_stage    VARCHAR NOT NULL,
    to_stage      VARCHAR NOT NULL CHECK (to_stage IN ('exploration', 'exploitation', 'finalization', 'done')),
    reason        VARCHAR NOT NULL,
    decided_by    VARCHAR NOT NULL,
    decided_at    TIMESTAMP NOT NULL
);

-- Supervisor decisions on lanes: covered, plateaued, promoted, challenger, waived, retired.
CREATE SEQUENCE lane_decision_seq START 1;
CREATE TABLE lane_decisions (
    decision_id BIGINT PRIMARY KEY DEFAULT nextval('lane_decision_seq'),
    lane_id     VARCHAR NOT NULL,
    from_status VARCHAR NOT NULL,
    to_status   VARCHAR NOT NULL,
    reason      VARCHAR NOT NULL,
    evidence    JSON,
    decided_by  VARCHAR NOT NULL,
    decided_at  TIMESTAMP NOT NULL
);

-- A heartbeat sent because of something (reflection:<review_id>, consolidation:<n>, plateau:…) is sent
-- once per agent and cause: a restarted supervisor that decides it again gets the first one back.
ALTER TABLE heartbeats ADD COLUMN cause_key VARCHAR;

-- The attempt finalization chose for the package, with the evidence it rested on.
CREATE SEQUENCE final_choice_seq START 1;
CREATE TABLE final_choices (
    choice_id      BIGINT PRIMARY KEY DEFAULT nextval('final_choice_seq'),
    attempt_id     VARCHAR NOT NULL,
    lane_id        VARCHAR,
    verified_score DOUBLE,
    reason         VARCHAR NOT NULL,
    audit_id       VARCHAR,
    package_path   VARCHAR,
    decided_by     VARCHAR NOT NULL,
    decided_at     TIMESTAMP NOT NULL
);

-- For humans: the current stage, and every transition with its reason.
CREATE VIEW v_stage AS
SELECT coalesce(json_extract_string((SELECT value FROM run_state WHERE key = 'stage'), '$'), 'exploration') AS stage,
       (SELECT max(decided_at) FROM stage_transitions) AS since,
       (SELECT count(*) FROM stage_transitions) AS n_transitions;

CREATE VIEW v_stage_transitions AS
SELECT transition_id, from_stage, to_stage, reason, decided_by, decided_at FROM stage_transitions;

CREATE VIEW v_lane_decisions AS
SELECT d.decision_id, d.lane_id, l.tier, d.from_status, d.to_status, d.reason, d.evidence, d.decided_by, d.decided_at
FROM lane_decisions d LEFT JOIN lanes l USING (lane_id);

-- Accepted attempts with their verified primary score, fold spread and whether the holdout gate passed
-- (holdout_checked: the review ran the gate; holdout_gated: it did not fail it as an error).
CREATE VIEW v_evidence AS
WITH last_review AS (
    SELECT attempt_id, arg_max(review_id, finished_at) AS review_id, max(finished_at) AS reviewed_at
    FROM reviews WHERE status = 'done' GROUP BY attempt_id
), folds AS (
    SELECT m.attempt_id, avg(m.value) AS verified_score, coalesce(stddev_samp(m.value), 0) AS fold_spread,
           count(*) AS n_folds, list(m.value ORDER BY m.fold) AS fold_scores
    FROM metrics m
    WHERE m.source = 'reviewer' AND m.scope = 'fold'
      AND m.metric = json_extract_string((SELECT value FROM run_state WHERE key = 'primary_metric'), '$')
    GROUP BY m.attempt_id
)
SELECT a.attempt_id, a.agent_id, a.lane_id, coalesce(a.budget_class, 'real') AS budget_class, a.status,
       a.created_at, r.review_id, r.reviewed_at, rv.verdict, f.verified_score, f.fold_spread, f.n_folds, f.fold_scores,
       EXISTS (SELECT 1 FROM check_results c WHERE c.review_id = r.review_id AND c.code = 'HOLDOUT_GAP')
           AS holdout_checked,
       NOT EXISTS (SELECT 1 FROM check_results c WHERE c.review_id = r.review_id AND c.code = 'HOLDOUT_GAP'
                   AND NOT c.passed AND c.severity = 'error') AS holdout_gated,
       (SELECT string_agg(c.code, ',' ORDER BY c.code) FROM check_results c
         WHERE c.review_id = r.review_id AND NOT c.passed AND c.severity = 'error') AS failed_codes
FROM attempts a
LEFT JOIN last_review r USING (attempt_id)
LEFT JOIN reviews rv ON rv.review_id = r.review_id
LEFT JOIN folds f USING (attempt_id);

CREATE VIEW v_final_choice AS
SELECT choice_id, attempt_id, lane_id, verified_score, reason, audit_id, package_path, decided_by, decided_at
FROM final_choices;
