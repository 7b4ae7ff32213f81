-- Erasure of a debtor's personal data (docs/decisions.md, "Erasure of a Customer's personal data"): a recorded fact,
-- followed up in bounded chunks by the erasure worker (src/workers/erasure.ts).

-- When the Customer was erased: its row then keeps only identifiers and restriction types (the tombstone).
ALTER TABLE customers ADD COLUMN erased_at timestamptz;

-- One erasure per Customer, asked for by the Integration (`request`) or by PERSONAL_DATA_RETENTION_DAYS
-- (`retention`). `erased_strings`: the personal values the worker still has to find elsewhere (audit details),
-- cleared when it is done. `step` and `after_seq`: how far it got, so a restart resumes there.
CREATE TABLE customer_erasures (
  client_code text NOT NULL REFERENCES clients (client_code),
  external_customer_id text NOT NULL,
  cause text NOT NULL CHECK (cause IN ('request', 'retention')),
  status text NOT NULL CHECK (status IN ('pending', 'done')),
  step text NOT NULL DEFAULT 'batch_records' CHECK (step IN ('batch_records', 'payment_requests', 'audit', 'done')),
  after_seq bigint NOT NULL DEFAULT 0,
  erased_strings jsonb,
  requested_at timestamptz NOT NULL,
  completed_at timestamptz,
  attempts integer NOT NULL DEFAULT 0,
  lease_token uuid,
  lease_expires_at timestamptz,
  last_error text,
  PRIMARY KEY (client_code, external_customer_id),
  CHECK ((status = 'done') = (completed_at IS NOT NULL)),
  CHECK (status = 'pending' OR erased_strings IS NULL)
);
CREATE INDEX customer_erasures_pending ON customer_erasures (client_code, requested_at) WHERE status = 'pending';

-- A Customer's batch records, found without reading every record of the client's batches.
CREATE INDEX batch_records_resource ON batch_records (client_code, kind, external_id);
