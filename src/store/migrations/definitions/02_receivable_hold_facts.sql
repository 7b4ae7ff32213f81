-- One row per Receivable with every fact a hold depends on, and no rule: the holds themselves are SQL predicates
-- over these columns in src/domain/holds.ts, and test/domain/holds-definition.test.ts checks that this view has
-- exactly the columns that file declares. Aggregates are joined per (client, receivable), so a filter on
-- client_code is pushed into each of them and a summary over 100,000 Receivables is a few hash joins.
--
-- The client-wide facts (collection enabled, Source stale) are read as of the Receivable's last client fact
-- (src/resources/holds/client-facts-store.ts, migration 0013): the state just before the next fact when one is pending for it,
-- the live state otherwise, so a revision never changes its content. `source_stale` is the recorded freshness,
-- which only a transaction flips (a Source write that makes the client fresh, or the freshness sweeper).
--
-- CREATE OR REPLACE VIEW may only add columns at the end; to drop, rename or reorder one, DROP VIEW IF EXISTS
-- receivable_hold_facts first, here (nothing in the schema depends on the view).
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
