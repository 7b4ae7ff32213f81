import type { Tx } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'

/**
 * SQL of Source restrictions and Disputes (src/resources/holds/restrictions.ts): the `restrictions` rows the hold
 * view reads, and the suspension of the recovery instructions a restriction now protects.
 */

export async function restrictionsOf(tx: Tx, clientCode: string, subjectType: 'customer' | 'receivable', subjectId: string) {
  return tx.query<{ type: string; reference: string | null }>(
    'SELECT type, reference FROM restrictions WHERE client_code = $1 AND subject_type = $2 AND subject_id = $3 ORDER BY type',
    [clientCode, subjectType, subjectId],
  )
}

/** Replaces the subject's restrictions with `next` (already sorted by type). */
export async function replaceRestrictions(
  tx: Tx,
  clientCode: string,
  subjectType: 'customer' | 'receivable',
  subjectId: string,
  next: readonly { type: string; reference: string | null }[],
): Promise<void> {
  // Both sent before either answer is awaited: one round trip.
  const deleted = tx.query('DELETE FROM restrictions WHERE client_code = $1 AND subject_type = $2 AND subject_id = $3', [
    clientCode,
    subjectType,
    subjectId,
  ])
  const inserted =
    next.length > 0
      ? tx.query(
          `INSERT INTO restrictions (client_code, subject_type, subject_id, type, reference)
           SELECT $1, $2, $3, t, r FROM unnest($4::text[], $5::text[]) AS x(t, r)`,
          [clientCode, subjectType, subjectId, next.map((r) => r.type), next.map((r) => r.reference)],
        )
      : undefined
  await answersInOrder([deleted, inserted])
}

export async function receivablesOfCustomer(tx: Tx, clientCode: string, customerId: string): Promise<string[]> {
  const rows = await tx.query<{ external_receivable_id: string }>(
    'SELECT external_receivable_id FROM receivable_customers WHERE client_code = $1 AND external_customer_id = $2 ORDER BY 1',
    [clientCode, customerId],
  )
  return rows.map((r) => r.external_receivable_id)
}

/**
 * The service's own revision of the authorized instructions of these Receivables (all of them, or only those a
 * restriction or Dispute now protects): suspended, revision + 1, recorded in the history with why.
 */
export async function suspendInstructions(
  tx: Tx,
  clientCode: string,
  receivableIds: readonly string[],
  now: string,
  cause: string,
  onlyRestricted: boolean,
): Promise<void> {
  if (receivableIds.length === 0) return
  await tx.query(
    `WITH s AS (
       UPDATE recovery_instructions ri SET state = 'suspended', revision = ri.revision + 1, recorded_at = $3
         FROM receivable_hold_facts h
        WHERE ri.client_code = $1 AND ri.external_receivable_id = ANY($2::text[]) AND ri.state = 'authorized'
          AND h.client_code = ri.client_code AND h.external_receivable_id = ri.external_receivable_id
          AND (NOT $4::boolean OR h.has_dispute OR h.has_source_restriction)
        RETURNING ri.external_instruction_id, ri.revision, ri.effective_at)
     INSERT INTO recovery_instruction_history (client_code, external_instruction_id, revision, state, actor, cause, effective_at, recorded_at)
     SELECT $1, s.external_instruction_id, s.revision, 'suspended', 'service', $5, s.effective_at, $3 FROM s`,
    [clientCode, receivableIds, now, onlyRestricted, cause],
  )
}
