import type Stripe from 'stripe'
import {
  type PaymentProvider,
  type ProviderEvent,
  type ProviderFact,
  type ProviderKind,
  type ProviderRefund,
  ProviderSignatureError,
  type RefundRequest,
} from '../provider.ts'
import {
  CHECKOUT_MAX_LIFETIME_SECONDS,
  CHECKOUT_MIN_LIFETIME_SECONDS,
  createStripeGateway,
  type StripeGateway,
  StripeRejectedError,
  StripeSignatureError,
  StripeUnparsableEventError,
  stripeCheckoutOrigins,
} from './gateway.ts'

/**
 * The Stripe provider (issue 22, docs/design/payment-providers.md): `PaymentProvider` (payments/provider.ts) over the
 * typed gateway (gateway.ts), for one client's keys. It maps Stripe's objects to the service's facts and nothing more;
 * what a fact does is payments/provider-events.ts's.
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
  'charge.dispute.funds_reinstated',
] as const

/** The events the service acts on: those, and the older name of a refund's update, should an endpoint send it. */
export const STRIPE_EVENT_TYPES: ReadonlySet<string> = new Set<string>([...STRIPE_WEBHOOK_EVENTS, 'charge.refund.updated'])

/** Events per page of the catch-up sweep (Stripe's most), and the pages a first sweep reads at most. */
const EVENT_PAGE = 100
const EVENT_PAGES_FIRST_SWEEP = 20

/** Metadata keys the service sets on what it creates at Stripe. */
const META = { client: 'clientCode', request: 'paymentRequestId', refund: 'refundId', reason: 'reason' } as const

/** The refund reasons Stripe knows; `other` and the service's `unapplied_funds` have none there (the metadata keeps them). */
const STRIPE_REASON: Record<RefundRequest['reason'], Stripe.RefundCreateParams.Reason | undefined> = {
  requested_by_customer: 'requested_by_customer',
  duplicate: 'duplicate',
  fraudulent: 'fraudulent',
  other: undefined,
  unapplied_funds: undefined,
}

/** A refund made at Stripe, in the service's words: Stripe's reason where it has one of ours, else `other`. */
function reasonOf(refund: Stripe.Refund): Extract<ProviderFact, { kind: 'provider_refund' }>['reason'] {
  switch (refund.reason) {
    case 'requested_by_customer':
      return 'requested_by_customer'
    case 'duplicate':
      return 'duplicate'
    case 'fraudulent':
      return 'fraudulent'
    default:
      return 'other'
  }
}

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
      return { kind: 'none', why: 'a paid session without a PaymentIntent or amount' }
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
  const owner = refund.metadata?.[META.client]
  if (owner !== undefined && owner !== clientCode) return { kind: 'none', why: 'a refund of another client' }
  if (!requestId || !refundId) {
    // Money the service gave back itself for a request that could not take it (returnPayment): no Payment has it.
    if (refund.metadata?.returnedFor) return { kind: 'none', why: 'money the service returned' }
    // Made at Stripe (the Dashboard, another tool): recorded once it succeeded, as a refund of its Payment.
    const providerPaymentId = idOf(refund.payment_intent)
    if (providerPaymentId === null) return { kind: 'none', why: 'a refund without a PaymentIntent' }
    if (refund.status !== 'succeeded') return { kind: 'none', why: `refund ${refund.status}` }
    return {
      kind: 'provider_refund',
      providerRefundId: refund.id,
      providerPaymentId,
      amountMinor: BigInt(refund.amount),
      currency: upper(refund.currency),
      reason: reasonOf(refund),
    }
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
 * A dispute's money, from its balance transactions (Stripe: zero, one or two, "funds withdrawn and reinstated"):
 * - won after its funds were withdrawn (`charge.dispute.closed` won, `charge.dispute.funds_reinstated`): a
 *   reinstatement, undoing the dispute's reversal once (payments/reinstatement.ts);
 * - lost, or its funds withdrawn and not given back (the transactions sum below zero): a reversal.
 *   `charge.dispute.funds_withdrawn` and `charge.dispute.closed` (lost) name the same dispute, and its reversal is
 *   recorded once (provider_reversals);
 * - anything else (open, won with nothing withdrawn, an inquiry closed): nothing.
 * Each event reads the dispute as it is now, so a late withdrawal event of a dispute since won is a reinstatement too.
 */
export function disputeFact(dispute: Stripe.Dispute): ProviderFact {
  const providerPaymentId = idOf(dispute.payment_intent)
  if (providerPaymentId === null) return { kind: 'none', why: 'dispute without a PaymentIntent' }
  const withdrawnMinor = dispute.balance_transactions.reduce((sum, t) => (t.amount < 0 ? sum - t.amount : sum), 0)
  const netMinor = dispute.balance_transactions.reduce((sum, t) => sum + t.amount, 0)
  const money = { reversalId: dispute.id, providerPaymentId, amountMinor: BigInt(dispute.amount), currency: upper(dispute.currency) }
  if (dispute.status === 'won' && withdrawnMinor > 0) return { kind: 'reinstatement', ...money }
  if (dispute.status !== 'lost' && netMinor >= 0) return { kind: 'none', why: `dispute ${dispute.status}` }
  return { kind: 'reversal', ...money }
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

/**
 * What a validly signed body says, whatever it holds: Stripe's signature proves the sender, not the shape. An array,
 * an event without an id, a type or an object (null or missing), or a type the service does not act on is ignored
 * with the reason (answered 200: sending it again would not change it).
 */
export function eventOf(parsed: unknown): ProviderEvent {
  const none = (why: string, id = '', type = ''): ProviderEvent => ({ id, type, objectId: '', ignored: why })
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return none('not an event object')
  const event = parsed as { id?: unknown; type?: unknown; data?: unknown }
  if (typeof event.id !== 'string' || event.id === '' || event.id.length > 255) return none('an event without an id')
  if (typeof event.type !== 'string' || event.type === '') return none('an event without a type', event.id)
  const data = event.data
  const object = typeof data === 'object' && data !== null ? (data as { object?: unknown }).object : undefined
  const objectId = typeof object === 'object' && object !== null ? (object as { id?: unknown }).id : undefined
  if (typeof objectId !== 'string' || objectId === '' || objectId.length > 255) {
    return none('an event without an object', event.id, event.type)
  }
  if (!STRIPE_EVENT_TYPES.has(event.type)) return { id: event.id, type: event.type, objectId, ignored: 'event type not acted on' }
  return { id: event.id, type: event.type, objectId, ignored: null }
}

/** Stripe's limits on a Checkout Session's `expires_at`, less a minute of clock margin each (gateway.ts). */
const SESSION_LIFETIME = { minSeconds: CHECKOUT_MIN_LIFETIME_SECONDS, maxSeconds: CHECKOUT_MAX_LIFETIME_SECONDS }

/**
 * Stripe as a kind of provider a client can be configured with: each client's provider over a gateway on its own
 * secret key, at `apiBase` (STRIPE_API_BASE), on the clock `now` (the base clock: Stripe's time).
 */
export function createStripeKind(opts: { apiBase: string; now?: () => Date }): ProviderKind {
  const checkoutOrigins = stripeCheckoutOrigins(opts.apiBase)
  return {
    name: STRIPE_PROVIDER,
    checkoutOrigins,
    sessionLifetime: SESSION_LIFETIME,
    forClient({ clientCode, secretKey, webhookSecret }) {
      const gateway = createStripeGateway({ secretKey, apiBase: opts.apiBase, ...(opts.now ? { now: opts.now } : {}) })
      return createStripeProvider({ clientCode, gateway, webhookSecret, checkoutOrigins })
    },
  }
}

export function createStripeProvider(opts: {
  clientCode: string
  gateway: StripeGateway
  webhookSecret: string
  checkoutOrigins?: readonly string[]
}): PaymentProvider {
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
    sessionLifetime: SESSION_LIFETIME,
    checkoutOrigins: opts.checkoutOrigins ?? [],

    async startCheckout(start) {
      const metadata = { [META.client]: start.clientCode, [META.request]: start.externalPaymentRequestId }
      const session = await gateway.createCheckoutSession(
        {
          amountMinor: start.amountMinor,
          currency: start.currency,
          description: start.description,
          clientReferenceId: start.externalPaymentRequestId,
          metadata,
          // Stripe fills {CHECKOUT_SESSION_ID} in.
          successUrl: start.returnUrl('{CHECKOUT_SESSION_ID}'),
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
              [META.reason]: request.reason,
            },
            ...(STRIPE_REASON[request.reason] ? { reason: STRIPE_REASON[request.reason] } : {}),
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
      let parsed: unknown
      try {
        parsed = gateway.verifyEvent(rawBody, Array.isArray(header) ? header[0] : header, webhookSecret)
      } catch (err) {
        if (err instanceof StripeUnparsableEventError) return eventOf(undefined)
        if (err instanceof StripeSignatureError) throw new ProviderSignatureError(err.message, { cause: err })
        throw err
      }
      return eventOf(parsed)
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
        // Any other refusal of the read (an id Stripe cannot take): the event names nothing usable, and asking again
        // gives the same answer.
        if (err instanceof StripeRejectedError) return { kind: 'none', why: `Stripe refused to read ${event.objectId}` }
        throw err
      }
    },

    async readCheckout(sessionId) {
      try {
        return sessionFact(await gateway.retrieveCheckoutSession(sessionId), clientCode)
      } catch (err) {
        if (err instanceof StripeRejectedError) return { kind: 'none', why: `Stripe refused to read ${sessionId}` }
        throw err
      }
    },

    async closeCheckout(sessionId) {
      try {
        await gateway.expireCheckoutSession(sessionId)
      } catch (err) {
        // Not open any more (paid, expired): nothing to end; what it became is read back and recorded.
        if (err instanceof StripeRejectedError) return
        throw err
      }
    },

    async *eventPages(cursor, since) {
      let after = cursor
      const types = [...STRIPE_EVENT_TYPES]
      if (after === null) {
        // No cursor yet: every event since the configuration, read newest first to the end, then handled oldest first.
        const all: Stripe.Event[] = []
        let startingAfter: string | undefined
        for (let page = 0; page < EVENT_PAGES_FIRST_SWEEP; page++) {
          const list = await gateway.listEvents({
            limit: EVENT_PAGE,
            types,
            created: { gte: Math.floor(since.getTime() / 1000) },
            ...(startingAfter ? { starting_after: startingAfter } : {}),
          })
          all.push(...list.data)
          const last = list.data[list.data.length - 1]
          if (!list.has_more || !last) break
          startingAfter = last.id
        }
        const oldestFirst = all.reverse()
        const newest = oldestFirst[oldestFirst.length - 1]
        if (!newest) return
        yield { events: oldestFirst.map(eventOf), cursor: { eventId: newest.id, created: newest.created } }
        after = { eventId: newest.id, created: newest.created }
      }
      for (;;) {
        let list: Stripe.ApiList<Stripe.Event>
        try {
          list = await gateway.listEvents({ limit: EVENT_PAGE, types, ending_before: after.eventId })
        } catch (err) {
          // The cursor's event is gone (Stripe keeps 30 days): resume from its creation time instead.
          if (!(err instanceof StripeRejectedError && err.code === 'resource_missing')) throw err
          yield* this.eventPages(null, new Date(after.created * 1000))
          return
        }
        const oldestFirst = [...list.data].reverse()
        const newest = oldestFirst[oldestFirst.length - 1]
        if (!newest) return
        after = { eventId: newest.id, created: newest.created }
        yield { events: oldestFirst.map(eventOf), cursor: after }
        if (!list.has_more) return
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
