-- Webhook endpoints (one per Integration per Client) and the deliveries derived from the change feed.

CREATE TABLE webhook_endpoints (
  client_code text NOT NULL REFERENCES clients (client_code),
  integration_id text NOT NULL REFERENCES integrations (integration_id),
  url text NOT NULL,
  status text NOT NULL CHECK (status IN ('enabled', 'disabled')),
  -- null while enabled, and when the Integration disabled it itself.
  disabled_reason text CHECK (disabled_reason IN ('grant_revoked', 'destination_unsafe')),
  secret_version integer NOT NULL,
  -- Signing secrets, AES-256-GCM under the configured key (webhooks/secrets.ts); never stored in clear.
  secret_ciphertext text NOT NULL,
  -- The secret before the last rotation, still signing until previous_expires_at (24 hours).
  previous_secret_ciphertext text,
  previous_expires_at timestamptz,
  -- The feed sequence when the endpoint was (re)configured: only later events are notified.
  configured_seq bigint NOT NULL,
  -- Feed events up to here have been turned into deliveries (or passed over as unreadable).
  scanned_seq bigint NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, integration_id),
  FOREIGN KEY (client_code, integration_id) REFERENCES grants (client_code, integration_id)
);
CREATE INDEX webhook_endpoints_enabled ON webhook_endpoints (client_code, integration_id) WHERE status = 'enabled';

-- One delivery per endpoint per feed event. The event's identity and revision are copied so that the
-- delivery log outlives nothing it needs. Worker leases: lease_token + lease_expires_at.
CREATE TABLE webhook_deliveries (
  client_code text NOT NULL,
  integration_id text NOT NULL,
  delivery_id text NOT NULL,
  seq bigint NOT NULL,
  event_id uuid NOT NULL,
  type text NOT NULL,
  resource_type text NOT NULL,
  resource_id text NOT NULL,
  revision bigint NOT NULL,
  occurred_at timestamptz NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'delivered', 'abandoned', 'skipped')),
  -- Attempts in the current round (a manual retry or a replay starts a new round of the schedule).
  round_attempts integer NOT NULL DEFAULT 0,
  attempt_count integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  lease_token uuid,
  lease_expires_at timestamptz,
  last_error text,
  created_at timestamptz NOT NULL,
  completed_at timestamptz,
  PRIMARY KEY (client_code, integration_id, delivery_id),
  UNIQUE (client_code, integration_id, seq),
  FOREIGN KEY (client_code, integration_id) REFERENCES webhook_endpoints (client_code, integration_id)
);
-- The worker's work list: due pending deliveries per endpoint.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (client_code, integration_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (client_code, integration_id, event_id);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);

-- Every attempt: when, how long, the HTTP status or the error class. Never the URL, secret or signature.
CREATE TABLE webhook_attempts (
  client_code text NOT NULL,
  integration_id text NOT NULL,
  delivery_id text NOT NULL,
  attempt integer NOT NULL,
  attempted_at timestamptz NOT NULL,
  duration_ms integer NOT NULL,
  http_status integer,
  error_class text,
  PRIMARY KEY (client_code, integration_id, delivery_id, attempt),
  FOREIGN KEY (client_code, integration_id, delivery_id) REFERENCES webhook_deliveries (client_code, integration_id, delivery_id) ON DELETE CASCADE
);
