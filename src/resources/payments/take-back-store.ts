import type { Tx } from '../../store/store.ts'

/**
 * SQL of the take-back record (migration 0025): one row per refund success or reversal of a Payment, with the split
 * take-back.ts decided. The receipt of a refund or a reversal reports it (receipts/delivery-store.ts scanFeed).
 */
export async function insertTakeBack(
  tx: Tx,
  t: {
    clientCode: string
    requestId: string
    key: string
    /** `reinstatement`: money given back to the Payment (payments/reinstatement.ts), recorded beside its take-backs. */
    kind: 'refund' | 'reversal' | 'reinstatement'
    unappliedMinor: bigint
    allocatedMinor: bigint
    occurredAt: string
  },
): Promise<void> {
  await tx.query(
    `INSERT INTO payment_take_backs (client_code, external_payment_request_id, take_back_key, kind, amount_minor, unapplied_minor,
                                     allocated_minor, occurred_at)
     VALUES ($1, $2, $3, $4, $5::bigint + $6::bigint, $5, $6, $7)`,
    [t.clientCode, t.requestId, t.key, t.kind, t.unappliedMinor.toString(), t.allocatedMinor.toString(), t.occurredAt],
  )
}
