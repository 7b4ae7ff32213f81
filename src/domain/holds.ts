/**
 * Holds: every reason recovery may not act on a Receivable now. Computed by one function wherever holds
 * appear (Receivable read, recovery instruction, collection summary), so they can never disagree.
 * An authorized instruction removes only `recovery_not_authorized`; it clears no other hold.
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

export interface HoldFacts {
  instructionState: 'authorized' | 'withdrawn' | 'suspended' | null
  collectionEnabled: boolean
  hasSourceRestriction: boolean
  hasDispute: boolean
  sourceStale: boolean
  status: 'active' | 'paused' | 'closed'
  flaggedByBookDeclaration: boolean
  reconciliationHeld: boolean
}

export function computeHolds(f: HoldFacts): Hold[] {
  const holds: Hold[] = []
  if (f.instructionState !== 'authorized') holds.push('recovery_not_authorized')
  if (!f.collectionEnabled) holds.push('collection_not_enabled')
  if (f.hasSourceRestriction) holds.push('source_restriction')
  if (f.hasDispute) holds.push('dispute')
  if (f.sourceStale) holds.push('source_stale')
  if (f.status !== 'active' || f.flaggedByBookDeclaration) holds.push('other_protection')
  if (f.reconciliationHeld) holds.push('reconciliation_hold')
  return holds
}
