import Stripe from 'stripe'

/**
 * A small typed gateway over the official `stripe` package: the only calls the service makes to Stripe, each
 * answering the SDK's own types, with Stripe's failures sorted into two kinds the caller can act on.
 *
 * Where the calls go: `apiBase` (from `STRIPE_API_BASE`, default `https://api.stripe.com`) is parsed into the
 * SDK's own `protocol`, `host` and `port` options. The SDK always prefixes `/v1/`, so an apiBase with a path is
 * refused rather than silently ignored.
 *
 * Timeouts and retries: 10 s per call (`timeout`), and the SDK's own retries off (`maxNetworkRetries: 0`): the
 * service retries itself, idempotently, with the same idempotency key. One caveat of the SDK: a connection closed
 * before any answer (ECONNRESET and the like) is retried once even with retries off; every POST here carries an
 * idempotency key, so that retry cannot create a second object.
 *
 * Failures: a network failure, a timeout, a 5xx, a 429 (rate limited) or a 409 (Stripe's "a request with this
 * idempotency key is still in flight" / lock timeout) is a `StripeRetryableError`; any other 4xx is a
 * `StripeRejectedError` with Stripe's `code`, `type`, `param` and status. Stripe stores the answer of a request
 * that began executing under its idempotency key, a 500 included: a retry with the same key may replay that 500
 * for as long as Stripe keeps the key (24 hours). A caller that must get past it reads the current state (the
 * session, the refunds of the PaymentIntent) before trying again under a new key.
 *
 * A restricted key (`rk_test_` / `rk_live_`) needs exactly these permissions (Dashboard, Developers, API keys,
 * "Create restricted key"):
 *   - Checkout Sessions: Write   createCheckoutSession, retrieveCheckoutSession
 *   - PaymentIntents:    Read    retrievePaymentIntent, and `expand: ['payment_intent']` on a session
 *   - Refunds:           Write   createRefund, retrieveRefund
 *   - Disputes:          Read    retrieveDispute
 *   - Events:            Read    listEvents (the catch-up sweep)
 * Nothing else: webhook signatures are checked with the endpoint's signing secret (`whsec_`), not the API key.
 */

export const DEFAULT_STRIPE_API_BASE = 'https://api.stripe.com'
/** Per call; the SDK's default is 80 s, far longer than a debtor waits on the page. */
export const STRIPE_TIMEOUT_MS = 10_000
/** The tolerance docs/design/payment-providers.md pins for `webhooks.constructEvent`: an event signed longer ago is refused. */
export const WEBHOOK_TOLERANCE_SECONDS = 300

/**
 * Stripe accepts `expires_at` from 30 minutes to 24 hours after it creates the session. Stripe's clock and ours
 * differ by a little and the request takes a moment, so the bounds keep a minute's margin on each side.
 */
export const CHECKOUT_MIN_LIFETIME_SECONDS = 30 * 60 + 60
export const CHECKOUT_MAX_LIFETIME_SECONDS = 24 * 60 * 60 - 60

export type StripeKeyMode = 'test' | 'live'

export interface StripeGatewayOptions {
  secretKey: string
  /** `STRIPE_API_BASE`; default https://api.stripe.com. */
  apiBase?: string
  /** Per-call timeout; default 10 s. */
  timeoutMs?: number
  /** The clock used to clamp `expires_at` and to age webhook signatures. */
  now?: () => Date
}

export interface CheckoutSessionInput {
  amountMinor: bigint
  /** ISO 4217; sent lower-case, as Stripe writes it. */
  currency: string
  /** The line's product name the debtor sees on Stripe's page. */
  description: string
  /** The payment request id; comes back on the session and its events. */
  clientReferenceId: string
  /** Set on the session and on its PaymentIntent, so refunds and disputes (which name the PaymentIntent) lead back. */
  metadata: Record<string, string>
  successUrl: string
  cancelUrl: string
  /** When the session should expire; clamped into Stripe's window (see clampCheckoutExpiry). */
  expiresAt: Date
}

export interface RefundInput {
  paymentIntentId: string
  amountMinor: bigint
  metadata: Record<string, string>
  /** Stripe's reason, when the refund has one Stripe knows (`other` and `unapplied_funds` have none there). */
  reason?: Stripe.RefundCreateParams.Reason
}

export interface StripeGateway {
  /** `mode` of the key the gateway was built with. */
  readonly mode: StripeKeyMode | null
  createCheckoutSession(input: CheckoutSessionInput, idempotencyKey: string): Promise<Stripe.Checkout.Session>
  /** The session with its PaymentIntent expanded (an object, or null while the debtor has not paid). */
  retrieveCheckoutSession(id: string): Promise<Stripe.Checkout.Session>
  createRefund(input: RefundInput, idempotencyKey: string): Promise<Stripe.Refund>
  retrieveRefund(id: string): Promise<Stripe.Refund>
  retrieveDispute(id: string): Promise<Stripe.Dispute>
  /** `POST /v1/checkout/sessions/{id}/expire`: the debtor can no longer pay it (Stripe refuses one not open). */
  expireCheckoutSession(id: string): Promise<Stripe.Checkout.Session>
  /** `GET /v1/events`, newest first: `ending_before` reads the events after that one, `starting_after` those before. */
  listEvents(params: Stripe.EventListParams): Promise<Stripe.ApiList<Stripe.Event>>
  retrievePaymentIntent(id: string): Promise<Stripe.PaymentIntent>
  /**
   * Verifies the raw body against the `Stripe-Signature` header; throws StripeSignatureError (answer 400), or
   * StripeUnparsableEventError for a signed body that is not JSON. What it returns is the parsed body: the signature
   * proves the sender, not the shape (adapter.ts eventOf checks it).
   */
  verifyEvent(rawBody: string | Buffer, signatureHeader: string | undefined | null, webhookSecret: string): Stripe.Event
}

/** Base of the gateway's errors: `retryable` says whether trying again (same idempotency key) may succeed. */
export abstract class StripeGatewayError extends Error {
  abstract readonly retryable: boolean
  /** Stripe's HTTP status, or null when no answer came. */
  readonly statusCode: number | null
  /** Stripe's `request-id`, for support. */
  readonly requestId: string | null
  constructor(message: string, statusCode: number | null, requestId: string | null, options?: ErrorOptions) {
    super(message, options)
    this.statusCode = statusCode
    this.requestId = requestId
  }
}

/** No answer, a timeout, a 5xx, 429 or 409: try again later with the same idempotency key. */
export class StripeRetryableError extends StripeGatewayError {
  override readonly name = 'StripeRetryableError'
  readonly retryable = true
}

/** Stripe refused the request (a 4xx): trying again unchanged gives the same answer. */
export class StripeRejectedError extends StripeGatewayError {
  override readonly name = 'StripeRejectedError'
  readonly retryable = false
  /** Stripe's error `type`: invalid_request_error, idempotency_error, card_error, ... */
  readonly type: string | null
  /** Stripe's error `code` (resource_missing, amount_too_large, ...), when it gives one. */
  readonly code: string | null
  readonly param: string | null
  constructor(
    message: string,
    fields: { statusCode: number; requestId: string | null; type: string | null; code: string | null; param: string | null },
    options?: ErrorOptions,
  ) {
    super(message, fields.statusCode, fields.requestId, options)
    this.type = fields.type
    this.code = fields.code
    this.param = fields.param
  }
}

/** A webhook whose signature is missing, wrong or too old, or whose body is not an event: answer 400. */
export class StripeSignatureError extends Error {
  override readonly name: string = 'StripeSignatureError'
}

/** A validly signed body that is not JSON: Stripe sent it, and nothing can be made of it (answered 200, ignored). */
export class StripeUnparsableEventError extends StripeSignatureError {
  override readonly name = 'StripeUnparsableEventError'
}

/** The SDK's `protocol`/`host`/`port` options for an apiBase such as `http://127.0.0.1:4010`. */
export function stripeHostOptions(apiBase: string): { protocol: 'http' | 'https'; host: string; port: number } {
  let url: URL
  try {
    url = new URL(apiBase)
  } catch {
    throw new Error(`STRIPE_API_BASE is not a URL: ${apiBase}`)
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('STRIPE_API_BASE must be an http or https URL')
  if (url.pathname !== '/' || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    // The SDK sends every call to `/v1/...` on the host: a path, query or credentials here would be dropped silently.
    throw new Error('STRIPE_API_BASE must be a scheme, host and optional port only (the SDK adds /v1/)')
  }
  const protocol = url.protocol === 'https:' ? 'https' : 'http'
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  const port = url.port === '' ? (protocol === 'https' ? 443 : 80) : Number(url.port)
  return { protocol, host, port }
}

/**
 * Where Stripe's hosted Checkout pages are: checkout.stripe.com, and the origin of STRIPE_API_BASE when it is not
 * Stripe's (a proxy or a local stand-in serving both). The hosted page's `form-action` allows these, since its form's
 * 303 leads there. A Checkout custom domain is not among them (not supported).
 */
export function stripeCheckoutOrigins(apiBase: string): string[] {
  const origin = new URL(apiBase).origin
  return origin === DEFAULT_STRIPE_API_BASE ? ['https://checkout.stripe.com'] : ['https://checkout.stripe.com', origin]
}

/** 'test' or 'live' for a secret (`sk_`) or restricted (`rk_`) key; null for anything else (a publishable key too). */
export function keyMode(secretKey: string): StripeKeyMode | null {
  const m = /^(?:sk|rk)_(test|live)_[A-Za-z0-9]+$/.exec(secretKey)
  return m ? (m[1] as StripeKeyMode) : null
}

/** What may be shown of a key: its prefix and last four characters, e.g. `sk_live_...4242`. */
export function keyHint(secretKey: string): string {
  const m = /^((?:sk|rk|pk)_(?:test|live)_)([A-Za-z0-9]+)$/.exec(secretKey)
  if (!m) return '...'
  const rest = m[2] as string
  return rest.length <= 4 ? `${m[1]}...` : `${m[1]}...${rest.slice(-4)}`
}

/** `expires_at` in Unix seconds: the wanted expiry, moved into Stripe's 30 min to 24 h window after `now`. */
export function clampCheckoutExpiry(expiresAt: Date, now: Date): number {
  const nowSeconds = Math.floor(now.getTime() / 1000)
  const wanted = Math.floor(expiresAt.getTime() / 1000)
  return Math.min(Math.max(wanted, nowSeconds + CHECKOUT_MIN_LIFETIME_SECONDS), nowSeconds + CHECKOUT_MAX_LIFETIME_SECONDS)
}

function toStripeAmount(amountMinor: bigint): number {
  if (amountMinor <= 0n || amountMinor > BigInt(Number.MAX_SAFE_INTEGER))
    throw new RangeError('amountMinor must be a positive safe integer')
  return Number(amountMinor)
}

/** Sorts whatever the SDK threw into the gateway's two kinds; anything else is ours and is rethrown unchanged. */
function translate(error: unknown): never {
  if (error instanceof Stripe.errors.StripeError) {
    const statusCode = typeof error.statusCode === 'number' ? error.statusCode : null
    const requestId = error.requestId ?? null
    if (error instanceof Stripe.errors.StripeConnectionError || statusCode === null) {
      throw new StripeRetryableError(`Stripe did not answer: ${error.message}`, null, requestId, { cause: error })
    }
    if (statusCode >= 500 || statusCode === 429 || statusCode === 409) {
      throw new StripeRetryableError(`Stripe answered ${statusCode}: ${error.message}`, statusCode, requestId, { cause: error })
    }
    throw new StripeRejectedError(
      error.message,
      { statusCode, requestId, type: error.rawType ?? null, code: error.code ?? null, param: error.param ?? null },
      { cause: error },
    )
  }
  throw error
}

async function call<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (error) {
    translate(error)
  }
}

export function createStripeGateway(options: StripeGatewayOptions): StripeGateway {
  const now = options.now ?? (() => new Date())
  const stripe = new Stripe(options.secretKey, {
    ...stripeHostOptions(options.apiBase ?? DEFAULT_STRIPE_API_BASE),
    timeout: options.timeoutMs ?? STRIPE_TIMEOUT_MS,
    maxNetworkRetries: 0,
    // Latency telemetry about earlier calls rides on later ones; the service has no use for it.
    telemetry: false,
  })

  return {
    mode: keyMode(options.secretKey),

    createCheckoutSession(input, idempotencyKey) {
      const params: Stripe.Checkout.SessionCreateParams = {
        mode: 'payment',
        line_items: [
          {
            quantity: 1,
            price_data: {
              currency: input.currency.toLowerCase(),
              unit_amount: toStripeAmount(input.amountMinor),
              product_data: { name: input.description },
            },
          },
        ],
        client_reference_id: input.clientReferenceId,
        metadata: input.metadata,
        payment_intent_data: { metadata: input.metadata, description: input.description },
        success_url: input.successUrl,
        cancel_url: input.cancelUrl,
        expires_at: clampCheckoutExpiry(input.expiresAt, now()),
      }
      return call(() => stripe.checkout.sessions.create(params, { idempotencyKey }))
    },

    retrieveCheckoutSession(id) {
      return call(() => stripe.checkout.sessions.retrieve(id, { expand: ['payment_intent'] }))
    },

    createRefund(input, idempotencyKey) {
      const params: Stripe.RefundCreateParams = {
        payment_intent: input.paymentIntentId,
        amount: toStripeAmount(input.amountMinor),
        metadata: input.metadata,
        ...(input.reason ? { reason: input.reason } : {}),
      }
      return call(() => stripe.refunds.create(params, { idempotencyKey }))
    },

    retrieveRefund(id) {
      return call(() => stripe.refunds.retrieve(id))
    },

    retrieveDispute(id) {
      return call(() => stripe.disputes.retrieve(id))
    },

    expireCheckoutSession(id) {
      return call(() => stripe.checkout.sessions.expire(id))
    },

    listEvents(params) {
      return call(() => stripe.events.list(params))
    },

    retrievePaymentIntent(id) {
      return call(() => stripe.paymentIntents.retrieve(id))
    },

    verifyEvent(rawBody, signatureHeader, webhookSecret) {
      if (!signatureHeader) throw new StripeSignatureError('No Stripe-Signature header')
      try {
        return stripe.webhooks.constructEvent(
          rawBody,
          signatureHeader,
          webhookSecret,
          WEBHOOK_TOLERANCE_SECONDS,
          undefined,
          now().getTime(),
        )
      } catch (error) {
        // A validly signed body that is not JSON (constructEvent verifies first, then parses): Stripe's, but unusable.
        if (error instanceof SyntaxError) throw new StripeUnparsableEventError(error.message, { cause: error })
        // Signature mismatch, a timestamp beyond the tolerance, a malformed header.
        throw new StripeSignatureError(error instanceof Error ? error.message : 'Invalid Stripe webhook', { cause: error })
      }
    },
  }
}
