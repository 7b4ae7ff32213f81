-- Money back (docs/design/money.md; docs/decisions.md, "Refunds and reversals"): refunds of a confirmed Payment,
-- decided by the provider outside any transaction (the refund worker), and reversals the provider records.

-- A refund of one Payment request's Payment, named by the Integration (or `unapplied-<request id>` for the
-- service's own refund of unapplied money). Created `pending`; the refund worker asks the provider and records
-- `succeeded` or `failed` (final). Only a succeeded refund moves balances.
CREATE TABLE refunds (
  client_code text NOT NULL,
  external_payment_request_id text NOT NULL,
  external_refund_id text NOT NULL,
  -- 1 on create, 2 once decided; change events carry it.
  revision bigint NOT NULL,
  currency text NOT NULL,
  amount_minor bigint NOT NULL CHECK (amount_minor > 0),
  reason text NOT NULL CHECK (reason IN ('requested_by_customer', 'duplicate', 'fraudulent', 'other', 'unapplied_funds')),
  status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
  -- The body as accepted: the identical-retry comparison.
  body jsonb NOT NULL,
  provider_refund_id text,
  failure_reason text,
  -- The worker's claim: attempts made, when the next may start (NULL: at once; on the base clock, as leases are),
  -- and the lease (token, expiry, holder's key: src/store/lease-holder.ts), so a killed process's claim is taken
  -- again. A pending refund with a provider_refund_id was accepted by the provider, which decides it later (its
  -- event): the worker does not claim it again.
  attempts int NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at timestamptz,
  last_error text,
  lease_token text,
  lease_expires_at timestamptz,
  lease_holder bigint,
  created_at timestamptz NOT NULL,
  decided_at timestamptz,
  PRIMARY KEY (client_code, external_payment_request_id, external_refund_id),
  FOREIGN KEY (client_code, external_payment_request_id) REFERENCES payments (client_code, external_payment_request_id),
  CHECK ((status = 'pending') = (decided_at IS NULL)),
  CHECK (status <> 'failed' OR failure_reason IS NOT NULL)
);
-- The refund worker's work list: pending refunds the provider has not accepted yet.
CREATE INDEX refunds_to_ask ON refunds (next_attempt_at) WHERE status = 'pending' AND provider_refund_id IS NULL;

-- What was taken back from each Payment: refunded (succeeded refunds) and reversed money, and where it came from
-- (unapplied money first, then allocated). The two sums agree; neither side ever exceeds the Payment's amount.
ALTER TABLE payments
  ADD COLUMN refunded_minor bigint NOT NULL DEFAULT 0 CHECK (refunded_minor >= 0),
  ADD COLUMN reversed_minor bigint NOT NULL DEFAULT 0 CHECK (reversed_minor >= 0),
  ADD COLUMN taken_back_unapplied_minor bigint NOT NULL DEFAULT 0 CHECK (taken_back_unapplied_minor >= 0),
  ADD COLUMN taken_back_allocated_minor bigint NOT NULL DEFAULT 0 CHECK (taken_back_allocated_minor >= 0),
  ADD CONSTRAINT payments_taken_back_within_amount CHECK (refunded_minor + reversed_minor <= amount_minor),
  ADD CONSTRAINT payments_taken_back_split CHECK (
    taken_back_unapplied_minor + taken_back_allocated_minor = refunded_minor + reversed_minor
    AND taken_back_unapplied_minor <= unapplied_minor
    AND taken_back_allocated_minor <= allocated_minor);
