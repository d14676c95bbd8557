-- Exploitation roles (docs/ARCHITECTURE.md §9): what the supervisor asked each agent to do in a stage — optimizer,
-- challenger, repair, support (exploitation) or finalizer (finalization) — with the lane and the
-- reason. A new row only when the role or lane changes; the latest row per agent is its role now.

CREATE SEQUENCE role_assignment_seq START 1;
CREATE TABLE role_assignments (
    assignment_id BIGINT PRIMARY KEY DEFAULT nextval('role_assignment_seq'),
    agent_id      VARCHAR NOT NULL,
    stage         VARCHAR NOT NULL CHECK (stage IN ('exploration', 'exploitation', 'finalization', 'done')),
    role          VARCHAR NOT NULL CHECK (role IN ('explorer', 'optimizer', 'challenger', 'repair', 'support',
                                                   'finalizer')),
    lane_id       VARCHAR,
    reason        VARCHAR NOT NULL,
    assigned_by   VARCHAR NOT NULL,
    assigned_at   TIMESTAMP NOT NULL
);

CREATE VIEW v_agent_roles AS
SELECT assignment_id, agent_id, stage, role, lane_id, reason, assigned_by, assigned_at,
       assignment_id = max(assignment_id) OVER (PARTITION BY agent_id) AS current
FROM role_assignments;
