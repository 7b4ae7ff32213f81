import assert from 'node:assert/strict'
import http from 'node:http'
import type net from 'node:net'
import { after, before, describe, it } from 'node:test'
import fc from 'fast-check'
import type Stripe from 'stripe'
import {
  CHECKOUT_MAX_LIFETIME_SECONDS,
  CHECKOUT_MIN_LIFETIME_SECONDS,
  type CheckoutSessionInput,
  clampCheckoutExpiry,
  createStripeGateway,
  keyHint,
  keyMode,
  StripeRejectedError,
  StripeRetryableError,
  StripeSignatureError,
  stripeHostOptions,
} from '../../../src/resources/payments/stripe/gateway.ts'
import { generateStripeKey, parseStripeForm, type StripeStandIn, startStripeStandIn } from '../../helpers/stripe-stand-in.ts'

/**
 * The Stripe gateway (issue 22) against the local stand-in: the real `stripe` SDK sends real HTTP to it. One
 * clock drives both, so `expires_at` and signature ages are exact.
 */
const WEBHOOK_SECRET = 'whsec_standin_gateway_test'
const T0 = Date.UTC(2026, 10, 26, 12, 0, 0)
const T0_SECONDS = T0 / 1000

let standIn: StripeStandIn
let clock = T0
const now = () => new Date(clock)

function gateway(secretKey = standIn.secretKey, extra: { apiBase?: string; timeoutMs?: number } = {}) {
  return createStripeGateway({
    secretKey,
    apiBase: extra.apiBase ?? standIn.url,
    now,
    ...(extra.timeoutMs ? { timeoutMs: extra.timeoutMs } : {}),
  })
}

let seq = 0
function sessionInput(overrides: Partial<CheckoutSessionInput> = {}): CheckoutSessionInput {
  seq += 1
  return {
    amountMinor: 1234n,
    currency: 'USD',
    description: 'Invoice INV-1 & INV-2',
    clientReferenceId: `pr_${seq}`,
    metadata: { clientCode: 'acme', paymentRequestId: `pr_${seq}` },
    successUrl: `https://pay.example.test/r/${seq}?back=1&session={CHECKOUT_SESSION_ID}`,
    cancelUrl: `https://pay.example.test/r/${seq}`,
    expiresAt: new Date(T0 + 2 * 60 * 60 * 1000),
    ...overrides,
  }
}

async function rejects<E extends Error>(promise: Promise<unknown> | (() => unknown), kind: new (...args: never[]) => E): Promise<E> {
  try {
    await (typeof promise === 'function' ? promise() : promise)
  } catch (error) {
    assert.ok(error instanceof kind, `expected ${kind.name}, got ${String(error)}`)
    return error
  }
  assert.fail(`expected ${kind.name}, nothing was thrown`)
}

async function paidSession(amountMinor = 1234n): Promise<{ session: Stripe.Checkout.Session; intentId: string }> {
  const g = gateway()
  const session = await g.createCheckoutSession(sessionInput({ amountMinor }), `attempt-${seq}-${Math.random()}`)
  standIn.completeSession(session.id, { outcome: 'paid' })
  const after = await g.retrieveCheckoutSession(session.id)
  const intent = after.payment_intent
  assert.ok(intent && typeof intent === 'object')
  return { session: after, intentId: intent.id }
}

before(async () => {
  standIn = await startStripeStandIn({ now: () => clock })
})

after(async () => {
  await standIn.close()
})

describe('Checkout Sessions', () => {
  it('creates a payment-mode session with one line, the reference, metadata and the expiry in seconds', async () => {
    const input = sessionInput()
    const callsBefore = standIn.calls.length
    const session = await gateway().createCheckoutSession(input, 'k-create-1')
    assert.equal(session.object, 'checkout.session')
    assert.equal(session.mode, 'payment')
    assert.equal(session.status, 'open')
    assert.equal(session.payment_status, 'unpaid')
    assert.equal(session.payment_intent, null)
    assert.equal(session.amount_total, 1234)
    assert.equal(session.currency, 'usd')
    assert.equal(session.client_reference_id, input.clientReferenceId)
    assert.deepEqual(session.metadata, input.metadata)
    assert.equal(session.success_url, input.successUrl)
    assert.equal(session.cancel_url, input.cancelUrl)
    assert.equal(session.expires_at, T0_SECONDS + 2 * 60 * 60)
    assert.equal(session.livemode, false)
    assert.equal(session.url, `${standIn.url}/checkout/${session.id}`)
    assert.match(session.id, /^cs_test_/)
    assert.deepEqual(
      standIn.calls.slice(callsBefore).map((c) => [c.method, c.path, c.idempotencyKey, c.status, c.replayed]),
      [['POST', '/v1/checkout/sessions', 'k-create-1', 200, false]],
    )
  })

  it('marks objects created with a live or restricted key as such', async () => {
    const live = generateStripeKey('rk_live')
    standIn.addKey(live)
    const g = gateway(live)
    assert.equal(g.mode, 'live')
    const session = await g.createCheckoutSession(sessionInput(), 'k-live')
    assert.equal(session.livemode, true)
    assert.match(session.id, /^cs_live_/)
    const [, completed] = standIn.completeSession(session.id, { outcome: 'paid' })
    assert.equal(completed?.type, 'checkout.session.completed')
    assert.equal(completed?.livemode, true)
  })

  it('replays the same session for the same key and parameters: two clicks, one session', async () => {
    const input = sessionInput()
    const g = gateway()
    const callsBefore = standIn.calls.length
    const first = await g.createCheckoutSession(input, 'k-twice')
    const second = await g.createCheckoutSession(input, 'k-twice')
    assert.equal(second.id, first.id)
    assert.deepEqual(second, first)
    assert.deepEqual(
      standIn.calls.slice(callsBefore).map((c) => [c.path, c.idempotencyKey, c.replayed]),
      [
        ['/v1/checkout/sessions', 'k-twice', false],
        ['/v1/checkout/sessions', 'k-twice', true],
      ],
    )
  })

  it('refuses the same key with other parameters as a non-retryable idempotency_error', async () => {
    const input = sessionInput()
    await gateway().createCheckoutSession(input, 'k-mismatch')
    const error = await rejects(gateway().createCheckoutSession({ ...input, amountMinor: 1235n }, 'k-mismatch'), StripeRejectedError)
    assert.equal(error.statusCode, 400)
    assert.equal(error.type, 'idempotency_error')
    assert.equal(error.retryable, false)
  })

  it("clamps expires_at into Stripe's window of 30 minutes to 24 hours", async () => {
    const soon = await gateway().createCheckoutSession(sessionInput({ expiresAt: new Date(T0 + 5 * 60 * 1000) }), 'k-soon')
    assert.equal(soon.expires_at, T0_SECONDS + 31 * 60)
    const late = await gateway().createCheckoutSession(sessionInput({ expiresAt: new Date(T0 + 3 * 24 * 60 * 60 * 1000) }), 'k-late')
    assert.equal(late.expires_at, T0_SECONDS + 24 * 60 * 60 - 60)
  })

  it('retrieves the session with its PaymentIntent expanded once paid', async () => {
    const g = gateway()
    const input = sessionInput({ amountMinor: 5000n })
    const created = await g.createCheckoutSession(input, 'k-retrieve')
    const before = await g.retrieveCheckoutSession(created.id)
    assert.equal(before.payment_intent, null)
    assert.equal(standIn.calls.at(-1)?.query, '?expand[0]=payment_intent')

    const events = standIn.completeSession(created.id, { outcome: 'paid' })
    assert.deepEqual(
      events.map((e) => e.type),
      ['payment_intent.succeeded', 'checkout.session.completed'],
    )
    const paid = await g.retrieveCheckoutSession(created.id)
    assert.equal(paid.status, 'complete')
    assert.equal(paid.payment_status, 'paid')
    const intent = paid.payment_intent
    assert.ok(intent !== null && typeof intent === 'object')
    assert.equal(intent.status, 'succeeded')
    assert.equal(intent.amount, 5000)
    assert.equal(intent.amount_received, 5000)
    assert.equal(intent.currency, 'usd')
    assert.deepEqual(intent.metadata, input.metadata)
    assert.equal(intent.description, input.description)

    const direct = await g.retrievePaymentIntent(intent.id)
    assert.deepEqual(direct, intent)
  })

  it('follows an asynchronous payment to success and another to failure', async () => {
    const g = gateway()
    const ok = await g.createCheckoutSession(sessionInput(), 'k-async-ok')
    assert.deepEqual(
      standIn.completeSession(ok.id, { outcome: 'async_pending' }).map((e) => e.type),
      ['payment_intent.processing', 'checkout.session.completed'],
    )
    const pending = await g.retrieveCheckoutSession(ok.id)
    assert.equal(pending.status, 'complete')
    assert.equal(pending.payment_status, 'unpaid')
    assert.equal((pending.payment_intent as Stripe.PaymentIntent).status, 'processing')
    assert.deepEqual(
      standIn.completeSession(ok.id, { outcome: 'async_succeeded' }).map((e) => e.type),
      ['payment_intent.succeeded', 'checkout.session.async_payment_succeeded'],
    )
    const succeeded = await g.retrieveCheckoutSession(ok.id)
    assert.equal(succeeded.payment_status, 'paid')
    assert.equal((succeeded.payment_intent as Stripe.PaymentIntent).amount_received, 1234)

    const bad = await g.createCheckoutSession(sessionInput(), 'k-async-bad')
    assert.deepEqual(
      standIn.completeSession(bad.id, { outcome: 'async_failed' }).map((e) => e.type),
      ['payment_intent.processing', 'checkout.session.completed', 'payment_intent.payment_failed', 'checkout.session.async_payment_failed'],
    )
    const failed = await g.retrieveCheckoutSession(bad.id)
    assert.equal(failed.status, 'complete')
    assert.equal(failed.payment_status, 'unpaid')
    assert.equal((failed.payment_intent as Stripe.PaymentIntent).status, 'requires_payment_method')
    assert.equal((failed.payment_intent as Stripe.PaymentIntent).amount_received, 0)
  })

  it('expires a session on request and when its expires_at passes', async () => {
    const g = gateway()
    const abandoned = await g.createCheckoutSession(sessionInput(), 'k-expire')
    const [event] = standIn.completeSession(abandoned.id, { outcome: 'expired' })
    assert.equal(event?.type, 'checkout.session.expired')
    const expired = await g.retrieveCheckoutSession(abandoned.id)
    assert.equal(expired.status, 'expired')
    assert.equal(expired.url, null)

    const timed = await g.createCheckoutSession(sessionInput({ expiresAt: new Date(T0) }), 'k-timeout')
    assert.equal(timed.expires_at, T0_SECONDS + 31 * 60)
    clock = T0 + 31 * 60 * 1000
    try {
      assert.equal((await g.retrieveCheckoutSession(timed.id)).status, 'expired')
      const last = standIn.events().at(-1)
      assert.ok(last?.type === 'checkout.session.expired')
      assert.equal(last.data.object.id, timed.id)
    } finally {
      clock = T0
    }
  })

  it('serves a checkout page whose Pay completes the session and redirects to success_url', async () => {
    const input = sessionInput()
    const session = await gateway().createCheckoutSession(input, 'k-page')
    const page = await fetch(session.url as string)
    assert.equal(page.status, 200)
    const html = await page.text()
    assert.match(html, /<button type="submit" name="outcome" value="paid">Pay<\/button>/)
    assert.match(html, /Invoice INV-1 &#38; INV-2/)
    const pay = await fetch(`${session.url}/pay`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'outcome=paid',
      redirect: 'manual',
    })
    assert.equal(pay.status, 303)
    assert.equal(pay.headers.get('location'), input.successUrl.replace('{CHECKOUT_SESSION_ID}', session.id))
    assert.equal(standIn.session(session.id)?.payment_status, 'paid')
    assert.equal((await fetch(session.url as string)).status, 410)
  })
})

describe('refunds and disputes', () => {
  it('refunds part, then the rest, then refuses more, with Stripe codes', async () => {
    const { intentId } = await paidSession(1000n)
    const g = gateway()
    const part = await g.createRefund({ paymentIntentId: intentId, amountMinor: 400n, metadata: { refundId: 'rf_1' } }, 'rf_1')
    assert.equal(part.object, 'refund')
    assert.equal(part.amount, 400)
    assert.equal(part.status, 'succeeded')
    assert.equal(part.payment_intent, intentId)
    assert.deepEqual(part.metadata, { refundId: 'rf_1' })
    assert.deepEqual(await g.retrieveRefund(part.id), part)

    const replay = await g.createRefund({ paymentIntentId: intentId, amountMinor: 400n, metadata: { refundId: 'rf_1' } }, 'rf_1')
    assert.equal(replay.id, part.id)

    const tooMuch = await rejects(
      g.createRefund({ paymentIntentId: intentId, amountMinor: 601n, metadata: {} }, 'rf_2'),
      StripeRejectedError,
    )
    assert.equal(tooMuch.code, 'amount_too_large')
    assert.equal(tooMuch.statusCode, 400)
    const rest = await g.createRefund({ paymentIntentId: intentId, amountMinor: 600n, metadata: {} }, 'rf_3')
    assert.equal(rest.amount, 600)
    const again = await rejects(g.createRefund({ paymentIntentId: intentId, amountMinor: 1n, metadata: {} }, 'rf_4'), StripeRejectedError)
    assert.equal(again.code, 'charge_already_refunded')
    const created = standIn.events().filter((e) => e.type === 'refund.created' && e.data.object.payment_intent === intentId)
    assert.deepEqual(
      created.map((e) => (e.data.object as Stripe.Refund).amount),
      [400, 600],
    )
  })

  it('answers a failing refund as pending and reads it failed afterwards; a pending one settles on command', async () => {
    const { intentId } = await paidSession(800n)
    const g = gateway()
    standIn.setRefundOutcome('failed')
    try {
      const refund = await g.createRefund({ paymentIntentId: intentId, amountMinor: 300n, metadata: {} }, 'rf_fail')
      assert.equal(refund.status, 'pending')
      const now = await g.retrieveRefund(refund.id)
      assert.equal(now.status, 'failed')
      assert.equal(now.failure_reason, 'declined')
      assert.deepEqual(
        standIn
          .events()
          .filter((e) => e.type.startsWith('refund.') && (e.data.object as Stripe.Refund).id === refund.id)
          .map((e) => [e.type, (e.data.object as Stripe.Refund).status]),
        [
          ['refund.created', 'pending'],
          ['refund.failed', 'failed'],
          ['refund.updated', 'failed'],
        ],
      )
      standIn.setRefundOutcome('pending')
      const slow = await g.createRefund({ paymentIntentId: intentId, amountMinor: 800n, metadata: {} }, 'rf_slow')
      assert.equal(slow.status, 'pending')
      standIn.settleRefund(slow.id, 'succeeded')
      assert.equal((await g.retrieveRefund(slow.id)).status, 'succeeded')
    } finally {
      standIn.setRefundOutcome('succeeded')
    }
  })

  it('reads a lost dispute with its withdrawal', async () => {
    const { intentId } = await paidSession(2500n)
    const ended = standIn.loseDispute(intentId, 2500)
    const dispute = await gateway().retrieveDispute(ended.id)
    assert.equal(dispute.status, 'lost')
    assert.equal(dispute.amount, 2500)
    assert.equal(dispute.payment_intent, intentId)
    assert.deepEqual(
      dispute.balance_transactions.map((b) => [b.amount, b.reporting_category]),
      [[-2500, 'dispute']],
    )
    const events = standIn.events().filter((e) => e.type.startsWith('charge.dispute.') && (e.data.object as Stripe.Dispute).id === ended.id)
    assert.deepEqual(
      events.map((e) => [e.type, (e.data.object as Stripe.Dispute).status]),
      [
        ['charge.dispute.created', 'needs_response'],
        ['charge.dispute.funds_withdrawn', 'needs_response'],
        ['charge.dispute.closed', 'lost'],
      ],
    )
  })

  it('answers resource_missing for an unknown object', async () => {
    const error = await rejects(gateway().retrieveRefund('re_missing'), StripeRejectedError)
    assert.equal(error.statusCode, 404)
    assert.equal(error.code, 'resource_missing')
  })
})

describe('failures', () => {
  it('turns an unknown key into a non-retryable 401', async () => {
    const error = await rejects(gateway(generateStripeKey('sk_test')).retrieveRefund('re_x'), StripeRejectedError)
    assert.equal(error.statusCode, 401)
    assert.equal(error.retryable, false)
    assert.equal(standIn.calls.at(-1)?.status, 401)
  })

  it('turns a 500 into a retryable error; the retry with the same key then creates the session once', async () => {
    const input = sessionInput()
    standIn.failNext()
    const error = await rejects(gateway().createCheckoutSession(input, 'k-500'), StripeRetryableError)
    assert.equal(error.statusCode, 500)
    assert.equal(error.retryable, true)
    const session = await gateway().createCheckoutSession(input, 'k-500')
    assert.equal(session.status, 'open')
    assert.equal((await gateway().createCheckoutSession(input, 'k-500')).id, session.id)
  })

  it('replays a 500 Stripe stored under the key', async () => {
    const input = sessionInput()
    standIn.failNext({ replayed: true })
    await rejects(gateway().createCheckoutSession(input, 'k-500-stored'), StripeRetryableError)
    const again = await rejects(gateway().createCheckoutSession(input, 'k-500-stored'), StripeRetryableError)
    assert.equal(again.statusCode, 500)
    assert.equal(standIn.calls.at(-1)?.replayed, true)
  })

  it('turns a refused connection and a timeout into retryable errors without a status', async () => {
    const closed = http.createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', () => resolve()))
    const { port } = closed.address() as net.AddressInfo
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const refused = await rejects(
      gateway(standIn.secretKey, { apiBase: `http://127.0.0.1:${port}` }).retrieveRefund('re_x'),
      StripeRetryableError,
    )
    assert.equal(refused.statusCode, null)

    const sockets = new Set<net.Socket>()
    const silent = http.createServer(() => {})
    silent.on('connection', (s) => sockets.add(s))
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()))
    try {
      const silentPort = (silent.address() as net.AddressInfo).port
      const g = gateway(standIn.secretKey, { apiBase: `http://127.0.0.1:${silentPort}`, timeoutMs: 200 })
      const timedOut = await rejects(g.retrieveDispute('dp_x'), StripeRetryableError)
      assert.equal(timedOut.statusCode, null)
    } finally {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => silent.close(() => resolve()))
    }
  })
})

describe('verifyEvent', () => {
  let event: Stripe.Event
  before(async () => {
    const session = await gateway().createCheckoutSession(sessionInput(), 'k-events')
    const produced = standIn.completeSession(session.id, { outcome: 'paid' })
    event = produced.find((e) => e.type === 'checkout.session.completed') as Stripe.Event
  })

  it('accepts a good signature, from a string or a Buffer', () => {
    const { payload, header } = standIn.sign(event, WEBHOOK_SECRET)
    const verified = gateway().verifyEvent(payload, header, WEBHOOK_SECRET)
    assert.deepEqual(verified, event)
    assert.equal(gateway().verifyEvent(Buffer.from(payload), header, WEBHOOK_SECRET).id, event.id)
  })

  it('refuses a forged signature, a changed body, another secret and a missing header', async () => {
    const forged = standIn.sign(event, WEBHOOK_SECRET, { forged: true })
    await rejects(() => gateway().verifyEvent(forged.payload, forged.header, WEBHOOK_SECRET), StripeSignatureError)
    const good = standIn.sign(event, WEBHOOK_SECRET)
    await rejects(() => gateway().verifyEvent(good.payload.replace('1234', '9234'), good.header, WEBHOOK_SECRET), StripeSignatureError)
    await rejects(() => gateway().verifyEvent(good.payload, good.header, 'whsec_other'), StripeSignatureError)
    await rejects(() => gateway().verifyEvent(good.payload, undefined, WEBHOOK_SECRET), StripeSignatureError)
    await rejects(() => gateway().verifyEvent(good.payload, '', WEBHOOK_SECRET), StripeSignatureError)
  })

  it('accepts a signature 300 s old and refuses one 301 s old', async () => {
    const edge = standIn.sign(event, WEBHOOK_SECRET, { timestamp: T0_SECONDS - 300 })
    assert.equal(gateway().verifyEvent(edge.payload, edge.header, WEBHOOK_SECRET).id, event.id)
    const old = standIn.sign(event, WEBHOOK_SECRET, { timestamp: T0_SECONDS - 301 })
    const error = await rejects(() => gateway().verifyEvent(old.payload, old.header, WEBHOOK_SECRET), StripeSignatureError)
    assert.match(error.message, /tolerance/)
  })

  it('delivers events over HTTP as Stripe does: a receiver verifying them answers 200, and 400 to a forgery', async () => {
    const g = gateway()
    const seen: string[] = []
    const receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        try {
          const verified = g.verifyEvent(Buffer.concat(chunks), req.headers['stripe-signature'] as string | undefined, WEBHOOK_SECRET)
          seen.push(verified.id)
          res.writeHead(200).end()
        } catch (error) {
          res.writeHead(error instanceof StripeSignatureError ? 400 : 500).end()
        }
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()))
    try {
      const url = `http://127.0.0.1:${(receiver.address() as net.AddressInfo).port}/providers/stripe/webhooks/acme`
      assert.equal((await standIn.deliver(event, url, WEBHOOK_SECRET)).status, 200)
      assert.equal((await standIn.deliver(event, url, WEBHOOK_SECRET, { forged: true })).status, 400)
      assert.equal((await standIn.deliver(event, url, WEBHOOK_SECRET, { timestamp: T0_SECONDS - 301 })).status, 400)
      assert.deepEqual(seen, [event.id])
    } finally {
      receiver.closeAllConnections()
      await new Promise<void>((resolve) => receiver.close(() => resolve()))
    }
  })
})

describe('keys, hosts and expiry arithmetic', () => {
  const suffix = fc.string({
    unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'),
    minLength: 5,
    maxLength: 99,
  })

  it('keyMode names the mode of sk_/rk_ test and live keys', () => {
    fc.assert(
      fc.property(fc.constantFrom('sk', 'rk'), fc.constantFrom('test', 'live'), suffix, (kind, mode, rest) => {
        assert.equal(keyMode(`${kind}_${mode}_${rest}`), mode)
      }),
    )
  })

  it('keyMode is null for publishable keys and anything else', () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        fc.pre(!/^(?:sk|rk)_(?:test|live)_/.test(s))
        assert.equal(keyMode(s), null)
      }),
    )
    assert.equal(keyMode('pk_test_abcdef'), null)
    assert.equal(keyMode('sk_test_'), null)
    assert.equal(keyMode('sk_test_abc def'), null)
  })

  it('keyHint keeps the prefix and the last four characters only', () => {
    fc.assert(
      fc.property(fc.constantFrom('sk', 'rk'), fc.constantFrom('test', 'live'), suffix, (kind, mode, rest) => {
        const key = `${kind}_${mode}_${rest}`
        assert.equal(keyHint(key), `${kind}_${mode}_...${rest.slice(-4)}`)
      }),
    )
    assert.equal(keyHint('sk_live_abcd'), 'sk_live_...')
    assert.equal(keyHint('not-a-key-1234'), '...')
  })

  it('clampCheckoutExpiry keeps an expiry inside the window and moves one outside to its nearer edge', () => {
    fc.assert(
      fc.property(fc.integer({ min: -10 * 86_400, max: 10 * 86_400 }), (offsetSeconds) => {
        const got = clampCheckoutExpiry(new Date(T0 + offsetSeconds * 1000), new Date(T0))
        const expected = Math.min(Math.max(offsetSeconds, CHECKOUT_MIN_LIFETIME_SECONDS), CHECKOUT_MAX_LIFETIME_SECONDS)
        assert.equal(got, T0_SECONDS + expected)
      }),
    )
  })

  it('parses STRIPE_API_BASE into the SDK host options', () => {
    assert.deepEqual(stripeHostOptions('https://api.stripe.com'), { protocol: 'https', host: 'api.stripe.com', port: 443 })
    assert.deepEqual(stripeHostOptions('http://127.0.0.1:12111/'), { protocol: 'http', host: '127.0.0.1', port: 12111 })
    assert.deepEqual(stripeHostOptions('http://[::1]:8080'), { protocol: 'http', host: '::1', port: 8080 })
    assert.deepEqual(stripeHostOptions('http://stripe-proxy.internal'), { protocol: 'http', host: 'stripe-proxy.internal', port: 80 })
    assert.throws(() => stripeHostOptions('https://proxy.example/stripe'), /host and optional port only/)
    assert.throws(() => stripeHostOptions('ftp://api.stripe.com'), /http or https/)
    assert.throws(() => stripeHostOptions('api.stripe.com'), /not a URL/)
  })

  it("parses the SDK's bracket encoding back into objects and arrays", () => {
    assert.deepEqual(
      parseStripeForm(
        'mode=payment&line_items[0][quantity]=1&line_items[0][price_data][product_data][name]=A%20%26%20B&expand[0]=x&expand[1]=y',
      ),
      {
        mode: 'payment',
        line_items: [{ quantity: '1', price_data: { product_data: { name: 'A & B' } } }],
        expand: ['x', 'y'],
      },
    )
  })
})
