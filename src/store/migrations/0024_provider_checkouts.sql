-- Taking real payments through a client's provider (issue 22, docs/design/payment-providers.md): Stripe Checkout attempts,
-- Stripe's events handled once, and the disputes already reversed.

-- One attempt to pay a Payment request through the provider: a Checkout Session. Attempt n's idempotency key is
-- `checkout/{client}/{request}/{n}`, so two clicks (or a retry after a crash between the row and Stripe's answer)
-- give Stripe the same key and get the same session. A new attempt starts only once the latest one is over
-- (expired or failed): the request stays open for another try until its own expiry.
--   creating   the row is committed, Stripe has not answered yet (or the answer was lost): the next click asks again
--   open       the session exists; the debtor is sent to `url` until `expires_at`
--   processing the debtor completed it with an asynchronous method (a US bank debit): no new attempt until decided
--   complete   paid: the Payment is recorded
--   expired    Stripe expired it unpaid (or its expires_at passed), or it stayed `creating` too long to ask again
--   failed     the asynchronous payment failed: nothing was taken
--   refunded   money Stripe took that the request could no longer accept (expired, canceled, paid another way):
--              refunded in full through Stripe
CREATE TABLE provider_checkouts (
  client_code text NOT NULL,
  external_payment_request_id text NOT NULL,
  attempt int NOT NULL CHECK (attempt >= 1),
  provider text NOT NULL CHECK (provider IN ('stripe')),
  status text NOT NULL CHECK (status IN ('creating', 'open', 'processing', 'complete', 'expired', 'failed', 'refunded')),
  session_id text,
  url text,
  -- When the session expires (the one asked of Stripe, then Stripe's own).
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_payment_request_id, attempt),
  FOREIGN KEY (client_code, external_payment_request_id) REFERENCES payment_requests (client_code, external_payment_request_id),
  -- No session: being created, or abandoned while being created (expired without Stripe's answer ever recorded).
  CHECK (status IN ('creating', 'expired') OR session_id IS NOT NULL)
);
CREATE UNIQUE INDEX provider_checkouts_session ON provider_checkouts (client_code, provider, session_id) WHERE session_id IS NOT NULL;

-- A provider event handled: inserted in the transaction that records its effect, so an event delivered twice (or to
-- two instances at once) has its effect once; the second insert waits for the first's commit and finds the row.
CREATE TABLE provider_events (
  client_code text NOT NULL REFERENCES clients (client_code),
  provider text NOT NULL CHECK (provider IN ('stripe')),
  event_id text NOT NULL,
  event_type text NOT NULL,
  -- What the handler did: the object's state it acted on (confirmed, processing, refund_succeeded, ignored, ...).
  effect text NOT NULL,
  received_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, provider, event_id)
);

-- A dispute taken back as a reversal: once per dispute, whichever of its events (funds withdrawn, closed lost)
-- arrives first.
CREATE TABLE provider_reversals (
  client_code text NOT NULL,
  provider text NOT NULL CHECK (provider IN ('stripe')),
  provider_reversal_id text NOT NULL,
  external_payment_request_id text NOT NULL,
  amount_minor bigint NOT NULL CHECK (amount_minor >= 0),
  recorded_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, provider, provider_reversal_id),
  FOREIGN KEY (client_code, external_payment_request_id) REFERENCES payments (client_code, external_payment_request_id)
);
