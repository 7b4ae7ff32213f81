/**
 * Holds: every reason recovery may not act on a Receivable now. Defined once, here, as SQL predicates over
 * the `receivable_hold_facts` view (migration 0005), and used by every place holds appear: the Receivable
 * read, the recovery instruction response and the collection summary's counts. An authorized instruction
 * removes only `recovery_not_authorized`; it clears no other hold.
 *
 * `source_stale` reads the client's recorded freshness (migration 0006), which only a transaction flips:
 * the Source write that makes the client fresh, or the freshness sweeper when time runs out.
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
