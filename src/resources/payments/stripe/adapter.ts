import type Stripe from 'stripe'
import {
  type CheckoutProvider,
  type ProviderEvent,
  type ProviderFact,
  type ProviderRefund,
  ProviderSignatureError,
  type RefundRequest,
} from '../provider.ts'
import { type StripeGateway, StripeRejectedError, StripeSignatureError } from './gateway.ts'

/**
 * The Stripe provider (issue 22, docs/design/payment-providers.md): `CheckoutProvider` over the typed gateway (gateway.ts), for
 * one client's keys. It maps Stripe's objects to the service's facts and nothing more; what a fact does is
 * payment-requests/provider-events.ts's.
 *
 * - Paying: a Checkout Session in `payment` mode, one line (amount, currency, description), `client_reference_id`
 *   the request id, metadata `{clientCode, paymentRequestId}` on the session and its PaymentIntent (refunds and
 *   disputes name the PaymentIntent), the attempt's idempotency key.
 * - Events: the ones in STRIPE_EVENT_TYPES; every other type is acknowledged and ignored. The object is read again
 *   from Stripe (`factOf`), never taken from the event.
 * - Refunds: by PaymentIntent, the refund's identity as idempotency key, metadata naming the refund, so its events
 *   lead back to it. Stripe's `pending` and `requires_action` are pending; `failed` and `canceled` are failed.
 * - A Payment is the PaymentIntent: `providerPaymentId` is its `pi_` id.
 */
export const STRIPE_PROVIDER = 'stripe'

/** The events the operator enables on the client's webhook endpoint (GET .../payment-provider lists them). */
export const STRIPE_WEBHOOK_EVENTS = [
  'checkout.session.completed',
  'checkout.session.async_payment_succeeded',
  'checkout.session.async_payment_failed',
  'checkout.session.expired',
  'refund.created',
  'refund.updated',
  'refund.failed',
  'charge.dispute.created',
  'charge.dispute.funds_withdrawn',
  'charge.dispute.closed',
] as const

/** The events the service acts on: those, and the older name of a refund's update, should an endpoint send it. */
export const STRIPE_EVENT_TYPES: ReadonlySet<string> = new Set<string>([...STRIPE_WEBHOOK_EVENTS, 'charge.refund.updated'])

/** Metadata keys the service sets on what it creates at Stripe. */
const META = { client: 'clientCode', request: 'paymentRequestId', refund: 'refundId' } as const

const upper = (currency: string) => currency.toUpperCase()
const idOf = (value: string | { id: string } | null): string | null =>
  value === null ? null : typeof value === 'string' ? value : value.id

/** A session as the service reads it: whose, and what it says now. */
export function sessionFact(session: Stripe.Checkout.Session, clientCode: string): ProviderFact {
  const requestId = session.client_reference_id
  if (session.metadata?.[META.client] !== clientCode || !requestId || session.metadata?.[META.request] !== requestId) {
    return { kind: 'none', why: 'not a session of this client made by the service' }
  }
  const intent = typeof session.payment_intent === 'object' ? session.payment_intent : null
  const sessionId = session.id
  if (session.status === 'expired') return { kind: 'expired', requestId, sessionId }
  if (session.status !== 'complete') return { kind: 'none', why: `session ${session.status}` }
  if (session.payment_status === 'paid') {
    const providerPaymentId = idOf(session.payment_intent)
    if (providerPaymentId === null || session.amount_total === null || session.currency === null) {
      throw new Error(`Stripe session ${sessionId} is paid without a PaymentIntent or amount`)
    }
    return {
      kind: 'paid',
      requestId,
      sessionId,
      providerPaymentId,
      amountMinor: BigInt(session.amount_total),
      currency: upper(session.currency),
    }
  }
  // Complete and unpaid: an asynchronous method, still being collected, or failed (the PaymentIntent went back to
  // requiring a payment method, or was canceled).
  if (intent && (intent.status === 'requires_payment_method' || intent.status === 'canceled'))
    return { kind: 'failed', requestId, sessionId }
  return { kind: 'processing', requestId, sessionId }
}

export function refundFact(refund: Stripe.Refund, clientCode: string): ProviderFact {
  const requestId = refund.metadata?.[META.request]
  const refundId = refund.metadata?.[META.refund]
  if (refund.metadata?.[META.client] !== clientCode || !requestId || !refundId) {
    return { kind: 'none', why: 'not a refund the service asked for' }
  }
  const status = stripeRefundStatus(refund)
  if (status.status === 'pending') return { kind: 'none', why: `refund ${refund.status}` }
  return {
    kind: 'refund',
    requestId,
    refundId,
    providerRefundId: refund.id,
    status: status.status,
    ...(status.failureReason ? { failureReason: status.failureReason } : {}),
  }
}

/**
 * A dispute is a reversal once it is lost, or once its funds were withdrawn and not given back (the balance
 * transactions sum below zero): `charge.dispute.funds_withdrawn` and `charge.dispute.closed` (lost) name the same
 * dispute, and its reversal is recorded once (provider_reversals).
 */
export function disputeFact(dispute: Stripe.Dispute): ProviderFact {
  const providerPaymentId = idOf(dispute.payment_intent)
  if (providerPaymentId === null) return { kind: 'none', why: 'dispute without a PaymentIntent' }
  const withdrawn = dispute.balance_transactions.reduce((sum, t) => sum + t.amount, 0) < 0
  if (dispute.status !== 'lost' && !withdrawn) return { kind: 'none', why: `dispute ${dispute.status}` }
  return {
    kind: 'reversal',
    reversalId: dispute.id,
    providerPaymentId,
    amountMinor: BigInt(dispute.amount),
    currency: upper(dispute.currency),
  }
}

export function stripeRefundStatus(refund: Stripe.Refund): { status: ProviderRefund['status']; failureReason?: string } {
  switch (refund.status) {
    case 'succeeded':
      return { status: 'succeeded' }
    case 'failed':
    case 'canceled':
      return { status: 'failed', failureReason: `stripe_${refund.status}: ${refund.failure_reason ?? 'no reason given'}` }
    default:
      return { status: 'pending' }
  }
}

export function createStripeProvider(opts: { clientCode: string; gateway: StripeGateway; webhookSecret: string }): CheckoutProvider {
  const { clientCode, gateway, webhookSecret } = opts

  /** The event's object as it is now at Stripe, as a fact. */
  async function currentFact(event: ProviderEvent): Promise<ProviderFact> {
    if (event.type.startsWith('checkout.session.')) return sessionFact(await gateway.retrieveCheckoutSession(event.objectId), clientCode)
    if (event.type.startsWith('charge.dispute.')) return disputeFact(await gateway.retrieveDispute(event.objectId))
    if (event.type.startsWith('refund.') || event.type === 'charge.refund.updated') {
      return refundFact(await gateway.retrieveRefund(event.objectId), clientCode)
    }
    return { kind: 'none', why: `event type ${event.type}` }
  }

  return {
    name: STRIPE_PROVIDER,

    async startCheckout(start) {
      const metadata = { [META.client]: start.clientCode, [META.request]: start.externalPaymentRequestId }
      const session = await gateway.createCheckoutSession(
        {
          amountMinor: start.amountMinor,
          currency: start.currency,
          description: start.description,
          clientReferenceId: start.externalPaymentRequestId,
          metadata,
          successUrl: start.returnUrl,
          cancelUrl: start.cancelUrl,
          expiresAt: start.expiresAt,
        },
        start.idempotencyKey,
      )
      if (!session.url) throw new Error(`Stripe answered session ${session.id} without a url (status ${session.status})`)
      return { sessionId: session.id, url: session.url, expiresAt: new Date(session.expires_at * 1000).toISOString() }
    },

    async refund(request: RefundRequest): Promise<ProviderRefund> {
      let refund: Stripe.Refund
      try {
        refund = await gateway.createRefund(
          {
            paymentIntentId: request.providerPaymentId,
            amountMinor: request.amountMinor,
            metadata: {
              [META.client]: request.clientCode,
              [META.request]: request.externalPaymentRequestId,
              [META.refund]: request.externalRefundId,
            },
          },
          request.idempotencyKey,
        )
      } catch (err) {
        // Stripe refused it (already refunded, more than remains, ...): asking again gives the same answer.
        if (err instanceof StripeRejectedError) {
          return {
            providerRefundId: `refused/${request.idempotencyKey}`,
            status: 'failed',
            failureReason: `stripe_rejected: ${err.code ?? err.type ?? err.message}`,
          }
        }
        throw err
      }
      const status = stripeRefundStatus(refund)
      return { providerRefundId: refund.id, ...status }
    },

    readEvent(rawBody, headers) {
      const header = headers['stripe-signature']
      let event: Stripe.Event
      try {
        event = gateway.verifyEvent(rawBody, Array.isArray(header) ? header[0] : header, webhookSecret)
      } catch (err) {
        if (err instanceof StripeSignatureError) throw new ProviderSignatureError(err.message, { cause: err })
        throw err
      }
      const object = event.data.object as { id?: unknown }
      return {
        id: event.id,
        type: event.type,
        handled: STRIPE_EVENT_TYPES.has(event.type),
        objectId: typeof object.id === 'string' ? object.id : '',
      }
    },

    async factOf(event: ProviderEvent) {
      try {
        return await currentFact(event)
      } catch (err) {
        // An object Stripe no longer has (or never had for this key): nothing to act on, and a retry would not change
        // that. Every other failure (no answer, a permission missing from the key) is thrown: answered 500, Stripe
        // delivers the event again later.
        if (err instanceof StripeRejectedError && err.code === 'resource_missing')
          return { kind: 'none', why: `${event.objectId} not found at Stripe` }
        throw err
      }
    },

    async returnPayment(fact, forClient) {
      try {
        await gateway.createRefund(
          {
            paymentIntentId: fact.providerPaymentId,
            amountMinor: fact.amountMinor,
            metadata: { [META.client]: forClient, returnedFor: fact.requestId },
          },
          `returned/${forClient}/${fact.providerPaymentId}`,
        )
      } catch (err) {
        // Already given back in full (by this call before a crash under another key, or by hand): nothing left to return.
        if (err instanceof StripeRejectedError && err.code === 'charge_already_refunded') return
        throw err
      }
    },
  }
}
