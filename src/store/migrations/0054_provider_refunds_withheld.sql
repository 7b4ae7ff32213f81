-- Refunds made at the provider of money its Payment no longer held (issue 32's rule "whatever the provider did with
-- money is recorded"; docs/decisions.md, "A provider refund of money a dispute holds"; CI stop 42 found it). A refund
-- made in the Stripe Dashboard is recorded as far as the Payment still holds money (src/resources/refunds/provider-side.ts):
-- while a dispute's withdrawal holds the rest, the rest of the refund waits here. When the dispute is won and its funds
-- come back (src/resources/payments/reinstatement.ts), that money pays these refunds first: each part recorded then is
-- a refund of the Payment with origin `provider` (`recorded_minor` counts them), and only what is left is the
-- debtor's to be refunded by the service. A dispute lost keeps the row waiting: the money never came back.
-- One row per provider refund, written once, whichever of its events (refund.created, refund.updated) or the sweep
-- brings it first.
CREATE TABLE provider_refunds_withheld (
  client_code text NOT NULL,
  provider text NOT NULL CHECK (provider IN ('stripe')),
  provider_refund_id text NOT NULL,
  external_payment_request_id text NOT NULL,
  currency text NOT NULL,
  reason text NOT NULL CHECK (reason IN ('requested_by_customer', 'duplicate', 'fraudulent', 'other')),
  -- What the provider refunded beyond what the Payment held then.
  amount_minor bigint NOT NULL CHECK (amount_minor > 0),
  -- Of it, what money given back since has paid (recorded as refunds of the Payment).
  recorded_minor bigint NOT NULL DEFAULT 0 CHECK (recorded_minor >= 0 AND recorded_minor <= amount_minor),
  created_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, provider, provider_refund_id),
  FOREIGN KEY (client_code, external_payment_request_id) REFERENCES payments (client_code, external_payment_request_id)
);

CREATE INDEX provider_refunds_withheld_waiting ON provider_refunds_withheld (client_code, external_payment_request_id)
  WHERE recorded_minor < amount_minor;
