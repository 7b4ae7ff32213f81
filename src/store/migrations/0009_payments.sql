-- Payment requests, the Payments a provider confirms for them, and payment reconciliations against Source
-- receipt lines. Money is bigint minor units with its currency, as everywhere.

-- A fixed-amount request for one Receivable, paid through the hosted page at /pay/<page_token>.
CREATE TABLE payment_requests (
  client_code text NOT NULL REFERENCES clients (client_code),
  external_payment_request_id text NOT NULL,
  external_receivable_id text NOT NULL,
  -- 1 on create, +1 on each state change (confirmed, failed, expired); change events carry it.
  revision bigint NOT NULL,
  status text NOT NULL CHECK (status IN ('open', 'confirmed', 'failed', 'expired')),
  currency text NOT NULL,
  amount_minor bigint NOT NULL CHECK (amount_minor > 0),
  description text,
  expires_at timestamptz NOT NULL,
  -- The request body as accepted, with expiresAt filled in: the identical-retry comparison.
  body jsonb NOT NULL,
  -- The capability in the hosted page URL (256 random bits, base64url). Kept because every read returns
  -- hostedUrl, as a payment API returns its checkout URL; it opens only this request's page.
  page_token text NOT NULL UNIQUE,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_payment_request_id),
  FOREIGN KEY (client_code, external_receivable_id) REFERENCES receivables (client_code, external_receivable_id)
);
CREATE INDEX payment_requests_receivable ON payment_requests (client_code, external_receivable_id);
-- The expiry sweeper's work list: open requests by expiry time.
CREATE INDEX payment_requests_open_expiry ON payment_requests (expires_at) WHERE status = 'open';

-- The provider's outcome for a request: at most one Payment per request (a second confirmation is the
-- same Payment), and at most one per provider payment id.
CREATE TABLE payments (
  client_code text NOT NULL,
  external_payment_request_id text NOT NULL,
  provider text NOT NULL,
  provider_payment_id text NOT NULL,
  status text NOT NULL CHECK (status IN ('confirmed', 'failed')),
  revision bigint NOT NULL,
  currency text NOT NULL,
  amount_minor bigint NOT NULL CHECK (amount_minor > 0),
  -- What the confirmed Payment allocated to the request's Receivable (at most its working amount then),
  -- and the rest, which no allocation covers. Both 0 for a failed Payment.
  allocated_minor bigint NOT NULL CHECK (allocated_minor >= 0),
  unapplied_minor bigint NOT NULL CHECK (unapplied_minor >= 0),
  external_receivable_id text NOT NULL,
  decided_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_payment_request_id),
  UNIQUE (provider, provider_payment_id),
  FOREIGN KEY (client_code, external_payment_request_id) REFERENCES payment_requests (client_code, external_payment_request_id),
  CHECK (allocated_minor + unapplied_minor = CASE WHEN status = 'confirmed' THEN amount_minor ELSE 0 END)
);

CREATE TABLE payment_reconciliations (
  client_code text NOT NULL REFERENCES clients (client_code),
  external_reconciliation_id text NOT NULL,
  external_payment_request_id text NOT NULL,
  revision bigint NOT NULL,
  status text NOT NULL CHECK (status IN ('matched', 'held', 'resolved')),
  body jsonb NOT NULL,
  resolution jsonb,
  accepted_at timestamptz NOT NULL,
  resolved_at timestamptz,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_reconciliation_id),
  FOREIGN KEY (client_code, external_payment_request_id) REFERENCES payments (client_code, external_payment_request_id)
);
CREATE INDEX payment_reconciliations_payment ON payment_reconciliations (client_code, external_payment_request_id);

-- Receipt lines as received (original figures, never changed by a resolution). A receipt line id is
-- unique per Payment: one Source receipt line acknowledges money once.
CREATE TABLE receipt_lines (
  client_code text NOT NULL,
  external_reconciliation_id text NOT NULL,
  position int NOT NULL,
  external_payment_request_id text NOT NULL,
  external_receipt_line_id text NOT NULL,
  external_receivable_id text NOT NULL,
  currency text NOT NULL,
  amount_minor bigint NOT NULL CHECK (amount_minor > 0),
  state text NOT NULL CHECK (state IN ('matched', 'differs')),
  PRIMARY KEY (client_code, external_reconciliation_id, position),
  UNIQUE (client_code, external_payment_request_id, external_receipt_line_id),
  FOREIGN KEY (client_code, external_reconciliation_id) REFERENCES payment_reconciliations (client_code, external_reconciliation_id)
);
CREATE INDEX receipt_lines_payment ON receipt_lines (client_code, external_payment_request_id);

-- The reconciliation_hold of a Receivable: one row per (held reconciliation, affected Receivable), released
-- by that reconciliation's resolution only.
CREATE TABLE reconciliation_holds (
  client_code text NOT NULL,
  external_reconciliation_id text NOT NULL,
  external_receivable_id text NOT NULL,
  held_at timestamptz NOT NULL,
  released_at timestamptz,
  PRIMARY KEY (client_code, external_reconciliation_id, external_receivable_id),
  FOREIGN KEY (client_code, external_reconciliation_id) REFERENCES payment_reconciliations (client_code, external_reconciliation_id)
);
CREATE INDEX reconciliation_holds_open ON reconciliation_holds (client_code, external_receivable_id) WHERE released_at IS NULL;

-- Receipt delivery attempts (none are made today: no delivery route is verified). The table exists so the
-- receipt-delivery read lists real rows, and retention covers them.
CREATE TABLE receipt_delivery_attempts (
  client_code text NOT NULL,
  external_payment_request_id text NOT NULL,
  attempt int NOT NULL,
  route text NOT NULL,
  outcome text NOT NULL,
  attempted_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_payment_request_id, attempt)
);

-- The one definition of holds now reads reconciliation holds.
-- Superseded: the view's current definition is definitions/02_receivable_hold_facts.sql (re-applied after the migrations).
CREATE OR REPLACE VIEW receivable_hold_facts AS
SELECT r.client_code,
       r.external_receivable_id,
       r.status,
       r.currency,
       r.source_amount_minor,
       r.confirmed_unreconciled_minor,
       c.collection_enabled,
       COALESCE(ri.state, 'none') AS instruction_state,
       COALESCE(rr.has_dispute, false) OR COALESCE(cr.has_dispute, false) AS has_dispute,
       COALESCE(rr.has_restriction, false) OR COALESCE(cr.has_restriction, false) AS has_source_restriction,
       (om.external_receivable_id IS NOT NULL) AS flagged,
       (rh.external_receivable_id IS NOT NULL) AS reconciliation_held,
       COALESCE(sa.stale_recorded, true) AS source_stale
  FROM receivables r
  JOIN clients c ON c.client_code = r.client_code
  LEFT JOIN source_activity sa ON sa.client_code = r.client_code
  LEFT JOIN recovery_instructions ri ON ri.client_code = r.client_code AND ri.external_receivable_id = r.external_receivable_id
  LEFT JOIN (SELECT client_code, subject_id, bool_or(type = 'dispute') AS has_dispute, bool_or(type <> 'dispute') AS has_restriction
               FROM restrictions WHERE subject_type = 'receivable' GROUP BY client_code, subject_id) rr
         ON rr.client_code = r.client_code AND rr.subject_id = r.external_receivable_id
  LEFT JOIN (SELECT rc.client_code, rc.external_receivable_id,
                    bool_or(x.type = 'dispute') AS has_dispute, bool_or(x.type <> 'dispute') AS has_restriction
               FROM receivable_customers rc
               JOIN restrictions x ON x.client_code = rc.client_code AND x.subject_type = 'customer' AND x.subject_id = rc.external_customer_id
              GROUP BY rc.client_code, rc.external_receivable_id) cr
         ON cr.client_code = r.client_code AND cr.external_receivable_id = r.external_receivable_id
  LEFT JOIN (SELECT DISTINCT client_code, external_receivable_id FROM book_omissions WHERE released_at IS NULL) om
         ON om.client_code = r.client_code AND om.external_receivable_id = r.external_receivable_id
  LEFT JOIN (SELECT DISTINCT client_code, external_receivable_id FROM reconciliation_holds WHERE released_at IS NULL) rh
         ON rh.client_code = r.client_code AND rh.external_receivable_id = r.external_receivable_id;
