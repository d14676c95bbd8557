-- Every write to an attempts row (creation, review requested, verdict, back to pending, withdrawal,
-- revocation) takes the next number of one sequence, so a reader can ask for what changed since the
-- number it last saw: `run_evidence` answers a polling supervisor with the attempts changed since its
-- cursor instead of the whole window every tick. Writes go through one connection under one lock
-- (server/ledger/database.py), so the numbers follow commit order and no change hides below a cursor.
-- Existing rows are numbered by the column's default when it is added.

CREATE SEQUENCE attempt_changes START 1;
ALTER TABLE attempts ADD COLUMN change_seq BIGINT DEFAULT nextval('attempt_changes');

