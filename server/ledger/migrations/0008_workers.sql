-- Managed workers (docs/ARCHITECTURE.md §9 Lifecycle): the current state of each worker the supervisor runs, and every
-- transition (started, exited with its class, stalled, paused, resumed, delivered, retired) with its detail.

CREATE TABLE workers (
    agent_id    VARCHAR PRIMARY KEY,
    backend     VARCHAR NOT NULL,
    state       VARCHAR NOT NULL CHECK (state IN ('starting', 'running', 'idle', 'paused', 'backoff', 'retired')),
    session_id  VARCHAR,
    updated_at  TIMESTAMP NOT NULL
);

CREATE SEQUENCE worker_transition_seq START 1;
CREATE TABLE worker_transitions (
    transition_id BIGINT PRIMARY KEY DEFAULT nextval('worker_transition_seq'),
    agent_id      VARCHAR NOT NULL,
    event         VARCHAR NOT NULL,
    from_state    VARCHAR,
    to_state      VARCHAR NOT NULL,
    session_id    VARCHAR,
    detail        JSON,
    recorded_by   VARCHAR NOT NULL,
    recorded_at   TIMESTAMP NOT NULL
);

CREATE VIEW v_worker_transitions AS
SELECT transition_id, agent_id, event, from_state, to_state, session_id, detail, recorded_by, recorded_at
FROM worker_transitions;
