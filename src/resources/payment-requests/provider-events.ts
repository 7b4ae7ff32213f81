import { EXTERNAL_ID_PATTERN } from '../../domain/identifiers.ts'
import { isProblem } from '../../domain/problems.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import type { Store } from '../../store/store.ts'
import {
  findRequestOfProviderPayment,
  lockCheckoutBySession,
  providerEventHandled,
  recordProviderEvent,
  recordProviderReversal,
  setCheckoutStatus,
} from '../payments/checkout-store.ts'
import { type CheckoutProvider, type ProviderEvent, type ProviderFact, ProviderSignatureError } from '../payments/provider.ts'
import type { ProviderRegistry } from '../payments/registry.ts'
import { recordRefundOutcome, remainingMinor } from '../refunds/rules.ts'
import { lockRefundedPayment } from '../refunds/store.ts'
import { inUnitOfWork, type UnitOfWork } from '../unit-of-work.ts'
import type { PaymentRules } from './payment-rules.ts'
import { lockPaymentRequest } from './store.ts'

/**
 * A real provider's events (issue 22 item 3; docs/design/payment-providers.md), at `POST /providers/stripe/webhooks/{clientCode}`
 * (provider-webhook-route.ts). Whatever the provider, in this order:
 *
 * 1. The client's configuration: none (or an unknown client, or one whose configuration cannot be used): 404.
 * 2. The delivery verified with the client's webhook secret (the provider's `readEvent`; Stripe's
 *    `webhooks.constructEvent`, 300 s tolerance): a missing, wrong or stale signature is 400 and nothing is recorded.
 * 3. A type the service does not act on: 200, ignored, not recorded.
 * 4. An event id already handled: 200, nothing done (a cheap read first; the insert below is what guarantees it).
 * 5. The object's current state, read from the provider (`factOf`): events arrive twice, late and out of order, so
 *    what the event's copy says is never acted on. A provider that does not answer: 500, and the provider retries.
 * 6. One transaction: the event id recorded (provider_events, unique per client and event: a second delivery, or the
 *    same event at two instances at once, waits for the first's commit and then does nothing), and its effect:
 *    - paid: the Payment confirmed through the one confirmation rule (payment-rules.ts recordOutcome: allocation,
 *      unapplied money refunded automatically), money already taken recorded whatever the holds; the attempt complete;
 *    - processing / failed / expired: the attempt's status; the request stays open (failed, expired: for another try);
 *    - refund: the refund decided (refunds/rules.ts recordRefundOutcome), once: a decided refund stays decided;
 *    - reversal (a dispute lost or its funds withdrawn): recorded once per dispute, then taken back through the one
 *      reversal rule (recordReversal, payments/take-back.ts), capped at what remains of the Payment.
 *    Killed before the commit, nothing of it stands and the provider's retry does it all.
 * 7. Money taken for a request that can no longer take it (expired or canceled meanwhile, or paid through another
 *    session): given back in full through the provider (idempotent per payment), then the event recorded as
 *    `returned`. No Payment is recorded for it.
 */
export interface ProviderEventsDeps {
  store: Store
  /** The client's clock (sandbox clocks): decisions are recorded at it. */
  clock: Clock
  /** The base clock: when an event was received. */
  realClock: Clock
  registry: Pick<ProviderRegistry, 'forClient'>
  paymentRules: Pick<PaymentRules, 'recordOutcome' | 'recordReversal'>
  atClientTime: <T>(clientCode: string, fn: () => Promise<T>) => Promise<T>
  onFeedAppended?: () => void
  /** A confirmation queued the refund of unapplied money: the refund worker asks soon. */
  onRefundQueued?: () => void
}

export interface ProviderEventAnswer {
  status: 200 | 400 | 404
  body: { received: boolean; eventId?: string; effect?: string; message?: string }
}

/** Money the request cannot take: the transaction is rolled back, the money given back, then the event recorded. */
class ReturnMoney extends Error {}

export function createProviderEvents(deps: ProviderEventsDeps) {
  const { store, clock, realClock, paymentRules: rules } = deps

  async function apply(
    uow: UnitOfWork,
    name: string,
    clientCode: string,
    event: ProviderEvent,
    fact: ProviderFact,
    after: (() => void)[],
  ): Promise<string> {
    const { tx } = uow
    const now = isoNow(clock)
    const recorded = await recordProviderEvent(tx, clientCode, {
      provider: name,
      eventId: event.id,
      type: event.type,
      effect: fact.kind,
      now: realClock.now().toISOString(),
    })
    if (!recorded) return 'duplicate'
    switch (fact.kind) {
      case 'paid': {
        let outcome: Awaited<ReturnType<PaymentRules['recordOutcome']>>
        try {
          outcome = await rules.recordOutcome(
            uow,
            clientCode,
            fact.requestId,
            'confirmed',
            () => ({
              provider: name,
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
          if (isProblem(err) && (err.code === 'payment_request_state_conflict' || err.code === 'payment_request_not_found')) {
            throw new ReturnMoney()
          }
          throw err
        }
        if (outcome.canceled || outcome.payment.provider_payment_id !== fact.providerPaymentId) throw new ReturnMoney()
        // After the request's lock (recordOutcome took it): the order every writer of an attempt keeps.
        const checkout = await lockCheckoutBySession(tx, clientCode, name, fact.sessionId)
        if (checkout)
          await setCheckoutStatus(tx, clientCode, { requestId: fact.requestId, attempt: checkout.attempt, status: 'complete', now })
        if (outcome.created && BigInt(outcome.payment.unapplied_minor) > 0n && deps.onRefundQueued) after.push(deps.onRefundQueued)
        return outcome.created ? 'confirmed' : 'already_confirmed'
      }
      case 'processing':
      case 'failed':
      case 'expired': {
        if (!(await lockPaymentRequest(tx, clientCode, fact.requestId))) return 'not_found'
        const checkout = await lockCheckoutBySession(tx, clientCode, name, fact.sessionId)
        if (!checkout || checkout.status === 'complete' || checkout.status === 'refunded') return 'unchanged'
        await setCheckoutStatus(tx, clientCode, { requestId: fact.requestId, attempt: checkout.attempt, status: fact.kind, now })
        return fact.kind
      }
      case 'refund': {
        const decided = await recordRefundOutcome(
          uow,
          { clientCode, requestId: fact.requestId, refundId: fact.refundId, token: null },
          {
            providerRefundId: fact.providerRefundId,
            status: fact.status,
            ...(fact.failureReason ? { failureReason: fact.failureReason } : {}),
          },
          now,
        )
        return decided ? `refund_${fact.status}` : 'refund_already_decided'
      }
      case 'reversal': {
        const requestId = await findRequestOfProviderPayment(tx, clientCode, name, fact.providerPaymentId)
        if (!requestId) return 'not_found'
        const payment = await lockRefundedPayment(tx, clientCode, requestId)
        if (payment?.payment_status !== 'confirmed') return 'not_found'
        // Never more than remains of the Payment after its refunds and reversals (bigint: no Math.min).
        let amountMinor = remainingMinor(payment)
        if (fact.amountMinor < amountMinor) amountMinor = fact.amountMinor
        const first = await recordProviderReversal(tx, clientCode, {
          provider: name,
          reversalId: fact.reversalId,
          requestId,
          amountMinor,
          now,
        })
        if (!first) return 'reversal_already_recorded'
        if (amountMinor <= 0n) return 'nothing_to_reverse'
        await rules.recordReversal(uow, clientCode, requestId, { amountMinor, currency: fact.currency }, now)
        return 'reversed'
      }
      case 'none':
        return `ignored: ${fact.why}`
    }
  }

  async function giveBack(
    provider: CheckoutProvider,
    clientCode: string,
    event: ProviderEvent,
    fact: Extract<ProviderFact, { kind: 'paid' }>,
  ) {
    const { name } = provider
    await provider.returnPayment(fact, clientCode)
    return deps.atClientTime(clientCode, () =>
      inUnitOfWork(store, async (uow) => {
        const recorded = await recordProviderEvent(uow.tx, clientCode, {
          provider: name,
          eventId: event.id,
          type: event.type,
          effect: 'returned',
          now: realClock.now().toISOString(),
        })
        if (!recorded) return 'duplicate'
        const checkout = await lockCheckoutBySession(uow.tx, clientCode, name, fact.sessionId)
        if (checkout && checkout.status !== 'complete') {
          await setCheckoutStatus(uow.tx, clientCode, {
            requestId: fact.requestId,
            attempt: checkout.attempt,
            status: 'refunded',
            now: isoNow(clock),
          })
        }
        return 'returned'
      }),
    )
  }

  return {
    async receive(
      clientCode: string,
      rawBody: Buffer,
      headers: Record<string, string | string[] | undefined>,
    ): Promise<ProviderEventAnswer> {
      // A client code no client can have (NUL, broken UTF-8, other characters, too long) names no configuration:
      // answered before any statement, which such text could otherwise fail.
      const choice = EXTERNAL_ID_PATTERN.test(clientCode) ? await deps.registry.forClient(store, clientCode) : null
      if (choice?.kind !== 'stripe') {
        return { status: 404, body: { received: false, message: 'No Stripe configuration for this client.' } }
      }
      const provider = choice.stripe.provider
      const { name } = provider
      let event: ProviderEvent
      try {
        event = provider.readEvent(rawBody, headers)
      } catch (err) {
        if (err instanceof ProviderSignatureError)
          return { status: 400, body: { received: false, message: 'The signature does not verify.' } }
        throw err
      }
      if (!event.handled) return { status: 200, body: { received: true, eventId: event.id, effect: 'ignored: event type not acted on' } }
      if (await providerEventHandled(store, clientCode, name, event.id)) {
        return { status: 200, body: { received: true, eventId: event.id, effect: 'duplicate' } }
      }
      const fact = await provider.factOf(event)
      const after: (() => void)[] = []
      let effect: string
      try {
        effect = await deps.atClientTime(clientCode, () =>
          inUnitOfWork(
            store,
            (uow) => {
              // The provider's word (the timeline's actor, migration 0038).
              uow.actor = { type: 'provider', ref: name }
              return apply(uow, name, clientCode, event, fact, after)
            },
            deps.onFeedAppended,
          ),
        )
      } catch (err) {
        if (!(err instanceof ReturnMoney) || fact.kind !== 'paid') throw err
        effect = await giveBack(provider, clientCode, event, fact)
      }
      for (const wake of after) wake()
      return { status: 200, body: { received: true, eventId: event.id, effect } }
    },
  }
}

export type ProviderEvents = ReturnType<typeof createProviderEvents>
