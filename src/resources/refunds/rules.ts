import { describeMoney, money } from '../../domain/money.ts'
import { smallerMinor as min } from '../../domain/money-rules.ts'
import { fieldProblem, Problem } from '../../domain/problems.ts'
import type { ProviderRefund } from '../payments/provider.ts'
import type { PaymentRow } from '../payments/store.ts'
import { takeBack } from '../payments/take-back.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import {
  decideRefund,
  findRefund,
  insertRefund,
  lockPendingRefund,
  lockRefundedPayment,
  lockWithheldProviderRefunds,
  type RefundedPaymentRow,
  type RefundKey,
  type RefundReason,
  type RefundRow,
  recordWithheldPart,
} from './store.ts'

/**
 * The rules of money given back (docs/design/money.md; docs/decisions.md, "Refunds and reversals"):
 *
 * - what may still be taken back from a Payment is its amount less its refunds pending or succeeded and its
 *   reversals (`remainingMinor`), read under the request's row lock (store.ts, lockRefundedPayment), so two refunds,
 *   or a refund and a reversal, never pass the amount together;
 * - a refund is created pending and moves nothing; the provider's decision is recorded by `recordRefundOutcome`
 *   (the refund worker, or later a provider's event): succeeded takes the money back (payments/take-back.ts),
 *   failed moves nothing;
 * - a confirmation that could not allocate all of a Payment queues the refund of the rest (`queueUnappliedRefund`)
 *   in its own transaction: money never rests unapplied without a refund under way.
 */

/** The service's own refund of a Payment's unapplied money: one per Payment request, under this identifier. */
export const UNAPPLIED_REFUND_ID = 'unapplied-funds'

export const refundNotFound = (requestId: string, refundId: string) =>
  new Problem('refund_not_found', `No refund ${refundId} of Payment request ${requestId} for this client.`)

export function paymentNotConfirmed(requestId: string, payment: RefundedPaymentRow): Problem {
  return new Problem(
    'payment_not_confirmed',
    payment.payment_status === 'failed'
      ? `The Payment of Payment request ${requestId} failed; there is no money to give back.`
      : `Payment request ${requestId} has no provider-confirmed Payment; there is no money to give back.`,
  )
}

/** What refunds and reversals together may still take back from a confirmed Payment. */
export function remainingMinor(payment: RefundedPaymentRow): bigint {
  return BigInt(payment.amount_minor ?? '0') - BigInt(payment.refunds_minor) - BigInt(payment.reversed_minor ?? '0')
}

/** Refuses an amount above what remains, at `pointer`, the detail giving both figures. */
export function refuseAboveRemaining(amountMinor: bigint, payment: RefundedPaymentRow, pointer: string, what: string): void {
  const remaining = remainingMinor(payment)
  if (amountMinor <= remaining) return
  const currency = payment.currency ?? ''
  throw fieldProblem(
    pointer,
    'custom',
    `${what} of ${describeMoney(amountMinor, currency)} exceeds what remains of the Payment (${describeMoney(remaining, currency)} of ${describeMoney(BigInt(payment.amount_minor ?? '0'), currency)}, after refunds pending or succeeded and reversals)`,
  )
}

function refundCreated(uow: UnitOfWork, clientCode: string, refund: RefundRow, now: string): void {
  uow.appendChange(clientCode, {
    type: 'refund.created',
    resourceType: 'refund',
    resourceId: refundResourceId(refund),
    revision: Number(refund.revision),
    occurredAt: now,
  })
}

/** A refund's id in the change feed: its request's id and its own, as its path names it. */
export function refundResourceId(refund: Pick<RefundRow, 'external_payment_request_id' | 'external_refund_id'>): string {
  return `${refund.external_payment_request_id}/${refund.external_refund_id}`
}

/** Creates a pending refund (the caller locked the request and checked the amount) with its `refund.created` event. */
export async function createRefund(uow: UnitOfWork, clientCode: string, r: Parameters<typeof insertRefund>[2]): Promise<RefundRow> {
  const refund = await insertRefund(uow.tx, clientCode, r)
  refundCreated(uow, clientCode, refund, r.now)
  return refund
}

/**
 * The confirmation's refund of unapplied money (payment-requests/payment-rules.ts, in the transaction that made the
 * Payment, under its request lock): nothing else was taken back yet, so the whole unapplied amount fits.
 */
export async function queueUnappliedRefund(
  uow: UnitOfWork,
  clientCode: string,
  payment: PaymentRow,
  now: string,
): Promise<RefundRow | null> {
  const unapplied = BigInt(payment.unapplied_minor)
  if (payment.status !== 'confirmed' || unapplied === 0n) return null
  const body = { amount: money(unapplied, payment.currency), reason: 'unapplied_funds' }
  return createRefund(uow, clientCode, {
    requestId: payment.external_payment_request_id,
    refundId: UNAPPLIED_REFUND_ID,
    currency: payment.currency,
    amountMinor: unapplied,
    reason: 'unapplied_funds',
    body,
    now,
  })
}

/**
 * Records the provider's decision on a pending refund, in the caller's transaction: succeeded takes the money back
 * (the Payment's refundedAmount, the Receivable's amounts with its revision and event) and appends
 * `refund.succeeded`; failed appends `refund.failed` and moves nothing. Under a claim (`key.token`), only while
 * the claim is still the caller's: undefined when it is not (another instance took it, or it was decided).
 */
export async function recordRefundOutcome(
  uow: UnitOfWork,
  key: RefundKey,
  outcome: ProviderRefund & { status: 'succeeded' | 'failed' },
  now: string,
): Promise<RefundRow | undefined> {
  const { tx } = uow
  const pending = await lockPendingRefund(tx, key)
  if (!pending) return undefined
  if (outcome.status === 'succeeded')
    await takeBack(uow, key.clientCode, key.requestId, 'refund', BigInt(pending.amount_minor), now, key.refundId)
  const decided = await decideRefund(tx, key, {
    status: outcome.status,
    providerRefundId: outcome.providerRefundId,
    failureReason: outcome.status === 'failed' ? (outcome.failureReason ?? 'declined by the provider') : null,
    now,
  })
  uow.appendChange(key.clientCode, {
    type: `refund.${outcome.status}`,
    resourceType: 'refund',
    resourceId: refundResourceId(decided),
    revision: Number(decided.revision),
    occurredAt: now,
  })
  // A refund the service asked for that failed leaves its amount within reach again: a refund made at the provider
  // meanwhile, and kept waiting because this one counted against the Payment, is recorded now.
  if (outcome.status === 'failed')
    await recordWithheldProviderRefunds(
      uow,
      key.clientCode,
      key.requestId,
      { amountMinor: BigInt(pending.amount_minor), by: key.refundId },
      now,
    )
  return decided
}

/** A refund the provider already made, recorded with origin `provider` and decided succeeded (its money taken back). */
export async function recordProviderMadeRefund(
  uow: UnitOfWork,
  clientCode: string,
  ids: { requestId: string; refundId: string; providerRefundId: string },
  r: { currency: string; amountMinor: bigint; reason: Exclude<RefundReason, 'unapplied_funds'>; body: unknown; now: string },
): Promise<void> {
  await createRefund(uow, clientCode, { ...r, requestId: ids.requestId, refundId: ids.refundId, origin: 'provider' })
  await recordRefundOutcome(
    uow,
    { clientCode, requestId: ids.requestId, refundId: ids.refundId, token: null },
    { providerRefundId: ids.providerRefundId, status: 'succeeded' },
    r.now,
  )
}

/**
 * Refunds made at the provider beyond what their Payment held then (migration 0054; provider-side.ts), recorded as
 * far as `within.amountMinor`, money that came back within reach (`within.by`: the won dispute's reversal, or the
 * service's refund that failed), and what remains of the Payment allow: each a refund of origin `provider`, under the
 * provider's refund id the first time, `<provider refund id>-<by>` after. The request's row is locked first (the order
 * of every refund and reversal). Answers the amount recorded.
 */
export async function recordWithheldProviderRefunds(
  uow: UnitOfWork,
  clientCode: string,
  requestId: string,
  within: { amountMinor: bigint; by: string },
  now: string,
): Promise<bigint> {
  const payment = await lockRefundedPayment(uow.tx, clientCode, requestId)
  if (payment?.payment_status !== 'confirmed') return 0n
  const waiting = await lockWithheldProviderRefunds(uow.tx, clientCode, requestId)
  let room = min(within.amountMinor, remainingMinor(payment))
  let recorded = 0n
  for (const w of waiting) {
    if (room <= 0n) break
    const amountMinor = min(BigInt(w.waiting_minor), room)
    const first = !(await findRefund(uow.tx, clientCode, requestId, w.provider_refund_id))
    const refundId = first ? w.provider_refund_id : `${w.provider_refund_id}-${within.by}`.slice(0, 128)
    const body = { amount: money(amountMinor, w.currency), reason: w.reason }
    const ids = { requestId, refundId, providerRefundId: w.provider_refund_id }
    await recordProviderMadeRefund(uow, clientCode, ids, { currency: w.currency, amountMinor, reason: w.reason, body, now })
    await recordWithheldPart(uow.tx, clientCode, { provider: w.provider, providerRefundId: w.provider_refund_id, amountMinor })
    room -= amountMinor
    recorded += amountMinor
  }
  return recorded
}
