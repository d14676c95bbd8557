-- Attempts and reviews: what submit_attempt and the reviewer record beyond version 1.

-- Metric names the attempt claims to improve over its parent (checked by METRIC_DIRECTION).
ALTER TABLE attempts ADD COLUMN claims JSON;
-- artifacts/manifests/<attempt_id>.json: every frozen file of the attempt with its role and hash.
ALTER TABLE attempts ADD COLUMN manifest_path VARCHAR;

-- The fold a predictions file belongs to, and its path inside the declared folder.
ALTER TABLE artifacts ADD COLUMN fold INTEGER;
ALTER TABLE artifacts ADD COLUMN member VARCHAR;
-- sha256 of the decoded prediction values (set by the reviewer; finds re-encoded duplicates).
ALTER TABLE artifacts ADD COLUMN value_sha256 VARCHAR;

-- Which review wrote a reviewer row (baseline rows carry the review that first computed them).
ALTER TABLE metrics ADD COLUMN review_id VARCHAR;
-- Trivial-predictor scores of a fold (scope 'baseline'): which predictor, e.g. empty_mask.
ALTER TABLE metrics ADD COLUMN predictor VARCHAR;
