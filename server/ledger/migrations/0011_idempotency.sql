-- Idempotency keys of the write tools (docs/ARCHITECTURE.md §13): a call repeated with the same key by the same agent gets the
-- first call's result back (`created: false`) when its arguments are the same, and CONFLICT when they differ.
-- Kept in the ledger, so a client retrying after a server restart is answered the same way.

CREATE TABLE idempotency_keys (
    agent_id        VARCHAR NOT NULL,
    tool            VARCHAR NOT NULL,
    idempotency_key VARCHAR NOT NULL,
    request_digest  VARCHAR NOT NULL,
    result          JSON NOT NULL,
    created_at      TIMESTAMP NOT NULL,
    PRIMARY KEY (agent_id, tool, idempotency_key)
);
