-- Issue 21: whose acknowledged money the Source has not declared (docs/design/money.md, "Effect of a refund or
-- reversal"; docs/decisions.md, "Money taken back per Payment").
--
-- Money taken back from a Payment leaves the Receivable's acknowledged_undeclared_minor only as far as that
-- Payment's own receipts are undeclared: money of another Payment acknowledged since must not stand in for it.
-- So each Payment keeps its share of the Receivable's acknowledged-undeclared money:
--
-- - payments.acknowledged_undeclared_minor: money this Payment's matched receipt lines acknowledged after the Source
--   last declared the Receivable's balance, less what was taken back of it since;
-- - receivables.declarations: how many times the Source declared the Receivable's balance (a Receivable PUT with a
--   higher sourceRevision, an applied balance-snapshot entry) since this migration;
-- - payments.undeclared_as_of: the Receivable's `declarations` when the Payment's figure was written. A declaration
--   clears every Payment's share of that Receivable at once by counting one more: a share whose undeclared_as_of is
--   behind its Receivable's count is zero (the declaration writes no Payment row, so it takes no Payment lock and
--   keeps the lock order of confirmations, reconciliations and refunds: the Payment row before the Receivable).
--
-- Invariant: a Receivable's acknowledged_undeclared_minor is the sum of the shares of its Payments whose
-- undeclared_as_of equals its declarations.

ALTER TABLE receivables
  ADD COLUMN declarations bigint NOT NULL DEFAULT 0 CONSTRAINT receivables_declarations_check CHECK (declarations >= 0);

ALTER TABLE payments
  ADD COLUMN acknowledged_undeclared_minor bigint NOT NULL DEFAULT 0
    CONSTRAINT payments_acknowledged_undeclared_minor_check CHECK (acknowledged_undeclared_minor >= 0),
  ADD COLUMN undeclared_as_of bigint NOT NULL DEFAULT 0 CONSTRAINT payments_undeclared_as_of_check CHECK (undeclared_as_of >= 0);

-- The backfill. Each Receivable's acknowledged_undeclared_minor stays as it is (migration 0019 and the rules since
-- kept it; where the past could not be proven it counts money as undeclared, so the service asks for less). It is
-- shared among its Payments, each taking at most the acknowledged money it still holds (matched, less allocated
-- money taken back beyond what was unacknowledged: LEAST(matched, allocated - taken back)), the most recently
-- acknowledged Payment first: a declaration includes every receipt before it, so the undeclared money is the newest.
-- The shares never exceed what the old rule would have given back: under it, money taken back left the Receivable's
-- figure as far as it held any; a share is at most that figure, so the service may now ask for less, never more.
-- The Receivable's figure never exceeds the acknowledged money its Payments hold (every rule that raised it raised
-- a Payment's matched money alike, and every take-back lowered it by at most what it took), so the shares add up to it.
WITH acknowledged AS (
  SELECT l.client_code, l.external_payment_request_id, sum(l.amount_minor) AS matched, max(c.accepted_at) AS last_at
    FROM receipt_lines l
    JOIN payment_reconciliations c
      ON c.client_code = l.client_code AND c.external_reconciliation_id = l.external_reconciliation_id
   WHERE l.state = 'matched'
   GROUP BY l.client_code, l.external_payment_request_id
),
held AS (
  SELECT p.client_code, p.external_payment_request_id, p.external_receivable_id, a.last_at,
         LEAST(a.matched, p.allocated_minor - p.taken_back_allocated_minor) AS capacity
    FROM payments p
    JOIN acknowledged a ON a.client_code = p.client_code AND a.external_payment_request_id = p.external_payment_request_id
   WHERE p.status = 'confirmed'
),
shared AS (
  SELECT h.client_code, h.external_payment_request_id, h.capacity, r.acknowledged_undeclared_minor AS undeclared,
         COALESCE(sum(h.capacity) OVER (
           PARTITION BY h.client_code, h.external_receivable_id
           ORDER BY h.last_at DESC, h.external_payment_request_id DESC
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS taken_before
    FROM held h
    JOIN receivables r ON r.client_code = h.client_code AND r.external_receivable_id = h.external_receivable_id
   WHERE h.capacity > 0 AND r.acknowledged_undeclared_minor > 0
)
UPDATE payments p
   SET acknowledged_undeclared_minor = LEAST(s.capacity, s.undeclared - s.taken_before)
  FROM shared s
 WHERE p.client_code = s.client_code AND p.external_payment_request_id = s.external_payment_request_id
   AND s.undeclared > s.taken_before;
