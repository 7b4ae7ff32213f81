import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import Stripe from 'stripe'
import { verifyWebhook } from '../../../packages/sdk/src/webhooks.ts'
import type { ResolvedAddress } from '../../../src/http/destination.ts'
import { runRetention } from '../../../src/resources/retention/service.ts'
import { createReceiptDispatcher } from '../../../src/workers/receipt-dispatcher.ts'
import { startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'
import { engineName, onPostgres } from '../../helpers/store.ts'
import { type Received, type Receiver, startReceiver } from '../../helpers/webhook-receiver.ts'

/**
 * Receipt delivery to the Source end to end (docs/design/receipt-delivery.md) on a loopback receiver
 * (WEBHOOK_DEV_ALLOW_LOOPBACK=1), through the real app and store: the dispatcher's runs are driven one at a time
 * (runOnce) and its clock is moved forward to reach each retry, so nothing here waits for a schedule. Durations are
 * never asserted.
 */
let offsetMs = 0
const clock = { now: () => new Date(Date.now() + offsetMs) }
const advance = (ms: number) => {
  offsetMs += ms
}
const resolver = async (name: string): Promise<ResolvedAddress[]> => {
  if (name === 'ledger.acme-lending.com') return [{ address: '93.184.215.14', family: 4 }]
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
}

const stripe = new Stripe('sk_test_unused')
const usd = (amount: string) => ({ amount, currency: 'USD' })
const ENV = { WEBHOOK_DEV_ALLOW_LOOPBACK: '1', WEBHOOK_RETRY_SCHEDULE: '1m,5m,30m,2h,6h,12h,24h' }

let t: TestApp
let rx: Receiver

before(async () => {
  t = await startTestApp(ENV, { clock, resolver })
  rx = await startReceiver()
})
after(async () => {
  await rx.close()
  await t.close()
})

const run = () => t.app.receiptDispatcher.runOnce()
const at = (client: string) => (r: Received) => r.path === `/hooks/${client}`
const receivedBy = (client: string) => rx.received.filter(at(client))
const verify = (r: Received, secret: string) =>
  verifyWebhook(r.rawBody, String(r.headers['service-signature']), [secret], 300, { now: clock.now() })

async function tenant(client: string, owner: 'service' | 'partner' = 'service'): Promise<Tenant> {
  return t.tenant(client, { grant: { receiptDeliveryOwner: owner } })
}

/** PUT the route at the receiver's /hooks/<client>; returns the answer. */
async function putRoute(tn: Tenant, url = `${rx.url}/${tn.clientCode}`) {
  return t.call('PUT', `/v1/clients/${tn.clientCode}/receipt-route`, { key: tn.apiKey, body: { url } })
}

/** A verified route: PUT, the test receipt delivered, its code sent back. Returns the signing secret. */
async function verifiedRoute(tn: Tenant): Promise<string> {
  const put = await putRoute(tn)
  assert.ok(put.status === 201 || put.status === 200, put.body)
  const before = receivedBy(tn.clientCode).length
  await run()
  const test = receivedBy(tn.clientCode)[before]
  assert.equal(test?.json.kind, 'test')
  const confirm = await t.call('POST', `/v1/clients/${tn.clientCode}/receipt-route/confirm`, {
    key: tn.apiKey,
    body: { confirmationCode: test?.json.confirmationCode },
  })
  assert.equal(confirm.status, 200, confirm.body)
  return put.json.signingSecret
}

/** A confirmed Payment of `amount` on a fresh payable Receivable of 100.00. */
async function confirmedPayment(tn: Tenant, requestId: string, amount = '40.00') {
  const receivable = await payableReceivable(t, tn, `rcv-${requestId}`)
  const pr = await t.call('PUT', `/v1/clients/${tn.clientCode}/payment-requests/${requestId}`, {
    key: tn.apiKey,
    body: { externalReceivableId: receivable, amount: usd(amount) },
  })
  assert.equal(pr.status, 201, pr.body)
  const sim = await t.admin('POST', `/admin/v1/clients/${tn.clientCode}/payment-requests/${requestId}/simulate`, { outcome: 'confirmed' })
  assert.equal(sim.status, 201, sim.body)
  return { receivable, payment: sim.json.payment }
}

async function delivery(tn: Tenant, requestId: string) {
  const res = await t.call('GET', `/v1/clients/${tn.clientCode}/payment-requests/${requestId}/receipt-delivery`, { key: tn.apiKey })
  assert.equal(res.status, 200, res.body)
  return res.json
}

describe(`receipt routes (${engineName})`, () => {
  test('verification: the signed test receipt carries the code; a wrong code is refused, the right one verifies', async () => {
    const tn = await tenant('rcp-verify')
    const missing = await t.call('GET', '/v1/clients/rcp-verify/receipt-route', { key: tn.apiKey })
    assert.equal(missing.status, 404)
    assert.equal(missing.json.type, 'https://docs.irs.test/problems/receipt_route_not_found')
    const unsafe = await putRoute(tn, 'https://10.0.0.7/receipts')
    assert.equal(unsafe.status, 422, unsafe.body)
    assert.equal(unsafe.json.type, 'https://docs.irs.test/problems/webhook_destination_unsafe')
    assert.equal(unsafe.json.errors[0].pointer, '/url')

    const put = await putRoute(tn)
    assert.equal(put.status, 201, put.body)
    assert.deepEqual(Object.keys(put.json).sort(), ['signingSecret', 'state', 'url'])
    assert.equal(put.json.state, 'unverified')
    assert.equal(put.json.url, `${rx.url}/rcp-verify`)
    assert.match(put.json.signingSecret, /^whsec_[A-Za-z0-9_-]{43}$/)
    const secret = put.json.signingSecret as string
    const read = await t.call('GET', '/v1/clients/rcp-verify/receipt-route', { key: tn.apiKey })
    assert.deepEqual(read.json, { url: `${rx.url}/rcp-verify`, state: 'unverified' })

    assert.equal(await run(), true)
    const got = receivedBy('rcp-verify')
    assert.equal(got.length, 1)
    const r = got[0] as Received
    assert.deepEqual(Object.keys(r.json), ['receiptId', 'kind', 'occurredAt', 'confirmationCode'])
    assert.equal(r.json.kind, 'test')
    assert.match(r.json.receiptId, /^rcpt_[0-9a-f]{32}$/)
    assert.match(r.json.confirmationCode, /^rcc_[A-Za-z0-9_-]{22}$/)
    assert.equal(r.headers['service-receipt-id'], r.json.receiptId)
    assert.equal(r.headers['content-type'], 'application/json')
    assert.match(String(r.headers['service-signature']), /^t=\d+,v1=[0-9a-f]{64}$/)
    assert.deepEqual(verify(r, secret), r.json)
    const viaStripe = stripe.webhooks.constructEvent(r.rawBody, String(r.headers['service-signature']), secret)
    assert.equal((viaStripe as unknown as { receiptId: string }).receiptId, r.json.receiptId)
    // Delivered once: another run sends nothing more.
    assert.equal(await run(), false)
    assert.equal(receivedBy('rcp-verify').length, 1)

    const confirm = (confirmationCode: string) =>
      t.call('POST', '/v1/clients/rcp-verify/receipt-route/confirm', { key: tn.apiKey, body: { confirmationCode } })
    const wrong = await confirm('rcc_not-the-code-0000000')
    assert.equal(wrong.status, 422, wrong.body)
    assert.deepEqual(
      wrong.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer]),
      [['custom', '/confirmationCode']],
    )
    const right = await confirm(r.json.confirmationCode)
    assert.equal(right.status, 200, right.body)
    assert.equal(right.json.state, 'verified')
    assert.match(right.json.verifiedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    const again = await confirm(r.json.confirmationCode)
    assert.deepEqual(again.json, right.json)
    const verified = await t.call('GET', '/v1/clients/rcp-verify/receipt-route', { key: tn.apiKey })
    assert.deepEqual(verified.json, { url: `${rx.url}/rcp-verify`, state: 'verified', verifiedAt: right.json.verifiedAt })

    // A second PUT starts over: a new secret and code, unverified, the old code refused.
    const second = await putRoute(tn)
    assert.equal(second.status, 200, second.body)
    assert.equal(second.json.state, 'unverified')
    assert.notEqual(second.json.signingSecret, secret)
    await run()
    const r2 = receivedBy('rcp-verify')[1] as Received
    assert.notEqual(r2.json.receiptId, r.json.receiptId)
    assert.notEqual(r2.json.confirmationCode, r.json.confirmationCode)
    assert.deepEqual(verify(r2, second.json.signingSecret), r2.json)
    assert.throws(() => verify(r2, secret))
    assert.equal((await confirm(r.json.confirmationCode)).status, 422)
    assert.equal((await confirm(r2.json.confirmationCode)).json.state, 'verified')
    // The route's changes are audited without the URL or the secret.
    const audit = await t.store.query<{ action: string; details: unknown }>(
      `SELECT action, details FROM audit_events WHERE client_code = 'rcp-verify' AND target_type = 'receipt_route' ORDER BY seq`,
    )
    assert.deepEqual(
      audit.map((a) => a.action),
      ['receipt_route.configured', 'receipt_route.verified', 'receipt_route.configured', 'receipt_route.verified'],
    )
    assert.ok(!JSON.stringify(audit).includes(rx.url) && !JSON.stringify(audit).includes('whsec_'))
  })

  test("a Payment's receipt: exact body, signed under the route's secret; capability enabled; acknowledgement still pending", async () => {
    const tn = await tenant('rcp-pay')
    // Confirmed before the route is verified: not delivered (receipts cover what is committed after the proof).
    await putRoute(tn)
    const early = await confirmedPayment(tn, 'pr-early')
    const unverified = await delivery(tn, 'pr-early')
    assert.deepEqual(unverified.capability, {
      state: 'disabled',
      disabledReason: 'no_verified_route',
      unverifiedRoutes: [{ route: 'vendor_receipt_posting', missingProof: 'source_posting_confirmation' }],
    })
    const secret = await verifiedRoute(tn)
    assert.ok(early.payment)
    const { receivable, payment } = await confirmedPayment(tn, 'pr-1', '40.00')
    await run()
    const got = receivedBy('rcp-pay').filter((r) => r.json.kind === 'payment')
    assert.equal(got.length, 1)
    const r = got[0] as Received
    assert.deepEqual(r.json, {
      receiptId: r.json.receiptId,
      kind: 'payment',
      externalPaymentRequestId: 'pr-1',
      providerPaymentId: payment.providerPaymentId,
      occurredAt: payment.decidedAt,
      amount: usd('40.00'),
      allocations: [{ externalReceivableId: receivable, amount: usd('40.00') }],
      unappliedAmount: usd('0.00'),
    })
    assert.deepEqual(Object.keys(r.json), [
      'receiptId',
      'kind',
      'externalPaymentRequestId',
      'providerPaymentId',
      'occurredAt',
      'amount',
      'allocations',
      'unappliedAmount',
    ])
    assert.match(r.json.receiptId, /^rcpt_[0-9a-f]{32}$/)
    assert.deepEqual(verify(r, secret), r.json)
    const viaStripe = stripe.webhooks.constructEvent(r.rawBody, String(r.headers['service-signature']), secret)
    assert.equal((viaStripe as unknown as { receiptId: string }).receiptId, r.json.receiptId)
    assert.throws(() => stripe.webhooks.constructEvent(`${r.rawBody} `, String(r.headers['service-signature']), secret))

    const d = await delivery(tn, 'pr-1')
    assert.equal(d.deliveryOwner, 'service')
    assert.deepEqual(d.capability, { state: 'enabled', disabledReason: null, unverifiedRoutes: [] })
    assert.equal(d.deliveryAttempts.length, 1)
    assert.deepEqual(d.deliveryAttempts[0], {
      attempt: 1,
      route: 'vendor_receipt_posting',
      outcome: 'delivered',
      httpStatus: 204,
      attemptedAt: d.deliveryAttempts[0].attemptedAt,
      receiptId: r.json.receiptId,
      kind: 'payment',
    })
    // A delivery never acknowledges: only reconciliation lines do.
    assert.deepEqual(d.acknowledgement, {
      status: 'pending',
      allocatedAmount: usd('40.00'),
      matchedAmount: usd('0.00'),
      unmatchedAmount: usd('40.00'),
    })
    const rcv = await t.call('GET', `/v1/clients/rcp-pay/receivables/${receivable}`, { key: tn.apiKey })
    assert.deepEqual(rcv.json.financialPosition.receiptAcknowledgedAmount, usd('0.00'))
    assert.deepEqual(rcv.json.financialPosition.confirmedUnreconciledAmount, usd('40.00'))
    // The Payment confirmed before verification has no receipt and no attempt.
    assert.deepEqual((await delivery(tn, 'pr-early')).deliveryAttempts, [])
    // Nothing is sent twice.
    await run()
    assert.equal(receivedBy('rcp-pay').filter((x) => x.json.kind === 'payment').length, 1)
  })

  test("a refund's and a reversal's receipts: the money taken back, each with its own stable receiptId", async () => {
    const tn = await tenant('rcp-back')
    const secret = await verifiedRoute(tn)
    const { receivable, payment } = await confirmedPayment(tn, 'pr-back', '40.00')
    const refund = await t.call('PUT', '/v1/clients/rcp-back/payment-requests/pr-back/refunds/rf-1', {
      key: tn.apiKey,
      body: { amount: usd('15.00'), reason: 'requested_by_customer' },
    })
    assert.equal(refund.status, 201, refund.body)
    await t.app.refundWorker.runOnce()
    const decided = await t.call('GET', '/v1/clients/rcp-back/payment-requests/pr-back/refunds/rf-1', { key: tn.apiKey })
    assert.equal(decided.json.status, 'succeeded', decided.body)
    await run()
    const reversed = await t.admin('POST', '/admin/v1/clients/rcp-back/payment-requests/pr-back/simulate', {
      outcome: 'reversed',
      amount: usd('10.00'),
    })
    assert.ok(reversed.status < 300, reversed.body)
    await run()
    const again = await t.admin('POST', '/admin/v1/clients/rcp-back/payment-requests/pr-back/simulate', {
      outcome: 'reversed',
      amount: usd('5.00'),
    })
    assert.ok(again.status < 300, again.body)
    await run()
    // Two reversals committed between two scans: two receipts, each of its own amount and with its own receiptId.
    for (const amount of ['4.00', '6.00']) {
      const two = await t.admin('POST', '/admin/v1/clients/rcp-back/payment-requests/pr-back/simulate', {
        outcome: 'reversed',
        amount: usd(amount),
      })
      assert.ok(two.status < 300, two.body)
    }
    await run()
    const got = receivedBy('rcp-back').filter((r) => r.json.kind !== 'test')
    assert.deepEqual(
      got.map((r) => [r.json.kind, r.json.amount.amount, r.json.allocations, r.json.unappliedAmount.amount]),
      [
        ['payment', '40.00', [{ externalReceivableId: receivable, amount: usd('40.00') }], '0.00'],
        ['refund', '15.00', [{ externalReceivableId: receivable, amount: usd('15.00') }], '0.00'],
        ['reversal', '10.00', [{ externalReceivableId: receivable, amount: usd('10.00') }], '0.00'],
        ['reversal', '5.00', [{ externalReceivableId: receivable, amount: usd('5.00') }], '0.00'],
        ['reversal', '4.00', [{ externalReceivableId: receivable, amount: usd('4.00') }], '0.00'],
        ['reversal', '6.00', [{ externalReceivableId: receivable, amount: usd('6.00') }], '0.00'],
      ],
    )
    for (const r of got) {
      assert.equal(r.json.externalPaymentRequestId, 'pr-back')
      assert.equal(r.json.providerPaymentId, payment.providerPaymentId)
      assert.deepEqual(verify(r, secret), r.json)
    }
    assert.equal(new Set(got.map((r) => r.json.receiptId)).size, 6)
    // Each take-back is recorded once, with the split its receipt reports.
    assert.deepEqual(
      await t.store.query(
        `SELECT kind, amount_minor::text AS amount, unapplied_minor::text AS unapplied FROM payment_take_backs
          WHERE client_code = 'rcp-back' ORDER BY occurred_at, length(take_back_key), take_back_key`,
      ),
      [
        { kind: 'refund', amount: '1500', unapplied: '0' },
        { kind: 'reversal', amount: '1000', unapplied: '0' },
        { kind: 'reversal', amount: '500', unapplied: '0' },
        { kind: 'reversal', amount: '400', unapplied: '0' },
        { kind: 'reversal', amount: '600', unapplied: '0' },
      ],
    )
    // Scanned again from the start (as after a lost sequence): the same receipts, nothing new to send.
    await t.store.query(`UPDATE receipt_routes SET scanned_seq = 0 WHERE client_code = 'rcp-back'`)
    await run()
    assert.equal(receivedBy('rcp-back').filter((r) => r.json.kind !== 'test').length, 6)
    assert.equal(got[1]?.json.occurredAt, decided.json.decidedAt)
    const d = await delivery(tn, 'pr-back')
    assert.deepEqual(
      d.deliveryAttempts.map((a: { kind: string; outcome: string; receiptId: string }) => [a.kind, a.outcome, a.receiptId]),
      got.map((r) => [r.json.kind, 'delivered', r.json.receiptId]),
    )
  })

  test('retry after a 500: the same receiptId and body on the webhook schedule; every attempt listed', async () => {
    const tn = await tenant('rcp-500')
    await verifiedRoute(tn)
    rx.behave((r) =>
      at('rcp-500')(r) && receivedBy('rcp-500').filter((x) => x.json.kind === 'payment').length === 1 ? { status: 500 } : { status: 204 },
    )
    await confirmedPayment(tn, 'pr-500')
    await run()
    const first = await delivery(tn, 'pr-500')
    assert.equal(first.deliveryAttempts.length, 1)
    const a1 = first.deliveryAttempts[0]
    assert.deepEqual([a1.attempt, a1.outcome, a1.httpStatus], [1, 'failed', 500])
    assert.equal(Date.parse(a1.nextAttemptAt) - Date.parse(a1.attemptedAt), 60_000)
    // Not due yet: nothing is sent.
    await run()
    assert.equal(receivedBy('rcp-500').filter((x) => x.json.kind === 'payment').length, 1)
    advance(61_000)
    await run()
    const sent = receivedBy('rcp-500').filter((x) => x.json.kind === 'payment')
    assert.equal(sent.length, 2)
    assert.equal(sent[1]?.rawBody, sent[0]?.rawBody)
    assert.equal(sent[1]?.headers['service-receipt-id'], sent[0]?.json.receiptId)
    const second = await delivery(tn, 'pr-500')
    assert.deepEqual(
      second.deliveryAttempts.map((a: { attempt: number; outcome: string; httpStatus?: number; nextAttemptAt?: string }) => [
        a.attempt,
        a.outcome,
        a.httpStatus,
        a.nextAttemptAt === undefined,
      ]),
      [
        [1, 'failed', 500, false],
        [2, 'delivered', 204, true],
      ],
    )
    rx.behave(() => ({ status: 204 }))
  })

  test('retry after a stall: the attempt times out (no status), the next one delivers the same receipt', async () => {
    const tn = await tenant('rcp-stall')
    await verifiedRoute(tn)
    // A dispatcher of its own with a short timeout, on the same store.
    const quick = createReceiptDispatcher({
      store: t.store,
      clock,
      resolver,
      allowLoopback: true,
      keyRing: t.app.services.webhooks.keyRing,
      intervalMs: 60_000,
      retryScheduleMs: [60_000, 300_000],
      timeoutMs: 300,
    })
    rx.behave((r) =>
      at('rcp-stall')(r) && receivedBy('rcp-stall').filter((x) => x.json.kind === 'payment').length === 1
        ? { hang: true }
        : { status: 204 },
    )
    await confirmedPayment(tn, 'pr-stall')
    await quick.runOnce()
    const first = await delivery(tn, 'pr-stall')
    assert.deepEqual(
      first.deliveryAttempts.map((a: { outcome: string; httpStatus?: number }) => [a.outcome, a.httpStatus]),
      [['failed', undefined]],
    )
    const row = await t.store.query<{ last_error: string }>(
      `SELECT last_error FROM receipt_deliveries WHERE client_code = 'rcp-stall' AND kind = 'payment'`,
    )
    assert.equal(row[0]?.last_error, 'timeout')
    advance(61_000)
    await quick.runOnce()
    const sent = receivedBy('rcp-stall').filter((x) => x.json.kind === 'payment')
    assert.equal(sent.length, 2)
    assert.equal(sent[1]?.rawBody, sent[0]?.rawBody)
    assert.deepEqual(
      (await delivery(tn, 'pr-stall')).deliveryAttempts.map((a: { attempt: number; outcome: string }) => [a.attempt, a.outcome]),
      [
        [1, 'failed'],
        [2, 'delivered'],
      ],
    )
    await quick.stop()
    rx.behave(() => ({ status: 204 }))
  })

  test('a redirect is a failure and is never followed', async () => {
    const tn = await tenant('rcp-redirect')
    await verifiedRoute(tn)
    rx.behave((r) =>
      at('rcp-redirect')(r) && r.json?.kind === 'payment' ? { status: 302, headers: { location: `${rx.url}/elsewhere` } } : { status: 204 },
    )
    await confirmedPayment(tn, 'pr-redirect')
    await run()
    assert.equal(rx.received.filter((r) => r.path === '/hooks/elsewhere').length, 0)
    const d = await delivery(tn, 'pr-redirect')
    assert.deepEqual(
      d.deliveryAttempts.map((a: { outcome: string; httpStatus?: number }) => [a.outcome, a.httpStatus]),
      [['failed', 302]],
    )
    const row = await t.store.query<{ last_error: string; status: string }>(
      `SELECT last_error, status FROM receipt_deliveries WHERE client_code = 'rcp-redirect' AND kind = 'payment'`,
    )
    assert.deepEqual(row[0], { last_error: 'redirect 302', status: 'pending' })
    rx.behave(() => ({ status: 204 }))
  })

  test('grant revocation: through the operator API, and found before an attempt; nothing is sent, the route says why', async () => {
    // (1) Revoked through the operator API: the route is disabled in the same transaction.
    const tn = await tenant('rcp-revoke')
    const other = await t.tenant('rcp-revoke', { integrationId: 'int-rcp-revoke-reader', grant: { receiptDeliveryOwner: 'service' } })
    await verifiedRoute(tn)
    await confirmedPayment(tn, 'pr-rv')
    const revoke = await t.admin('POST', `/admin/v1/integrations/${tn.integrationId}/grants/rcp-revoke/revoke`, {})
    assert.equal(revoke.status, 200, revoke.body)
    const sentBefore = receivedBy('rcp-revoke').length
    await run()
    assert.equal(receivedBy('rcp-revoke').length, sentBefore, 'nothing sent after the revocation')
    const route = await t.call('GET', '/v1/clients/rcp-revoke/receipt-route', { key: other.apiKey })
    assert.equal(route.json.state, 'disabled')
    assert.equal(route.json.disabledReason, 'grant_revoked')
    const d = await delivery(other, 'pr-rv')
    assert.deepEqual(d.capability, { state: 'disabled', disabledReason: 'grant_revoked', unverifiedRoutes: [] })
    assert.deepEqual(d.deliveryAttempts, [])

    // (2) Revoked with no hook (another path): the dispatcher finds it before the retry and sends nothing.
    const tn2 = await tenant('rcp-revoke2')
    await verifiedRoute(tn2)
    rx.behave((r) => (at('rcp-revoke2')(r) && r.json?.kind === 'payment' ? { status: 503 } : { status: 204 }))
    await confirmedPayment(tn2, 'pr-rv2')
    await run()
    assert.equal(receivedBy('rcp-revoke2').filter((x) => x.json.kind === 'payment').length, 1)
    await t.store.query(`UPDATE grants SET status = 'revoked' WHERE client_code = 'rcp-revoke2' AND integration_id = $1`, [
      tn2.integrationId,
    ])
    advance(61_000)
    await run()
    assert.equal(receivedBy('rcp-revoke2').filter((x) => x.json.kind === 'payment').length, 1, 'no attempt after the revocation')
    const row = await t.store.query<{ state: string; disabled_reason: string }>(
      `SELECT state, disabled_reason FROM receipt_routes WHERE client_code = 'rcp-revoke2'`,
    )
    assert.deepEqual(row[0], { state: 'disabled', disabled_reason: 'grant_revoked' })
    const attempts = await t.store.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM receipt_delivery_attempts WHERE client_code = 'rcp-revoke2' AND external_payment_request_id = 'pr-rv2'`,
    )
    assert.equal(attempts[0]?.n, 1)
    rx.behave(() => ({ status: 204 }))
  })

  test('owner partner: the route can be verified, but no receipt is delivered and the capability says why', async () => {
    const tn = await tenant('rcp-partner', 'partner')
    await verifiedRoute(tn)
    await confirmedPayment(tn, 'pr-partner')
    await run()
    assert.deepEqual(
      receivedBy('rcp-partner').map((r) => r.json.kind),
      ['test'],
    )
    const d = await delivery(tn, 'pr-partner')
    assert.equal(d.deliveryOwner, 'partner')
    assert.deepEqual(d.capability, { state: 'disabled', disabledReason: 'delivery_owner_partner', unverifiedRoutes: [] })
    assert.deepEqual(d.deliveryAttempts, [])
    // No route at all, owner service: no_verified_route, with the missing proof.
    const none = await tenant('rcp-none')
    await confirmedPayment(none, 'pr-none')
    assert.deepEqual((await delivery(none, 'pr-none')).capability, {
      state: 'disabled',
      disabledReason: 'no_verified_route',
      unverifiedRoutes: [{ route: 'vendor_receipt_posting', missingProof: 'source_posting_confirmation' }],
    })
  })

  test('two instances never send one receipt twice at once', async () => {
    const tn = await tenant('rcp-two')
    await verifiedRoute(tn)
    // A second app on the same database (PostgreSQL: its own pool; PGlite: the same engine).
    const db = onPostgres ? { ...t.db, store: t.db.open() } : t.db
    const second = await startTestApp(ENV, { clock, resolver, db })
    try {
      for (let i = 0; i < 16; i++) await confirmedPayment(tn, `pr-two-${i}`, '5.00')
      rx.behave(() => ({ status: 204, delayMs: 100 }))
      for (let round = 0; round < 4; round++) {
        await Promise.all([run(), second.app.receiptDispatcher.runOnce(), run(), second.app.receiptDispatcher.runOnce()])
      }
      const ids = receivedBy('rcp-two')
        .filter((r) => r.json.kind === 'payment')
        .map((r) => r.json.externalPaymentRequestId)
      assert.equal(ids.length, 16, `every receipt once: ${ids.join(',')}`)
      assert.equal(new Set(ids).size, 16)
      const rows = await t.store.query<{ status: string; attempt_count: number; n: number }>(
        `SELECT status, attempt_count, count(*)::int AS n FROM receipt_deliveries WHERE client_code = 'rcp-two' AND kind = 'payment'
          GROUP BY status, attempt_count`,
      )
      assert.deepEqual(rows, [{ status: 'delivered', attempt_count: 1, n: 16 }])
    } finally {
      rx.behave(() => ({ status: 204 }))
      await second.app.app.close()
      await second.app.receiptDispatcher.stop()
    }
  })

  test('retention: finished receipt delivery records older than 30 days go with their attempts; pending ones stay', async () => {
    const tn = await tenant('rcp-retain')
    await verifiedRoute(tn)
    await confirmedPayment(tn, 'pr-old')
    await confirmedPayment(tn, 'pr-new')
    rx.behave((r) => (at('rcp-retain')(r) && r.json?.externalPaymentRequestId === 'pr-owed' ? { status: 500 } : { status: 204 }))
    await confirmedPayment(tn, 'pr-owed')
    await run()
    const rows = () =>
      t.store.query<{ request: string; status: string; attempts: number }>(
        `SELECT d.external_payment_request_id AS request, d.status,
                (SELECT count(*)::int FROM receipt_delivery_attempts a WHERE a.client_code = d.client_code AND a.receipt_id = d.receipt_id) AS attempts
           FROM receipt_deliveries d WHERE d.client_code = 'rcp-retain' AND d.kind = 'payment' ORDER BY 1`,
      )
    assert.deepEqual(await rows(), [
      { request: 'pr-new', status: 'delivered', attempts: 1 },
      { request: 'pr-old', status: 'delivered', attempts: 1 },
      { request: 'pr-owed', status: 'pending', attempts: 1 },
    ])
    // pr-old finished 31 days ago; pr-new 29 days ago; pr-owed was created 31 days ago and is still owed.
    await t.store.query(
      `UPDATE receipt_deliveries SET completed_at = now() - interval '31 days' WHERE client_code = 'rcp-retain' AND external_payment_request_id = 'pr-old'`,
    )
    await t.store.query(
      `UPDATE receipt_deliveries SET completed_at = now() - interval '29 days' WHERE client_code = 'rcp-retain' AND external_payment_request_id = 'pr-new'`,
    )
    await t.store.query(
      `UPDATE receipt_deliveries SET created_at = now() - interval '31 days' WHERE client_code = 'rcp-retain' AND external_payment_request_id = 'pr-owed'`,
    )
    await runRetention(t.store)
    assert.deepEqual(await rows(), [
      { request: 'pr-new', status: 'delivered', attempts: 1 },
      { request: 'pr-owed', status: 'pending', attempts: 1 },
    ])
    assert.deepEqual((await delivery(tn, 'pr-old')).deliveryAttempts, [])
    assert.equal((await delivery(tn, 'pr-new')).deliveryAttempts.length, 1)
    // Purged rows are not derived again: the route's scan is past them.
    await run()
    assert.equal((await rows()).length, 2)
    // The sandbox's retention (each client at its own clock) purges them alike.
    await t.store.query(
      `UPDATE receipt_deliveries SET completed_at = now() - interval '31 days' WHERE client_code = 'rcp-retain' AND external_payment_request_id = 'pr-new'`,
    )
    assert.ok(t.app.sandbox)
    await runRetention(t.store, t.app.sandbox)
    assert.deepEqual(await rows(), [{ request: 'pr-owed', status: 'pending', attempts: 1 }])
    // A refund after the purge still reports exactly its own money (it depends on no earlier receipt).
    const refund = await t.call('PUT', '/v1/clients/rcp-retain/payment-requests/pr-old/refunds/rf-after', {
      key: tn.apiKey,
      body: { amount: usd('12.34'), reason: 'requested_by_customer' },
    })
    assert.equal(refund.status, 201, refund.body)
    await t.app.refundWorker.runOnce()
    await run()
    const refunds = receivedBy('rcp-retain').filter((r) => r.json.kind === 'refund')
    assert.deepEqual(
      refunds.map((r) => [r.json.externalPaymentRequestId, r.json.amount, r.json.unappliedAmount]),
      [['pr-old', usd('12.34'), usd('0.00')]],
    )
    rx.behave(() => ({ status: 204 }))
  })

  test('a sandbox client reset keeps the route (verified stays verified), deletes its receipts; an unverified one gets its test receipt again', async () => {
    const tn = await tenant('rcp-reset')
    const secret = await verifiedRoute(tn)
    await confirmedPayment(tn, 'pr-before')
    await run()
    const before = receivedBy('rcp-reset').filter((r) => r.json.kind === 'payment')
    assert.equal(before.length, 1)
    const count = async (table: string, client: string) =>
      (await t.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE client_code = $1`, [client]))[0]?.n
    const routeBefore = await t.store.query(
      `SELECT url, state, version, verified_at, secret_ciphertext FROM receipt_routes WHERE client_code = 'rcp-reset'`,
    )

    const reset = await t.admin('POST', '/admin/v1/clients/rcp-reset/sandbox-reset', {})
    assert.equal(reset.status, 200, reset.body)
    assert.equal(reset.json.deleted.receipt_deliveries, 2)
    assert.equal(reset.json.deleted.receipt_delivery_attempts, 2)
    assert.equal(reset.json.deleted.receipt_routes, undefined)
    assert.equal(await count('receipt_deliveries', 'rcp-reset'), 0)
    assert.equal(await count('receipt_delivery_attempts', 'rcp-reset'), 0)
    assert.deepEqual(
      await t.store.query(`SELECT url, state, version, verified_at, secret_ciphertext FROM receipt_routes WHERE client_code = 'rcp-reset'`),
      routeBefore,
    )
    const read = await t.call('GET', '/v1/clients/rcp-reset/receipt-route', { key: tn.apiKey })
    assert.equal(read.json.state, 'verified')
    // Nothing is sent for the deleted data; a Payment confirmed after the reset is delivered under the same secret.
    await run()
    assert.equal(receivedBy('rcp-reset').length, before.length + 1)
    await confirmedPayment(tn, 'pr-after')
    await run()
    const after = receivedBy('rcp-reset').filter((r) => r.json.kind === 'payment')
    assert.deepEqual(
      after.map((r) => r.json.externalPaymentRequestId),
      ['pr-before', 'pr-after'],
    )
    assert.deepEqual(verify(after[1] as Received, secret), (after[1] as Received).json)

    // An unverified route: its test receipt (delivered or not) goes with the reset and is queued again.
    const un = await tenant('rcp-reset-un')
    assert.equal((await putRoute(un)).status, 201)
    const reset2 = await t.admin('POST', '/admin/v1/clients/rcp-reset-un/sandbox-reset', {})
    assert.equal(reset2.status, 200, reset2.body)
    assert.deepEqual(await t.store.query(`SELECT kind, status FROM receipt_deliveries WHERE client_code = 'rcp-reset-un'`), [
      { kind: 'test', status: 'pending' },
    ])
    await run()
    const tests = receivedBy('rcp-reset-un')
    assert.deepEqual(
      tests.map((r) => r.json.kind),
      ['test'],
    )
    const confirm = await t.call('POST', '/v1/clients/rcp-reset-un/receipt-route/confirm', {
      key: un.apiKey,
      body: { confirmationCode: tests[0]?.json.confirmationCode },
    })
    assert.equal(confirm.status, 200, confirm.body)
    assert.equal(confirm.json.state, 'verified')
  })
})
