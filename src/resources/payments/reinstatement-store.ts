import type { Tx } from '../../store/store.ts'
import { COLUMNS as PAYMENT_COLUMNS, type PaymentRow, releaseAllocation } from './store.ts'

/**
 * SQL of a dispute's reinstatement (payments/reinstatement.ts; migration 0044): the dispute's reversal marked undone
 * once, the money given back to the Payment and, as far as the Receivable still owes it, to its allocation.
 */

/** The request row, locked: the first lock every writer of a Payment's money takes (refunds/store.ts lockRefundedPayment). */
export async function lockRequestOfPayment(tx: Tx, clientCode: string, requestId: string): Promise<boolean> {
  const rows = await tx.query(`SELECT 1 FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = $2 FOR UPDATE`, [
    clientCode,
    requestId,
  ])
  return rows.length > 0
}

/**
 * Marks the dispute's reversal reinstated, once: the amount its reversal took back, or undefined when it was already
 * reinstated. A dispute with no reversal recorded (won before any withdrawal event was handled) is recorded now with
 * amount 0, reinstated, so a late withdrawal event records no reversal (checkout-store.ts recordProviderReversal finds
 * it). Under the request's lock, as the reversal is recorded: the two never interleave.
 */
export async function markReversalReinstated(
  tx: Tx,
  clientCode: string,
  r: { provider: string; reversalId: string; requestId: string; now: string },
): Promise<bigint | undefined> {
  const rows = await tx.query<{ amount_minor: string }>(
    `INSERT INTO provider_reversals (client_code, provider, provider_reversal_id, external_payment_request_id, amount_minor,
                                     recorded_at, reinstated_minor, reinstated_at)
     VALUES ($1, $2, $3, $4, 0, $5, 0, $5)
     ON CONFLICT (client_code, provider, provider_reversal_id) DO UPDATE
        SET reinstated_minor = provider_reversals.amount_minor, reinstated_at = EXCLUDED.reinstated_at
      WHERE provider_reversals.reinstated_at IS NULL
     RETURNING amount_minor`,
    [clientCode, r.provider, r.reversalId, r.requestId, r.now],
  )
  return rows[0] ? BigInt(rows[0].amount_minor) : undefined
}

/** The Receivable amounts a reinstatement reads and moves, row-locked. */
export interface ReinstatedReceivableRow {
  source_amount_minor: string
  confirmed_unreconciled_minor: string
  acknowledged_undeclared_minor: string
  declarations: string
}

export async function lockReinstatedReceivable(
  tx: Tx,
  clientCode: string,
  receivableId: string,
): Promise<ReinstatedReceivableRow | undefined> {
  return (
    await tx.query<ReinstatedReceivableRow>(
      `SELECT source_amount_minor, confirmed_unreconciled_minor, acknowledged_undeclared_minor, declarations FROM receivables
        WHERE client_code = $1 AND external_receivable_id = $2 FOR UPDATE`,
      [clientCode, receivableId],
    )
  )[0]
}

/**
 * Gives money back to a Payment: its reversed total falls by `unapplied + allocated`, what it says was taken back
 * by as much (`unapplied` from its unapplied money, `allocated` from its allocation); `overflow` of the allocated money
 * given back no longer fits the Receivable and moves from its allocation to its unapplied money (refunded at once);
 * its undeclared share becomes `undeclared` as of `declarations`.
 */
export async function recordReinstated(
  tx: Tx,
  clientCode: string,
  requestId: string,
  r: { unappliedMinor: bigint; allocatedMinor: bigint; overflowMinor: bigint; undeclared: { minor: bigint; asOf: bigint } },
): Promise<PaymentRow> {
  const rows = await tx.query<PaymentRow>(
    `UPDATE payments SET reversed_minor = reversed_minor - $3 - $4, taken_back_unapplied_minor = taken_back_unapplied_minor - $3,
            taken_back_allocated_minor = taken_back_allocated_minor - $4, allocated_minor = allocated_minor - $5,
            unapplied_minor = unapplied_minor + $5, acknowledged_undeclared_minor = $6, undeclared_as_of = $7, revision = revision + 1
      WHERE client_code = $1 AND external_payment_request_id = $2 RETURNING ${PAYMENT_COLUMNS}`,
    [
      clientCode,
      requestId,
      r.unappliedMinor.toString(),
      r.allocatedMinor.toString(),
      r.overflowMinor.toString(),
      r.undeclared.minor.toString(),
      r.undeclared.asOf.toString(),
    ],
  )
  return rows[0] as PaymentRow
}

/**
 * Allocated money back in the Receivable's amounts, the inverse of store.ts releaseAllocation (the same statement with
 * the amounts negated): `unacknowledged` into confirmed_unreconciled_minor, `acknowledged` into
 * acknowledged_undeclared_minor. Returns the new revision.
 */
export async function restoreAllocation(
  tx: Tx,
  clientCode: string,
  receivableId: string,
  r: { unacknowledgedMinor: bigint; acknowledgedMinor: bigint },
  now: string,
): Promise<number> {
  return releaseAllocation(
    tx,
    clientCode,
    receivableId,
    { unacknowledgedMinor: -r.unacknowledgedMinor, acknowledgedMinor: -r.acknowledgedMinor },
    now,
  )
}
