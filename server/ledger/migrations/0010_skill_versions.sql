-- Skills (issue 12): every saved version of an agent's skill, attributed and hashed. The text lives in
-- memory/skills/<name>/versions/<version>.md; SKILL.md beside it is the latest version. Seeded skills
-- (author amid) have no rows: they come from the product's skills/ folder and no agent may replace them.
-- name_key folds case and dashes, so a near-identical name cannot shadow another author's skill.

CREATE TABLE skill_versions (
    name            VARCHAR NOT NULL,
    name_key        VARCHAR NOT NULL,
    version         INTEGER NOT NULL CHECK (version >= 1),
    author          VARCHAR NOT NULL,
    description     VARCHAR NOT NULL,
    sha256          VARCHAR NOT NULL,
    path            VARCHAR NOT NULL,
    idempotency_key VARCHAR,
    content_digests JSON NOT NULL,
    created_at      TIMESTAMP NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE VIEW v_skill_versions AS
SELECT name, version, author, description, sha256, path, created_at FROM skill_versions;
