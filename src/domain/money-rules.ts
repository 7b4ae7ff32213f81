/**
 * The rules about a debtor's money that both TypeScript and SQL compute, each defined once on each side: here, and
 * as an SQL function in src/store/migrations/definitions/01_money_rules.sql (the same name in snake_case).
 * test/domain/money-rules.test.ts checks on each engine that the two agree over generated amounts and instants;
 * a change to a rule changes both, and that test fails until they agree again.
 */

/** The amounts the working amount is computed from, as stored on the Receivable (minor units). */
export interface WorkingAmountFacts {
  sourceAmountMinor: bigint
  confirmedUnreconciledMinor: bigint
  /** Money matched receipt lines acknowledged after the Source last declared the balance (receivables.acknowledged_undeclared_minor). */
  acknowledgedUndeclaredMinor: bigint
}

/**
 * What recovery may still collect on a Receivable (docs/design/money.md): its Source amount less what confirmed
 * Payments took that the Source has not acknowledged, less what the Source acknowledged but has not yet included in
 * a declaration of the balance, never below zero. So reconciling a Payment never raises it; the Source's next
 * declaration (which includes the acknowledged receipt) replaces it. SQL: working_amount_minor(source_amount_minor,
 * confirmed_unreconciled_minor, acknowledged_undeclared_minor).
 */
export function workingAmountMinor(facts: WorkingAmountFacts): bigint {
  const working = facts.sourceAmountMinor - facts.confirmedUnreconciledMinor - facts.acknowledgedUndeclaredMinor
  return working > 0n ? working : 0n
}

/**
 * Whether an open Payment request is expired at `nowMs`: from its expiresAt on, the instant itself included.
 * SQL: payment_request_expired(expires_at, as_of).
 */
export function paymentRequestExpired(expiresAt: string, nowMs: number): boolean {
  return Date.parse(expiresAt) <= nowMs
}

/**
 * Allocated money of a Payment that it still holds and no matched receipt line acknowledged: its allocation net of
 * allocated money taken back, less what was matched, never below zero (since unacknowledged money is taken back
 * first, acknowledged money taken back means none is left). What a reconciliation may still match, what a
 * `matching_evidence` resolution requires to be zero, and the `unmatchedAmount` every view reports. A refund or
 * reversal takes this money first (src/resources/payments/take-back.ts).
 */
export function unacknowledgedMinor(p: { allocatedMinor: bigint; takenBackAllocatedMinor: bigint; matchedMinor: bigint }): bigint {
  const left = p.allocatedMinor - p.takenBackAllocatedMinor - p.matchedMinor
  return left > 0n ? left : 0n
}

/** The smaller of two amounts in minor units (bigint has no Math.min). */
export const smallerMinor = (a: bigint, b: bigint): bigint => (a < b ? a : b)
