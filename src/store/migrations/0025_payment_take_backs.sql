-- Every take-back of a confirmed Payment, one row each (issue 23; src/resources/payments/take-back.ts): a refund's
-- success or a reversal, with the split the take-back rule decided at that moment (unapplied money first, then
-- allocated). A Payment keeps only running totals (refunded_minor, reversed_minor); the receipt of a refund or a
-- reversal (src/workers/receipt-dispatcher.ts) reports this row, so two reversals committed between two scans of
-- the feed give two receipts, each with its own amount, and a receipt never depends on earlier receipts.
CREATE TABLE payment_take_backs (
  client_code text NOT NULL,
  external_payment_request_id text NOT NULL,
  -- `refund/<external refund id>` or `reversal/<the Payment's revision after it>` (the revision its
  -- `payment.reversed` event carries).
  take_back_key text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('refund', 'reversal')),
  amount_minor bigint NOT NULL CHECK (amount_minor > 0),
  unapplied_minor bigint NOT NULL CHECK (unapplied_minor >= 0),
  allocated_minor bigint NOT NULL CHECK (allocated_minor >= 0),
  occurred_at timestamptz NOT NULL,
  PRIMARY KEY (client_code, external_payment_request_id, take_back_key),
  FOREIGN KEY (client_code, external_payment_request_id) REFERENCES payments (client_code, external_payment_request_id),
  CHECK (unapplied_minor + allocated_minor = amount_minor)
);

-- Take-backs recorded before this migration. Succeeded refunds are known one by one; reversals only as each
-- Payment's running total, recorded as one reversal at the revision of its latest `payment.reversed` event (the
-- Payment's own revision when the feed no longer holds it), less what reversal receipts already reported (which
-- came before it). The split
-- follows the rule over the take-backs in the order they were decided (refunds by decided_at, the reversals last).
WITH reversal_events AS (
  SELECT client_code, resource_id AS request_id, max(revision) AS revision, max(occurred_at) AS occurred_at
    FROM change_events WHERE type = 'payment.reversed' GROUP BY client_code, resource_id),
reported AS (
  SELECT client_code, external_payment_request_id AS request_id, max(reversed_through_minor) AS through
    FROM receipt_deliveries WHERE kind = 'reversal' GROUP BY client_code, external_payment_request_id),
items AS (
  SELECT f.client_code, f.external_payment_request_id AS request_id, 'refund/' || f.external_refund_id AS take_back_key,
         'refund' AS kind, f.amount_minor, f.decided_at AS occurred_at, 0 AS tail, f.amount_minor AS counted_minor, 0::bigint AS prior_minor
    FROM refunds f WHERE f.status = 'succeeded'
  UNION ALL
  SELECT p.client_code, p.external_payment_request_id, 'reversal/' || COALESCE(e.revision, p.revision),
         'reversal', p.reversed_minor - COALESCE(r.through, 0), COALESCE(e.occurred_at, p.decided_at), 1, p.reversed_minor,
         COALESCE(r.through, 0)
    FROM payments p
    LEFT JOIN reversal_events e ON e.client_code = p.client_code AND e.request_id = p.external_payment_request_id
    LEFT JOIN reported r ON r.client_code = p.client_code AND r.request_id = p.external_payment_request_id
   WHERE p.reversed_minor > 0),
ordered AS (
  SELECT i.*, COALESCE(sum(i.counted_minor) OVER (PARTITION BY i.client_code, i.request_id ORDER BY i.tail, i.occurred_at, i.take_back_key
                                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before_minor
    FROM items i)
INSERT INTO payment_take_backs (client_code, external_payment_request_id, take_back_key, kind, amount_minor, unapplied_minor,
                                allocated_minor, occurred_at)
SELECT o.client_code, o.request_id, o.take_back_key, o.kind, o.amount_minor, s.unapplied, o.amount_minor - s.unapplied, o.occurred_at
  FROM ordered o
  JOIN payments p ON p.client_code = o.client_code AND p.external_payment_request_id = o.request_id
  CROSS JOIN LATERAL (SELECT LEAST(o.amount_minor, GREATEST(p.unapplied_minor - o.before_minor - o.prior_minor, 0)) AS unapplied) s
 WHERE o.amount_minor > 0;

-- Receipts no longer keep running figures of their own: the take-back rows above say what each one reports.
ALTER TABLE receipt_deliveries DROP COLUMN taken_back_minor, DROP COLUMN reversed_through_minor;

-- Retention purges finished receipt delivery records 30 days after their last attempt (retention/service.ts).
CREATE INDEX receipt_deliveries_finished ON receipt_deliveries (completed_at) WHERE status <> 'pending';

-- The operator's view of a route (GET /admin/v1/clients/{clientCode}/receipt-route): its latest attempts.
CREATE INDEX receipt_delivery_attempts_recent ON receipt_delivery_attempts (client_code, attempted_at DESC);

-- The dispatcher claims a client's due receipts in (next_attempt_at, created_at, receipt_id) order: an index in
-- that order makes a claim from a backlog of thousands read only the rows it takes (bench/receipts.ts).
DROP INDEX receipt_deliveries_due;
CREATE INDEX receipt_deliveries_due ON receipt_deliveries (client_code, next_attempt_at, created_at, receipt_id) WHERE status = 'pending';
