import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import Stripe from 'stripe'
import { problemCode, startTestApp, type TestApp } from '../../helpers/app.ts'
import {
  countRows,
  deliver,
  eventOf,
  readPosition,
  readRequest,
  type StripePayable,
  type StripeTest,
  startCheckout,
  startStripeTest,
  stripePayable,
  webhookSecretFor,
} from '../../helpers/stripe.ts'

/**
 * Every cent that moves at the provider is recorded (issue 32), against the Stripe stand-in: unusable but signed
 * events answered 200, a session paid in another amount returned, refunds made in Stripe's Dashboard recorded, the
 * lost event caught up by the sweep (and by a second instance at once, applied once), the page's read-back, cancel
 * ending the session, the provider's removal while checkouts are open, and the slips of issue 33 on this path.
 */
let s: StripeTest
before(async () => {
  s = await startStripeTest()
})
after(async () => {
  await s?.close()
})

const usd = (amount: string) => ({ amount, currency: 'USD' })
const handledEvents = (client: string) => countRows(s, 'SELECT count(*) AS n FROM provider_events WHERE client_code = $1', [client])
const payments = (p: StripePayable) =>
  countRows(s, 'SELECT count(*) AS n FROM payments WHERE client_code = $1 AND external_payment_request_id = $2', [p.client, p.requestId])
const sync = (client: string) => s.t.admin('POST', `/admin/v1/clients/${client}/payment-provider/sync`)
const intentOf = (sessionId: string) => s.stripe.session(sessionId)?.payment_intent as string
const h1 = (html: string) => /<h1>([^<]*)<\/h1>/.exec(html)?.[1]

/** A body signed with the client's webhook secret, whatever it holds. */
function postSigned(client: string, payload: string) {
  const header = Stripe.webhooks.generateTestHeaderString({
    payload,
    secret: webhookSecretFor(client),
    timestamp: Math.floor(s.clock.now().getTime() / 1000),
  })
  return s.t.call('POST', `/providers/stripe/webhooks/${client}`, {
    rawBody: payload,
    headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': header },
  })
}

/** A paid Payment of USD 30.00 whose event was delivered. */
async function paidThroughStripe(client: string): Promise<StripePayable & { sessionId: string; intent: string }> {
  const p = await stripePayable(s, client)
  const sessionId = await startCheckout(s, p)
  const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
  assert.equal((await deliver(s, p.client, completed)).json.effect, 'confirmed')
  return { ...p, sessionId, intent: intentOf(sessionId) }
}

describe('the event route never answers 5xx for what Stripe sent', () => {
  test('validly signed but unusable: null or missing object, an array, no id, not JSON, an unknown type: 200 ignored, nothing recorded', async () => {
    const p = await stripePayable(s, 'cu-unusable')
    const base = { id: 'evt_cu_unusable', object: 'event', type: 'checkout.session.completed', created: 1 }
    const cases: [string, string][] = [
      [JSON.stringify({ ...base, data: { object: null } }), 'an event without an object'],
      [JSON.stringify({ ...base, data: {} }), 'an event without an object'],
      [JSON.stringify({ ...base, data: null }), 'an event without an object'],
      [JSON.stringify({ ...base, data: { object: { id: 42 } } }), 'an event without an object'],
      [JSON.stringify([base]), 'not an event object'],
      [JSON.stringify(null), 'not an event object'],
      [JSON.stringify('evt'), 'not an event object'],
      [JSON.stringify({ ...base, id: undefined, data: { object: { id: 'cs_x' } } }), 'an event without an id'],
      [JSON.stringify({ ...base, type: null, data: { object: { id: 'cs_x' } } }), 'an event without a type'],
      ['{"id": "evt_broken", ', 'not an event object'],
      [JSON.stringify({ ...base, type: 'customer.created', data: { object: { id: 'cus_1' } } }), 'event type not acted on'],
    ]
    for (const [payload, why] of cases) {
      const res = await postSigned(p.client, payload)
      assert.equal(res.status, 200, `${payload}: ${res.body}`)
      assert.equal(res.json.received, true, payload)
      assert.equal(res.json.ignored, why, payload)
      assert.equal(res.json.effect, undefined, payload)
    }
    // A known type whose object Stripe does not have: ignored, recorded as handled (nothing to do, ever).
    const ghost = await postSigned(p.client, JSON.stringify({ ...base, id: 'evt_cu_ghost', data: { object: { id: 'cs_test_nosuch' } } }))
    assert.deepEqual(ghost.json, { received: true, eventId: 'evt_cu_ghost', ignored: 'cs_test_nosuch not found at Stripe' })
    assert.equal(await payments(p), 0)
    assert.equal((await readRequest(s, p)).status, 'open')
  })

  test("a body above the route's 512 KiB: 413 saying 512 KiB; 400 KiB is read (and refused for its signature)", async () => {
    const p = await stripePayable(s, 'cu-large')
    const big = await s.t.call('POST', `/providers/stripe/webhooks/${p.client}`, {
      rawBody: 'x'.repeat(600 * 1024),
      headers: { 'content-type': 'application/json', 'stripe-signature': 't=1,v1=00' },
    })
    assert.equal(big.status, 413)
    assert.deepEqual(big.json, { received: false, message: 'The request body exceeds 512 KiB.' })
    const fits = await s.t.call('POST', `/providers/stripe/webhooks/${p.client}`, {
      rawBody: 'x'.repeat(400 * 1024),
      headers: { 'content-type': 'application/json', 'stripe-signature': 't=1,v1=00' },
    })
    assert.equal(fits.status, 400)
  })

  test('an unknown provider in the path is 404, the same client under stripe is served', async () => {
    const p = await stripePayable(s, 'cu-path')
    for (const provider of ['gocardless', 'STRIPE', 'sandbox']) {
      const res = await s.t.call('POST', `/providers/${provider}/webhooks/${p.client}`, { rawBody: '{}' })
      assert.equal(res.status, 404, provider)
    }
  })
})

describe('money the service did not ask for', () => {
  test('a session paid in another amount or currency is returned in full, 200, the request stays open', async () => {
    for (const [client, change] of [
      ['cu-mis-amount', { amountTotal: 2900 }],
      ['cu-mis-currency', { currency: 'eur' }],
    ] as const) {
      const p = await stripePayable(s, client)
      const sessionId = await startCheckout(s, p)
      s.stripe.editSession(sessionId, change)
      const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
      const res = await deliver(s, p.client, completed)
      assert.equal(res.status, 200, res.body)
      assert.deepEqual(res.json, { received: true, eventId: completed.id, effect: 'returned' })
      const returned = s.stripe
        .events()
        .filter((e) => e.type === 'refund.created' && (e.data.object as Stripe.Refund).payment_intent === intentOf(sessionId))
      assert.equal(returned.length, 1)
      assert.equal((returned[0]?.data.object as Stripe.Refund | undefined)?.amount, s.stripe.session(sessionId)?.amount_total)
      assert.equal(await payments(p), 0)
      const request = await readRequest(s, p)
      assert.equal(request.status, 'open')
      assert.equal(request.payment, null)
      // Delivered again: already handled.
      assert.equal((await deliver(s, p.client, completed)).json.effect, 'duplicate')
    }
  })

  test("a refund made in the Dashboard: origin provider, balance, refund.created and refund.succeeded, once; the service's own say service", async () => {
    const p = await paidThroughStripe('cu-dash')
    const before = await readPosition(s, p)
    const refund = s.stripe.dashboardRefund(p.intent, 1500, { reason: 'requested_by_customer' })
    const created = eventOf(s.stripe.events().reverse(), 'refund.created')
    const res = await deliver(s, p.client, created)
    assert.deepEqual(res.json, { received: true, eventId: created.id, effect: 'provider_refund_recorded' })
    const request = await readRequest(s, p)
    assert.deepEqual(request.payment.refundedAmount, usd('15.00'))
    const got = await s.t.call('GET', `/v1/clients/${p.client}/payment-requests/${p.requestId}/refunds/${refund.id}`, { key: p.apiKey })
    assert.equal(got.status, 200, got.body)
    assert.deepEqual(
      { ...got.json, createdAt: undefined, decidedAt: undefined },
      {
        externalRefundId: refund.id,
        externalPaymentRequestId: p.requestId,
        amount: usd('15.00'),
        reason: 'requested_by_customer',
        status: 'succeeded',
        origin: 'provider',
        createdAt: undefined,
        decidedAt: undefined,
      },
    )
    // The working amount rose by the 15.00 taken back (the Source never acknowledged it).
    const afterPosition = await readPosition(s, p)
    assert.deepEqual(before.workingAmount, usd('70.00'))
    assert.deepEqual(afterPosition.workingAmount, usd('85.00'))
    // The same refund again (an update event, a redelivery): nothing more.
    const again = structuredClone(created)
    again.id = `${created.id}_update`
    again.type = 'refund.updated'
    assert.equal((await deliver(s, p.client, again)).json.effect, 'refund_already_recorded')
    assert.deepEqual((await readRequest(s, p)).payment.refundedAmount, usd('15.00'))
    // The feed says refund.created then refund.succeeded for it.
    const feed = await s.t.store.query<{ type: string }>(
      `SELECT type FROM change_events WHERE client_code = $1 AND resource_type = 'refund' ORDER BY seq`,
      [p.client],
    )
    assert.deepEqual(
      feed.map((r) => r.type),
      ['refund.created', 'refund.succeeded'],
    )
    // A refund through the API: origin service; the list shows both.
    const put = await s.t.call('PUT', `/v1/clients/${p.client}/payment-requests/${p.requestId}/refunds/rf-own`, {
      key: p.apiKey,
      body: { amount: usd('5.00'), reason: 'duplicate' },
    })
    assert.equal(put.status, 201, put.body)
    assert.equal(put.json.origin, 'service')
    const list = await s.t.call('GET', `/v1/clients/${p.client}/payment-requests/${p.requestId}/refunds`, { key: p.apiKey })
    assert.deepEqual(
      list.json.data.map((r: { externalRefundId: string; origin: string }) => [r.externalRefundId, r.origin]).sort(),
      [
        [refund.id, 'provider'],
        ['rf-own', 'service'],
      ].sort(),
    )
  })

  test('refunded in full at Stripe: the page says refunded, not received; a pending Dashboard refund waits for its success', async () => {
    const p = await paidThroughStripe('cu-dash-full')
    const pending = s.stripe.dashboardRefund(p.intent, 3000, { pending: true })
    const created = eventOf(s.stripe.events().reverse(), 'refund.created')
    assert.deepEqual((await deliver(s, p.client, created)).json, { received: true, eventId: created.id, ignored: 'refund pending' })
    s.stripe.settleRefund(pending.id, 'succeeded')
    const updated = eventOf(s.stripe.events().reverse(), 'refund.updated')
    assert.equal((await deliver(s, p.client, updated)).json.effect, 'provider_refund_recorded')
    const page = await s.t.call('GET', p.path)
    assert.equal(h1(page.body), 'Payment refunded')
    assert.ok(!page.body.includes('Payment received'))
    assert.ok(page.body.includes('was refunded in full'))
  })

  test("a refund's reason reaches Stripe (the Integration's own, none for other)", async () => {
    const p = await paidThroughStripe('cu-reason')
    for (const [id, reason] of [
      ['rf-fraud', 'fraudulent'],
      ['rf-other', 'other'],
    ] as const) {
      const put = await s.t.call('PUT', `/v1/clients/${p.client}/payment-requests/${p.requestId}/refunds/${id}`, {
        key: p.apiKey,
        body: { amount: usd('1.00'), reason },
      })
      assert.equal(put.status, 201, put.body)
    }
    await s.t.app.refundWorker.runOnce()
    const made = s.stripe
      .events()
      .filter((e) => e.type === 'refund.created' && (e.data.object as Stripe.Refund).payment_intent === p.intent)
      .map((e) => e.data.object as Stripe.Refund)
    assert.deepEqual(made.map((r) => [r.metadata?.refundId, r.reason, r.metadata?.reason]).sort(), [
      ['rf-fraud', 'fraudulent', 'fraudulent'],
      ['rf-other', null, 'other'],
    ])
  })
})

describe('catching up: the sweep, the read-back, cancel, removal', () => {
  test('a lost event: the sweep confirms the Payment, once; a second sweep and the late event change nothing', async () => {
    const p = await stripePayable(s, 'cu-lost')
    const sessionId = await startCheckout(s, p)
    const events = s.stripe.completeSession(sessionId, { outcome: 'paid' })
    const first = await sync(p.client)
    assert.equal(first.status, 200, first.body)
    assert.ok(first.json.eventsRead >= 1)
    assert.equal(first.json.eventsApplied, 1)
    const request = await readRequest(s, p)
    assert.equal(request.status, 'confirmed')
    assert.equal(request.payment.providerPaymentId, intentOf(sessionId))
    const second = await sync(p.client)
    assert.deepEqual(second.json, { eventsRead: 0, eventsApplied: 0 })
    assert.equal((await deliver(s, p.client, eventOf(events, 'checkout.session.completed'))).json.effect, 'duplicate')
    assert.equal(await payments(p), 1)
  })

  test('the sweep: unknown client 404, no provider 404, refused without the operator token', async () => {
    assert.equal(problemCode(await sync('cu-nobody')), 'client_not_found')
    await s.t.tenant('cu-noprov')
    const none = await sync('cu-noprov')
    assert.equal(none.status, 404)
    assert.equal(problemCode(none), 'payment_provider_not_found')
    const anonymous = await s.t.call('POST', '/admin/v1/clients/cu-noprov/payment-provider/sync')
    assert.equal(anonymous.status, 401)
  })

  test('the page reads a paid attempt back: confirmed without the event, at most once per 5 s per attempt', async () => {
    const p = await stripePayable(s, 'cu-readback')
    const sessionId = await startCheckout(s, p)
    s.stripe.completeSession(sessionId, { outcome: 'async_pending' })
    const reads = () => s.stripe.calls.filter((c) => c.method === 'GET' && c.path === `/v1/checkout/sessions/${sessionId}`).length
    const before = reads()
    const first = await s.t.call('GET', p.path)
    assert.equal(h1(first.body), 'Payment processing')
    assert.equal(reads(), before + 1)
    // Within 5 s, no new read, however many page loads (16 at once included).
    await Promise.all(Array.from({ length: 16 }, () => s.t.call('GET', p.path)))
    assert.equal(reads(), before + 1)
    s.stripe.completeSession(sessionId, { outcome: 'async_succeeded' })
    s.clock.advance(5_000)
    const paid = await s.t.call('GET', p.path)
    assert.equal(h1(paid.body), 'Payment received')
    assert.equal(reads(), before + 2)
    assert.equal((await readRequest(s, p)).status, 'confirmed')
    assert.equal(await payments(p), 1)
  })

  test('cancel ends the open session at Stripe: the debtor can no longer pay it', async () => {
    const p = await stripePayable(s, 'cu-cancel')
    const sessionId = await startCheckout(s, p)
    const cancel = await s.t.call('POST', `/v1/clients/${p.client}/payment-requests/${p.requestId}/cancel`, { key: p.apiKey, body: {} })
    assert.equal(cancel.status, 200)
    const expiredHere = () =>
      countRows(s, `SELECT count(*) AS n FROM provider_checkouts WHERE client_code = $1 AND status = 'expired'`, [p.client])
    // Ended after the cancel's COMMIT (never waited for): at Stripe, then recorded here.
    for (let i = 0; i < 200 && (await expiredHere()) === 0; i++) await new Promise((r) => setTimeout(r, 20))
    assert.equal(s.stripe.session(sessionId)?.status, 'expired')
    assert.equal(s.stripe.calls.filter((c) => c.method === 'POST' && c.path === `/v1/checkout/sessions/${sessionId}/expire`).length, 1)
    assert.throws(() => s.stripe.completeSession(sessionId, { outcome: 'paid' }), /is expired, not open/)
    assert.equal(await expiredHere(), 1)
  })

  test('removal with an open checkout: 409 with the count, nothing changed; force retires it and its event still applies', async () => {
    const p = await stripePayable(s, 'cu-remove')
    const sessionId = await startCheckout(s, p)
    const refused = await s.t.admin('DELETE', `/admin/v1/clients/${p.client}/payment-provider`)
    assert.equal(refused.status, 409)
    assert.equal(problemCode(refused), 'payment_provider_in_use')
    assert.equal(refused.json.openCheckouts, 1)
    assert.equal((await s.t.admin('GET', `/admin/v1/clients/${p.client}/payment-provider`)).status, 200)
    for (const q of ['?force=yes', '?force=', '?other=1']) {
      assert.equal((await s.t.admin('DELETE', `/admin/v1/clients/${p.client}/payment-provider${q}`)).status, 422, q)
    }
    const forced = await s.t.admin('DELETE', `/admin/v1/clients/${p.client}/payment-provider?force=true`)
    assert.equal(forced.status, 204, forced.body)
    assert.equal((await s.t.admin('GET', `/admin/v1/clients/${p.client}/payment-provider`)).status, 404)
    const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
    assert.equal((await deliver(s, p.client, completed)).json.effect, 'confirmed')
    assert.equal((await readRequest(s, p)).status, 'confirmed')
    // Configured again: a fresh configuration, no longer retired.
    assert.equal(
      (
        await s.t.admin('PUT', `/admin/v1/clients/${p.client}/payment-provider`, {
          provider: 'stripe',
          secretKey: s.stripe.secretKey,
          webhookSecret: webhookSecretFor(p.client),
        })
      ).status,
      200,
    )
    assert.equal((await s.t.admin('GET', `/admin/v1/clients/${p.client}/payment-provider`)).status, 200)
    // No checkout live any more: removed at once.
    assert.equal((await s.t.admin('DELETE', `/admin/v1/clients/${p.client}/payment-provider`)).status, 204)
  })
})

describe('two instances sweep one client', () => {
  let second: TestApp
  before(async () => {
    second = await startTestApp({ STRIPE_API_BASE: s.stripe.url }, { clock: s.clock, db: s.t.db })
  })
  after(async () => {
    await second?.close()
  })

  test('sixteen sweeps at once on two instances: every lost event applied once', async () => {
    const paid: StripePayable[] = []
    for (let i = 0; i < 3; i++) {
      const p = await stripePayable(s, `cu-two-${i}`)
      s.stripe.completeSession(await startCheckout(s, p), { outcome: 'paid' })
      paid.push(p)
    }
    for (const p of paid) {
      const answers = await Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          (i % 2 === 0 ? s.t : second).admin('POST', `/admin/v1/clients/${p.client}/payment-provider/sync`),
        ),
      )
      assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([200]))
      assert.equal(
        answers.reduce((n, a) => n + a.json.eventsApplied, 0),
        1,
        p.client,
      )
      assert.equal(await payments(p), 1)
      assert.equal((await readRequest(s, p)).status, 'confirmed')
    }
    assert.equal((await handledEvents('cu-two-0')) > 0, true)
  })
})
