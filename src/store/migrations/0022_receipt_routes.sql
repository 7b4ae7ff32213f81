-- Receipt delivery to the Source (docs/design/receipt-delivery.md; src/resources/receipts, src/workers/receipt-dispatcher.ts):
-- one receipt-posting route per client, the receipts derived from committed facts, and every attempt.

-- The client's `vendor_receipt_posting` route. `integration_id` is the Integration that configured it: its grant
-- (active, receiptDeliveryOwner) governs delivery. Every PUT issues a new signing secret and a new confirmation
-- code and starts verification over.
CREATE TABLE receipt_routes (
  client_code text PRIMARY KEY REFERENCES clients (client_code),
  integration_id text NOT NULL,
  url text NOT NULL,
  state text NOT NULL CHECK (state IN ('unverified', 'verified', 'disabled')),
  disabled_reason text CHECK (disabled_reason IN ('grant_revoked', 'destination_unsafe', 'signing_secret_unreadable')),
  -- The signing secret, AES-256-GCM under the key ring (receipts/store.ts receiptSecretColumns); never in clear.
  secret_ciphertext text NOT NULL,
  -- SHA-256 (hex) of the one-time confirmation code the test receipt carries. The code itself is stored nowhere:
  -- the dispatcher derives it from the signing secret when it sends the test receipt.
  confirmation_digest text NOT NULL,
  -- 1 on the first PUT, +1 on each: names the configuration a test receipt belongs to.
  version integer NOT NULL,
  verified_at timestamptz,
  -- Change-feed events up to here have been looked at for receipts; set to the feed head when the route is
  -- verified, so receipts cover what is committed after the proof.
  scanned_seq bigint NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CHECK ((state = 'disabled') = (disabled_reason IS NOT NULL)),
  CHECK (state <> 'verified' OR verified_at IS NOT NULL),
  FOREIGN KEY (client_code, integration_id) REFERENCES grants (client_code, integration_id)
);
CREATE INDEX receipt_routes_verified ON receipt_routes (client_code) WHERE state = 'verified';

-- One row per receipt: `receipt_id` is stable (`rcpt_` + a digest of client, kind and source key), so every retry
-- carries the same one; the payload is fixed when the row is created. A test receipt (kind `test`) carries the
-- route's confirmation code and has no Payment request. Worker leases: lease_token, lease_expires_at, lease_holder
-- (src/store/lease-holder.ts).
CREATE TABLE receipt_deliveries (
  client_code text NOT NULL REFERENCES clients (client_code),
  receipt_id text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('test', 'payment', 'refund', 'reversal')),
  -- The fact the receipt reports: the Payment request id (payment), `<request id>/<refund id>` (refund),
  -- `<request id>/reversal/<Payment revision>` (reversal), the route version (test).
  source_key text NOT NULL,
  external_payment_request_id text,
  payload jsonb NOT NULL,
  -- Refund and reversal receipts: the money this one reports taken back, and (reversal) the Payment's cumulative
  -- reversed amount it reports up to: a Payment records reversals only as a running total (migration 0020), so a
  -- reversal's amount is what the total grew by since the last reversal receipt.
  taken_back_minor bigint,
  reversed_through_minor bigint,
  status text NOT NULL CHECK (status IN ('pending', 'delivered', 'abandoned')),
  round_attempts integer NOT NULL DEFAULT 0,
  attempt_count integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  last_error text,
  lease_token uuid,
  lease_expires_at timestamptz,
  lease_holder bigint,
  created_at timestamptz NOT NULL,
  completed_at timestamptz,
  PRIMARY KEY (client_code, receipt_id),
  UNIQUE (client_code, kind, source_key),
  CHECK ((kind = 'test') = (external_payment_request_id IS NULL))
);
-- The dispatcher's work list: due pending receipts per client.
CREATE INDEX receipt_deliveries_due ON receipt_deliveries (client_code, next_attempt_at) WHERE status = 'pending';
CREATE INDEX receipt_deliveries_request ON receipt_deliveries (client_code, external_payment_request_id);

-- Attempts (the table of migration 0009, which no code wrote to): one row per attempt of a receipt, keyed by the
-- receipt now that a Payment request can have several (its Payment's, its refunds', its reversals').
ALTER TABLE receipt_delivery_attempts DROP CONSTRAINT receipt_delivery_attempts_pkey;
ALTER TABLE receipt_delivery_attempts
  ALTER COLUMN external_payment_request_id DROP NOT NULL,
  ADD COLUMN receipt_id text,
  ADD COLUMN http_status integer,
  ADD COLUMN error_class text,
  ADD COLUMN next_attempt_at timestamptz;
UPDATE receipt_delivery_attempts SET receipt_id = 'rcpt_legacy_' || md5(client_code || '/' || external_payment_request_id)
 WHERE receipt_id IS NULL;
ALTER TABLE receipt_delivery_attempts ALTER COLUMN receipt_id SET NOT NULL, ADD PRIMARY KEY (client_code, receipt_id, attempt);
CREATE INDEX receipt_delivery_attempts_request ON receipt_delivery_attempts (client_code, external_payment_request_id);
