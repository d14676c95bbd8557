-- Re-audit (docs/ARCHITECTURE.md §7): an accepted attempt whose frozen evidence or stored commit later fails the
-- audit becomes `revoked`; every audit and every check it ran are kept.

-- DuckDB can neither drop nor add a CHECK constraint, so the status column is swapped for one of
-- an enum type holding the new status (its NOT NULL follows in 0006: DuckDB refuses it in the
-- transaction that filled the column).
CREATE TYPE attempt_status AS ENUM ('pending', 'in_review', 'accepted', 'rejected', 'withdrawn', 'revoked');
ALTER TABLE attempts RENAME COLUMN status TO status_v1;
ALTER TABLE attempts ADD COLUMN status attempt_status;
UPDATE attempts SET status = status_v1;
ALTER TABLE attempts DROP COLUMN status_v1;

-- What the attempt claimed, one digest per submit_attempt field: a reused idempotency key with
-- other content is refused, naming the fields that differ.
ALTER TABLE attempts ADD COLUMN content_digests JSON;

CREATE SEQUENCE audit_seq START 1;
CREATE TABLE audits (
    audit_id     VARCHAR PRIMARY KEY,
    requested_by VARCHAR NOT NULL,
    started_at   TIMESTAMP NOT NULL,
    finished_at  TIMESTAMP NOT NULL,
    n_attempts   INTEGER NOT NULL,
    n_revoked    INTEGER NOT NULL
);

-- Every check of every audited attempt, passed or not (COMMIT_UNKNOWN, ARTIFACT_MISSING, ARTIFACT_CHANGED).
CREATE TABLE audit_checks (
    audit_id   VARCHAR NOT NULL,
    attempt_id VARCHAR NOT NULL,
    code       VARCHAR NOT NULL,
    passed     BOOLEAN NOT NULL,
    message    VARCHAR NOT NULL,
    evidence   JSON
);

-- Attempts an audit revoked, with the codes that fired.
CREATE VIEW v_revocations AS
SELECT c.attempt_id, c.audit_id, au.finished_at AS revoked_at, string_agg(c.code, ',' ORDER BY c.code) AS codes,
       a.agent_id, a.lane_id, a.status
FROM audit_checks c JOIN audits au USING (audit_id) JOIN attempts a USING (attempt_id)
WHERE NOT c.passed
GROUP BY ALL;

CREATE OR REPLACE VIEW v_attempts AS
SELECT a.attempt_id, a.agent_id, a.lane_id, a.commit_sha, a.status, a.budget_class, a.parent_attempt_id,
       a.created_at, a.updated_at,
       (SELECT r.verdict FROM reviews r WHERE r.attempt_id = a.attempt_id AND r.status = 'done'
         ORDER BY r.finished_at DESC LIMIT 1) AS verdict,
       CASE WHEN a.status = 'revoked' THEN
           (SELECT v.codes FROM v_revocations v WHERE v.attempt_id = a.attempt_id
             ORDER BY v.revoked_at DESC LIMIT 1) END AS revoked_codes
FROM attempts a;

CREATE OR REPLACE VIEW v_lane_summary AS
SELECT l.lane_id, l.title, l.family, l.tier, l.status, l.origin,
       COUNT(a.attempt_id) AS n_attempts,
       COUNT(a.attempt_id) FILTER (WHERE a.status = 'accepted') AS n_accepted,
       COUNT(a.attempt_id) FILTER (WHERE a.status = 'rejected') AS n_rejected,
       COUNT(a.attempt_id) FILTER (WHERE a.status = 'revoked') AS n_revoked
FROM lanes l LEFT JOIN attempts a ON a.lane_id = l.lane_id
GROUP BY ALL;
