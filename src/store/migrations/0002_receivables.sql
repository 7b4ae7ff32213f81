-- Receivables, financial corrections, payment observations; the change feed's purge watermark.
-- Money is held as bigint minor units with its currency; never numeric or floating point.

CREATE TABLE receivables (
  client_code text NOT NULL REFERENCES clients (client_code),
  external_receivable_id text NOT NULL,
  revision bigint NOT NULL,
  status text NOT NULL CHECK (status IN ('active', 'paused', 'closed')),
  source_revision bigint NOT NULL,
  currency text NOT NULL,
  -- Last Source-declared balance (PUT or balance snapshot) moved by accepted financial events.
  source_amount_minor bigint NOT NULL CHECK (source_amount_minor >= 0),
  confirmed_unreconciled_minor bigint NOT NULL DEFAULT 0,
  receipt_acknowledged_minor bigint NOT NULL DEFAULT 0,
  -- The normalized body of the last accepted Receivable PUT (for identical-retry detection and read-back).
  representation jsonb NOT NULL,
  -- The last lifecycle command's reason and effective time (pause, resume, close, reopen).
  status_reason text,
  status_effective_at timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_receivable_id)
);
CREATE INDEX receivables_status ON receivables (client_code, status, external_receivable_id);

-- Who is responsible for which Receivable: restrictions on a Customer reach its Receivables through here.
CREATE TABLE receivable_customers (
  client_code text NOT NULL,
  external_customer_id text NOT NULL,
  external_receivable_id text NOT NULL,
  role text NOT NULL,
  PRIMARY KEY (client_code, external_customer_id, external_receivable_id),
  FOREIGN KEY (client_code, external_receivable_id) REFERENCES receivables (client_code, external_receivable_id) ON DELETE CASCADE
);
CREATE INDEX receivable_customers_receivable ON receivable_customers (client_code, external_receivable_id);

CREATE TABLE financial_events (
  client_code text NOT NULL REFERENCES clients (client_code),
  family text NOT NULL CHECK (family IN ('adjustment', 'credit_note', 'write_off')),
  external_event_id text NOT NULL,
  external_receivable_id text NOT NULL,
  -- Normalized request body; staff notes stay here and are never returned.
  body jsonb NOT NULL,
  signed_amount_minor bigint NOT NULL,
  accepted_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, family, external_event_id)
);
CREATE INDEX financial_events_receivable ON financial_events (client_code, external_receivable_id);

CREATE TABLE payment_observations (
  client_code text NOT NULL REFERENCES clients (client_code),
  external_event_id text NOT NULL,
  external_customer_id text NOT NULL,
  body jsonb NOT NULL,
  unapplied_minor bigint NOT NULL CHECK (unapplied_minor >= 0),
  accepted_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_event_id)
);

CREATE TABLE payment_observation_allocations (
  client_code text NOT NULL,
  external_event_id text NOT NULL,
  external_receivable_id text NOT NULL,
  amount_minor bigint NOT NULL,
  currency text NOT NULL,
  PRIMARY KEY (client_code, external_event_id, external_receivable_id),
  FOREIGN KEY (client_code, external_event_id) REFERENCES payment_observations (client_code, external_event_id)
);
CREATE INDEX payment_observation_allocations_receivable ON payment_observation_allocations (client_code, external_receivable_id);

-- Events at or below this sequence number were purged (retention): an older cursor has expired.
ALTER TABLE feed_heads ADD COLUMN purged_through_seq bigint NOT NULL DEFAULT 0;
