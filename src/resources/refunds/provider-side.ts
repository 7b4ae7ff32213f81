import { money } from '../../domain/money.ts'
import type { ProviderRefunds } from '../payments/ports.ts'
import { createRefund, recordRefundOutcome, remainingMinor } from './rules.ts'
import { findRefund, lockRefundedPayment } from './store.ts'

/**
 * What refunds do for the provider side (payments/ports.ts `ProviderRefunds`; payments/provider-events.ts calls it,
 * src/app.ts gives it): a decision the provider made on a refund the service asked for, a refund made at the
 * provider (its Dashboard), and what remains of a Payment a dispute takes back from.
 */
export const providerRefunds: ProviderRefunds = {
  async recordDecision(uow, refund, decision, now) {
    return (await recordRefundOutcome(uow, { ...refund, token: null }, decision, now)) !== undefined
  },

  async recordProviderRefund(uow, clientCode, requestId, fact, now) {
    const payment = await lockRefundedPayment(uow.tx, clientCode, requestId)
    if (payment?.payment_status !== 'confirmed' || payment.currency !== fact.currency) return 'not_found'
    // refund.created and refund.updated both name it: the first records it, the second finds it.
    if (await findRefund(uow.tx, clientCode, requestId, fact.providerRefundId)) return 'refund_already_recorded'
    // Never more than remains of the Payment after its refunds and reversals (a dispute may have taken some first).
    let amountMinor = remainingMinor(payment)
    if (fact.amountMinor < amountMinor) amountMinor = fact.amountMinor
    if (amountMinor <= 0n) return 'nothing_to_refund'
    const body = { amount: { amount: fact.amountMinor.toString(), currency: fact.currency }, reason: fact.reason }
    await createRefund(uow, clientCode, {
      requestId,
      refundId: fact.providerRefundId,
      currency: fact.currency,
      amountMinor,
      reason: fact.reason,
      body,
      now,
      origin: 'provider',
    })
    await recordRefundOutcome(
      uow,
      { clientCode, requestId, refundId: fact.providerRefundId, token: null },
      { providerRefundId: fact.providerRefundId, status: 'succeeded' },
      now,
    )
    return 'provider_refund_recorded'
  },

  async queueUnappliedRefund(uow, clientCode, r) {
    await createRefund(uow, clientCode, {
      ...r,
      reason: 'unapplied_funds',
      body: { amount: money(r.amountMinor, r.currency), reason: 'unapplied_funds' },
    })
  },

  async lockRemaining(uow, clientCode, requestId) {
    const payment = await lockRefundedPayment(uow.tx, clientCode, requestId)
    return payment?.payment_status === 'confirmed' ? { remainingMinor: remainingMinor(payment) } : null
  },
}
