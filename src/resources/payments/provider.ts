import { createHash } from 'node:crypto'
import type { Environment } from '../../config.ts'

/**
 * The payment providers behind the hosted page: who decides whether the debtor paid. Everything else (the Payment
 * row, the allocation, refunds and reversals, the feed) is the service's and goes through the same rules whatever
 * the provider (payment-requests/payment-rules.ts recordOutcome and recordReversal, refunds/rules.ts
 * recordRefundOutcome).
 *
 * Two shapes of provider:
 * - `PaymentProvider`: the sandbox's, which settles at once when asked (the page's test buttons, `simulate`),
 *   and the refunds of every Payment (the refund worker calls `refund`, whatever made the Payment: registry.ts
 *   `refundsThroughProviders` routes a Payment's refund to the provider named on it).
 * - `CheckoutProvider`: a real provider, per client, where the debtor pays on the provider's own page and the
 *   provider tells the outcome later, by a signed event. It does four things and knows nothing of the service's
 *   tables: `startCheckout` (a hosted payment session for one attempt, idempotent by the attempt's key), `refund`,
 *   `readEvent` (verify a delivery and say which event it is) and `factOf` (the object's current state, read from
 *   the provider, as a `ProviderFact`). payment-requests/checkout.ts starts attempts and payment-requests/provider-events.ts
 *   records facts; neither names Stripe.
 *
 * Adding a provider (Adyen, a US ACH processor): a new file implementing `CheckoutProvider` (stripe/adapter.ts is
 * the model), its secrets in `client_payment_providers` (a new `provider` value), a branch in registry.ts that builds
 * it, and its webhook path registered beside Stripe's (payment-requests/provider-webhook-route.ts) onto the same
 * `receive` (payment-requests/provider-events.ts), which records facts under the provider's `name`.
 */
export interface SettleRequest {
  clientCode: string
  externalPaymentRequestId: string
  amountMinor: bigint
  currency: string
}

/** What a provider reports about one Payment request: the Payment it made (or refused), by its own id. */
export interface ProviderOutcome {
  provider: string
  providerPaymentId: string
  outcome: 'confirmed' | 'failed'
  amountMinor: bigint
  currency: string
}

/** A refund the service asks the provider to make, of a Payment the provider made (its `providerPaymentId`). */
export interface RefundRequest {
  clientCode: string
  /** The refund's reason, as the Integration gave it (`unapplied_funds`: the service's own); passed on to the provider. */
  reason: 'requested_by_customer' | 'duplicate' | 'fraudulent' | 'other' | 'unapplied_funds'
  externalPaymentRequestId: string
  externalRefundId: string
  provider: string
  providerPaymentId: string
  amountMinor: bigint
  currency: string
  /**
   * The provider's idempotency key, derived from the refund's identity: asked again after a crash (a claim
   * retaken), the provider answers with the refund it already made, never a second one.
   */
  idempotencyKey: string
}

/**
 * What the provider said about a refund: `succeeded` or `failed` (decided now), or `pending` (decided later: a
 * real provider tells by an event, which records the decision as the refund worker records an immediate one,
 * refunds/store.ts decideRefund). Money moves only on `succeeded`.
 */
export interface ProviderRefund {
  providerRefundId: string
  status: 'succeeded' | 'pending' | 'failed'
  /** Why it failed (status failed), in the provider's words. */
  failureReason?: string
}

/** One payment attempt to start at the provider: a hosted session for the request's amount. */
export interface CheckoutStart {
  clientCode: string
  externalPaymentRequestId: string
  attempt: number
  amountMinor: bigint
  currency: string
  /** What the debtor sees on the provider's page (the request's description, or the creditor's name). */
  description: string
  /** Where the provider sends the debtor back, paid or not. */
  returnUrl: string
  cancelUrl: string
  /** When the session must end (never after the request's own expiry: payment-requests/checkout.ts). */
  expiresAt: Date
  /** The same on every try of this attempt: a retried start gives the same session. */
  idempotencyKey: string
}

export interface CheckoutSession {
  sessionId: string
  /** Where the debtor is sent (303). */
  url: string
  /** When the provider will expire it unpaid (ISO). */
  expiresAt: string
}

/**
 * What the provider says an event is about, as it stands now (read from the provider, never from the event's
 * copy: events arrive twice, late and out of order). `requestId` and `refundId` come from the metadata the
 * service set on the object it created.
 */
export type ProviderFact =
  | {
      kind: 'paid'
      requestId: string
      sessionId: string
      providerPaymentId: string
      amountMinor: bigint
      currency: string
    }
  /** Completed with an asynchronous method still being collected (a bank debit): nothing taken yet. */
  | { kind: 'processing'; requestId: string; sessionId: string }
  /** The asynchronous payment failed, or the session expired unpaid: the request stays open for another try. */
  | { kind: 'failed' | 'expired'; requestId: string; sessionId: string }
  | {
      kind: 'refund'
      requestId: string
      refundId: string
      providerRefundId: string
      status: 'succeeded' | 'failed'
      failureReason?: string
    }
  /**
   * A refund made at the provider that the service did not ask for (the Stripe Dashboard, another tool), succeeded:
   * recorded as a refund of the Payment with origin `provider`, once per `providerRefundId`.
   */
  | {
      kind: 'provider_refund'
      providerRefundId: string
      providerPaymentId: string
      amountMinor: bigint
      currency: string
      reason: 'requested_by_customer' | 'duplicate' | 'fraudulent' | 'other'
    }
  /** Money the provider took back (a dispute lost, funds withdrawn): once per `reversalId`. */
  | { kind: 'reversal'; reversalId: string; providerPaymentId: string; amountMinor: bigint; currency: string }
  /**
   * A dispute won after its funds were withdrawn: the provider gave them back, so its reversal (`reversalId`) is
   * undone, once per dispute (payments/reinstatement.ts). A dispute won with nothing withdrawn is `none`.
   */
  | { kind: 'reinstatement'; reversalId: string; providerPaymentId: string; amountMinor: bigint; currency: string }
  /** Nothing to record: not ours, not decided yet, or a state the service does not act on. */
  | { kind: 'none'; why: string }

/**
 * A verified delivery: which event it is, and whether the service acts on it. `ignored` says why not (a type the
 * service does not act on, an event without an object, a body that is not an event): answered 200, never 5xx, since
 * sending it again would not change it.
 */
export interface ProviderEvent {
  id: string
  type: string
  /** The id of the object the event is about (a session, a refund, a dispute). */
  objectId: string
  ignored: string | null
}

export interface CheckoutProvider {
  name: string
  startCheckout(start: CheckoutStart): Promise<CheckoutSession>
  refund(request: RefundRequest): Promise<ProviderRefund>
  /** Verifies a delivery (raw body and headers); throws ProviderSignatureError when it is not the provider's. */
  readEvent(rawBody: Buffer, headers: Record<string, string | string[] | undefined>): ProviderEvent
  /** The event's object as it stands now at the provider. */
  factOf(event: ProviderEvent): Promise<ProviderFact>
  /**
   * Gives back, in full, money taken for a request that can no longer take it (expired, canceled, or paid through
   * another session): idempotent per provider payment.
   */
  returnPayment(fact: Extract<ProviderFact, { kind: 'paid' }>, clientCode: string): Promise<void>
  /** A checkout session as it stands now (the page's read-back, the sweep's look at an attempt past its expiry). */
  readCheckout(sessionId: string): Promise<ProviderFact>
  /** Ends an open session so the debtor can no longer pay it; one no longer open is left as it is. */
  closeCheckout(sessionId: string): Promise<void>
  /**
   * The provider's events after `cursor` (or, without one, since `since`), oldest first, a page at a time, only the
   * types the service acts on. Each page's `cursor` is its newest event: the sweep stores it once the page is handled.
   */
  eventPages(cursor: ProviderCursor | null, since: Date): AsyncIterable<{ events: ProviderEvent[]; cursor: ProviderCursor }>
}

/** Where the catch-up sweep stopped: the last event it handled, and when the provider created it (Unix seconds). */
export interface ProviderCursor {
  eventId: string
  created: number
}

/** A delivery whose signature is missing, wrong or too old: 400, nothing recorded. */
export class ProviderSignatureError extends Error {
  override readonly name = 'ProviderSignatureError'
}

export interface PaymentProvider {
  name: string
  /** May the hosted page offer a form that settles the request directly (the sandbox's "Pay" buttons)? */
  offersSandboxForm: boolean
  settle(request: SettleRequest, outcome: 'confirmed' | 'failed'): ProviderOutcome
  /**
   * Asks for a refund. Called by the refund worker outside any transaction (a network call holds no
   * connection); a throw is a transient failure, retried later under the same idempotency key.
   */
  refund(request: RefundRequest): Promise<ProviderRefund>
}

/** The sandbox's test trigger (as card test numbers are): a refund whose amount ends in .13 fails. */
export const SANDBOX_FAILING_REFUND_CENTS = 13n

/**
 * The sandbox provider: settles at once with the outcome asked for, for the full amount. Its payment id is
 * derived from the request, so a second confirmation of one request names the same Payment.
 */
export function createSandboxProvider(): PaymentProvider {
  return {
    name: 'sandbox',
    offersSandboxForm: true,
    settle(request, outcome) {
      const digest = createHash('sha256').update(`${request.clientCode}/${request.externalPaymentRequestId}`).digest('hex')
      return {
        provider: 'sandbox',
        providerPaymentId: `sbx_${digest.slice(0, 32)}`,
        outcome,
        amountMinor: request.amountMinor,
        currency: request.currency,
      }
    },
    async refund(request) {
      const digest = createHash('sha256').update(request.idempotencyKey).digest('hex')
      const providerRefundId = `sbx_re_${digest.slice(0, 29)}`
      // Amounts are in minor units of two-decimal currencies here, as every sandbox amount is.
      if (request.amountMinor % 100n === SANDBOX_FAILING_REFUND_CENTS) {
        return { providerRefundId, status: 'failed', failureReason: 'sandbox_declined: a refund amount ending in .13 fails' }
      }
      return { providerRefundId, status: 'succeeded' }
    },
  }
}

/** Production has no provider configured yet: the page says so, and nothing can be settled. */
export const unconfiguredProvider: PaymentProvider = {
  name: 'none',
  offersSandboxForm: false,
  settle() {
    throw new Error('no payment provider is configured for this deployment')
  },
  refund() {
    return Promise.reject(new Error('no payment provider is configured for this deployment'))
  },
}

export function providerFor(environment: Environment): PaymentProvider {
  return environment === 'sandbox' ? createSandboxProvider() : unconfiguredProvider
}
