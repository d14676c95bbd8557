-- The final model package (docs/ARCHITECTURE.md §12): every build of package/ with the sha256 of its manifest.json,
-- so `amid verify-package -w` can tell a package whose files AND manifest were edited from the one
-- the server built. The final choice shows the hash of its package's latest build.
CREATE SEQUENCE package_seq START 1;
CREATE TABLE packages (
    package_id      BIGINT PRIMARY KEY DEFAULT nextval('package_seq'),
    attempt_id      VARCHAR NOT NULL,
    package_path    VARCHAR NOT NULL,
    manifest_sha256 VARCHAR NOT NULL,
    n_files         INTEGER NOT NULL,
    size_bytes      BIGINT NOT NULL,
    built_by        VARCHAR NOT NULL,
    built_at        TIMESTAMP NOT NULL
);

CREATE VIEW v_packages AS
SELECT package_id, attempt_id, package_path, manifest_sha256, n_files, size_bytes, built_by, built_at FROM packages;

CREATE OR REPLACE VIEW v_final_choice AS
SELECT f.choice_id, f.attempt_id, f.lane_id, f.verified_score, f.reason, f.audit_id, f.package_path, f.decided_by,
       f.decided_at,
       (SELECT arg_max(p.manifest_sha256, p.package_id) FROM packages p
         WHERE p.attempt_id = f.attempt_id AND p.package_path = f.package_path) AS package_sha256
FROM final_choices f;
