-- The `source_stale` hold follows a recorded state, flipped only inside transactions (a Source write that
-- makes the client fresh, or the freshness sweeper when time runs out), so that each flip gives every
-- Receivable of the client a new revision and a change event in the same transaction.
ALTER TABLE source_activity ADD COLUMN stale_recorded boolean NOT NULL DEFAULT true;
-- The value stale_recorded had before the last upsert, read from the row the upsert locked (race-free).
ALTER TABLE source_activity ADD COLUMN stale_before boolean;

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
       false AS reconciliation_held,
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
         ON om.client_code = r.client_code AND om.external_receivable_id = r.external_receivable_id;
