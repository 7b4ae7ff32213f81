/**
 * The payment-provider seam (docs/design/payment-provider-seam.md): one interface, `PaymentProvider`, that every
 * provider implements, each in its own folder (payments/sandbox/, payments/stripe/). A provider knows nothing of the
 * service's tables; the service knows nothing of a provider but this file. Everything else (the Payment row, the
 * allocation, refunds and reversals, the feed) is the service's and goes through the same rules whatever the provider.
 *
 * What a provider does, and who calls it:
 * - `startCheckout` / `readCheckout` / `closeCheckout`: a hosted payment session for one attempt (checkout.ts), read
 *   back by the page and the sweep (provider-sync.ts), ended when its request is canceled or expires;
 * - `readEvent` / `factOf`: a delivery verified and named, then its object's current state as a `ProviderFact`
 *   (provider-events.ts records facts; provider-webhook-route.ts is the route);
 * - `eventPages`: the provider's events since a cursor (the catch-up sweep);
 * - `refund`: a refund the service asks for (the refund worker, through registry.ts `refundsThroughProviders`,
 *   which finds the provider named on the Payment);
 * - `returnPayment`: money taken that a request cannot take, given back in full;
 * - `sessionLifetime` and `checkoutOrigins`: the provider's own limits on a session and where its checkout pages are.
 * - `settle`, only a provider with a test form (the sandbox's "Pay" and "Simulate a failed payment" buttons, the
 *   operator's `simulate`): settles at once, for the full amount.
 *
 * Adding a provider (GoCardless, Adyen): a folder under payments/ implementing `PaymentProvider` and a
 * `ProviderKind` that builds it from a client's stored secrets, listed in src/app.ts (`providerKinds`). Its events
 * arrive at `/providers/{provider}/webhooks/{clientCode}` and are recorded under its `name`.
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
  /** Where the provider sends the debtor back once paid, naming the session (the provider may pass its placeholder). */
  returnUrl: (sessionId: string) => string
  /** Where the provider sends the debtor back unpaid. */
  cancelUrl: string
  /** When the session must end (never after the request's own expiry: payments/checkout.ts). */
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

/** How long a provider lets a checkout session live, in seconds. */
export interface SessionLifetime {
  minSeconds: number
  maxSeconds: number
}

export interface PaymentProvider {
  /** Its folder's name, stored on its Payments, attempts and events, and in its event route. */
  name: string
  sessionLifetime: SessionLifetime
  /** Where its checkout pages are served: the page's form may send the debtor there (CSP form-action). */
  checkoutOrigins: readonly string[]
  startCheckout(start: CheckoutStart): Promise<CheckoutSession>
  /** A checkout session as it stands now (the page's read-back, the sweep's look at an attempt past its expiry). */
  readCheckout(sessionId: string): Promise<ProviderFact>
  /** Ends an open session so the debtor can no longer pay it; one no longer open is left as it is. */
  closeCheckout(sessionId: string): Promise<void>
  /** Verifies a delivery (raw body and headers); throws ProviderSignatureError when it is not the provider's. */
  readEvent(rawBody: Buffer, headers: Record<string, string | string[] | undefined>): ProviderEvent
  /** The event's object as it stands now at the provider. */
  factOf(event: ProviderEvent): Promise<ProviderFact>
  /**
   * The provider's events after `cursor` (or, without one, since `since`), oldest first, a page at a time, only the
   * types the service acts on. Each page's `cursor` is its newest event: the sweep stores it once the page is handled.
   */
  eventPages(cursor: ProviderCursor | null, since: Date): AsyncIterable<{ events: ProviderEvent[]; cursor: ProviderCursor }>
  /**
   * Asks for a refund. Called by the refund worker outside any transaction (a network call holds no
   * connection); a throw is a transient failure, retried later under the same idempotency key.
   */
  refund(request: RefundRequest): Promise<ProviderRefund>
  /**
   * Gives back, in full, money taken for a request that can no longer take it (expired, canceled, paid through
   * another session, or in another amount or currency): idempotent per provider payment.
   */
  returnPayment(fact: Extract<ProviderFact, { kind: 'paid' }>, clientCode: string): Promise<void>
  /** A provider with a test form only (the sandbox): settles at once with the outcome asked for, for the full amount. */
  settle?(request: SettleRequest, outcome: 'confirmed' | 'failed'): ProviderOutcome
}

/** A client's stored provider configuration, its secrets decrypted (registry.ts). */
export interface ProviderSecrets {
  clientCode: string
  mode: 'test' | 'live'
  secretKey: string
  webhookSecret: string
}

/**
 * A provider a client can be configured with (`client_payment_providers.provider`): builds the client's provider from
 * its secrets. `checkoutOrigins` and `sessionLifetime` are the same for every client of the deployment.
 */
export interface ProviderKind {
  name: string
  checkoutOrigins: readonly string[]
  sessionLifetime: SessionLifetime
  forClient(secrets: ProviderSecrets): PaymentProvider
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
