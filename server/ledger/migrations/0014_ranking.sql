-- Ranking that accounts for noise and repetition: each verified fold metric keeps the standard
-- error of its mean from the per-case scores (case_se; cases grouped by patient where known), and
-- every attempt with a verified primary score gets the spread of that score (score_se, from its
-- last review) and the number of tries its agent made on its lane (tries: attempts the reviewer
-- scored). v_evidence also gains the commit and parent its lineage reads. The ranking itself (a Bonferroni-widened lower bound) is computed in server/ranking.py.

ALTER TABLE metrics ADD COLUMN case_se DOUBLE;

CREATE VIEW v_ranking AS
WITH last_review AS (
    SELECT attempt_id, arg_max(review_id, finished_at) AS review_id
    FROM reviews WHERE status = 'done' GROUP BY attempt_id
), primary_folds AS (
    SELECT m.attempt_id, m.value, m.case_se
    FROM metrics m JOIN last_review r ON r.attempt_id = m.attempt_id AND r.review_id = m.review_id
    WHERE m.source = 'reviewer' AND m.scope = 'fold'
      AND m.metric = json_extract_string((SELECT value FROM run_state WHERE key = 'primary_metric'), '$')
), spread AS (
    SELECT attempt_id,
           CASE WHEN count(case_se) = count(*) THEN sqrt(sum(case_se * case_se)) / count(*)
                WHEN count(*) > 1 THEN stddev_samp(value) / sqrt(count(*)) END AS score_se,
           count(case_se) = count(*) AS se_from_cases
    FROM primary_folds GROUP BY attempt_id
)
SELECT a.attempt_id, a.agent_id, a.lane_id, s.score_se, s.se_from_cases,
       count(*) OVER (PARTITION BY a.agent_id, a.lane_id) AS tries
FROM attempts a JOIN spread s USING (attempt_id);

CREATE OR REPLACE VIEW v_leaderboard AS
SELECT a.attempt_id, a.agent_id, a.lane_id, a.commit_sha, p.verified_score, p.n_folds, a.updated_at,
       k.score_se, coalesce(k.tries, 1) AS tries, a.created_at
FROM attempts a JOIN v_verified_primary p USING (attempt_id) LEFT JOIN v_ranking k USING (attempt_id)
WHERE a.status = 'accepted';

CREATE OR REPLACE VIEW v_evidence AS
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
         WHERE c.review_id = r.review_id AND NOT c.passed AND c.severity = 'error') AS failed_codes,
       k.score_se, coalesce(k.tries, 1) AS tries, a.commit_sha, a.parent_attempt_id
FROM attempts a
LEFT JOIN last_review r USING (attempt_id)
LEFT JOIN reviews rv ON rv.review_id = r.review_id
LEFT JOIN folds f USING (attempt_id)
LEFT JOIN v_ranking k USING (attempt_id);
