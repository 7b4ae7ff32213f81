import { randomBytes } from 'node:crypto'
import http from 'node:http'
import type net from 'node:net'
import Stripe from 'stripe'

/**
 * A local stand-in for the part of Stripe's API the service uses, for the real `stripe` SDK pointed at it through
 * `STRIPE_API_BASE` (its `url`). It speaks Stripe's wire format: form-encoded bodies and queries in bracket
 * notation (`line_items[0][price_data][currency]=usd`, `expand[0]=payment_intent`), `Authorization: Bearer <key>`,
 * `Idempotency-Key`, and Stripe's error body `{ error: { type, code?, message, param? } }`.
 *
 * Every object it stores, answers and puts in an event is typed with the SDK's own types (`Stripe.Checkout.Session`,
 * `Stripe.PaymentIntent`, `Stripe.Refund`, `Stripe.Dispute`, `Stripe.Event`): when a new SDK changes Stripe's
 * shapes, this file stops compiling instead of drifting.
 *
 * What it models (and what it does not):
 * - A Checkout Session in `payment` mode is `open` with no PaymentIntent until the debtor pays (as on Stripe since
 *   API 2022-08-01); `completeSession` creates the PaymentIntent. An open session past `expires_at` expires on
 *   the next request (Stripe expires it within minutes; its `checkout.session.expired` event follows).
 * - Idempotency: a POST's key with the same method, path and parameters replays the stored answer
 *   (`Idempotent-Replayed: true`); with anything different, 400 `idempotency_error`. Successful answers are
 *   stored; validation errors are not (as on Stripe); `failNext({ replayed: true })` stores a 500 as Stripe does
 *   once a request began executing.
 * - Events: only the ones that carry the four object types (no `charge.*` other than disputes, whose payload is a
 *   Dispute). Each event's `data.object` is a snapshot at the time, so a late event shows a stale object.
 * - Disputes as Stripe runs them: opened (`charge.dispute.created`), funds withdrawn (`charge.dispute.funds_withdrawn`,
 *   a negative balance transaction), closed (`charge.dispute.closed`, `won` or `lost`); won after a withdrawal, the
 *   funds come back (`charge.dispute.funds_reinstated`, a positive balance transaction). `GET /v1/disputes/{id}`.
 * - One account: every key it knows sees every object; `livemode` follows the key that created the object.
 */

export type SessionOutcome = 'paid' | 'async_pending' | 'async_succeeded' | 'async_failed' | 'expired'
/** What a new refund does: succeed at once, stay pending until `settleRefund`, or fail right after creation. */
export type RefundOutcome = 'succeeded' | 'pending' | 'failed'
export type RefundRule = RefundOutcome | ((refund: Stripe.Refund) => RefundOutcome)

export interface StandInCall {
  method: string
  /** The path without its query, e.g. `/v1/checkout/sessions`. */
  path: string
  query: string
  idempotencyKey: string | null
  status: number
  /** The answer was an idempotent replay of an earlier one. */
  replayed: boolean
}

export interface StandInOptions {
  /** Keys it accepts (sk_/rk_, test or live); default one generated test key, `secretKey`. */
  keys?: string[]
  /** Its clock in milliseconds; default Date.now. */
  now?: () => number
}

export interface SignedDelivery {
  payload: string
  header: string
}

type EventType = Stripe.Event['type']
type EventOf<T extends EventType> = Extract<Stripe.Event, { type: T }>

/** The SDK's form encoding, parsed back: brackets make nested objects, `[0]`, `[1]`... make arrays. Values stay strings. */
export function parseStripeForm(text: string): Record<string, unknown> {
  const root: Record<string, unknown> = {}
  for (const pair of text.split('&')) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    const key = decodeFormComponent(eq === -1 ? pair : pair.slice(0, eq))
    const value = decodeFormComponent(eq === -1 ? '' : pair.slice(eq + 1))
    const m = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(key)
    if (!m) throw new ApiError(400, { type: 'invalid_request_error', message: `Invalid parameter name: ${key}` })
    const path = [m[1] as string, ...[...(m[2] as string).matchAll(/\[([^[\]]*)\]/g)].map((x) => x[1] as string)]
    if (path.some((p) => p === '__proto__' || p === 'constructor' || p === 'prototype')) {
      throw new ApiError(400, { type: 'invalid_request_error', message: `Invalid parameter name: ${key}` })
    }
    let node = root
    for (let i = 0; i < path.length - 1; i++) {
      const segment = path[i] as string
      const next = node[segment]
      if (next === undefined) node[segment] = {}
      else if (typeof next !== 'object' || next === null) {
        throw new ApiError(400, { type: 'invalid_request_error', message: `Invalid parameter: ${key}`, param: key })
      }
      node = node[segment] as Record<string, unknown>
    }
    let last = path[path.length - 1] as string
    if (last === '') last = String(Object.keys(node).length)
    node[last] = value
  }
  return arrayify(root) as Record<string, unknown>
}

function decodeFormComponent(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '))
  } catch {
    throw new ApiError(400, { type: 'invalid_request_error', message: 'Malformed form encoding' })
  }
}

function arrayify(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value
  const obj = value as Record<string, unknown>
  const keys = Object.keys(obj)
  for (const k of keys) obj[k] = arrayify(obj[k])
  if (keys.length > 0 && keys.every((k, i) => k === String(i))) return keys.map((k) => obj[k])
  return obj
}

/** The parameters in a form that does not depend on key order, for the idempotency comparison. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (typeof value === 'object' && value !== null) {
    const obj = value as Record<string, unknown>
    return `{${Object.keys(obj)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(obj[k])}`)
      .join(',')}}`
  }
  return JSON.stringify(value)
}

interface StripeErrorBody {
  type: 'api_error' | 'invalid_request_error' | 'idempotency_error' | 'card_error'
  message: string
  code?: string
  param?: string
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: StripeErrorBody,
  ) {
    super(body.message)
  }
}

const invalid = (message: string, param?: string, code?: string) =>
  new ApiError(400, { type: 'invalid_request_error', message, ...(param ? { param } : {}), ...(code ? { code } : {}) })
const missing = (kind: string, id: string, param = 'id') =>
  new ApiError(404, { type: 'invalid_request_error', code: 'resource_missing', param, message: `No such ${kind}: '${id}'` })

function asString(value: unknown, param: string, required = false): string | undefined {
  if (value === undefined) {
    if (required) throw invalid(`Missing required param: ${param}.`, param, 'parameter_missing')
    return undefined
  }
  if (typeof value !== 'string') throw invalid(`Invalid string: ${param}`, param)
  return value
}

function asInteger(value: unknown, param: string, required = false): number | undefined {
  const s = asString(value, param, required)
  if (s === undefined) return undefined
  if (!/^-?\d+$/.test(s)) throw invalid(`Invalid integer: ${s}`, param, 'parameter_invalid_integer')
  return Number(s)
}

function asMetadata(value: unknown, param: string): Stripe.Metadata {
  if (value === undefined || value === '') return {}
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid(`Invalid hash: ${param}`, param)
  const out: Stripe.Metadata = {}
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw invalid(`Invalid metadata value: ${param}[${k}]`, `${param}[${k}]`)
    out[k] = v
  }
  return out
}

function asObject(value: unknown, param: string): Record<string, unknown> | undefined {
  if (value === undefined) return undefined
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid(`Invalid hash: ${param}`, param)
  return value as Record<string, unknown>
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
function randomId(prefix: string, length = 24): string {
  const bytes = randomBytes(length)
  let s = ''
  for (const b of bytes) s += ALPHANUMERIC[b % ALPHANUMERIC.length]
  return `${prefix}${s}`
}

/** A Stripe-looking key for tests: `sk_test_` followed by 24 random characters. */
export function generateStripeKey(kind: 'sk_test' | 'sk_live' | 'rk_test' | 'rk_live' = 'sk_test'): string {
  return randomId(`${kind}_`, 24)
}

interface StoredAnswer {
  method: string
  path: string
  params: string
  status: number
  body: string
  requestId: string
}

interface SessionExtras {
  description: string
  intentMetadata: Stripe.Metadata
  intentDescription: string | null
}

export async function startStripeStandIn(options: StandInOptions = {}) {
  const clock = options.now ?? Date.now
  const nowSeconds = () => Math.floor(clock() / 1000)
  const keys = new Set(options.keys ?? [generateStripeKey('sk_test')])
  const sessions = new Map<string, Stripe.Checkout.Session>()
  const extras = new Map<string, SessionExtras>()
  const intents = new Map<string, Stripe.PaymentIntent>()
  const refunds = new Map<string, Stripe.Refund>()
  const disputes = new Map<string, Stripe.Dispute>()
  const produced: Stripe.Event[] = []
  const stored = new Map<string, StoredAnswer>()
  const calls: StandInCall[] = []
  const failures: { status: number; replayed: boolean }[] = []
  let refundRule: RefundRule = 'succeeded'
  /** Requests to leave unanswered (holdNext): the first one matching each is received and never answered. */
  const holds: { method: string; pathPrefix: string; arrived: () => void }[] = []
  let base = ''

  const idFor = (prefix: string, livemode: boolean) => randomId(`${prefix}_${livemode ? 'live' : 'test'}_`)
  const snapshot = <T>(value: T): T => structuredClone(value)

  function emit<T extends EventType>(type: T, object: EventOf<T>['data']['object'], livemode: boolean): EventOf<T> {
    const envelope: Stripe.EventBase = {
      id: randomId('evt_'),
      object: 'event',
      api_version: Stripe.API_VERSION,
      created: nowSeconds(),
      data: { object: snapshot(object) },
      livemode,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
    }
    // The envelope is checked against EventBase and the payload against the event's own `data.object` type.
    const event = envelope as EventOf<T>
    produced.push(event)
    return event
  }

  function newSession(params: Record<string, unknown>, livemode: boolean): Stripe.Checkout.Session {
    const created = nowSeconds()
    const mode = asString(params.mode, 'mode', true)
    if (mode !== 'payment') throw invalid('The stand-in supports only `mode: payment`.', 'mode')
    const lines = params.line_items
    if (!Array.isArray(lines) || lines.length === 0) throw invalid('Missing required param: line_items.', 'line_items', 'parameter_missing')
    let total = 0
    let currency: string | undefined
    const names: string[] = []
    lines.forEach((raw, i) => {
      const line = asObject(raw, `line_items[${i}]`) ?? {}
      const priceData = asObject(line.price_data, `line_items[${i}][price_data]`)
      if (!priceData) throw invalid('The stand-in supports only line items with price_data.', `line_items[${i}][price_data]`)
      const quantity = asInteger(line.quantity, `line_items[${i}][quantity]`, true) as number
      const unitAmount = asInteger(priceData.unit_amount, `line_items[${i}][price_data][unit_amount]`, true) as number
      const lineCurrency = (asString(priceData.currency, `line_items[${i}][price_data][currency]`, true) as string).toLowerCase()
      const product = asObject(priceData.product_data, `line_items[${i}][price_data][product_data]`)
      const name = asString(product?.name, `line_items[${i}][price_data][product_data][name]`, true) as string
      if (quantity < 1 || unitAmount < 1) throw invalid('Amounts and quantities must be positive integers.', `line_items[${i}]`)
      if (currency !== undefined && currency !== lineCurrency) throw invalid('All line items must share one currency.', `line_items[${i}]`)
      currency = lineCurrency
      total += quantity * unitAmount
      names.push(name)
    })
    const successUrl = asString(params.success_url, 'success_url', true) as string
    const cancelUrl = asString(params.cancel_url, 'cancel_url') ?? null
    const expiresAt = asInteger(params.expires_at, 'expires_at') ?? created + 24 * 60 * 60
    if (expiresAt < created + 30 * 60 || expiresAt > created + 24 * 60 * 60) {
      throw invalid('The `expires_at` timestamp must be between 30 minutes and 24 hours from Checkout Session creation.', 'expires_at')
    }
    const intentData = asObject(params.payment_intent_data, 'payment_intent_data') ?? {}
    const id = idFor('cs', livemode)
    extras.set(id, {
      description: names.join(', '),
      intentMetadata: asMetadata(intentData.metadata, 'payment_intent_data[metadata]'),
      intentDescription: asString(intentData.description, 'payment_intent_data[description]') ?? null,
    })
    return {
      id,
      object: 'checkout.session',
      adaptive_pricing: null,
      after_expiration: null,
      allow_promotion_codes: null,
      allowed_payment_method_types: null,
      amount_subtotal: total,
      amount_total: total,
      automatic_tax: { enabled: false, liability: null, provider: null, status: null },
      billing_address_collection: null,
      cancel_url: cancelUrl,
      client_reference_id: asString(params.client_reference_id, 'client_reference_id') ?? null,
      client_secret: null,
      collected_information: null,
      consent: null,
      consent_collection: null,
      created,
      currency: currency ?? null,
      currency_conversion: null,
      custom_fields: [],
      custom_text: { after_submit: null, shipping_address: null, submit: null, terms_of_service_acceptance: null },
      customer: null,
      customer_account: null,
      customer_creation: 'if_required',
      customer_details: null,
      customer_email: null,
      discounts: [],
      expires_at: expiresAt,
      integration_identifier: null,
      invoice: null,
      invoice_creation: null,
      livemode,
      locale: null,
      managed_payments: null,
      metadata: asMetadata(params.metadata, 'metadata'),
      mode: 'payment',
      origin_context: null,
      payment_intent: null,
      payment_link: null,
      payment_method_collection: 'if_required',
      payment_method_configuration_details: null,
      payment_method_options: {},
      payment_method_types: ['card', 'us_bank_account'],
      payment_status: 'unpaid',
      permissions: null,
      recovered_from: null,
      saved_payment_method_options: null,
      setup_intent: null,
      shipping_address_collection: null,
      shipping_cost: null,
      shipping_options: [],
      status: 'open',
      submit_type: null,
      subscription: null,
      success_url: successUrl,
      total_details: { amount_discount: 0, amount_shipping: 0, amount_tax: 0 },
      ui_mode: 'hosted',
      url: `${base}/checkout/${id}`,
      wallet_options: null,
    }
  }

  function newIntent(session: Stripe.Checkout.Session, status: Stripe.PaymentIntent.Status, method: string): Stripe.PaymentIntent {
    const extra = extras.get(session.id)
    const amount = session.amount_total ?? 0
    const succeeded = status === 'succeeded'
    return {
      id: randomId('pi_'),
      object: 'payment_intent',
      allowed_payment_method_types: null,
      amount,
      amount_capturable: 0,
      amount_received: succeeded ? amount : 0,
      application: null,
      application_fee_amount: null,
      automatic_payment_methods: null,
      canceled_at: null,
      cancellation_reason: null,
      capture_method: 'automatic',
      client_secret: null,
      confirmation_method: 'automatic',
      created: nowSeconds(),
      currency: session.currency ?? 'usd',
      customer: null,
      customer_account: null,
      description: extra?.intentDescription ?? null,
      excluded_payment_method_types: null,
      last_payment_error: null,
      latest_charge: randomId('ch_'),
      livemode: session.livemode,
      managed_payments: null,
      metadata: { ...(extra?.intentMetadata ?? {}) },
      next_action: null,
      on_behalf_of: null,
      payment_method: randomId('pm_'),
      payment_method_configuration_details: null,
      payment_method_options: null,
      payment_method_types: [method],
      payment_record: null,
      processing: null,
      receipt_email: null,
      review: null,
      setup_future_usage: null,
      shipping: null,
      source: null,
      statement_descriptor: null,
      statement_descriptor_suffix: null,
      status,
      transfer_group: null,
    }
  }

  function expireDue(): void {
    for (const session of sessions.values()) {
      if (session.status === 'open' && session.expires_at <= nowSeconds()) expire(session)
    }
  }

  function expire(session: Stripe.Checkout.Session): void {
    session.status = 'expired'
    session.url = null
    emit('checkout.session.expired', session, session.livemode)
  }

  function sessionOrThrow(id: string): Stripe.Checkout.Session {
    const session = sessions.get(id)
    if (!session) throw new Error(`stand-in: no Checkout Session ${id}`)
    return session
  }

  function intentOf(session: Stripe.Checkout.Session): Stripe.PaymentIntent {
    const id = typeof session.payment_intent === 'string' ? session.payment_intent : session.payment_intent?.id
    const intent = id ? intents.get(id) : undefined
    if (!intent) throw new Error(`stand-in: Checkout Session ${session.id} has no PaymentIntent yet`)
    return intent
  }

  /** The debtor finishes (or abandons) the session; returns the events this produced, in order. */
  function completeSession(id: string, { outcome }: { outcome: SessionOutcome }): Stripe.Event[] {
    expireDue()
    const first = produced.length
    const session = sessionOrThrow(id)
    const requireOpen = () => {
      if (session.status !== 'open') throw new Error(`stand-in: Checkout Session ${id} is ${session.status}, not open`)
    }
    const startAsync = () => {
      requireOpen()
      const intent = newIntent(session, 'processing', 'us_bank_account')
      intents.set(intent.id, intent)
      session.status = 'complete'
      session.payment_intent = intent.id
      emit('payment_intent.processing', intent, session.livemode)
      emit('checkout.session.completed', session, session.livemode)
    }
    switch (outcome) {
      case 'paid': {
        requireOpen()
        const intent = newIntent(session, 'succeeded', 'card')
        intents.set(intent.id, intent)
        session.status = 'complete'
        session.payment_status = 'paid'
        session.payment_intent = intent.id
        emit('payment_intent.succeeded', intent, session.livemode)
        emit('checkout.session.completed', session, session.livemode)
        break
      }
      case 'async_pending':
        startAsync()
        break
      case 'async_succeeded':
      case 'async_failed': {
        if (session.status === 'open') startAsync()
        const intent = intentOf(session)
        if (intent.status !== 'processing') throw new Error(`stand-in: PaymentIntent ${intent.id} is ${intent.status}, not processing`)
        if (outcome === 'async_succeeded') {
          intent.status = 'succeeded'
          intent.amount_received = intent.amount
          session.payment_status = 'paid'
          emit('payment_intent.succeeded', intent, session.livemode)
          emit('checkout.session.async_payment_succeeded', session, session.livemode)
        } else {
          // A failed bank debit sends the PaymentIntent back for another payment method; the session stays unpaid.
          intent.status = 'requires_payment_method'
          intent.last_payment_error = {
            type: 'invalid_request_error',
            code: 'payment_method_provider_decline',
            message: 'The customer bank account could not be debited.',
          }
          emit('payment_intent.payment_failed', intent, session.livemode)
          emit('checkout.session.async_payment_failed', session, session.livemode)
        }
        break
      }
      case 'expired':
        requireOpen()
        expire(session)
        break
    }
    return produced.slice(first)
  }

  function refundedSoFar(intentId: string): number {
    let sum = 0
    for (const r of refunds.values()) {
      if (r.payment_intent === intentId && (r.status === 'succeeded' || r.status === 'pending' || r.status === 'requires_action'))
        sum += r.amount
    }
    return sum
  }

  function moveRefund(refund: Stripe.Refund, outcome: 'succeeded' | 'failed'): void {
    refund.status = outcome
    if (outcome === 'failed') {
      refund.failure_reason = 'declined'
      refund.failure_balance_transaction = randomId('txn_')
      emit('refund.failed', refund, livemodeOf(refund))
    }
    emit('refund.updated', refund, livemodeOf(refund))
  }

  function livemodeOf(refund: Stripe.Refund): boolean {
    return typeof refund.payment_intent === 'string' ? (intents.get(refund.payment_intent)?.livemode ?? false) : false
  }

  function createRefund(params: Record<string, unknown>): { refund: Stripe.Refund; after: (() => void) | null } {
    const intentId = asString(params.payment_intent, 'payment_intent')
    if (intentId === undefined) throw invalid('The stand-in refunds by payment_intent only.', 'payment_intent', 'parameter_missing')
    const intent = intents.get(intentId)
    if (!intent) throw invalid(`No such payment_intent: '${intentId}'`, 'payment_intent', 'resource_missing')
    if (intent.status !== 'succeeded') {
      throw invalid(`This PaymentIntent (${intentId}) does not have a successful charge to refund.`, 'payment_intent')
    }
    const remaining = intent.amount_received - refundedSoFar(intentId)
    if (remaining <= 0) {
      throw invalid(`Charge ${String(intent.latest_charge)} has already been refunded.`, undefined, 'charge_already_refunded')
    }
    const amount = asInteger(params.amount, 'amount') ?? remaining
    if (amount < 1) throw invalid('Invalid positive integer', 'amount', 'parameter_invalid_integer')
    if (amount > remaining) {
      throw invalid(`Refund amount (${amount}) is greater than unrefunded amount on charge (${remaining})`, 'amount', 'amount_too_large')
    }
    const refund: Stripe.Refund = {
      id: randomId('re_'),
      object: 'refund',
      amount,
      balance_transaction: randomId('txn_'),
      charge: intent.latest_charge,
      created: nowSeconds(),
      currency: intent.currency,
      customer: null,
      customer_account: null,
      metadata: asMetadata(params.metadata, 'metadata'),
      payment_intent: intentId,
      payment_method: null,
      reason: (asString(params.reason, 'reason') as Stripe.Refund.Reason | undefined) ?? null,
      receipt_number: null,
      source_transfer_reversal: null,
      status: 'pending',
      transfer_reversal: null,
    }
    const outcome = typeof refundRule === 'function' ? refundRule(snapshot(refund)) : refundRule
    refund.status = outcome === 'succeeded' ? 'succeeded' : 'pending'
    refunds.set(refund.id, refund)
    emit('refund.created', refund, intent.livemode)
    // A failing refund is answered as pending and fails a moment later, as on Stripe.
    return { refund, after: outcome === 'failed' ? () => moveRefund(refund, 'failed') : null }
  }

  /**
   * A dispute's balance transaction: the withdrawal (negative, with Stripe's dispute fee) or, once won, the
   * reinstatement (positive, `dispute_reversal`, the fee given back).
   */
  function balanceTransaction(amount: number, currency: string, sourceId: string): Stripe.BalanceTransaction {
    if (amount > 0) {
      return {
        id: randomId('txn_'),
        object: 'balance_transaction',
        amount,
        available_on: nowSeconds(),
        balance_type: 'payments',
        created: nowSeconds(),
        currency,
        description: 'Chargeback reversal',
        exchange_rate: null,
        fee: -1500,
        fee_details: [{ amount: -1500, application: null, currency, description: 'Dispute fee refund', type: 'stripe_fee' }],
        net: amount + 1500,
        reporting_category: 'dispute_reversal',
        source: sourceId,
        status: 'available',
        type: 'adjustment',
      }
    }
    return {
      id: randomId('txn_'),
      object: 'balance_transaction',
      amount,
      available_on: nowSeconds(),
      balance_type: 'payments',
      created: nowSeconds(),
      currency,
      description: 'Chargeback withdrawal',
      exchange_rate: null,
      fee: 1500,
      fee_details: [{ amount: 1500, application: null, currency, description: 'Dispute fee', type: 'stripe_fee' }],
      net: amount - 1500,
      reporting_category: 'dispute',
      source: sourceId,
      status: 'available',
      type: 'adjustment',
    }
  }

  /**
   * A dispute as Stripe opens one (`charge.dispute.created`, status `needs_response`), nothing withdrawn yet
   * (`withdrawDisputeFunds`), then closed (`closeDispute`). Returns the dispute as it is (a copy).
   */
  function openDispute(paymentIntentId: string, amountMinor: number): Stripe.Dispute {
    const intent = intents.get(paymentIntentId)
    if (intent?.status !== 'succeeded') throw new Error(`stand-in: no succeeded PaymentIntent ${paymentIntentId}`)
    if (!Number.isInteger(amountMinor) || amountMinor < 1 || amountMinor > intent.amount_received) {
      throw new Error(`stand-in: a dispute of ${amountMinor} does not fit PaymentIntent ${paymentIntentId}`)
    }
    const dispute: Stripe.Dispute = {
      id: randomId('dp_'),
      object: 'dispute',
      amount: amountMinor,
      balance_transactions: [],
      charge: String(intent.latest_charge),
      created: nowSeconds(),
      currency: intent.currency,
      enhanced_eligibility_types: [],
      evidence: {
        access_activity_log: null,
        billing_address: null,
        cancellation_policy: null,
        cancellation_policy_disclosure: null,
        cancellation_rebuttal: null,
        customer_communication: null,
        customer_email_address: null,
        customer_name: null,
        customer_purchase_ip: null,
        customer_signature: null,
        duplicate_charge_documentation: null,
        duplicate_charge_explanation: null,
        duplicate_charge_id: null,
        enhanced_evidence: {},
        product_description: null,
        receipt: null,
        refund_policy: null,
        refund_policy_disclosure: null,
        refund_refusal_explanation: null,
        service_date: null,
        service_documentation: null,
        shipping_address: null,
        shipping_carrier: null,
        shipping_date: null,
        shipping_documentation: null,
        shipping_tracking_number: null,
        uncategorized_file: null,
        uncategorized_text: null,
      },
      evidence_details: {
        due_by: nowSeconds() + 7 * 24 * 60 * 60,
        enhanced_eligibility: {},
        has_evidence: false,
        past_due: false,
        submission_count: 0,
        submission_method: 'not_submitted',
      },
      intended_submission_method: null,
      is_charge_refundable: false,
      livemode: intent.livemode,
      metadata: {},
      payment_intent: paymentIntentId,
      reason: 'fraudulent',
      status: 'needs_response',
    }
    disputes.set(dispute.id, dispute)
    emit('charge.dispute.created', dispute, intent.livemode)
    return snapshot(dispute)
  }

  function openOf(id: string): Stripe.Dispute {
    const dispute = disputes.get(id)
    if (!dispute) throw new Error(`stand-in: no dispute ${id}`)
    if (dispute.status === 'won' || dispute.status === 'lost') throw new Error(`stand-in: dispute ${id} is closed (${dispute.status})`)
    return dispute
  }

  /** The disputed amount taken from the balance (a negative balance transaction): `charge.dispute.funds_withdrawn`. */
  function withdrawDisputeFunds(id: string): Stripe.Dispute {
    const dispute = openOf(id)
    if (dispute.balance_transactions.length > 0) throw new Error(`stand-in: dispute ${id} already withdrew its funds`)
    dispute.balance_transactions.push(balanceTransaction(-dispute.amount, dispute.currency, dispute.id))
    dispute.is_charge_refundable = false
    emit('charge.dispute.funds_withdrawn', dispute, dispute.livemode)
    return snapshot(dispute)
  }

  /**
   * Closes the dispute (`charge.dispute.closed`). Won after a withdrawal, Stripe gives the funds back: a positive balance
   * transaction and `charge.dispute.funds_reinstated`. Lost: the withdrawal stands.
   */
  function closeDispute(id: string, outcome: 'won' | 'lost'): Stripe.Dispute {
    const dispute = openOf(id)
    dispute.status = outcome
    emit('charge.dispute.closed', dispute, dispute.livemode)
    const withdrawn = dispute.balance_transactions.reduce((sum, t) => (t.amount < 0 ? sum - t.amount : sum), 0)
    if (outcome === 'won' && withdrawn > 0) {
      dispute.balance_transactions.push(balanceTransaction(withdrawn, dispute.currency, dispute.id))
      emit('charge.dispute.funds_reinstated', dispute, dispute.livemode)
    }
    return snapshot(dispute)
  }

  /** A chargeback the merchant loses: created, funds withdrawn, closed as lost. Returns the dispute as it ends. */
  function loseDispute(paymentIntentId: string, amountMinor: number): Stripe.Dispute {
    const { id } = openDispute(paymentIntentId, amountMinor)
    withdrawDisputeFunds(id)
    return closeDispute(id, 'lost')
  }

  /** A chargeback the merchant wins after its funds were withdrawn: created, withdrawn, closed won, funds reinstated. */
  function winDispute(paymentIntentId: string, amountMinor: number): Stripe.Dispute {
    const { id } = openDispute(paymentIntentId, amountMinor)
    withdrawDisputeFunds(id)
    return closeDispute(id, 'won')
  }

  /**
   * `GET /v1/events` as Stripe answers it: newest first, `limit` (1..100, default 10), `starting_after` (older than
   * that event), `ending_before` (newer than it: the page nearest to it, still newest first), `types[]`, and
   * `created[gte]`; `has_more` says whether more lie beyond the page in the direction read. Events of this key's mode.
   */
  function listEvents(params: Record<string, unknown>, livemode: boolean): Stripe.ApiList<Stripe.Event> {
    const limit = asInteger(params.limit, 'limit') ?? 10
    if (limit < 1 || limit > 100) throw invalid('This value must be between 1 and 100.', 'limit')
    const types = Array.isArray(params.types) ? (params.types as string[]) : undefined
    const created = asObject(params.created, 'created')
    const gte = asInteger(created?.gte, 'created[gte]')
    const startingAfter = asString(params.starting_after, 'starting_after')
    const endingBefore = asString(params.ending_before, 'ending_before')
    if (startingAfter !== undefined && endingBefore !== undefined) {
      throw invalid('You may only specify one of these parameters: ending_before, starting_after.')
    }
    // Newest first.
    const all = produced
      .filter((e) => e.livemode === livemode && (!types || types.includes(e.type)) && (gte === undefined || e.created >= gte))
      .reverse()
    const cursorOf = (id: string, param: string) => {
      const at = all.findIndex((e) => e.id === id)
      if (at === -1) throw missing('event', id, param)
      return at
    }
    let page: Stripe.Event[]
    let hasMore: boolean
    if (endingBefore !== undefined) {
      const at = cursorOf(endingBefore, 'ending_before')
      const from = Math.max(0, at - limit)
      page = all.slice(from, at)
      hasMore = from > 0
    } else {
      const from = startingAfter !== undefined ? cursorOf(startingAfter, 'starting_after') + 1 : 0
      page = all.slice(from, from + limit)
      hasMore = from + limit < all.length
    }
    return { object: 'list', data: page.map((e) => snapshot(e)), has_more: hasMore, url: '/v1/events' }
  }

  /**
   * A refund made in Stripe's Dashboard (or another tool): no metadata of the service, Stripe's reason, and its
   * `refund.created` event. Succeeds at once unless `pending`.
   */
  function dashboardRefund(
    paymentIntentId: string,
    amountMinor: number,
    opts: { reason?: Stripe.Refund.Reason; pending?: boolean } = {},
  ): Stripe.Refund {
    const intent = intents.get(paymentIntentId)
    if (intent?.status !== 'succeeded') throw new Error(`stand-in: no succeeded PaymentIntent ${paymentIntentId}`)
    const remaining = intent.amount_received - refundedSoFar(paymentIntentId)
    if (!Number.isInteger(amountMinor) || amountMinor < 1 || amountMinor > remaining) {
      throw new Error(`stand-in: a refund of ${amountMinor} does not fit PaymentIntent ${paymentIntentId} (${remaining} left)`)
    }
    const refund: Stripe.Refund = {
      id: randomId('re_'),
      object: 'refund',
      amount: amountMinor,
      balance_transaction: randomId('txn_'),
      charge: intent.latest_charge,
      created: nowSeconds(),
      currency: intent.currency,
      customer: null,
      customer_account: null,
      metadata: {},
      payment_intent: paymentIntentId,
      payment_method: null,
      reason: opts.reason ?? null,
      receipt_number: null,
      source_transfer_reversal: null,
      status: opts.pending ? 'pending' : 'succeeded',
      transfer_reversal: null,
    }
    refunds.set(refund.id, refund)
    emit('refund.created', refund, intent.livemode)
    return snapshot(refund)
  }

  /**
   * A paid session whose amount or currency is not what the service asked (Adaptive Pricing, a session edited at
   * Stripe): the session's total and currency changed before the debtor pays it.
   */
  function editSession(id: string, change: { amountTotal?: number; currency?: string }): void {
    const session = sessionOrThrow(id)
    if (change.amountTotal !== undefined) {
      session.amount_total = change.amountTotal
      session.amount_subtotal = change.amountTotal
    }
    if (change.currency !== undefined) session.currency = change.currency
  }

  function sign(event: Stripe.Event, webhookSecret: string, opts: { forged?: boolean; timestamp?: number } = {}): SignedDelivery {
    // Stripe sends its events pretty-printed; the signature covers these exact bytes.
    const payload = JSON.stringify(event, null, 2)
    const header = Stripe.webhooks.generateTestHeaderString({
      payload,
      secret: opts.forged ? `whsec_forged_${randomId('')}` : webhookSecret,
      timestamp: opts.timestamp ?? nowSeconds(),
    })
    return { payload, header }
  }

  function answerJson(res: http.ServerResponse, status: number, body: string, headers: Record<string, string>): void {
    res.writeHead(status, { 'content-type': 'application/json', 'stripe-version': Stripe.API_VERSION, ...headers })
    res.end(body)
  }

  function handleApi(
    method: string,
    path: string,
    params: Record<string, unknown>,
    livemode: boolean,
  ): { status: number; body: unknown; after?: () => void } {
    if (method === 'POST' && path === '/v1/checkout/sessions') {
      const session = newSession(params, livemode)
      sessions.set(session.id, session)
      return { status: 200, body: session }
    }
    if (method === 'POST' && path === '/v1/refunds') {
      const { refund, after } = createRefund(params)
      return { status: 200, body: snapshot(refund), ...(after ? { after } : {}) }
    }
    const expiring = method === 'POST' ? /^\/v1\/checkout\/sessions\/([^/]+)\/expire$/.exec(path) : null
    if (expiring) {
      const session = sessions.get(decodeURIComponent(expiring[1] as string))
      if (!session) throw missing('checkout.session', decodeURIComponent(expiring[1] as string), 'session')
      // Stripe: only an open session can be expired.
      if (session.status !== 'open') {
        throw invalid(
          `Only Checkout Sessions with a status in ["open"] can be expired. This Checkout Session has a status of "${session.status}".`,
        )
      }
      expire(session)
      return { status: 200, body: snapshot(session) }
    }
    if (method === 'GET' && path === '/v1/events') return { status: 200, body: listEvents(params, livemode) }
    const read = method === 'GET' ? /^\/v1\/(checkout\/sessions|payment_intents|refunds|disputes)\/([^/]+)$/.exec(path) : null
    const id = read ? decodeURIComponent(read[2] as string) : ''
    switch (read?.[1]) {
      case 'checkout/sessions': {
        const session = sessions.get(id)
        if (!session) throw missing('checkout.session', id, 'session')
        const expand = Array.isArray(params.expand) ? params.expand : []
        const copy = snapshot(session)
        if (expand.includes('payment_intent') && typeof copy.payment_intent === 'string') {
          copy.payment_intent = snapshot(intents.get(copy.payment_intent) ?? null)
        }
        return { status: 200, body: copy }
      }
      case 'payment_intents': {
        const intent = intents.get(id)
        if (!intent) throw missing('payment_intent', id, 'intent')
        return { status: 200, body: intent }
      }
      case 'refunds': {
        const refund = refunds.get(id)
        if (!refund) throw missing('refund', id, 'refund')
        return { status: 200, body: refund }
      }
      case 'disputes': {
        const dispute = disputes.get(id)
        if (!dispute) throw missing('dispute', id, 'dispute')
        return { status: 200, body: dispute }
      }
    }
    throw new ApiError(404, {
      type: 'invalid_request_error',
      message: `Unrecognized request URL (${method}: ${path}). The stand-in serves only the calls of the Stripe gateway.`,
    })
  }

  function serveApi(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    url: URL,
    rawBody: string,
  ): { status: number; key: string | null; replayed: boolean } {
    const method = req.method ?? 'GET'
    const path = url.pathname
    const requestId = randomId('req_', 14)
    const idempotencyKey = method === 'POST' ? ((req.headers['idempotency-key'] as string | undefined) ?? null) : null
    const headers: Record<string, string> = { 'request-id': requestId, ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) }
    const fail = (status: number, body: StripeErrorBody) => {
      answerJson(res, status, JSON.stringify({ error: body }, null, 2), headers)
      return { status, key: idempotencyKey, replayed: false }
    }

    const auth = req.headers.authorization ?? ''
    const apiKey = auth.startsWith('Bearer ') ? auth.slice('Bearer '.length) : ''
    if (apiKey === '') {
      return fail(401, {
        type: 'invalid_request_error',
        message: 'You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth.',
      })
    }
    if (!keys.has(apiKey)) {
      const masked = apiKey.length > 4 ? `${apiKey.slice(0, 8)}${'*'.repeat(Math.max(0, apiKey.length - 12))}${apiKey.slice(-4)}` : '****'
      return fail(401, { type: 'invalid_request_error', message: `Invalid API Key provided: ${masked}` })
    }
    const livemode = /^(?:sk|rk)_live_/.test(apiKey)

    let params: Record<string, unknown>
    try {
      params = parseStripeForm(method === 'GET' ? url.search.slice(1) : rawBody)
    } catch (error) {
      if (error instanceof ApiError) return fail(error.status, error.body)
      throw error
    }
    const paramsCanonical = canonical(params)

    if (idempotencyKey !== null) {
      const earlier = stored.get(idempotencyKey)
      if (earlier) {
        if (earlier.method !== method || earlier.path !== path || earlier.params !== paramsCanonical) {
          return fail(400, {
            type: 'idempotency_error',
            message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${idempotencyKey}' if you meant to execute a different request.`,
          })
        }
        answerJson(res, earlier.status, earlier.body, { ...headers, 'idempotent-replayed': 'true', 'original-request': earlier.requestId })
        return { status: earlier.status, key: idempotencyKey, replayed: true }
      }
    }

    const store = (status: number, body: string) => {
      if (idempotencyKey !== null) stored.set(idempotencyKey, { method, path, params: paramsCanonical, status, body, requestId })
    }

    const injected = failures.shift()
    if (injected) {
      const body = JSON.stringify({ error: { type: 'api_error', message: 'An unexpected error occurred (stand-in failNext).' } }, null, 2)
      if (injected.replayed) store(injected.status, body)
      answerJson(res, injected.status, body, headers)
      return { status: injected.status, key: idempotencyKey, replayed: false }
    }

    expireDue()
    let result: { status: number; body: unknown; after?: () => void }
    try {
      result = handleApi(method, path, params, livemode)
    } catch (error) {
      if (error instanceof ApiError) return fail(error.status, error.body)
      throw error
    }
    const body = JSON.stringify(result.body, null, 2)
    store(result.status, body)
    answerJson(res, result.status, body, headers)
    result.after?.()
    return { status: result.status, key: idempotencyKey, replayed: false }
  }

  function servePage(req: http.IncomingMessage, res: http.ServerResponse, url: URL, rawBody: string): number {
    const m = /^\/checkout\/([^/]+)(\/pay)?$/.exec(url.pathname)
    const session = m ? sessions.get(decodeURIComponent(m[1] as string)) : undefined
    const page = (status: number, body: string) => {
      res.writeHead(status, { 'content-type': 'text/html; charset=utf-8' })
      res.end(
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Stripe stand-in Checkout</title></head><body>${body}</body></html>`,
      )
      return status
    }
    if (!m || !session) return page(404, '<h1>No such Checkout Session</h1>')
    expireDue()
    if (session.status !== 'open') return page(410, '<h1>This Checkout Session is no longer available</h1>')
    if (req.method === 'GET' && !m[2]) {
      const description = extras.get(session.id)?.description ?? ''
      const cancel = session.cancel_url ? `<p><a href="${escapeHtml(session.cancel_url)}">Back</a></p>` : ''
      return page(
        200,
        `<h1>Pay ${escapeHtml(description)}</h1>` +
          `<p>Amount: <span id="amount">${session.amount_total}</span> <span id="currency">${escapeHtml(session.currency ?? '')}</span> (minor units)</p>` +
          `<form method="post" action="/checkout/${encodeURIComponent(session.id)}/pay">` +
          '<button type="submit" name="outcome" value="paid">Pay</button> ' +
          '<button type="submit" name="outcome" value="async_pending">Pay by bank account</button>' +
          `</form>${cancel}`,
      )
    }
    if (req.method === 'POST' && m[2]) {
      const outcome = parseStripeForm(rawBody).outcome === 'async_pending' ? 'async_pending' : 'paid'
      completeSession(session.id, { outcome })
      // Stripe fills the {CHECKOUT_SESSION_ID} template in success_url.
      const location = (session.success_url ?? '/').replace('{CHECKOUT_SESSION_ID}', encodeURIComponent(session.id))
      res.writeHead(303, { location })
      res.end()
      return 303
    }
    return page(405, '<h1>Method not allowed</h1>')
  }

  const sockets = new Set<net.Socket>()
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8')
      const url = new URL(req.url ?? '/', base)
      const call: StandInCall = {
        method: req.method ?? 'GET',
        path: url.pathname,
        query: url.search,
        idempotencyKey: null,
        status: 0,
        replayed: false,
      }
      calls.push(call)
      const held = holds.findIndex((h) => h.method === call.method && call.path.startsWith(h.pathPrefix))
      if (held !== -1) {
        // Received, never answered: the caller waits (a process killed meanwhile never hears back).
        const [hold] = holds.splice(held, 1)
        hold?.arrived()
        return
      }
      try {
        if (url.pathname.startsWith('/checkout/')) {
          call.status = servePage(req, res, url, rawBody)
        } else {
          const outcome = serveApi(req, res, url, rawBody)
          call.status = outcome.status
          call.idempotencyKey = outcome.key
          call.replayed = outcome.replayed
        }
      } catch (error) {
        call.status = 500
        if (!res.headersSent) {
          answerJson(res, 500, JSON.stringify({ error: { type: 'api_error', message: String(error) } }), {})
        } else res.end()
      }
    })
  })
  server.on('connection', (s) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as net.AddressInfo
  base = `http://127.0.0.1:${port}`
  const [firstKey] = keys

  return {
    /** Give this as `apiBase` / `STRIPE_API_BASE`. */
    url: base,
    /** A key the stand-in accepts (the first of `keys`). */
    secretKey: firstKey as string,
    /** Every request it received, in order. */
    calls,
    addKey(key: string): void {
      keys.add(key)
    },
    /** The next `count` API calls answer `status` (500 by default); `replayed` stores it under the idempotency key. */
    failNext(opts: { status?: number; count?: number; replayed?: boolean } = {}): void {
      for (let i = 0; i < (opts.count ?? 1); i++) failures.push({ status: opts.status ?? 500, replayed: opts.replayed ?? false })
    },
    completeSession,
    /**
     * The next request with this method and a path starting with `pathPrefix` is received and never answered (until
     * `close`); the promise resolves when it has arrived.
     */
    holdNext(method: string, pathPrefix: string): Promise<void> {
      return new Promise<void>((arrived) => holds.push({ method, pathPrefix, arrived }))
    },
    setRefundOutcome(rule: RefundRule): void {
      refundRule = rule
    },
    /** Moves a pending refund to its end state, with Stripe's events. */
    settleRefund(id: string, outcome: 'succeeded' | 'failed'): void {
      const refund = refunds.get(id)
      if (refund?.status !== 'pending') throw new Error(`stand-in: refund ${id} is not pending`)
      moveRefund(refund, outcome)
    },
    openDispute,
    withdrawDisputeFunds,
    closeDispute,
    loseDispute,
    winDispute,
    dashboardRefund,
    editSession,
    /** Every event it produced, oldest first (copies: later changes do not reach them). */
    events(): Stripe.Event[] {
      return produced.map((e) => snapshot(e))
    },
    session(id: string): Stripe.Checkout.Session | undefined {
      const s = sessions.get(id)
      return s ? snapshot(s) : undefined
    },
    /** The body and `Stripe-Signature` header Stripe would send; `forged` signs with another secret. */
    sign,
    /** POSTs the event to `url` as Stripe does, signed with `webhookSecret` (or forged, or with an old `timestamp`). */
    async deliver(
      event: Stripe.Event,
      url: string,
      webhookSecret: string,
      opts: { forged?: boolean; timestamp?: number } = {},
    ): Promise<{ status: number; body: string }> {
      const { payload, header } = sign(event, webhookSecret, opts)
      const response = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json; charset=utf-8',
          'stripe-signature': header,
          'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)',
        },
        body: payload,
      })
      return { status: response.status, body: await response.text() }
    },
    async close(): Promise<void> {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

export type StripeStandIn = Awaited<ReturnType<typeof startStripeStandIn>>
