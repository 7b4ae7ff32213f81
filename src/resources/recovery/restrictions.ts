import { canonicalJson } from '../../domain/canonical.ts'
import { holdsFromRow } from '../../domain/holds.ts'
import type { RestrictionT } from '../../domain/restrictions.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Tx } from '../../store/store.ts'
import { findReceivables, recordReceivableChanges } from '../receivables/store.ts'

/**
 * What follows a change of Source restrictions or Disputes:
 * - the `restrictions` table is kept in step with the representation (the holds read it);
 * - every authorized instruction of an affected Receivable that is now restricted is suspended by the
 *   service (revision + 1, recorded in the history); clearing the restriction later resumes nothing;
 * - every affected Receivable whose holds changed gets a new revision and a change-feed event.
 * All in the writer's transaction.
 */
export async function syncRestrictions(
  tx: Tx,
  clientCode: string,
  subjectType: 'customer' | 'receivable',
  subjectId: string,
  restrictions: readonly RestrictionT[],
): Promise<boolean> {
  const current = await tx.query<{ type: string; reference: string | null }>(
    'SELECT type, reference FROM restrictions WHERE client_code = $1 AND subject_type = $2 AND subject_id = $3 ORDER BY type',
    [clientCode, subjectType, subjectId],
  )
  const next = [...restrictions].map((r) => ({ type: r.type, reference: r.reference ?? null })).sort((a, b) => (a.type < b.type ? -1 : 1))
  if (canonicalJson(current) === canonicalJson(next)) return false
  await tx.query('DELETE FROM restrictions WHERE client_code = $1 AND subject_type = $2 AND subject_id = $3', [
    clientCode,
    subjectType,
    subjectId,
  ])
  if (next.length > 0) {
    await tx.query(
      `INSERT INTO restrictions (client_code, subject_type, subject_id, type, reference)
       SELECT $1, $2, $3, t, r FROM unnest($4::text[], $5::text[]) AS x(t, r)`,
      [clientCode, subjectType, subjectId, next.map((r) => r.type), next.map((r) => r.reference)],
    )
  }
  return true
}

export async function receivablesOfCustomer(tx: Tx, clientCode: string, customerId: string): Promise<string[]> {
  const rows = await tx.query<{ external_receivable_id: string }>(
    'SELECT external_receivable_id FROM receivable_customers WHERE client_code = $1 AND external_customer_id = $2 ORDER BY 1',
    [clientCode, customerId],
  )
  return rows.map((r) => r.external_receivable_id)
}

export type HoldSnapshot = Map<string, string>

/** Holds of these Receivables now (freshness is not affected by the writes that track holds). */
export async function holdSnapshot(tx: Tx, clientCode: string, ids: readonly string[]): Promise<HoldSnapshot> {
  if (ids.length === 0) return new Map()
  const rows = await findReceivables(tx, clientCode, ids)
  return new Map(rows.map((r) => [r.external_receivable_id, holdsFromRow(r).join(',')]))
}

/** A new revision and a change event for each Receivable whose holds differ from `before`. */
export async function recordHoldChanges(
  tx: Tx,
  clientCode: string,
  before: HoldSnapshot,
  now: string,
  skip: ReadonlySet<string> = new Set(),
) {
  const after = await holdSnapshot(tx, clientCode, [...before.keys()])
  const changed = [...before.keys()].filter((id) => !skip.has(id) && before.get(id) !== after.get(id))
  await recordReceivableChanges(tx, clientCode, { only: changed }, now)
}

/** Suspends the authorized instructions of these Receivables that a restriction or Dispute now protects. */
export async function suspendRestrictedInstructions(tx: Tx, clientCode: string, receivableIds: readonly string[], now: string) {
  await suspend(tx, clientCode, receivableIds, now, 'source_restriction_or_dispute_raised', true)
}

/** Suspends every authorized instruction of these Receivables (a reopened Receivable never resumes by itself). */
export async function suspendInstructionsOf(tx: Tx, clientCode: string, receivableIds: readonly string[], now: string, cause: string) {
  await suspend(tx, clientCode, receivableIds, now, cause, false)
}

/** The service's own revision of an instruction: suspended, revision + 1, recorded in the history with why. */
async function suspend(tx: Tx, clientCode: string, receivableIds: readonly string[], now: string, cause: string, onlyRestricted: boolean) {
  if (receivableIds.length === 0) return
  const suspended = await tx.query<{ external_instruction_id: string; revision: string; effective_at: string }>(
    `UPDATE recovery_instructions ri SET state = 'suspended', revision = ri.revision + 1, recorded_at = $3
       FROM receivable_hold_facts h
      WHERE ri.client_code = $1 AND ri.external_receivable_id = ANY($2::text[]) AND ri.state = 'authorized'
        AND h.client_code = ri.client_code AND h.external_receivable_id = ri.external_receivable_id
        AND (NOT $4::boolean OR h.has_dispute OR h.has_source_restriction)
      RETURNING ri.external_instruction_id, ri.revision, ri.effective_at`,
    [clientCode, receivableIds, now, onlyRestricted],
  )
  if (suspended.length === 0) return
  await tx.query(
    `INSERT INTO recovery_instruction_history (client_code, external_instruction_id, revision, state, actor, cause, effective_at, recorded_at)
     SELECT $1, i, r, 'suspended', 'service', $6, e, $5 FROM unnest($2::text[], $3::bigint[], $4::text[]) AS x(i, r, e)`,
    [
      clientCode,
      suspended.map((x) => x.external_instruction_id),
      suspended.map((x) => x.revision),
      suspended.map((x) => x.effective_at),
      now,
      cause,
    ],
  )
}

/**
 * The whole consequence of a restriction change on some Receivables, with their identities locked in a
 * fixed order first (so a Customer write and a Receivable write touching the same rows cannot deadlock).
 */
export async function applyRestrictionChange(
  tx: Tx,
  clientCode: string,
  receivableIds: readonly string[],
  now: string,
  write: () => Promise<void>,
  skipRevision: ReadonlySet<string> = new Set(),
) {
  const ids = [...new Set(receivableIds)].sort()
  for (const id of ids) if (!skipRevision.has(id)) await lockIdentity(tx, clientCode, 'receivable', id)
  const before = await holdSnapshot(tx, clientCode, ids)
  await write()
  await suspendRestrictedInstructions(tx, clientCode, ids, now)
  await recordHoldChanges(tx, clientCode, before, now, skipRevision)
}
