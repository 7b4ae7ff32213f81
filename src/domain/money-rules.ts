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
}

/**
 * What recovery may still collect on a Receivable: its Source amount less what confirmed Payments took and no
 * reconciliation has settled yet, never below zero. SQL: working_amount_minor(source_amount_minor,
 * confirmed_unreconciled_minor).
 */
export function workingAmountMinor(facts: WorkingAmountFacts): bigint {
  const working = facts.sourceAmountMinor - facts.confirmedUnreconciledMinor
  return working > 0n ? working : 0n
}

/**
 * Whether an open Payment request is expired at `nowMs`: from its expiresAt on, the instant itself included.
 * SQL: payment_request_expired(expires_at, as_of).
 */
export function paymentRequestExpired(expiresAt: string, nowMs: number): boolean {
  return Date.parse(expiresAt) <= nowMs
}
