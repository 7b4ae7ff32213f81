-- Batch worker failure handling. A chunk whose transaction fails outside any record (a deadlock, a serialization
-- failure, a lost connection, a refused statement of the runner's own) is retried after a backoff instead of
-- at once or forever: `failed_attempts` counts the batch's chunk failures in a row (reset by a chunk that
-- commits), `next_attempt_at` is when any instance may claim it again, and `last_error` (from 0003) says why.
-- After a bounded number of failures in a row the runner fails the batch's remaining records instead.
ALTER TABLE batches ADD COLUMN next_attempt_at timestamptz;
ALTER TABLE batches ADD COLUMN failed_attempts integer NOT NULL DEFAULT 0;
