import { money } from '../../domain/money.ts'
import { smallerMinor as min } from '../../domain/money-rules.ts'
import type { ProviderRefunds } from '../payments/ports.ts'
import { createRefund, recordProviderMadeRefund, recordRefundOutcome, recordWithheldProviderRefunds, remainingMinor } from './rules.ts'
import { findRefund, insertWithheldProviderRefund, lockRefundedPayment } from './store.ts'

/**
 * What refunds do for the provider side (payments/ports.ts `ProviderRefunds`; payments/provider-events.ts calls it,
 * src/app.ts gives it): a decision the provider made on a refund the service asked for, a refund made at the
 * provider (its Dashboard), and what remains of a Payment a dispute takes back from.
 *
 * A refund made at the provider while a dispute's withdrawal held the Payment's money is recorded as far as the
 * Payment still held money; the rest waits (migration 0054, provider_refunds_withheld) and is recorded when money
 * comes back (rules.ts, recordWithheldProviderRefunds: a won dispute's reinstatement, a refund of the service's that
 * failed): the provider refunded it, so that money is already the debtor's, never the Receivable's again and never
 * refunded a second time.
 */
export const providerRefunds: ProviderRefunds = {
  async recordDecision(uow, refund, decision, now) {
    return (await recordRefundOutcome(uow, { ...refund, token: null }, decision, now)) !== undefined
  },

  async recordProviderRefund(uow, provider, clientCode, requestId, fact, now) {
    const payment = await lockRefundedPayment(uow.tx, clientCode, requestId)
    if (payment?.payment_status !== 'confirmed' || payment.currency !== fact.currency) return 'not_found'
    // refund.created and refund.updated both name it: the first records it, the second finds it.
    if (await findRefund(uow.tx, clientCode, requestId, fact.providerRefundId)) return 'refund_already_recorded'
    // Never more than remains of the Payment after its refunds and reversals (a dispute may have taken some first):
    // the rest waits for money to come back within reach (a dispute won, a refund of the service's that failed).
    const remaining = remainingMinor(payment)
    const amountMinor = remaining > 0n ? min(fact.amountMinor, remaining) : 0n
    if (fact.amountMinor > amountMinor) {
      const first = await insertWithheldProviderRefund(uow.tx, clientCode, {
        provider,
        providerRefundId: fact.providerRefundId,
        requestId,
        currency: fact.currency,
        reason: fact.reason,
        amountMinor: fact.amountMinor - amountMinor,
        now,
      })
      if (!first) return 'refund_already_recorded'
    }
    if (amountMinor <= 0n) return 'nothing_to_refund'
    const body = { amount: { amount: fact.amountMinor.toString(), currency: fact.currency }, reason: fact.reason }
    await recordProviderMadeRefund(
      uow,
      clientCode,
      { requestId, refundId: fact.providerRefundId, providerRefundId: fact.providerRefundId },
      {
        currency: fact.currency,
        amountMinor,
        reason: fact.reason,
        body,
        now,
      },
    )
    return 'provider_refund_recorded'
  },

  recordWithheldRefunds: (uow, clientCode, requestId, givenBack, now) =>
    recordWithheldProviderRefunds(uow, clientCode, requestId, { amountMinor: givenBack.amountMinor, by: givenBack.reversalId }, now),

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
