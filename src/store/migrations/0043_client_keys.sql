-- Every unique key of a client-keyed table includes client_code, and no client-keyed table has a nullable
-- client_code (docs/scaling.md): the rules Citus sets for a table distributed by client_code, and the rule a table
-- hash-partitioned by client_code enforces (DATABASE_LAYOUT=partitioned). Safe on existing data: each new key is
-- the old one widened by client_code, so rows that satisfied the old key satisfy the new one.

-- The audit of operators: the events of no client (integrations, API keys, the rewrap, settings) move to a table
-- of their own, a reference table on Citus. Both tables draw `seq` from the one sequence, so the operator's audit
-- listing still reads one order across them.
CREATE TABLE operator_audit_events (
  seq bigint PRIMARY KEY DEFAULT nextval('audit_events_seq_seq'),
  audit_event_id uuid NOT NULL UNIQUE,
  actor text NOT NULL,
  action text NOT NULL,
  target_type text NOT NULL,
  target_id text NOT NULL,
  details jsonb NOT NULL DEFAULT '{}',
  change_digest text NOT NULL,
  occurred_at timestamptz NOT NULL
);
INSERT INTO operator_audit_events (seq, audit_event_id, actor, action, target_type, target_id, details, change_digest, occurred_at)
SELECT seq, audit_event_id, actor, action, target_type, target_id, details, change_digest, occurred_at
  FROM audit_events WHERE client_code IS NULL;
DELETE FROM audit_events WHERE client_code IS NULL;
ALTER TABLE audit_events ALTER COLUMN client_code SET NOT NULL;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_pkey;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_pkey PRIMARY KEY (client_code, seq);
ALTER TABLE audit_events DROP CONSTRAINT audit_events_audit_event_id_key;
ALTER TABLE audit_events ADD CONSTRAINT audit_events_audit_event_id_key UNIQUE (client_code, audit_event_id);
-- The primary key is now this index.
DROP INDEX audit_events_client;

-- The hosted page arrives with its token alone: page_tokens finds the client (256 random bits, unique here), and
-- the page's read then names that client. On Citus it is a table distributed by page_token (docs/scaling.md).
CREATE TABLE page_tokens (
  page_token text PRIMARY KEY,
  client_code text NOT NULL,
  external_payment_request_id text NOT NULL
);
INSERT INTO page_tokens (page_token, client_code, external_payment_request_id)
SELECT page_token, client_code, external_payment_request_id FROM payment_requests;
ALTER TABLE payment_requests DROP CONSTRAINT payment_requests_page_token_key;
ALTER TABLE payment_requests ADD CONSTRAINT payment_requests_page_token_key UNIQUE (client_code, page_token);

-- A provider's payment id is unique per client: every lookup by it already names the client (Stripe's event
-- route carries the client in its path).
ALTER TABLE payments DROP CONSTRAINT payments_provider_provider_payment_id_key;
ALTER TABLE payments ADD CONSTRAINT payments_provider_provider_payment_id_key UNIQUE (client_code, provider, provider_payment_id);
