-- Every cent that moves at the provider is recorded (issue 32; docs/decisions.md, "Money the provider moved"):
-- refunds the service did not ask for, the catch-up sweep's cursor per client, the read-back's pace per attempt, and
-- a configuration retired while its last attempts settle.

-- Who asked for a refund: the service (the API's PUT, the refund of unapplied money) or the provider itself (a refund
-- made in Stripe's Dashboard or another tool; `external_refund_id` is then the provider's refund id).
ALTER TABLE refunds ADD COLUMN origin text NOT NULL DEFAULT 'service' CHECK (origin IN ('service', 'provider'));

-- The catch-up sweep of one client's provider events (src/workers/provider-sync.ts): the last event it handled (it
-- resumes after it), and its lease, so two instances never sweep one client at once and a killed sweep's lease is
-- taken again once its holder's lock is gone or the lease expired.
CREATE TABLE provider_sync_cursors (
  client_code text NOT NULL REFERENCES clients (client_code),
  provider text NOT NULL,
  last_event_id text,
  -- The provider's creation time of that event (Unix seconds): a first sweep reads from the configuration's start.
  last_event_created bigint,
  lease_token text,
  lease_expires_at timestamptz,
  lease_holder bigint,
  last_run_at timestamptz,
  PRIMARY KEY (client_code, provider)
);

-- When the page last read an attempt back from the provider: at most once per 5 s per attempt.
ALTER TABLE provider_checkouts ADD COLUMN read_back_at timestamptz;

-- `DELETE .../payment-provider?force=true` while attempts are open: no new payment goes through it, but its events
-- are still verified and applied until its last attempt settles.
ALTER TABLE client_payment_providers ADD COLUMN retired_at timestamptz;
