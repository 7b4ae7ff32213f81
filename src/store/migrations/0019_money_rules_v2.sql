-- Issue 21, docs/design/money.md ("The money a debtor pays").
--
-- 1. receivables.acknowledged_undeclared_minor: money matched receipt lines acknowledged after the Source last
--    declared the Receivable's balance (a Receivable PUT with a higher sourceRevision, or an applied balance-snapshot
--    entry). The working amount subtracts it (working_amount_minor, definitions/01_money_rules.sql), so reconciling a
--    Payment never raises the working amount; the Source's next declaration clears it.
-- 2. Payment requests may be canceled (by the integrator, or at pay time when the amount no longer fits), with a
--    cancel reason present exactly when canceled, and the integrator's note kept as given.

ALTER TABLE receivables
  ADD COLUMN acknowledged_undeclared_minor bigint NOT NULL DEFAULT 0
    CONSTRAINT receivables_acknowledged_undeclared_minor_check CHECK (acknowledged_undeclared_minor >= 0);

-- The backfill (docs/decisions.md, "Working amount and open requests"). Every matched receipt line acknowledged its
-- amount at its reconciliation's accepted_at. Its money is undeclared unless the Source provably declared the
-- Receivable's balance after that instant. Provable declarations:
--   - an applied balance-snapshot entry naming the Receivable (balance_snapshots.outcomes[i] = 'applied'),
--     at the snapshot's accepted_at;
--   - a Receivable PUT with a higher sourceRevision. The service never recorded when a PUT happened, only that the
--     Receivable changed (`receivable.updated`). An event counts as a PUT only when nothing else explains it: it is
--     the only change event of the client at its instant (a payment, a reconciliation, a customer's restrictions,
--     an instruction, a batch or a client-fact fan-out each write other events at the same instant), no other
--     recorded write of the client or the Receivable happened at that instant (financial events, snapshots, book
--     completions and omissions, reconciliation holds, instruction history, client facts, operator actions), and
--     the Receivable never had a lifecycle command (status_effective_at is set by one; its instant is not
--     recorded, so on such a Receivable no event is read as a PUT).
-- When in doubt the money stays undeclared: the working amount may then be lower than the Source would say
-- (the service under-collects until the Source's next declaration clears it), never higher.
WITH acknowledged AS (
  SELECT l.client_code, l.external_receivable_id, l.amount_minor, c.accepted_at
    FROM receipt_lines l
    JOIN payment_reconciliations c
      ON c.client_code = l.client_code AND c.external_reconciliation_id = l.external_reconciliation_id
   WHERE l.state = 'matched'
),
snapshot_declarations AS (
  SELECT s.client_code, b.entry ->> 'externalReceivableId' AS external_receivable_id, s.accepted_at AS declared_at
    FROM balance_snapshots s
   CROSS JOIN LATERAL jsonb_array_elements(s.body -> 'balances') WITH ORDINALITY AS b(entry, n)
   WHERE s.outcomes ->> (b.n::int - 1) = 'applied'
),
put_declarations AS (
  SELECT e.client_code, e.resource_id AS external_receivable_id, e.occurred_at AS declared_at
    FROM change_events e
    JOIN receivables r ON r.client_code = e.client_code AND r.external_receivable_id = e.resource_id
   WHERE e.type = 'receivable.updated' AND e.resource_type = 'receivable' AND r.status_effective_at IS NULL
     AND NOT EXISTS (SELECT 1 FROM change_events o
                      WHERE o.client_code = e.client_code AND o.occurred_at = e.occurred_at AND o.seq <> e.seq)
     AND NOT EXISTS (SELECT 1 FROM financial_events f
                      WHERE f.client_code = e.client_code AND f.accepted_at = e.occurred_at)
     AND NOT EXISTS (SELECT 1 FROM balance_snapshots s
                      WHERE s.client_code = e.client_code AND s.accepted_at = e.occurred_at)
     AND NOT EXISTS (SELECT 1 FROM book_completions b
                      WHERE b.client_code = e.client_code AND b.accepted_at = e.occurred_at)
     AND NOT EXISTS (SELECT 1 FROM book_omissions b
                      WHERE b.client_code = e.client_code AND b.external_receivable_id = e.resource_id
                        AND (b.flagged_at = e.occurred_at OR b.released_at = e.occurred_at))
     AND NOT EXISTS (SELECT 1 FROM reconciliation_holds h
                      WHERE h.client_code = e.client_code AND h.external_receivable_id = e.resource_id
                        AND (h.held_at = e.occurred_at OR h.released_at = e.occurred_at))
     AND NOT EXISTS (SELECT 1 FROM payment_reconciliations c
                      WHERE c.client_code = e.client_code AND (c.accepted_at = e.occurred_at OR c.resolved_at = e.occurred_at))
     AND NOT EXISTS (SELECT 1 FROM payments p
                      WHERE p.client_code = e.client_code AND p.decided_at = e.occurred_at)
     AND NOT EXISTS (SELECT 1 FROM recovery_instruction_history h
                      JOIN recovery_instructions i
                        ON i.client_code = h.client_code AND i.external_instruction_id = h.external_instruction_id
                      WHERE h.client_code = e.client_code AND i.external_receivable_id = e.resource_id
                        AND h.recorded_at = e.occurred_at)
     AND NOT EXISTS (SELECT 1 FROM client_facts cf
                      WHERE cf.client_code = e.client_code AND cf.recorded_at = e.occurred_at)
     AND NOT EXISTS (SELECT 1 FROM client_fanouts cf
                      WHERE cf.client_code = e.client_code AND cf.updated_at = e.occurred_at)
     AND NOT EXISTS (SELECT 1 FROM audit_events a
                      WHERE (a.client_code = e.client_code OR a.client_code IS NULL) AND a.occurred_at = e.occurred_at)
),
last_declared AS (
  SELECT r.client_code, r.external_receivable_id,
         GREATEST(r.created_at, max(d.declared_at)) AS declared_at
    FROM receivables r
    LEFT JOIN (SELECT * FROM snapshot_declarations UNION ALL SELECT * FROM put_declarations) d
      ON d.client_code = r.client_code AND d.external_receivable_id = r.external_receivable_id
   GROUP BY r.client_code, r.external_receivable_id, r.created_at
),
undeclared AS (
  SELECT a.client_code, a.external_receivable_id, sum(a.amount_minor) AS amount_minor
    FROM acknowledged a
    JOIN last_declared d ON d.client_code = a.client_code AND d.external_receivable_id = a.external_receivable_id
   WHERE a.accepted_at >= d.declared_at
   GROUP BY a.client_code, a.external_receivable_id
)
UPDATE receivables r
   SET acknowledged_undeclared_minor = LEAST(u.amount_minor, r.receipt_acknowledged_minor)
  FROM undeclared u
 WHERE r.client_code = u.client_code AND r.external_receivable_id = u.external_receivable_id;

-- Payment requests: `canceled` (final), its reason present exactly when canceled, and the integrator's note.
ALTER TABLE payment_requests DROP CONSTRAINT payment_requests_status_check;
ALTER TABLE payment_requests
  ADD CONSTRAINT payment_requests_status_check CHECK (status IN ('open', 'confirmed', 'failed', 'expired', 'canceled'));
ALTER TABLE payment_requests
  ADD COLUMN cancel_reason text
    CONSTRAINT payment_requests_cancel_reason_check CHECK (cancel_reason IN ('requested', 'balance_changed')),
  ADD COLUMN cancellation_note text;
ALTER TABLE payment_requests
  ADD CONSTRAINT payment_requests_canceled_reason CHECK ((status = 'canceled') = (cancel_reason IS NOT NULL));
