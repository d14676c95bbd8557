-- AMID ledger, version 1. Timestamps are UTC; paths are workspace-relative (docs/ARCHITECTURE.md §14).

CREATE TABLE run_state (
    key        VARCHAR PRIMARY KEY,
    value      JSON NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

CREATE TABLE agents (
    agent_id   VARCHAR PRIMARY KEY,
    role       VARCHAR NOT NULL CHECK (role IN ('agent', 'supervisor', 'human')),
    created_at TIMESTAMP NOT NULL,
    metadata   JSON
);

CREATE TABLE tokens (
    token_hash VARCHAR PRIMARY KEY,
    token_hint VARCHAR NOT NULL,
    agent_id   VARCHAR NOT NULL,
    role       VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL,
    revoked_at TIMESTAMP
);

CREATE SEQUENCE event_seq START 1;
CREATE TABLE events (
    event_id     BIGINT PRIMARY KEY DEFAULT nextval('event_seq'),
    occurred_at  TIMESTAMP NOT NULL,
    agent_id     VARCHAR,
    kind         VARCHAR NOT NULL,
    subject_type VARCHAR,
    subject_id   VARCHAR,
    payload      JSON
);

CREATE TABLE lanes (
    lane_id     VARCHAR PRIMARY KEY,
    title       VARCHAR NOT NULL,
    family      VARCHAR NOT NULL,
    tier        VARCHAR NOT NULL CHECK (tier IN ('primary', 'secondary', 'fallback')),
    status      VARCHAR NOT NULL CHECK (status IN ('open', 'claimed', 'covered', 'plateaued', 'promoted',
                                                   'challenger', 'waived', 'retired')),
    origin      VARCHAR NOT NULL CHECK (origin IN ('planner', 'agent')),
    proposed_by VARCHAR,
    template_id VARCHAR,
    rank        DOUBLE NOT NULL DEFAULT 0,
    lane_file   VARCHAR,
    spec        JSON,
    created_at  TIMESTAMP NOT NULL,
    updated_at  TIMESTAMP NOT NULL
);

CREATE SEQUENCE claim_seq START 1;
CREATE TABLE claims (
    claim_id    BIGINT PRIMARY KEY DEFAULT nextval('claim_seq'),
    lane_id     VARCHAR NOT NULL,
    agent_id    VARCHAR NOT NULL,
    claimed_at  TIMESTAMP NOT NULL,
    expires_at  TIMESTAMP NOT NULL,
    released_at TIMESTAMP
);

CREATE SEQUENCE attempt_seq START 1;
CREATE TABLE attempts (
    attempt_id        VARCHAR PRIMARY KEY,
    agent_id          VARCHAR NOT NULL,
    lane_id           VARCHAR,
    commit_sha        VARCHAR NOT NULL,
    folds             JSON NOT NULL,
    status            VARCHAR NOT NULL CHECK (status IN ('pending', 'in_review', 'accepted', 'rejected',
                                                         'withdrawn')),
    budget_class      VARCHAR,
    parent_attempt_id VARCHAR,
    inference_command JSON,
    idempotency_key   VARCHAR,
    summary           VARCHAR,
    created_at        TIMESTAMP NOT NULL,
    updated_at        TIMESTAMP NOT NULL
);

CREATE TABLE artifacts (
    attempt_id  VARCHAR NOT NULL,
    role        VARCHAR NOT NULL,
    declared_path VARCHAR NOT NULL,
    sha256      VARCHAR NOT NULL,
    size_bytes  BIGINT NOT NULL,
    frozen_path VARCHAR NOT NULL
);

CREATE TABLE metrics (
    attempt_id  VARCHAR NOT NULL,
    source      VARCHAR NOT NULL CHECK (source IN ('agent', 'reviewer')),
    scope       VARCHAR NOT NULL CHECK (scope IN ('fold', 'test', 'holdout', 'baseline')),
    fold        INTEGER,
    metric      VARCHAR NOT NULL,
    value       DOUBLE,
    n_cases     INTEGER,
    n_valid     INTEGER,
    n_nan       INTEGER,
    n_capped    INTEGER,
    recorded_at TIMESTAMP NOT NULL
);

CREATE SEQUENCE review_seq START 1;
CREATE TABLE reviews (
    review_id    VARCHAR PRIMARY KEY,
    attempt_id   VARCHAR NOT NULL,
    status       VARCHAR NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),
    verdict      VARCHAR CHECK (verdict IN ('accepted', 'rejected')),
    requested_by VARCHAR NOT NULL,
    requested_at TIMESTAMP NOT NULL,
    started_at   TIMESTAMP,
    finished_at  TIMESTAMP,
    report_path  VARCHAR,
    error        VARCHAR
);

CREATE TABLE check_results (
    review_id  VARCHAR NOT NULL,
    attempt_id VARCHAR NOT NULL,
    code       VARCHAR NOT NULL,
    passed     BOOLEAN NOT NULL,
    severity   VARCHAR NOT NULL CHECK (severity IN ('error', 'warning')),
    message    VARCHAR NOT NULL,
    evidence   JSON
);

CREATE TABLE jobs (
    job_id          VARCHAR PRIMARY KEY,
    agent_id        VARCHAR NOT NULL,
    status          VARCHAR NOT NULL,
    backend         VARCHAR NOT NULL,
    backend_job_id  VARCHAR,
    command         JSON NOT NULL,
    cwd             VARCHAR NOT NULL,
    gpus            INTEGER NOT NULL,
    gpu_uuids       JSON,
    tags            JSON,
    created_at      TIMESTAMP NOT NULL,
    started_at      TIMESTAMP,
    ended_at        TIMESTAMP,
    exit_code       INTEGER,
    wall_s          DOUBLE,
    peak_gpu_mem_mb DOUBLE,
    reason          VARCHAR
);

CREATE SEQUENCE note_seq START 1;
CREATE TABLE notes (
    note_id    BIGINT PRIMARY KEY DEFAULT nextval('note_seq'),
    agent_id   VARCHAR NOT NULL,
    kind       VARCHAR NOT NULL,
    lane_id    VARCHAR,
    title      VARCHAR NOT NULL,
    body       VARCHAR NOT NULL,
    data       JSON,
    created_at TIMESTAMP NOT NULL
);

CREATE SEQUENCE heartbeat_seq START 1;
CREATE TABLE heartbeats (
    heartbeat_id BIGINT PRIMARY KEY DEFAULT nextval('heartbeat_seq'),
    agent_id     VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL CHECK (kind IN ('reflection', 'consolidation', 'plateau', 'stage', 'custom')),
    prompt       VARCHAR NOT NULL,
    sent_by      VARCHAR NOT NULL,
    trigger      JSON,
    created_at   TIMESTAMP NOT NULL,
    delivered_at TIMESTAMP
);

CREATE VIEW v_attempts AS
SELECT a.attempt_id, a.agent_id, a.lane_id, a.commit_sha, a.status, a.budget_class, a.parent_attempt_id,
       a.created_at, a.updated_at,
       (SELECT r.verdict FROM reviews r WHERE r.attempt_id = a.attempt_id AND r.status = 'done'
         ORDER BY r.finished_at DESC LIMIT 1) AS verdict
FROM attempts a;

CREATE VIEW v_verified_primary AS
SELECT m.attempt_id, AVG(m.value) AS verified_score, COUNT(*) AS n_folds
FROM metrics m
WHERE m.source = 'reviewer' AND m.scope = 'fold'
  AND m.metric = json_extract_string((SELECT value FROM run_state WHERE key = 'primary_metric'), '$')
GROUP BY m.attempt_id;

CREATE VIEW v_leaderboard AS
SELECT a.attempt_id, a.agent_id, a.lane_id, a.commit_sha, p.verified_score, p.n_folds, a.updated_at
FROM attempts a JOIN v_verified_primary p USING (attempt_id)
WHERE a.status = 'accepted';

CREATE VIEW v_lane_summary AS
SELECT l.lane_id, l.title, l.family, l.tier, l.status, l.origin,
       COUNT(a.attempt_id) AS n_attempts,
       COUNT(a.attempt_id) FILTER (WHERE a.status = 'accepted') AS n_accepted,
       COUNT(a.attempt_id) FILTER (WHERE a.status = 'rejected') AS n_rejected
FROM lanes l LEFT JOIN attempts a ON a.lane_id = l.lane_id
GROUP BY ALL;

CREATE VIEW v_agent_activity AS
SELECT agent_id, COUNT(*) AS n_events, MIN(occurred_at) AS first_seen, MAX(occurred_at) AS last_seen,
       COUNT(*) FILTER (WHERE kind = 'tool_call') AS n_tool_calls
FROM events WHERE agent_id IS NOT NULL
GROUP BY agent_id;

CREATE VIEW v_failed_checks AS
SELECT c.attempt_id, c.review_id, c.code, c.severity, c.message, c.evidence, a.agent_id, a.lane_id
FROM check_results c JOIN attempts a USING (attempt_id)
WHERE NOT c.passed;

CREATE VIEW v_jobs AS
SELECT job_id, agent_id, status, backend, gpus, created_at, started_at, ended_at, exit_code, wall_s,
       peak_gpu_mem_mb, reason
FROM jobs;
