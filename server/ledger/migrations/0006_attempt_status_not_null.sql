-- The attempt status of 0005, NOT NULL again (a separate transaction: see 0005).
ALTER TABLE attempts ALTER COLUMN status SET NOT NULL;
