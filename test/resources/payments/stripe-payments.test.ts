import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type Stripe from 'stripe'
import { pageRequest } from '../../helpers/payments.ts'
import {
  countRows,
  deliver,
  eventOf,
  pressPay,
  readPosition,
  readRequest,
  type StripePayable,
  type StripeTest,
  startCheckout,
  startStripeTest,
  stripePayable,
} from '../../helpers/stripe.ts'

/**
 * Paying through Stripe (issue 22 items 2 and 3), against the local stand-in the real `stripe` SDK is pointed at:
 * the page's Pay (pay-time check, one Checkout Session per attempt, 303), Stripe's events (signature, once per
 * event id, the current state read back, out of order and late), the request staying open after an expired or
 * failed attempt, and money that arrives for a request that can no longer take it.
 */
let s: StripeTest
before(async () => {
  s = await startStripeTest()
})
after(async () => {
  await s?.close()
})

const payments = (p: StripePayable) =>
  countRows(s, 'SELECT count(*) AS n FROM payments WHERE client_code = $1 AND external_payment_request_id = $2', [p.client, p.requestId])
const handledEvents = (client: string) => countRows(s, 'SELECT count(*) AS n FROM provider_events WHERE client_code = $1', [client])
const sessionCreates = () => s.stripe.calls.filter((c) => c.method === 'POST' && c.path === '/v1/checkout/sessions')
const page = (p: StripePayable, query = '') => s.t.call('GET', `${p.path}${query}`)
const h1 = (html: string) => /<h1>([^<]*)<\/h1>/.exec(html)?.[1]

describe('the page pays through Stripe Checkout', () => {
  test('Pay: the pay-time check, one Checkout Session as docs/design/payment-providers.md pins it, 303 to it; a second click, the same session', async () => {
    const p = await stripePayable(s, 'st-pay')
    const first = await page(p)
    assert.equal(first.status, 200)
    assert.equal(h1(first.body), 'Payment request')
    // Pay is its own operation (action=pay), not the sandbox form's outcome.
    assert.ok(first.body.includes('<button type="submit" name="action" value="pay" class="pay">Pay $30.00</button>'))
    assert.ok(!first.body.includes('Simulate a failed payment'), 'no sandbox buttons for a client with Stripe')
    // The form's 303 leads to Stripe's checkout: form-action allows its origins (browsers apply it to redirects).
    assert.equal(
      first.headers['content-security-policy'],
      `default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self' https://checkout.stripe.com ${s.stripe.url}; frame-ancestors 'none'; base-uri 'none'`,
    )
    const before = sessionCreates().length
    const sessionId = await startCheckout(s, p)
    const created = sessionCreates().slice(before)
    assert.equal(created.length, 1)
    assert.equal(created[0]?.idempotencyKey, `checkout/${p.client}/${p.requestId}/1`)
    const session = s.stripe.session(sessionId) as Stripe.Checkout.Session
    assert.equal(session.mode, 'payment')
    assert.equal(session.amount_total, 3000)
    assert.equal(session.currency, 'usd')
    assert.equal(session.client_reference_id, p.requestId)
    assert.deepEqual(session.metadata, { clientCode: p.client, paymentRequestId: p.requestId })
    // The request expires in 7 days: the session gets Stripe's longest, 24 hours less the minute of margin.
    assert.equal(session.expires_at, Date.parse('2026-11-23T12:00:00Z') / 1000 + 24 * 3600 - 60)
    assert.equal(session.success_url, `http://irs.test${p.path}?checkout={CHECKOUT_SESSION_ID}`)
    assert.equal(session.cancel_url, `http://irs.test${p.path}`)
    // A second click (and a third): the same session, no new one asked for.
    for (let i = 0; i < 2; i++) {
      const again = await pressPay(s, p)
      assert.equal(again.status, 303)
      assert.equal(again.headers.location, `${s.stripe.url}/checkout/${sessionId}`)
    }
    assert.equal(sessionCreates().length, before + 1)
    // Nothing is recorded as paid yet: the request is open, with no Payment.
    assert.equal((await readRequest(s, p)).status, 'open')
    assert.equal(await payments(p), 0)
  })

  test("the sandbox form's outcome posted to a Stripe client's page settles nothing and starts no checkout", async () => {
    const p = await stripePayable(s, 'st-not-sandbox')
    const before = s.stripe.calls.length
    for (const outcome of ['confirmed', 'failed']) {
      const res = await s.t.call('POST', p.path, { rawBody: `outcome=${outcome}`, contentType: 'application/x-www-form-urlencoded' })
      assert.deepEqual([res.status, res.headers.location], [303, p.path])
    }
    // Neither a Pay and an outcome together, nor an action other than pay, is the page's form.
    for (const body of ['action=pay&outcome=confirmed', 'action=settle', 'action=pay&action=pay']) {
      const res = await s.t.call('POST', p.path, { rawBody: body, contentType: 'application/x-www-form-urlencoded' })
      assert.equal(res.status, 400, body)
    }
    assert.equal(s.stripe.calls.length, before, 'Stripe was not asked for anything')
    assert.equal(await countRows(s, 'SELECT count(*) AS n FROM provider_checkouts WHERE client_code = $1', [p.client]), 0)
    assert.equal((await readRequest(s, p)).status, 'open')
    assert.equal(await payments(p), 0)
  })

  test('sixteen clicks at once make one session', async () => {
    const p = await stripePayable(s, 'st-clicks')
    const before = sessionCreates().length
    const answers = await Promise.all(Array.from({ length: 16 }, () => pressPay(s, p)))
    assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([303]))
    const locations = new Set(answers.map((a) => a.headers.location))
    assert.equal(locations.size, 1, [...locations].join(', '))
    const created = sessionCreates().slice(before)
    // Every ask is attempt 1's key: Stripe (the stand-in) answers the same session to each.
    assert.ok(created.length >= 1)
    assert.deepEqual(new Set(created.map((c) => c.idempotencyKey)), new Set([`checkout/${p.client}/${p.requestId}/1`]))
    assert.equal(created.filter((c) => !c.replayed).length, 1)
    assert.equal(await countRows(s, 'SELECT count(*) AS n FROM provider_checkouts WHERE client_code = $1', [p.client]), 1)
  })

  test('paid by card: the debtor back early sees processing, the event confirms the Payment, the page says received', async () => {
    const p = await stripePayable(s, 'st-card')
    const sessionId = await startCheckout(s, p)
    // Back from Stripe before its event, with the read-back not due yet (read within the last 5 s: the page's own
    // read above found the session open): processing, reloading itself.
    await page(p)
    const events = s.stripe.completeSession(sessionId, { outcome: 'paid' })
    const early = await page(p, `?checkout=${sessionId}`)
    assert.equal(early.status, 200)
    assert.equal(h1(early.body), 'Payment processing')
    assert.equal(early.headers.refresh, '3')
    assert.ok(!early.body.includes('<form'))
    // Another session's id in the query is not this attempt: the page offers Pay (it returns the same session).
    assert.equal(h1((await page(p, '?checkout=cs_test_other')).body), 'Payment request')

    const completed = eventOf(events, 'checkout.session.completed')
    const res = await deliver(s, p.client, completed)
    assert.equal(res.status, 200, res.body)
    assert.deepEqual(res.json, { received: true, eventId: completed.id, effect: 'confirmed' })
    const request = await readRequest(s, p)
    assert.equal(request.status, 'confirmed')
    const intent = s.stripe.session(sessionId)?.payment_intent
    assert.equal(request.payment.provider, 'stripe')
    assert.equal(request.payment.providerPaymentId, intent)
    assert.deepEqual(request.payment.amount, { amount: '30.00', currency: 'USD' })
    assert.deepEqual(request.payment.allocatedAmount, { amount: '30.00', currency: 'USD' })
    assert.deepEqual(await readPosition(s, p), {
      sourceAmount: { amount: '100.00', currency: 'USD' },
      workingAmount: { amount: '70.00', currency: 'USD' },
      confirmedUnreconciledAmount: { amount: '30.00', currency: 'USD' },
      receiptAcknowledgedAmount: { amount: '0.00', currency: 'USD' },
    })
    const done = await page(p, `?checkout=${sessionId}`)
    assert.equal(h1(done.body), 'Payment received')
    assert.equal(done.headers.refresh, undefined)
    // Delivered again (Stripe retries; the payment_intent event too): nothing more.
    const again = await deliver(s, p.client, completed)
    assert.deepEqual(again.json, { received: true, eventId: completed.id, effect: 'duplicate' })
    assert.equal(await payments(p), 1)
    // Pay again on a paid request: back to the page, nothing asked of Stripe.
    const before = sessionCreates().length
    const late = await pressPay(s, p)
    assert.equal(late.status, 303)
    assert.equal(late.headers.location, p.path)
    assert.equal(sessionCreates().length, before)
  })

  test('Stripe failing at Pay: a 503 page and nothing charged; the next Pay asks again under the same key, once past a stored failure a new attempt', async () => {
    const p = await stripePayable(s, 'st-flaky')
    s.stripe.failNext({ status: 500 })
    const failed = await pressPay(s, p)
    assert.equal(failed.status, 503)
    assert.ok(failed.body.includes('Your payment may not have been recorded.'))
    const sessionId = await startCheckout(s, p)
    assert.deepEqual(
      sessionCreates()
        .slice(-2)
        .map((c) => [c.status, c.idempotencyKey]),
      [
        [500, `checkout/${p.client}/${p.requestId}/1`],
        [200, `checkout/${p.client}/${p.requestId}/1`],
      ],
    )
    assert.equal(s.stripe.session(sessionId)?.client_reference_id, p.requestId)

    // A 500 Stripe stored under the key (it began executing): replayed for that key; after 5 minutes, attempt 2.
    const q = await stripePayable(s, 'st-stored')
    s.stripe.failNext({ status: 500, replayed: true })
    assert.equal((await pressPay(s, q)).status, 503)
    assert.equal((await pressPay(s, q)).status, 503)
    s.clock.advance(5 * 60_000)
    const second = await startCheckout(s, q)
    assert.equal(sessionCreates().at(-1)?.idempotencyKey, `checkout/${q.client}/${q.requestId}/2`)
    assert.equal(s.stripe.session(second)?.client_reference_id, q.requestId)
  })

  test('a request whose balance changed is canceled at Pay (balance_changed) and Stripe is never asked', async () => {
    const p = await stripePayable(s, 'st-changed')
    // The Source declares 20.00 now: 30.00 no longer fits.
    const res = await s.t.call('PUT', `/v1/clients/${p.client}/receivables/${p.receivableId}`, {
      key: p.apiKey,
      body: {
        financialType: 'loan_balance',
        sourceRevision: 2,
        recoverableAmount: { amount: '20.00', currency: 'USD' },
        creditUnion: { loanAccountReference: `loan/${p.receivableId}`, loanType: 'auto' },
        dueDate: '2026-01-01',
        responsibleCustomers: [{ externalCustomerId: 'pay-cust', role: 'primary' }],
        sourceReference: `rcv/${p.receivableId}`,
      },
    })
    assert.equal(res.status, 200, res.body)
    const before = s.stripe.calls.length
    const pay = await pressPay(s, p)
    assert.equal(pay.status, 303)
    assert.equal(pay.headers.location, p.path)
    assert.equal(s.stripe.calls.length, before)
    const request = await readRequest(s, p)
    assert.deepEqual([request.status, request.cancelReason], ['canceled', 'balance_changed'])
    assert.equal(h1((await page(p)).body), 'The balance has changed')
  })

  test('a held Receivable refuses Pay (409) and Stripe is never asked', async () => {
    const p = await stripePayable(s, 'st-held')
    assert.equal((await s.t.admin('PUT', `/admin/v1/clients/${p.client}`, { collectionEnabled: false })).status, 200)
    const before = s.stripe.calls.length
    const pay = await pressPay(s, p)
    assert.equal(pay.status, 409)
    assert.ok(pay.body.includes('Your payment was not made: this payment request is on hold.'))
    assert.equal(s.stripe.calls.length, before)
    assert.equal((await readRequest(s, p)).status, 'open')
  })

  test('within 36 minutes of its expiry a request offers no Pay, and a POST starts nothing', async () => {
    const p = await stripePayable(s, 'st-late', { expiresAt: '2026-11-23T12:30:00Z' })
    const view = await page(p)
    assert.ok(view.body.includes('This payment request expires too soon to pay online'))
    assert.ok(!view.body.includes('<form'))
    const before = s.stripe.calls.length
    const pay = await pressPay(s, p)
    assert.equal(pay.status, 409)
    assert.ok(pay.body.includes('Your payment was not started: this payment request expires too soon to pay online.'))
    assert.equal(s.stripe.calls.length, before)
  })
})

describe("Stripe's events", () => {
  test('a forged, missing or stale signature is 400 and records nothing; no provider or an unknown client 404; other types ignored', async () => {
    const p = await stripePayable(s, 'st-sig')
    const sessionId = await startCheckout(s, p)
    const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
    const forged = await deliver(s, p.client, completed, { forged: true })
    assert.equal(forged.status, 400)
    assert.deepEqual(forged.json, { received: false, message: 'The signature does not verify.' })
    const stale = await deliver(s, p.client, completed, { timestamp: Math.floor(s.clock.now().getTime() / 1000) - 301 })
    assert.equal(stale.status, 400)
    const unsigned = await s.t.call('POST', `/providers/stripe/webhooks/${p.client}`, { rawBody: JSON.stringify(completed) })
    assert.equal(unsigned.status, 400)
    // Signed with another client's secret: not this client's event.
    const otherSecret = await deliver(s, p.client, completed, { secret: 'whsec_someoneelse0123456789' })
    assert.equal(otherSecret.status, 400)
    // The body changed after signing (whitespace only): the signature covers the exact bytes.
    const signed = s.stripe.sign(completed, `whsec_stsig0123456789abcdef`)
    const reformatted = await s.t.call('POST', `/providers/stripe/webhooks/${p.client}`, {
      rawBody: JSON.stringify(JSON.parse(signed.payload)),
      headers: { 'content-type': 'application/json', 'stripe-signature': signed.header },
    })
    assert.equal(reformatted.status, 400)
    assert.equal(await handledEvents(p.client), 0)
    assert.equal(await payments(p), 0)
    assert.equal((await readRequest(s, p)).status, 'open')

    const unknown = await deliver(s, 'st-nobody', completed)
    assert.equal(unknown.status, 404)
    await pageRequest(s.t, 'st-noprovider')
    const none = await deliver(s, 'st-noprovider', completed)
    assert.equal(none.status, 404)
    // A client code no client can have (NUL, too long, other characters): 404 before any lookup.
    for (const hostile of ['a%00b', 'x'.repeat(129), 'a%20b', '%E2%80%AE']) {
      const res = await deliver(s, hostile, completed)
      assert.equal(res.status, 404, `${hostile}: ${res.body}`)
      assert.deepEqual(res.json, { received: false, message: 'No such payment provider configuration for this client.' })
    }
    // Broken UTF-8 in the path is refused by the server's path check, as on every route, before routing.
    const broken = await deliver(s, '%C3%28', completed)
    assert.equal(broken.status, 422, broken.body)
    assert.deepEqual(broken.json.errors, [{ code: 'invalid_format', detail: 'is not a valid URL path', pointer: '/path' }])
    assert.equal(await handledEvents(p.client), 0)

    const intentEvent = eventOf(s.stripe.events(), 'payment_intent.succeeded')
    const ignored = await deliver(s, p.client, intentEvent)
    assert.equal(ignored.status, 200)
    assert.deepEqual(ignored.json, { received: true, eventId: intentEvent.id, ignored: 'event type not acted on' })
    assert.equal(await handledEvents(p.client), 0)
    // The genuine delivery still works.
    assert.equal((await deliver(s, p.client, completed)).json.effect, 'confirmed')
    assert.equal(await handledEvents(p.client), 1)
  })

  test('an asynchronous payment: processing, then confirmed only on async_payment_succeeded; late and out-of-order events change nothing', async () => {
    const p = await stripePayable(s, 'st-async')
    const sessionId = await startCheckout(s, p)
    const pending = s.stripe.completeSession(sessionId, { outcome: 'async_pending' })
    const completed = eventOf(pending, 'checkout.session.completed')
    assert.equal((await deliver(s, p.client, completed)).json.effect, 'processing')
    assert.equal((await readRequest(s, p)).status, 'open')
    assert.equal(await payments(p), 0)
    // The page says processing (no query needed now), and Pay starts nothing.
    assert.equal(h1((await page(p)).body), 'Payment processing')
    const before = sessionCreates().length
    assert.equal((await pressPay(s, p)).headers.location, p.path)
    assert.equal(sessionCreates().length, before)

    const succeeded = eventOf(
      s.stripe.completeSession(sessionId, { outcome: 'async_succeeded' }),
      'checkout.session.async_payment_succeeded',
    )
    assert.equal((await deliver(s, p.client, succeeded)).json.effect, 'confirmed')
    assert.equal((await readRequest(s, p)).status, 'confirmed')
    // The completed event again, late (Stripe retried it): already handled. A new delivery of it, as a new event
    // id would be, reads the session as it is now (paid) and finds the Payment made.
    assert.equal((await deliver(s, p.client, completed)).json.effect, 'duplicate')
    const replayedAsNew = { ...completed, id: `${completed.id}x` } as Stripe.Event
    assert.equal((await deliver(s, p.client, replayedAsNew)).json.effect, 'already_confirmed')
    assert.equal(await payments(p), 1)
  })

  test('out of order: async_payment_succeeded before completed confirms at once; completed then finds it confirmed', async () => {
    const p = await stripePayable(s, 'st-order')
    const sessionId = await startCheckout(s, p)
    const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'async_pending' }), 'checkout.session.completed')
    const succeeded = eventOf(
      s.stripe.completeSession(sessionId, { outcome: 'async_succeeded' }),
      'checkout.session.async_payment_succeeded',
    )
    assert.equal((await deliver(s, p.client, succeeded)).json.effect, 'confirmed')
    assert.equal((await deliver(s, p.client, completed)).json.effect, 'already_confirmed')
    assert.equal(h1((await page(p)).body), 'Payment received')
    assert.equal(await payments(p), 1)
  })

  test('an asynchronous payment that fails leaves the request open: the next Pay starts attempt 2 with a new session', async () => {
    const p = await stripePayable(s, 'st-asyncfail')
    const first = await startCheckout(s, p)
    s.stripe.completeSession(first, { outcome: 'async_pending' })
    const failed = eventOf(s.stripe.completeSession(first, { outcome: 'async_failed' }), 'checkout.session.async_payment_failed')
    assert.equal((await deliver(s, p.client, failed)).json.effect, 'failed')
    assert.equal((await readRequest(s, p)).status, 'open')
    assert.equal(await payments(p), 0)
    const again = await page(p)
    assert.equal(h1(again.body), 'Payment request')
    assert.ok(again.body.includes('Your bank payment did not go through, and nothing was charged. You can pay again.'))
    assert.ok(again.body.includes('Pay $30.00'))
    const second = await startCheckout(s, p)
    assert.notEqual(second, first)
    assert.equal(sessionCreates().at(-1)?.idempotencyKey, `checkout/${p.client}/${p.requestId}/2`)
  })

  test('an expired session leaves the request open for another attempt until its own expiry', async () => {
    const p = await stripePayable(s, 'st-expired')
    const first = await startCheckout(s, p)
    const expired = eventOf(s.stripe.completeSession(first, { outcome: 'expired' }), 'checkout.session.expired')
    assert.equal((await deliver(s, p.client, expired)).json.effect, 'expired')
    assert.equal((await readRequest(s, p)).status, 'open')
    const second = await startCheckout(s, p)
    assert.notEqual(second, first)
    const paid = eventOf(s.stripe.completeSession(second, { outcome: 'paid' }), 'checkout.session.completed')
    assert.equal((await deliver(s, p.client, paid)).json.effect, 'confirmed')
    assert.equal(await payments(p), 1)
  })

  test('money taken for a request canceled meanwhile is given back in full through Stripe; no Payment', async () => {
    const p = await stripePayable(s, 'st-return')
    const sessionId = await startCheckout(s, p)
    // Paid at Stripe just before the cancel (its event not here yet): the cancel's end of the session finds it paid.
    const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
    const cancel = await s.t.call('POST', `/v1/clients/${p.client}/payment-requests/${p.requestId}/cancel`, { key: p.apiKey, body: {} })
    assert.equal(cancel.status, 200, cancel.body)
    const res = await deliver(s, p.client, completed)
    assert.deepEqual(res.json, { received: true, eventId: completed.id, effect: 'returned' })
    const intent = s.stripe.session(sessionId)?.payment_intent as string
    const refunds = s.stripe.calls.filter(
      (c) => c.method === 'POST' && c.path === '/v1/refunds' && c.idempotencyKey === `returned/${p.client}/${intent}`,
    )
    // Asked once, or twice under one idempotency key (the cancel's read-back and the event): one refund at Stripe.
    assert.equal(refunds.filter((c) => !c.replayed).length, 1)
    const refund = eventOf(s.stripe.events(), 'refund.created').data.object as Stripe.Refund
    assert.deepEqual([refund.payment_intent, refund.amount], [intent, 3000])
    assert.equal(await payments(p), 0)
    assert.equal((await readRequest(s, p)).status, 'canceled')
    assert.equal((await deliver(s, p.client, completed)).json.effect, 'duplicate')
    // The refund's own events are the service's own return: ignored.
    assert.equal((await deliver(s, p.client, eventOf(s.stripe.events(), 'refund.created'))).json.ignored, 'money the service returned')
  })

  test("a session of another client, delivered to this client's URL with this client's signature, is ignored", async () => {
    const mine = await stripePayable(s, 'st-mine')
    const theirs = await stripePayable(s, 'st-theirs')
    const sessionId = await startCheckout(s, theirs)
    const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
    const res = await deliver(s, mine.client, completed)
    assert.equal(res.json.ignored, 'not a session of this client made by the service')
    assert.equal(await payments(theirs), 0)
    assert.equal((await deliver(s, theirs.client, completed)).json.effect, 'confirmed')
  })

  test('Stripe not answering the read-back: not 2xx and nothing recorded, so Stripe delivers again; an object Stripe does not have: ignored', async () => {
    const p = await stripePayable(s, 'st-readback')
    const sessionId = await startCheckout(s, p)
    const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
    s.stripe.failNext({ status: 503 })
    const failed = await deliver(s, p.client, completed)
    assert.equal(failed.status, 503)
    assert.equal(await handledEvents(p.client), 0)
    assert.equal(await payments(p), 0)
    assert.equal((await deliver(s, p.client, completed)).json.effect, 'confirmed')
    const ghost = structuredClone(completed)
    ghost.id = `${completed.id}ghost`
    ;(ghost.data.object as { id: string }).id = 'cs_test_nosuchsession'
    assert.equal((await deliver(s, p.client, ghost)).json.ignored, 'cs_test_nosuchsession not found at Stripe')
    assert.equal(await payments(p), 1)
  })

  test('the same event at sixteen deliveries at once: one Payment, one handled event', async () => {
    const p = await stripePayable(s, 'st-burst')
    const sessionId = await startCheckout(s, p)
    const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
    const answers = await Promise.all(Array.from({ length: 16 }, () => deliver(s, p.client, completed)))
    assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([200]))
    assert.equal(answers.filter((a) => a.json.effect === 'confirmed').length, 1)
    assert.equal(answers.filter((a) => a.json.effect === 'duplicate').length, 15)
    assert.equal(await payments(p), 1)
    assert.equal(await handledEvents(p.client), 1)
  })
})
