import { holdsFromRow } from '../../domain/holds.ts'
import { isProblem } from '../../domain/problems.ts'
import type { ProviderRequests } from '../payments/ports.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import {
  AmountMismatchError,
  amountFits,
  cancelAtPayTime,
  confirmationOf,
  lockReceivableToPay,
  payability,
  paymentRequestNotFound,
  recordExpiryIfDue,
  recordOutcome,
  recordReversal,
  recoveryHeld,
} from './payment-rules.ts'
import { lockPaymentRequest } from './store.ts'

/**
 * What a payment request does for the provider side (payments/ports.ts `ProviderRequests`; payments/checkout.ts and
 * payments/provider-events.ts call it, src/app.ts gives it to them): the rules of payment-rules.ts, in the order they
 * keep under the request's lock.
 */
async function lockToPay(uow: UnitOfWork, clientCode: string, requestId: string, now: string, nowMs: number) {
  const locked = await lockPaymentRequest(uow.tx, clientCode, requestId)
  if (!locked) throw paymentRequestNotFound(requestId)
  const request = await recordExpiryIfDue(uow, clientCode, locked, now)
  if (request.status !== 'open') {
    // Confirmed: null (the page shows it); expired, canceled or failed: refused, as the page's form is.
    confirmationOf(payability(request, [], nowMs), 'confirmed')
    return null
  }
  return {
    expiresAt: request.expires_at,
    async payTimeCheck() {
      const receivable = await lockReceivableToPay(uow, clientCode, request, now, true)
      const holds = holdsFromRow(receivable)
      if (holds.length > 0) throw recoveryHeld(holds)
      if (amountFits(receivable, BigInt(request.amount_minor)).fits) return true
      await cancelAtPayTime(uow, clientCode, requestId, now)
      return false
    },
  }
}

const recordPaid: ProviderRequests['recordPaid'] = async (uow, provider, clientCode, fact, now) => {
  let outcome: Awaited<ReturnType<typeof recordOutcome>>
  try {
    outcome = await recordOutcome(
      uow,
      clientCode,
      fact.requestId,
      'confirmed',
      () => ({
        provider,
        providerPaymentId: fact.providerPaymentId,
        outcome: 'confirmed',
        amountMinor: fact.amountMinor,
        currency: fact.currency,
      }),
      now,
      // Money already taken is recorded whatever the holds: the pay-time check ran before the debtor paid.
      { refuseWhileHeld: false },
    )
  } catch (err) {
    if (err instanceof AmountMismatchError) return { taken: false }
    if (isProblem(err) && (err.code === 'payment_request_state_conflict' || err.code === 'payment_request_not_found')) {
      return { taken: false }
    }
    throw err
  }
  // Canceled meanwhile, or paid through another session (another Payment): the request cannot take this money.
  if (outcome.canceled || outcome.payment.provider_payment_id !== fact.providerPaymentId) return { taken: false }
  return { taken: true, created: outcome.created, unappliedMinor: BigInt(outcome.payment.unapplied_minor) }
}

export const providerRequests: ProviderRequests = {
  lockToPay,
  async lock(uow, clientCode, requestId) {
    return (await lockPaymentRequest(uow.tx, clientCode, requestId)) !== undefined
  },
  recordPaid,
  async recordReversal(uow, clientCode, requestId, amount, now) {
    await recordReversal(uow, clientCode, requestId, amount, now)
  },
}
