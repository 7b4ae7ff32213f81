-- Asynchronous batches. The queue is this table: any instance claims a batch with
-- UPDATE .. WHERE id IN (SELECT .. FOR UPDATE SKIP LOCKED), holding a lease token and expiry.
-- A record's effect and its outcome commit in the same transaction, so no record runs twice.

CREATE TABLE batches (
  client_code text NOT NULL REFERENCES clients (client_code),
  external_batch_id text NOT NULL,
  integration_id text NOT NULL,
  body_digest text NOT NULL,
  status text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'partially_succeeded', 'failed')),
  submitted_at timestamptz NOT NULL,
  started_at timestamptz,
  completed_at timestamptz,
  lease_token uuid,
  lease_expires_at timestamptz,
  attempts integer NOT NULL DEFAULT 0,
  runner_id text,
  last_error text,
  PRIMARY KEY (client_code, external_batch_id)
);
CREATE INDEX batches_open ON batches (submitted_at) WHERE status IN ('queued', 'running');

CREATE TABLE batch_records (
  client_code text NOT NULL,
  external_batch_id text NOT NULL,
  position integer NOT NULL,
  record_id text NOT NULL,
  kind text NOT NULL,
  external_id text NOT NULL,
  depends_on text[] NOT NULL DEFAULT '{}',
  body jsonb NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed', 'dependency_failed')),
  http_status integer,
  problem_code text,
  blocked_by text,
  PRIMARY KEY (client_code, external_batch_id, position),
  FOREIGN KEY (client_code, external_batch_id) REFERENCES batches (client_code, external_batch_id)
);
