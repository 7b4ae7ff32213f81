-- Foundation: tenancy, credentials, limits, audit, customers and the change feed.
--
-- Tenant data is keyed by client_code first, so the schema can be distributed by client (for example
-- as Citus distributed tables with client_code as the distribution column). Operator-level tables that
-- belong to no single client (integrations, api_keys, audit_events, limit counters, settings) are small
-- reference or local tables.

CREATE TABLE settings (
  key text PRIMARY KEY,
  value text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE clients (
  client_code text PRIMARY KEY,
  name text,
  collection_enabled boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);

CREATE TABLE integrations (
  integration_id text PRIMARY KEY,
  name text NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);

-- Only a SHA-256 digest of each key is kept; the key itself is shown once at creation.
CREATE TABLE api_keys (
  api_key_id text PRIMARY KEY,
  integration_id text NOT NULL REFERENCES integrations (integration_id),
  environment text NOT NULL CHECK (environment IN ('sandbox', 'production')),
  digest text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL,
  revoked_at timestamptz
);
CREATE INDEX api_keys_integration ON api_keys (integration_id);

CREATE TABLE grants (
  client_code text NOT NULL REFERENCES clients (client_code),
  integration_id text NOT NULL REFERENCES integrations (integration_id),
  scopes text[] NOT NULL,
  ip_allowlist text[] NOT NULL DEFAULT '{}',
  status text NOT NULL CHECK (status IN ('active', 'revoked')),
  recovery_entry_mode text NOT NULL CHECK (recovery_entry_mode IN ('explicit_instruction', 'approved_rules')),
  feed_mode text NOT NULL CHECK (feed_mode IN ('transaction', 'snapshot_only')),
  industry_profile text NOT NULL CHECK (industry_profile IN ('credit_union')),
  receipt_delivery_owner text NOT NULL CHECK (receipt_delivery_owner IN ('partner', 'service')),
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, integration_id)
);
CREATE INDEX grants_integration ON grants (integration_id);

-- Audit events never hold a key, secret or URL: `details` carries only identifiers and a digest.
CREATE TABLE audit_events (
  seq bigserial PRIMARY KEY,
  audit_event_id uuid NOT NULL UNIQUE,
  client_code text,
  actor text NOT NULL,
  action text NOT NULL,
  target_type text NOT NULL,
  target_id text NOT NULL,
  details jsonb NOT NULL DEFAULT '{}',
  change_digest text NOT NULL,
  occurred_at timestamptz NOT NULL
);
CREATE INDEX audit_events_client ON audit_events (client_code, seq);

-- Fixed one-minute windows; `bucket` is 'key:<apiKeyId>' or 'client:<clientCode>'.
CREATE TABLE rate_limit_windows (
  bucket text NOT NULL,
  window_start timestamptz NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (bucket, window_start)
);

-- Concurrency leases: one row per occupied slot. The primary key makes claiming a slot atomic across
-- instances; `expires_at` frees the slot of a process that died mid-request.
CREATE TABLE inflight_requests (
  bucket text NOT NULL,
  slot integer NOT NULL,
  holder uuid NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (bucket, slot)
);

CREATE TABLE customers (
  client_code text NOT NULL REFERENCES clients (client_code),
  external_customer_id text NOT NULL,
  revision bigint NOT NULL,
  -- The normalized Source representation (contacts included: the active ones).
  representation jsonb NOT NULL,
  -- Contacts the Source omitted from a later write; kept, never returned.
  deactivated_contacts jsonb NOT NULL DEFAULT '[]',
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_customer_id)
);

-- The change feed. `seq` is allocated from feed_heads under a row lock held to commit, so within a
-- client the order of seq is the order of commit and a reader following seq never skips an event.
CREATE TABLE feed_heads (
  client_code text PRIMARY KEY REFERENCES clients (client_code),
  last_seq bigint NOT NULL DEFAULT 0
);

CREATE TABLE change_events (
  client_code text NOT NULL REFERENCES clients (client_code),
  seq bigint NOT NULL,
  event_id uuid NOT NULL,
  type text NOT NULL,
  resource_type text NOT NULL,
  resource_id text NOT NULL,
  revision bigint NOT NULL,
  occurred_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, seq)
);
CREATE INDEX change_events_occurred ON change_events (client_code, occurred_at);
