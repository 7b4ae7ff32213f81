import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { sha256Hex } from '../../src/domain/canonical.ts'
import { TEST_RECEIPT_DELAY_MS, TEST_RECEIPT_RETRY_MS } from '../../src/resources/receipts/service.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { engineName } from '../helpers/store.ts'
import { type Received, type Receiver, startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * Issue 33, items 1 to 3 (docs/decisions.md, "Receipt route confirmation codes"): the confirmation code is random and
 * derivable from nothing the API returns; the test receipt goes only after the PUT's answer, and is retried within
 * seconds; receipts of what happened while the route was unverified are delivered once it is verified, and the
 * receipt-delivery read says what they wait for. The dispatcher's runs are driven one at a time (runOnce) on a clock
 * moved by hand; no duration is asserted.
 */
let offsetMs = 0
const clock = { now: () => new Date(Date.now() + offsetMs) }
const advance = (ms: number) => {
  offsetMs += ms
}
const usd = (amount: string) => ({ amount, currency: 'USD' })

let t: TestApp
let rx: Receiver
before(async () => {
  t = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1', WEBHOOK_RETRY_SCHEDULE: '1m,5m,30m,2h,6h,12h,24h' }, { clock })
  rx = await startReceiver()
})
after(async () => {
  await rx.close()
  await t.close()
})

const run = () => t.app.receiptDispatcher.runOnce()
const tests = (client: string) => rx.received.filter((r) => r.path === `/hooks/${client}` && r.json?.kind === 'test')
const put = (tn: Tenant) =>
  t.call('PUT', `/v1/clients/${tn.clientCode}/receipt-route`, { key: tn.apiKey, body: { url: `${rx.url}/${tn.clientCode}` } })
const confirm = (tn: Tenant, confirmationCode: string) =>
  t.call('POST', `/v1/clients/${tn.clientCode}/receipt-route/confirm`, { key: tn.apiKey, body: { confirmationCode } })
const tenant = (client: string) => t.tenant(client, { grant: { receiptDeliveryOwner: 'service' } })
/** The code as it was derived before (issue 33 item 1): from the signing secret the PUT returns. */
const derivedCode = (secret: string, version: number) =>
  `rcc_${createHmac('sha256', secret).update(`receipt-route-confirmation/${version}`).digest('base64url').slice(0, 22)}`

describe(`the receipt route's proof (${engineName})`, () => {
  test('the code is random, stored only as a digest, and what the PUT returns derives nothing that verifies', async () => {
    const tn = await tenant('rrp-forge')
    const res = await put(tn)
    assert.equal(res.status, 201, res.body)
    // Before the test receipt is sent there is no code at all: the secret's derivation is refused.
    const forged = await confirm(tn, derivedCode(res.json.signingSecret, 1))
    assert.equal(forged.status, 422, forged.body)
    assert.deepEqual(
      forged.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer]),
      [['custom', '/confirmationCode']],
    )
    const [row] = await t.store.query<{ confirmation_digest: string | null }>(
      `SELECT confirmation_digest FROM receipt_routes WHERE client_code = 'rrp-forge'`,
    )
    assert.equal(row?.confirmation_digest, null)
    advance(TEST_RECEIPT_DELAY_MS)
    assert.equal(await run(), true)
    const [sent] = tests('rrp-forge') as [Received]
    assert.match(sent.json.confirmationCode, /^rcc_[A-Za-z0-9_-]{22}$/)
    assert.notEqual(sent.json.confirmationCode, derivedCode(res.json.signingSecret, 1))
    const [stored] = await t.store.query<{ confirmation_digest: string }>(
      `SELECT confirmation_digest FROM receipt_routes WHERE client_code = 'rrp-forge'`,
    )
    assert.equal(stored?.confirmation_digest, sha256Hex(sent.json.confirmationCode))
    assert.ok(
      !JSON.stringify(await t.store.query(`SELECT * FROM receipt_deliveries WHERE client_code = 'rrp-forge'`)).includes(
        sent.json.confirmationCode,
      ),
    )
    // Still refused after the send; nothing changed.
    assert.equal((await confirm(tn, derivedCode(res.json.signingSecret, 1))).status, 422)
    const read = await t.call('GET', '/v1/clients/rrp-forge/receipt-route', { key: tn.apiKey })
    assert.equal(read.json.state, 'unverified')
    const ok = await confirm(tn, sent.json.confirmationCode)
    assert.equal(ok.status, 200, ok.body)
    assert.equal(ok.json.state, 'verified')
  })

  test('a route whose test receipt never arrived cannot be verified (the only attempt refused)', async () => {
    const tn = await tenant('rrp-refused')
    const res = await t.call('PUT', '/v1/clients/rrp-refused/receipt-route', {
      key: tn.apiKey,
      body: { url: 'http://127.0.0.1:1/nothing-listens' },
    })
    assert.equal(res.status, 201, res.body)
    advance(TEST_RECEIPT_DELAY_MS)
    assert.equal(await run(), true)
    for (const code of [derivedCode(res.json.signingSecret, 1), derivedCode(res.json.signingSecret, 0), 'rcc_AAAAAAAAAAAAAAAAAAAAAA']) {
      assert.equal((await confirm(tn, code)).status, 422)
    }
    const read = await t.call('GET', '/v1/clients/rrp-refused/receipt-route', { key: tn.apiKey })
    assert.equal(read.json.state, 'unverified')
  })

  test("the test receipt goes after the PUT's answer, and a refused one is tried again within seconds with a new code", async () => {
    const tn = await tenant('rrp-soon')
    // The receiver has not stored the secret yet: it refuses the first attempt.
    rx.behave((r) => (r.path === '/hooks/rrp-soon' && tests('rrp-soon').length === 1 ? { status: 400 } : { status: 204 }))
    assert.equal((await put(tn)).status, 201)
    // A run at once (the PUT has just answered) sends nothing: the test receipt is due a second after the commit.
    assert.equal(await run(), false)
    assert.equal(tests('rrp-soon').length, 0)
    advance(TEST_RECEIPT_DELAY_MS)
    assert.equal(await run(), true)
    assert.equal(tests('rrp-soon').length, 1)
    // Not due again halfway to its retry interval, due at it (seconds, not the minute of the webhook schedule).
    advance((TEST_RECEIPT_RETRY_MS[0] as number) / 2)
    assert.equal(await run(), false)
    advance((TEST_RECEIPT_RETRY_MS[0] as number) / 2)
    assert.equal(await run(), true)
    const [first, second] = tests('rrp-soon') as [Received, Received]
    assert.equal(second.json.receiptId, first.json.receiptId)
    assert.notEqual(second.json.confirmationCode, first.json.confirmationCode)
    // Only the code sent last verifies.
    assert.equal((await confirm(tn, first.json.confirmationCode)).status, 422)
    assert.equal((await confirm(tn, second.json.confirmationCode)).json.state, 'verified')
    rx.behave(() => ({ status: 204 }))
  })

  test('receipts of Payments confirmed while the route was unverified are delivered once it is verified', async () => {
    const tn = await tenant('rrp-held')
    assert.equal((await put(tn)).status, 201)
    const receivable = await payableReceivable(t, tn, 'rcv-held')
    const pr = await t.call('PUT', '/v1/clients/rrp-held/payment-requests/pr-held', {
      key: tn.apiKey,
      body: { externalReceivableId: receivable, amount: usd('30.00') },
    })
    assert.equal(pr.status, 201, pr.body)
    const sim = await t.admin('POST', '/admin/v1/clients/rrp-held/payment-requests/pr-held/simulate', { outcome: 'confirmed' })
    assert.equal(sim.status, 201, sim.body)
    const view = async () =>
      (await t.call('GET', '/v1/clients/rrp-held/payment-requests/pr-held/receipt-delivery', { key: tn.apiKey })).json
    const waiting = await view()
    assert.equal(waiting.waitingFor, 'route_verification')
    assert.deepEqual(waiting.capability, {
      state: 'disabled',
      disabledReason: 'no_verified_route',
      unverifiedRoutes: [{ route: 'vendor_receipt_posting', missingProof: 'source_posting_confirmation' }],
    })
    assert.deepEqual(waiting.deliveryAttempts, [])
    advance(TEST_RECEIPT_DELAY_MS)
    await run()
    // Unverified: the test receipt only.
    assert.deepEqual(
      rx.received.filter((r) => r.path === '/hooks/rrp-held').map((r) => r.json.kind),
      ['test'],
    )
    const [sent] = tests('rrp-held') as [Received]
    assert.equal((await confirm(tn, sent.json.confirmationCode)).status, 200)
    await run()
    const payments = rx.received.filter((r) => r.path === '/hooks/rrp-held' && r.json.kind === 'payment')
    assert.equal(payments.length, 1)
    assert.equal(payments[0]?.json.externalPaymentRequestId, 'pr-held')
    assert.deepEqual(payments[0]?.json.amount, usd('30.00'))
    const delivered = await view()
    assert.equal(delivered.waitingFor, null)
    assert.deepEqual(delivered.capability, { state: 'enabled', disabledReason: null, unverifiedRoutes: [] })
    assert.deepEqual(
      delivered.deliveryAttempts.map((a: { kind: string; outcome: string }) => [a.kind, a.outcome]),
      [['payment', 'delivered']],
    )
  })
})
