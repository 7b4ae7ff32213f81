-- Recovery instructions, Source restrictions and disputes, and the facts every hold is computed from.

-- Restrictions the Source holds on a Customer or a Receivable (`dispute` is a Dispute; the rest are
-- restrictions). Kept in step with the representations on every write.
CREATE TABLE restrictions (
  client_code text NOT NULL,
  subject_type text NOT NULL CHECK (subject_type IN ('customer', 'receivable')),
  subject_id text NOT NULL,
  type text NOT NULL,
  reference text,
  PRIMARY KEY (client_code, subject_type, subject_id, type)
);

CREATE TABLE recovery_instructions (
  client_code text NOT NULL REFERENCES clients (client_code),
  external_instruction_id text NOT NULL,
  external_receivable_id text NOT NULL,
  state text NOT NULL CHECK (state IN ('authorized', 'withdrawn', 'suspended')),
  revision bigint NOT NULL,
  effective_at text NOT NULL,
  recorded_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_instruction_id),
  -- One instruction governs one Receivable.
  UNIQUE (client_code, external_receivable_id)
);

-- Every revision, the Source's and the service's own (suspensions), with why.
CREATE TABLE recovery_instruction_history (
  client_code text NOT NULL,
  external_instruction_id text NOT NULL,
  revision bigint NOT NULL,
  state text NOT NULL,
  actor text NOT NULL CHECK (actor IN ('source', 'service')),
  cause text NOT NULL,
  effective_at text NOT NULL,
  recorded_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_instruction_id, revision)
);

-- One row per Receivable with every fact a hold depends on (except freshness, which is per client and
-- depends on the clock). Aggregates are joined per (client, receivable), so a filter on client_code is
-- pushed into each of them and a summary over 100,000 Receivables is a few hash joins.
-- Superseded: the view's current definition is definitions/02_receivable_hold_facts.sql (re-applied after the migrations).
CREATE VIEW receivable_hold_facts AS
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
       false AS reconciliation_held
  FROM receivables r
  JOIN clients c ON c.client_code = r.client_code
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
         ON om.client_code = r.client_code AND om.external_receivable_id = r.external_receivable_id;
