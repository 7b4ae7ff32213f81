import { type Hold, holdsFromRow } from '../../domain/holds.ts'
import { paymentRequestExpired } from '../../domain/money-rules.ts'
import { Problem } from '../../domain/problems.ts'
import { lockIdentity } from '../../store/locks.ts'
import { catchUpReceivable } from '../holds/client-facts-store.ts'
import type { PaymentProvider, ProviderOutcome } from '../payments/provider.ts'
import { allocateToReceivable, findPayment, insertPayment, type PaymentRow } from '../payments/store.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import {
  lockPaymentRequest,
  type PaymentRequestRow,
  type PaymentRequestStatus,
  receivableHoldsNow,
  setPaymentRequestStatus,
} from './store.ts'

/**
 * Recording what a payment provider decided. Every confirmation, whatever its source (the hosted page's
 * sandbox form, the operator `simulate`, a future provider webhook), goes through `recordOutcome`:
 *
 * - the request is row-locked first, so two confirmations of one request run one after the other and the
 *   second sees the first's Payment (one Payment per request, whatever the race);
 * - an expiry not yet recorded is recorded first (status expired, revision + 1, `payment_request.expired`);
 * - the same outcome again returns the one Payment and changes nothing; the opposite outcome after a
 *   decision, or any outcome on an expired request, is 409 payment_request_state_conflict;
 * - a confirmed Payment allocates min(amount, workingAmount) to the Receivable in the same transaction.
 */
export const paymentRequestNotFound = (id: string) => new Problem('payment_request_not_found', `No Payment request ${id} for this client.`)

export const recoveryHeld = (holds: readonly string[]) =>
  new Problem('recovery_held', `The Receivable is held (${holds.join(', ')}); no payment can be asked for or taken through the sandbox.`, {
    extensions: { holds },
  })

/** Where a Payment request stands for a debtor who would pay it now. */
export type Payability = { state: 'payable' } | { state: 'held'; holds: Hold[] } | { state: 'expired' | 'confirmed' | 'failed' }

/**
 * May this request be paid now? The one decision of the hosted page's GET (whether it offers the form), its
 * POST and the operator's simulate (whether they take the payment): payable while the request is open, its
 * expiresAt has not passed, and its Receivable has no hold as it is now. `holds` are the Receivable's holds now:
 * client-wide facts included at once, not when the background fan-out reaches it (payment-requests/store.ts,
 * receivableHoldsNow and the page's read use the same facts).
 */
export function payability(
  request: { status: PaymentRequestStatus; expires_at: string },
  holds: readonly Hold[],
  nowMs: number,
): Payability {
  if (request.status !== 'open') return { state: request.status }
  if (paymentRequestExpired(request.expires_at, nowMs)) return { state: 'expired' }
  if (holds.length > 0) return { state: 'held', holds: [...holds] }
  return { state: 'payable' }
}

/** Records the expiry of a locked open request whose expiresAt has passed; returns the row as it now is. */
export async function recordExpiryIfDue(
  uow: UnitOfWork,
  clientCode: string,
  row: PaymentRequestRow,
  now: string,
): Promise<PaymentRequestRow> {
  if (row.status !== 'open' || !paymentRequestExpired(row.expires_at, Date.parse(now))) return row
  const expired = await setPaymentRequestStatus(uow.tx, clientCode, row.external_payment_request_id, 'expired', now)
  uow.appendChange(clientCode, {
    type: 'payment_request.expired',
    resourceType: 'payment_request',
    resourceId: row.external_payment_request_id,
    revision: Number(expired.revision),
    occurredAt: now,
  })
  return expired
}

export interface RecordedOutcome {
  /** True when this call made the Payment; false when it had already been recorded. */
  created: boolean
  payment: PaymentRow
}

export async function recordOutcome(
  uow: UnitOfWork,
  clientCode: string,
  requestId: string,
  outcome: ProviderOutcome,
  now: string,
  opts: { refuseWhileHeld: boolean },
): Promise<RecordedOutcome> {
  const { tx } = uow
  const locked = await lockPaymentRequest(tx, clientCode, requestId)
  if (!locked) throw paymentRequestNotFound(requestId)
  const request = await recordExpiryIfDue(uow, clientCode, locked, now)
  const existing = await findPayment(tx, clientCode, requestId)
  if (existing) {
    if (existing.status === outcome.outcome) return { created: false, payment: existing }
    throw new Problem(
      'payment_request_state_conflict',
      `The provider already decided this Payment request: its Payment is ${existing.status}; it cannot become ${outcome.outcome}.`,
      { extensions: { status: request.status } },
    )
  }
  if (request.status !== 'open') {
    throw new Problem('payment_request_state_conflict', `The Payment request is ${request.status}; it takes no payment.`, {
      extensions: { status: request.status },
    })
  }
  if (outcome.currency !== request.currency || outcome.amountMinor !== BigInt(request.amount_minor)) {
    throw new Error(`provider ${outcome.provider} reported an amount other than the request's`)
  }
  const receivableId = request.external_receivable_id
  await lockIdentity(tx, clientCode, 'receivable', receivableId)
  if (opts.refuseWhileHeld) {
    // Its holds as they are now, client-wide changes the fan-out has not brought to it yet included.
    // (The catch-up gives the Receivable its revision and event; the judgement below needs no catch-up.)
    const caughtUp = await catchUpReceivable(tx, clientCode, receivableId, now)
    if (caughtUp) uow.appendChange(clientCode, caughtUp)
    const verdict = payability(request, holdsFromRow((await receivableHoldsNow(tx, clientCode, receivableId)) ?? {}), Date.parse(now))
    if (verdict.state === 'held') throw recoveryHeld(verdict.holds)
    // Open and unexpired (both checked above): only a hold could refuse it here.
    if (verdict.state !== 'payable') throw new Error(`an open request judged ${verdict.state}`)
  }
  const allocation =
    outcome.outcome === 'confirmed'
      ? await allocateToReceivable(tx, clientCode, receivableId, outcome.amountMinor, now)
      : { allocatedMinor: 0n, revision: null }
  const payment = await insertPayment(tx, clientCode, {
    requestId,
    receivableId,
    provider: outcome.provider,
    providerPaymentId: outcome.providerPaymentId,
    status: outcome.outcome,
    currency: outcome.currency,
    amountMinor: outcome.amountMinor,
    allocatedMinor: allocation.allocatedMinor,
    unappliedMinor: outcome.outcome === 'confirmed' ? outcome.amountMinor - allocation.allocatedMinor : 0n,
    decidedAt: now,
  })
  const decided = await setPaymentRequestStatus(tx, clientCode, requestId, outcome.outcome, now)
  uow.appendChange(clientCode, {
    type: `payment.${outcome.outcome}`,
    resourceType: 'payment',
    resourceId: requestId,
    revision: 1,
    occurredAt: now,
  })
  uow.appendChange(clientCode, {
    type: `payment_request.${outcome.outcome}`,
    resourceType: 'payment_request',
    resourceId: requestId,
    revision: Number(decided.revision),
    occurredAt: now,
  })
  if (allocation.revision !== null) {
    uow.appendChange(clientCode, {
      type: 'receivable.updated',
      resourceType: 'receivable',
      resourceId: receivableId,
      revision: allocation.revision,
      occurredAt: now,
    })
  }
  return { created: true, payment }
}

/**
 * The sandbox's confirmation (the hosted page's form, the operator `simulate`): the provider settles the
 * request as asked, and the outcome is recorded. Refused with 409 recovery_held while the Receivable has any
 * hold: the sandbox takes no money from a held debtor (a real provider's report of money already taken would
 * still be recorded, through recordOutcome without that refusal).
 */
export async function settleInSandbox(
  uow: UnitOfWork,
  provider: PaymentProvider,
  clientCode: string,
  requestId: string,
  outcome: 'confirmed' | 'failed',
  now: string,
): Promise<RecordedOutcome> {
  const request = await lockPaymentRequest(uow.tx, clientCode, requestId)
  if (!request) throw paymentRequestNotFound(requestId)
  const settled = provider.settle(
    { clientCode, externalPaymentRequestId: requestId, amountMinor: BigInt(request.amount_minor), currency: request.currency },
    outcome,
  )
  return recordOutcome(uow, clientCode, requestId, settled, now, { refuseWhileHeld: true })
}

/** The payment rules, for the factories that receive them as a `Pick<>`. */
export const paymentRules = { payability, paymentRequestNotFound, recoveryHeld, recordExpiryIfDue, recordOutcome, settleInSandbox }
export type PaymentRules = typeof paymentRules
