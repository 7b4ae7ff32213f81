import { canonicalJson } from '../../domain/canonical.ts'
import type { RestrictionT } from '../../domain/restrictions.ts'
import { lockIdentities } from '../../store/locks.ts'
import type { Tx } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import { receivablesOfCustomer, replaceRestrictions, restrictionsOf, suspendInstructions } from './restrictions-store.ts'

/**
 * What these rules need of a unit of work (src/resources/unit-of-work.ts): its transaction and its hold watch.
 * Declared here so that holds stay below the write kernel that depends on them.
 */
export interface HoldWatch {
  readonly tx: Tx
  watchHolds(clientCode: string, ids: readonly string[]): Promise<void>
  recordHoldChanges(now: string): Promise<void>
}

/**
 * What follows a change of Source restrictions or Disputes:
 * - the `restrictions` table is kept in step with the representation (the holds read it);
 * - every authorized instruction of an affected Receivable that is now restricted is suspended by the
 *   service (revision + 1, recorded in the history); clearing the restriction later resumes nothing;
 * - every affected Receivable whose holds changed gets a new revision and a change-feed event (the unit of
 *   work's hold watch).
 * All in the writer's transaction.
 */
export async function syncRestrictions(
  tx: Tx,
  clientCode: string,
  subjectType: 'customer' | 'receivable',
  subjectId: string,
  restrictions: readonly RestrictionT[],
): Promise<boolean> {
  const current = await restrictionsOf(tx, clientCode, subjectType, subjectId)
  const next = [...restrictions].map((r) => ({ type: r.type, reference: r.reference ?? null })).sort((a, b) => (a.type < b.type ? -1 : 1))
  if (canonicalJson(current) === canonicalJson(next)) return false
  await replaceRestrictions(tx, clientCode, subjectType, subjectId, next)
  return true
}

/** Suspends the authorized instructions of these Receivables that a restriction or Dispute now protects. */
export async function suspendRestrictedInstructions(tx: Tx, clientCode: string, receivableIds: readonly string[], now: string) {
  await suspendInstructions(tx, clientCode, receivableIds, now, 'source_restriction_or_dispute_raised', true)
}

/** Suspends every authorized instruction of these Receivables (a reopened Receivable never resumes by itself). */
export async function suspendInstructionsOf(tx: Tx, clientCode: string, receivableIds: readonly string[], now: string, cause: string) {
  await suspendInstructions(tx, clientCode, receivableIds, now, cause, false)
}

/**
 * The whole consequence of a restriction change on some Receivables, with their identities locked in a
 * fixed order first (so a Customer write and a Receivable write touching the same rows cannot deadlock).
 * `locked`: identities the caller already holds.
 */
export async function applyRestrictionChange(
  uow: HoldWatch,
  clientCode: string,
  receivableIds: readonly string[],
  now: string,
  write: () => Promise<void>,
  locked: ReadonlySet<string> = new Set(),
) {
  const ids = [...new Set(receivableIds)].sort()
  // The locks (sorted) and the holds before, in one round trip; the suspension and the holds after, in another.
  const toLock = ids.filter((id) => !locked.has(id)).map((id) => ['receivable', id] as const)
  await answersInOrder([lockIdentities(uow.tx, clientCode, toLock), uow.watchHolds(clientCode, ids)])
  await write()
  // Their new revisions and events come here, before the event of the write that caused them.
  await answersInOrder([suspendRestrictedInstructions(uow.tx, clientCode, ids, now), uow.recordHoldChanges(now)])
}

/** The restriction rules, for the factories that receive them as a `Pick<>`. */
export const restrictionRules = {
  syncRestrictions,
  suspendRestrictedInstructions,
  suspendInstructionsOf,
  applyRestrictionChange,
  receivablesOfCustomer,
}
export type RestrictionRules = typeof restrictionRules
