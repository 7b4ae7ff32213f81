-- The lists of docs/design/lists-and-notifications.md (docs/decisions.md, "Lists"): newest first by creation time, ties broken by
-- identifier, each list and each of its filters one backward index range scan on (client_code, [filter,]
-- created, id) (src/store/newest-first.ts; the EXPLAIN figures are in docs/performance.md, "Lists").

-- A recovery instruction's creation time: recorded_at moves with every revision (a Source PUT, a suspension), so
-- it cannot order a list by creation. Existing instructions take the time their first revision was recorded.
-- The default covers a row an instance of the previous version inserts during a rolling upgrade.
ALTER TABLE recovery_instructions ADD COLUMN created_at timestamptz;
UPDATE recovery_instructions i
   SET created_at = COALESCE(
         (SELECT min(h.recorded_at) FROM recovery_instruction_history h
           WHERE h.client_code = i.client_code AND h.external_instruction_id = i.external_instruction_id),
         i.recorded_at);
ALTER TABLE recovery_instructions ALTER COLUMN created_at SET NOT NULL, ALTER COLUMN created_at SET DEFAULT now();

CREATE INDEX payment_requests_created ON payment_requests (client_code, created_at, external_payment_request_id);
CREATE INDEX payment_requests_status_created ON payment_requests (client_code, status, created_at, external_payment_request_id);
-- Replaces (client_code, external_receivable_id): the same lookups by Receivable use its prefix.
CREATE INDEX payment_requests_receivable_created
  ON payment_requests (client_code, external_receivable_id, created_at, external_payment_request_id);
DROP INDEX payment_requests_receivable;

CREATE INDEX recovery_instructions_created ON recovery_instructions (client_code, created_at, external_instruction_id);

CREATE INDEX payment_reconciliations_accepted ON payment_reconciliations (client_code, accepted_at, external_reconciliation_id);
CREATE INDEX payment_reconciliations_status_accepted
  ON payment_reconciliations (client_code, status, accepted_at, external_reconciliation_id);
-- Replaces (client_code, external_payment_request_id): the same lookups by Payment request use its prefix.
CREATE INDEX payment_reconciliations_payment_accepted
  ON payment_reconciliations (client_code, external_payment_request_id, accepted_at, external_reconciliation_id);
DROP INDEX payment_reconciliations_payment;

CREATE INDEX financial_events_accepted ON financial_events (client_code, family, accepted_at, external_event_id);
-- Replaces (client_code, external_receivable_id): the lookups of every family by Receivable use its prefix.
CREATE INDEX financial_events_receivable_accepted
  ON financial_events (client_code, external_receivable_id, family, accepted_at, external_event_id);
DROP INDEX financial_events_receivable;

CREATE INDEX payment_observations_accepted ON payment_observations (client_code, accepted_at, external_event_id);
CREATE INDEX payment_observations_customer_accepted
  ON payment_observations (client_code, external_customer_id, accepted_at, external_event_id);

CREATE INDEX batches_submitted ON batches (client_code, submitted_at, external_batch_id);
CREATE INDEX batches_status_submitted ON batches (client_code, status, submitted_at, external_batch_id);
