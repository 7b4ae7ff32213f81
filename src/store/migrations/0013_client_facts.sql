-- Client-wide changes in the background (issue 11, docs/decisions.md "Client-wide changes in the background").
-- A collection toggle or a freshness flip records one fact here, in its own transaction; the per-Receivable
-- revisions and `receivable.updated` events follow in bounded chunks (src/workers/client-fanout.ts).

-- The last client fact each Receivable's current revision includes. Its holds that depend on client-wide state
-- (collection_not_enabled, source_stale) are read as of that fact, so a revision never changes its content.
ALTER TABLE receivables ADD COLUMN client_fact_seq bigint NOT NULL DEFAULT 0;

-- Per client, the number of the last fact recorded (locked by the recording transaction: facts are numbered in
-- commit order, one writer at a time per client).
CREATE TABLE client_fact_heads (
  client_code text PRIMARY KEY REFERENCES clients (client_code),
  last_seq bigint NOT NULL
);

-- The facts not yet reached by every Receivable, each with the client-wide state just before it. Deleted once
-- every Receivable of the client has passed it.
CREATE TABLE client_facts (
  client_code text NOT NULL REFERENCES clients (client_code),
  seq bigint NOT NULL,
  kind text NOT NULL CHECK (kind IN ('collection_enabled', 'collection_disabled', 'source_fresh', 'source_stale')),
  collection_enabled_before boolean NOT NULL,
  source_stale_before boolean NOT NULL,
  recorded_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, seq)
);

-- The fan-out's progress per client, claimed by a worker with FOR UPDATE SKIP LOCKED for one chunk transaction
-- at a time. A pass brings every Receivable to `target_seq`, in id order after `after_id`; `done_seq` is the
-- fact every Receivable has reached.
CREATE TABLE client_fanouts (
  client_code text PRIMARY KEY REFERENCES clients (client_code),
  done_seq bigint NOT NULL DEFAULT 0,
  target_seq bigint NOT NULL DEFAULT 0,
  after_id text,
  reached bigint NOT NULL DEFAULT 0,
  failed_attempts integer NOT NULL DEFAULT 0,
  last_error text,
  next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
  updated_at timestamptz
);

-- Holds read client-wide state as of the Receivable's last client fact: the state just before the next fact
-- when one is pending for it, the live state otherwise. Same columns as before (src/domain/holds.ts).
-- Superseded: the view's current definition is definitions/02_receivable_hold_facts.sql (re-applied after the migrations).
CREATE OR REPLACE VIEW receivable_hold_facts AS
SELECT r.client_code,
       r.external_receivable_id,
       r.status,
       r.currency,
       r.source_amount_minor,
       r.confirmed_unreconciled_minor,
       COALESCE(pf.collection_enabled_before, c.collection_enabled) AS collection_enabled,
       COALESCE(ri.state, 'none') AS instruction_state,
       COALESCE(rr.has_dispute, false) OR COALESCE(cr.has_dispute, false) AS has_dispute,
       COALESCE(rr.has_restriction, false) OR COALESCE(cr.has_restriction, false) AS has_source_restriction,
       (om.external_receivable_id IS NOT NULL) AS flagged,
       (rh.external_receivable_id IS NOT NULL) AS reconciliation_held,
       COALESCE(pf.source_stale_before, sa.stale_recorded, true) AS source_stale
  FROM receivables r
  JOIN clients c ON c.client_code = r.client_code
  LEFT JOIN client_facts pf ON pf.client_code = r.client_code AND pf.seq = r.client_fact_seq + 1
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
