-- A dispute won after its funds were withdrawn gives them back (issue 32 item 4; src/resources/payments/reinstatement.ts):
-- the reversal its withdrawal recorded is undone, once per dispute. `reinstated_at` marks the dispute's reversal as
-- undone (whichever of its events, `charge.dispute.closed` won or `charge.dispute.funds_reinstated`, is handled first);
-- `reinstated_minor` is what went back to the Payment (its reversal's amount). A dispute read as won before any of its
-- withdrawal events was handled is recorded here at once with amount 0 and reinstated, so a late withdrawal event
-- finds it and records no reversal.
ALTER TABLE provider_reversals
  ADD COLUMN reinstated_minor bigint CHECK (reinstated_minor >= 0),
  ADD COLUMN reinstated_at timestamptz,
  ADD CONSTRAINT provider_reversals_reinstated_whole CHECK ((reinstated_at IS NULL) = (reinstated_minor IS NULL)),
  ADD CONSTRAINT provider_reversals_reinstated_within CHECK (reinstated_minor IS NULL OR reinstated_minor <= amount_minor);

-- The money a reinstatement gives back to a Payment, one row each beside its take-backs (key
-- `reinstatement/<the Payment's revision after it>`, the revision its `payment.reinstated` event carries), with where it
-- went: `allocated_minor` back to the Receivable, `unapplied_minor` what could not be (refunded at once). Its receipt
-- (kind `reinstatement`) reports this row.
ALTER TABLE payment_take_backs DROP CONSTRAINT payment_take_backs_kind_check;
ALTER TABLE payment_take_backs ADD CONSTRAINT payment_take_backs_kind_check CHECK (kind IN ('refund', 'reversal', 'reinstatement'));

ALTER TABLE receipt_deliveries DROP CONSTRAINT receipt_deliveries_kind_check;
ALTER TABLE receipt_deliveries ADD CONSTRAINT receipt_deliveries_kind_check
  CHECK (kind IN ('test', 'payment', 'refund', 'reversal', 'reinstatement'));
