import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { startTestApp, type TestApp } from '../../helpers/app.ts'
import { engineName } from '../../helpers/store.ts'
import {
  countRows,
  deliver,
  eventOf,
  generateStripeKey,
  readRequest,
  type StripeTest,
  startCheckout,
  startStripeTest,
  stripePayable,
  webhookSecretFor,
} from '../../helpers/stripe.ts'

/**
 * Two service instances on one store receiving the same Stripe event at once (Stripe retries; two deliveries race
 * behind a load balancer): one Payment, one handled event. And production: a live-looking restricted key against the
 * stand-in, the whole path in live mode.
 */
const open: { close(): Promise<void> }[] = []
after(async () => {
  for (const o of open.reverse()) await o.close()
})

test(`two instances receive the same event sixteen times at once (${engineName}): one Payment`, async () => {
  const s = await startStripeTest()
  open.push(s)
  // A second app on the same database: its own registry, caches and Fastify instance.
  const second: TestApp = await startTestApp({ STRIPE_API_BASE: s.stripe.url }, { clock: s.clock, db: s.t.db })
  open.push({ close: () => second.app.app.close() })
  const p = await stripePayable(s, 'si-two')
  const sessionId = await startCheckout(s, p)
  const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
  const signed = s.stripe.sign(completed, webhookSecretFor(p.client))
  const post = (app: TestApp) =>
    app.call('POST', `/providers/stripe/webhooks/${p.client}`, {
      rawBody: signed.payload,
      headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': signed.header },
    })
  const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => post(i % 2 === 0 ? s.t : second)))
  assert.deepEqual(
    answers.map((a) => a.status),
    Array.from({ length: 16 }, () => 200),
  )
  assert.deepEqual(answers.map((a) => a.json.effect).sort(), ['confirmed', ...Array.from({ length: 15 }, () => 'duplicate')])
  assert.equal(await countRows(s, 'SELECT count(*) AS n FROM payments WHERE client_code = $1', [p.client]), 1)
  assert.equal(await countRows(s, 'SELECT count(*) AS n FROM provider_events WHERE client_code = $1', [p.client]), 1)
  assert.equal((await readRequest(s, p)).status, 'confirmed')
})

test(`production with a live restricted key against the stand-in (${engineName}): live session, live event, confirmed`, async () => {
  const live = generateStripeKey('rk_live')
  const s: StripeTest = await startStripeTest({ environment: 'production', standIn: { keys: [live] } })
  open.push(s)
  // A test key is refused in production (item 1's rule), here too.
  await s.t.tenant('sp-live')
  const refused = await s.t.admin('PUT', '/admin/v1/clients/sp-live/payment-provider', {
    provider: 'stripe',
    secretKey: generateStripeKey('sk_test'),
    webhookSecret: webhookSecretFor('sp-live'),
  })
  assert.equal(refused.status, 422)
  const p = await stripePayable(s, 'sp-live', {}, live)
  const shown = await s.t.admin('GET', `/admin/v1/clients/${p.client}/payment-provider`)
  assert.deepEqual([shown.json.mode, shown.json.secretKeyHint], ['live', `rk_live_...${live.slice(-4)}`])
  const pageBefore = await s.t.call('GET', p.path)
  assert.ok(pageBefore.body.includes('Pay $30.00'))
  assert.ok(!pageBefore.body.includes('no payment provider is configured'))
  const sessionId = await startCheckout(s, p, 'live')
  const events = s.stripe.completeSession(sessionId, { outcome: 'paid' })
  const completed = eventOf(events, 'checkout.session.completed')
  assert.equal(completed.livemode, true)
  assert.equal((await deliver(s, p.client, completed)).json.effect, 'confirmed')
  const request = await readRequest(s, p)
  assert.deepEqual([request.status, request.payment.provider], ['confirmed', 'stripe'])
  assert.equal(request.payment.providerPaymentId, s.stripe.session(sessionId)?.payment_intent)
  assert.equal(s.stripe.session(sessionId)?.livemode, true)
  // Every call the service made carried the live key.
  assert.ok(
    s.stripe.calls.every((c) => c.status === 200 || c.status === 303),
    JSON.stringify(s.stripe.calls),
  )
})
