/**
 * Holds: every reason recovery may not act on a Receivable now. Defined once, here, as SQL predicates over
 * the `receivable_hold_facts` view, and used by every place holds appear: the Receivable
 * read, the recovery instruction response and the collection summary's counts. An authorized instruction
 * removes only `recovery_not_authorized`; it clears no other hold.
 *
 * `source_stale` reads the client's recorded freshness, which only a transaction flips (the Source write that makes
 * the client fresh, or the freshness sweeper when time runs out), as of the Receivable's last client fact.
 */
export const HOLD_CATEGORIES = [
  'recovery_not_authorized',
  'collection_not_enabled',
  'source_restriction',
  'dispute',
  'source_stale',
  'other_protection',
  'reconciliation_hold',
] as const

export type Hold = (typeof HOLD_CATEGORIES)[number]

/**
 * The one home of holds is this file. The view `receivable_hold_facts`
 * (src/store/migrations/definitions/02_receivable_hold_facts.sql) only gathers facts: exactly these columns, no
 * rule. test/domain/holds-definition.test.ts checks that the view's columns are exactly HOLD_VIEW_COLUMNS and that
 * the predicates read only HOLD_FACTS, so a new hold that needs a new fact fails there until the definition file
 * adds it to the view.
 */
export const HOLD_FACTS = [
  'instruction_state',
  'collection_enabled',
  'has_source_restriction',
  'has_dispute',
  'source_stale',
  'status',
  'flagged',
  'reconciliation_held',
] as const

/** Every column of the view: its key, the hold facts, and the amounts the collection summary sums. */
export const HOLD_VIEW_COLUMNS = [
  'client_code',
  'external_receivable_id',
  ...HOLD_FACTS,
  'currency',
  'source_amount_minor',
  'confirmed_unreconciled_minor',
] as const

/** SQL predicate per hold over alias `h` (receivable_hold_facts). */
export function holdPredicates(): Record<Hold, string> {
  return {
    recovery_not_authorized: `h.instruction_state <> 'authorized'`,
    collection_not_enabled: 'NOT h.collection_enabled',
    source_restriction: 'h.has_source_restriction',
    dispute: 'h.has_dispute',
    source_stale: 'h.source_stale',
    other_protection: `(h.status <> 'active' OR h.flagged)`,
    reconciliation_hold: 'h.reconciliation_held',
  }
}

/** `hold_<category>` boolean columns for a SELECT over alias `h`. */
export function holdColumns(): string {
  return Object.entries(holdPredicates())
    .map(([hold, predicate]) => `(${predicate}) AS hold_${hold}`)
    .join(', ')
}

export function holdsFromRow(row: object): Hold[] {
  const r = row as Record<string, unknown>
  return HOLD_CATEGORIES.filter((h) => r[`hold_${h}`] === true)
}
