import { type Hold, holdsFromRow } from '../../domain/holds.ts'
import { paymentRequestExpired, workingAmountMinor } from '../../domain/money-rules.ts'
import { fieldProblem, Problem } from '../../domain/problems.ts'
import { lockIdentity } from '../../store/locks.ts'
import { catchUpReceivable } from '../holds/client-facts-store.ts'
import type { PaymentProvider, ProviderOutcome } from '../payments/provider.ts'
import { allocateToReceivable, findPayment, insertPayment, type PaymentRow } from '../payments/store.ts'
import { takeBack } from '../payments/take-back.ts'
import { paymentNotConfirmed, queueUnappliedRefund, refuseAboveRemaining, remainingMinor } from '../refunds/rules.ts'
import { lockRefundedPayment } from '../refunds/store.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import {
  cancelPaymentRequest,
  findPaymentRequest,
  lockPayingReceivable,
  lockPaymentRequest,
  type PayingReceivableRow,
  type PaymentRequestRow,
  type PaymentRequestStatus,
  setPaymentRequestStatus,
} from './store.ts'

/**
 * Recording what a payment provider decided. Every confirmation, whatever its source (the hosted page's
 * sandbox form, the operator `simulate`, a future provider webhook), goes through `recordOutcome`:
 *
 * - the request is row-locked first, and only once, so two confirmations of one request run one after the other
 *   and the second sees the first's Payment (one Payment per request, whatever the race);
 * - an expiry not yet recorded is recorded first (status expired, revision + 1, `payment_request.expired`);
 * - whether it takes the payment is confirmationOf(payability(...)), the hosted page's decision too: the same
 *   outcome again returns the one Payment and changes nothing; the opposite outcome after a decision, or any
 *   outcome on an expired request, is 409 payment_request_state_conflict;
 * - at the commit point (the sandbox: the page's POST and simulate), an amount that no longer fits the working amount
 *   less the open requests made before it cancels the request instead (`balance_changed`), and nothing is charged;
 * - a confirmed Payment allocates min(amount, workingAmount) to the Receivable in the same transaction.
 */
export const paymentRequestNotFound = (id: string) => new Problem('payment_request_not_found', `No Payment request ${id} for this client.`)

export const recoveryHeld = (holds: readonly string[]) =>
  new Problem('recovery_held', `The Receivable is held (${holds.join(', ')}); no payment can be asked for or taken through the sandbox.`, {
    extensions: { holds },
  })

/** Where a Payment request stands for a debtor who would pay it now. */
export type Payability =
  | { state: 'payable' }
  | { state: 'held'; holds: Hold[] }
  | { state: 'expired' | 'confirmed' | 'failed' | 'canceled' }

/**
 * May this request be paid now? The one decision of the hosted page's GET (whether it offers the form), its
 * POST and the operator's simulate (whether they take the payment): payable while the request is open, its
 * expiresAt has not passed, and its Receivable has no hold as it is now. `holds` are the Receivable's holds now:
 * client-wide facts included at once, not when the background fan-out reaches it (payment-requests/store.ts,
 * lockPayingReceivable and the page's read use the same facts).
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

export type RecordedOutcome =
  | {
      canceled?: undefined
      /** True when this call made the Payment; false when it had already been recorded. */
      created: boolean
      /** The request as the transaction leaves it (decided, or as it was when the outcome was already recorded). */
      request: PaymentRequestRow
      payment: PaymentRow
    }
  | {
      /** The pay-time check canceled the request (`balance_changed`): nothing was charged, no Payment exists. */
      canceled: true
      created: false
      request: PaymentRequestRow
      payment: null
    }

/**
 * The pay-time check (docs/design/money.md): may a request for `amountMinor` still be paid from this Receivable,
 * read under its lock? Its working amount less what the other open requests reserve (lockPayingReceivable: at pay
 * time those made before it; at creation every other). Returns the figures, for the
 * answer that says why not.
 */
export function amountFits(
  receivable: PayingReceivableRow,
  amountMinor: bigint,
): { fits: boolean; workingMinor: bigint; reservedMinor: bigint } {
  const workingMinor = workingAmountMinor({
    sourceAmountMinor: BigInt(receivable.source_amount_minor),
    confirmedUnreconciledMinor: BigInt(receivable.confirmed_unreconciled_minor),
    acknowledgedUndeclaredMinor: BigInt(receivable.acknowledged_undeclared_minor),
  })
  const reservedMinor = BigInt(receivable.reserved_minor)
  return { fits: amountMinor <= workingMinor - reservedMinor, workingMinor, reservedMinor }
}

/** What a payment tried on a request the pay-time check canceled answers (simulate), after the cancel committed. */
export const canceledAtPayTime = (amount: { amount: string; currency: string }) =>
  new Problem(
    'payment_request_state_conflict',
    `The Receivable's balance changed: ${amount.amount} ${amount.currency} no longer fits its working amount less the open requests made before it, so the Payment request was canceled (balance_changed) and nothing was charged.`,
    { extensions: { paymentRequestStatus: 'canceled', cancelReason: 'balance_changed' } },
  )

/**
 * What a confirmation asking for `outcome` may do with a request that stands at `verdict` (payability): `take`
 * it (record the Payment), or find it `already` taken that way (the same outcome again: its one Payment stands and
 * nothing changes). Refused otherwise: 409 recovery_held while the Receivable has a hold, 409
 * payment_request_state_conflict when the request expired or the provider decided it the other way. The one
 * decision of the hosted page's POST (on its read, before any transaction) and of every confirmation (on the
 * locked request, recordOutcome).
 */
export function confirmationOf(verdict: Payability, outcome: 'confirmed' | 'failed'): 'take' | 'already' {
  if (verdict.state === 'payable') return 'take'
  if (verdict.state === outcome) return 'already'
  if (verdict.state === 'held') throw recoveryHeld(verdict.holds)
  const detail =
    verdict.state === 'expired' || verdict.state === 'canceled'
      ? `The Payment request is ${verdict.state}; it takes no payment.`
      : `The provider already decided this Payment request: its Payment is ${verdict.state}; it cannot become ${outcome}.`
  throw new Problem('payment_request_state_conflict', detail, { extensions: { paymentRequestStatus: verdict.state } })
}

/**
 * The Receivable of an open request about to be paid, identity- and row-locked, with what the open requests made
 * before this one reserve (their claims came first: docs/decisions.md) and, with `judgeHolds`, its holds as they are
 * now (client-wide changes the fan-out has not brought to it yet caught up first, with their revision and event).
 * The pay-time check of every way of paying (recordOutcome, checkout.ts) reads it.
 */
export async function lockReceivableToPay(
  uow: UnitOfWork,
  clientCode: string,
  request: PaymentRequestRow,
  now: string,
  judgeHolds: boolean,
): Promise<PayingReceivableRow> {
  const { tx } = uow
  const receivableId = request.external_receivable_id
  await lockIdentity(tx, clientCode, 'receivable', receivableId)
  if (judgeHolds) {
    // The catch-up gives the Receivable its revision and event; the judgement needs no catch-up.
    const caughtUp = await catchUpReceivable(tx, clientCode, receivableId, now)
    if (caughtUp) uow.appendChange(clientCode, caughtUp)
  }
  const id = request.external_payment_request_id
  const receivable = await lockPayingReceivable(tx, clientCode, receivableId, { id, createdAt: request.created_at }, now)
  if (!receivable) throw new Error(`Receivable ${receivableId} of Payment request ${id} is missing`)
  return receivable
}

/** The pay-time check's refusal: the locked open request is canceled (`balance_changed`), and nothing is charged. */
export async function cancelAtPayTime(uow: UnitOfWork, clientCode: string, requestId: string, now: string): Promise<PaymentRequestRow> {
  const canceled = await cancelPaymentRequest(uow.tx, clientCode, requestId, 'balance_changed', null, now)
  uow.appendChange(clientCode, {
    type: 'payment_request.canceled',
    resourceType: 'payment_request',
    resourceId: requestId,
    revision: Number(canceled.revision),
    occurredAt: now,
  })
  return canceled
}

/** A provider reported money in another amount or currency than the request's: the request cannot take it. */
export class AmountMismatchError extends Error {
  override readonly name = 'AmountMismatchError'
}

/**
 * Records what a provider decided about a request. `report` is the provider's account of the Payment, asked only
 * when the request takes it (the sandbox settles the request then). With `refuseWhileHeld` (the sandbox) a held
 * Receivable refuses the payment; a real provider's report of money already taken is recorded whatever the holds.
 */
export async function recordOutcome(
  uow: UnitOfWork,
  clientCode: string,
  requestId: string,
  outcome: 'confirmed' | 'failed',
  report: (request: PaymentRequestRow) => ProviderOutcome,
  now: string,
  opts: { refuseWhileHeld: boolean },
): Promise<RecordedOutcome> {
  const { tx } = uow
  // The one lock of the request: a second confirmation waits here, then finds the request decided.
  const locked = await lockPaymentRequest(tx, clientCode, requestId)
  if (!locked) throw paymentRequestNotFound(requestId)
  const request = await recordExpiryIfDue(uow, clientCode, locked, now)
  const receivableId = request.external_receivable_id
  // An open request may take the payment: its Receivable, locked, with its holds as they are now (client-wide
  // changes the fan-out has not brought to it yet included). A decided or expired one is judged as it stands.
  const receivable = request.status === 'open' ? await lockReceivableToPay(uow, clientCode, request, now, opts.refuseWhileHeld) : undefined
  const holds = receivable && opts.refuseWhileHeld ? holdsFromRow(receivable) : []
  if (confirmationOf(payability(request, holds, Date.parse(now)), outcome) === 'already') {
    // Decided (never open) in the transaction that made its Payment: read after the lock, it is there.
    const payment = await findPayment(tx, clientCode, requestId)
    if (!payment) throw new Error(`Payment request ${requestId} is ${request.status} without its Payment`)
    return { created: false, request, payment }
  }
  // The pay-time check, where the debtor commits (the sandbox): an amount that no longer fits cancels the request,
  // before the provider is asked for anything. A real provider's report of money already taken is recorded as is.
  if (opts.refuseWhileHeld && !amountFits(receivable as PayingReceivableRow, BigInt(request.amount_minor)).fits) {
    return { canceled: true, created: false, request: await cancelAtPayTime(uow, clientCode, requestId, now), payment: null }
  }
  const reported = report(request)
  if (reported.outcome !== outcome) throw new Error(`provider ${reported.provider} reported ${reported.outcome}, not ${outcome}`)
  if (reported.currency !== request.currency || reported.amountMinor !== BigInt(request.amount_minor)) {
    throw new AmountMismatchError(`provider ${reported.provider} reported an amount other than the request's`)
  }
  // Taken only from an open request, whose Receivable was locked and read above.
  const amounts = receivable as PayingReceivableRow
  const allocation =
    outcome === 'confirmed'
      ? await allocateToReceivable(
          tx,
          clientCode,
          receivableId,
          {
            sourceAmountMinor: BigInt(amounts.source_amount_minor),
            confirmedUnreconciledMinor: BigInt(amounts.confirmed_unreconciled_minor),
            acknowledgedUndeclaredMinor: BigInt(amounts.acknowledged_undeclared_minor),
          },
          reported.amountMinor,
          now,
        )
      : { allocatedMinor: 0n, revision: null }
  const payment = await insertPayment(tx, clientCode, {
    requestId,
    receivableId,
    provider: reported.provider,
    providerPaymentId: reported.providerPaymentId,
    status: outcome,
    currency: reported.currency,
    amountMinor: reported.amountMinor,
    allocatedMinor: allocation.allocatedMinor,
    unappliedMinor: outcome === 'confirmed' ? reported.amountMinor - allocation.allocatedMinor : 0n,
    decidedAt: now,
  })
  const decided = await setPaymentRequestStatus(tx, clientCode, requestId, outcome, now)
  uow.appendChange(clientCode, {
    type: `payment.${outcome}`,
    resourceType: 'payment',
    resourceId: requestId,
    revision: 1,
    occurredAt: now,
  })
  uow.appendChange(clientCode, {
    type: `payment_request.${outcome}`,
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
  // Money confirmed beyond what could be allocated never rests unapplied: its refund is under way from now on.
  await queueUnappliedRefund(uow, clientCode, payment, now)
  return { created: true, request: decided, payment }
}

/**
 * A reversal the provider recorded (a card chargeback lost, a bank debit returned; the sandbox's `simulate` with
 * outcome `reversed`): `amountMinor` (default: what remains of the Payment after its refunds pending or succeeded
 * and its reversals) is taken back at once (payments/take-back.ts: unapplied money first, then allocated, with the
 * Receivable's revision and event), the Payment records it as reversed, event `payment.reversed`. Under the
 * request's row lock, the one lock of a refund too: refunds and reversals never pass the Payment's amount together.
 * Refused: 404 for an unknown request, 409 payment_not_confirmed without a confirmed Payment, 422 for a currency
 * other than the Payment's (/amount/currency) or more than remains (/amount/amount), 409
 * payment_request_state_conflict when nothing remains to reverse.
 */
export async function recordReversal(
  uow: UnitOfWork,
  clientCode: string,
  requestId: string,
  amount: { amountMinor: bigint; currency: string } | undefined,
  now: string,
): Promise<{ request: PaymentRequestRow; payment: PaymentRow }> {
  const { tx } = uow
  const refunded = await lockRefundedPayment(tx, clientCode, requestId)
  if (!refunded) throw paymentRequestNotFound(requestId)
  if (refunded.payment_status !== 'confirmed' || refunded.currency === null) throw paymentNotConfirmed(requestId, refunded)
  if (amount && amount.currency !== refunded.currency) {
    throw fieldProblem('/amount/currency', 'custom', `must be ${refunded.currency}, the Payment's currency`)
  }
  const remaining = remainingMinor(refunded)
  if (!amount && remaining === 0n) {
    throw new Problem('payment_request_state_conflict', 'Nothing remains of the Payment to reverse: refunds and reversals took it all.', {
      extensions: { paymentRequestStatus: 'confirmed' },
    })
  }
  const amountMinor = amount?.amountMinor ?? remaining
  refuseAboveRemaining(amountMinor, refunded, '/amount/amount', 'a reversal')
  const taken = await takeBack(uow, clientCode, requestId, 'reversal', amountMinor, now)
  uow.appendChange(clientCode, {
    type: 'payment.reversed',
    resourceType: 'payment',
    resourceId: requestId,
    revision: Number(taken.payment.revision),
    occurredAt: now,
  })
  const request = await findPaymentRequest(tx, clientCode, requestId)
  if (!request) throw new Error(`Payment request ${requestId} vanished under its lock`)
  return { request, payment: taken.payment }
}

/**
 * The sandbox's confirmation (the hosted page's form, the operator `simulate`, both through the service's
 * `confirmOperation`): the provider settles the request as asked, for its amount, and the outcome is recorded.
 * Refused with 409 recovery_held while the Receivable has any hold: the sandbox takes no money from a held debtor.
 */
export function settleInSandbox(
  uow: UnitOfWork,
  provider: { settle: NonNullable<PaymentProvider['settle']> },
  clientCode: string,
  requestId: string,
  outcome: 'confirmed' | 'failed',
  now: string,
): Promise<RecordedOutcome> {
  const report = (request: PaymentRequestRow) =>
    provider.settle(
      { clientCode, externalPaymentRequestId: requestId, amountMinor: BigInt(request.amount_minor), currency: request.currency },
      outcome,
    )
  return recordOutcome(uow, clientCode, requestId, outcome, report, now, { refuseWhileHeld: true })
}

/** The payment rules, for the factories that receive them as a `Pick<>`. */
export const paymentRules = {
  amountFits,
  cancelAtPayTime,
  lockReceivableToPay,
  canceledAtPayTime,
  confirmationOf,
  payability,
  paymentRequestNotFound,
  recoveryHeld,
  recordExpiryIfDue,
  recordOutcome,
  recordReversal,
  settleInSandbox,
}
export type PaymentRules = typeof paymentRules
