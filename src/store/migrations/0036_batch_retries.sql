-- A retry batch (PUT .../batches/{id} with {retryOf}) holds the failed and blocked records of an earlier batch of
-- the same client; each remembers which record it retries (docs/decisions.md, "Retry only what failed"). Both null
-- on a record of an ordinary batch. No foreign key: the earlier record is named for the reader, never joined.
ALTER TABLE batch_records ADD COLUMN retried_from_batch text;
ALTER TABLE batch_records ADD COLUMN retried_from_position integer;
ALTER TABLE batch_records ADD CONSTRAINT batch_records_retried_from_check
  CHECK ((retried_from_batch IS NULL) = (retried_from_position IS NULL));
