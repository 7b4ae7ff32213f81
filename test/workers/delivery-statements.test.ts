import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { ResolvedAddress } from '../../src/outbound/destination.ts'
import { TEST_RECEIPT_DELAY_MS } from '../../src/resources/receipts/service.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { type CountingStore, countingStore } from '../helpers/counting-store.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { createTestDatabase, type TestDatabase } from '../helpers/store.ts'
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * Statements per delivery run (docs/performance.md, "Delivery runs"): a webhook run that sends one notification and
 * a receipt run that sends one receipt, each with one destination configured. A change in these numbers is a change
 * of the engine's path.
 */
let t: TestApp
let rx: Receiver
let db: TestDatabase
let counting: CountingStore
let offsetMs = 0
const clock = { now: () => new Date(Date.now() + offsetMs) }
const resolver = async (_name: string): Promise<ResolvedAddress[]> => {
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
}

before(async () => {
  db = await createTestDatabase()
  counting = countingStore(db.store)
  t = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1' }, { db: { ...db, store: counting }, resolver, clock })
  rx = await startReceiver()
})
after(async () => {
  await rx.close()
  await t.close()
  await db.drop()
})

const all = () => [...counting.inTransactions, ...counting.outside]
const show = () => `in transactions:\n${counting.inTransactions.join('\n---\n')}\noutside:\n${counting.outside.join('\n---\n')}`

test('a webhook run that sends one notification', async () => {
  const tn = await t.tenant('ds-webhook')
  const put = await t.call('PUT', '/v1/clients/ds-webhook/webhook-endpoint', { key: tn.apiKey, body: { url: `${rx.url}/ds-webhook` } })
  assert.equal(put.status, 201, put.body)
  await t.app.webhookDispatcher.runOnce()
  const res = await t.call('PUT', '/v1/clients/ds-webhook/customers/c-1', {
    key: tn.apiKey,
    body: { type: 'person', name: { firstName: 'Ada', lastName: 'L' }, sourceReference: 'ds/c/1' },
  })
  assert.equal(res.status, 201, res.body)
  const before = rx.received.length
  counting.reset()
  assert.equal(await t.app.webhookDispatcher.runOnce(), true)
  assert.equal(rx.received.length, before + 1)
  // Derivation, one transaction for the endpoint: BEGIN, the endpoint locked with its grant, feed head and pending
  // count, the deliveries derived, the stale ones superseded, COMMIT. The claim, one transaction: BEGIN, the endpoint
  // and its grant locked with its budget, the deliveries claimed, the budget, COMMIT. (19 before the engine: an
  // empty derivation chunk, and the endpoint and grant read again outside the claim.)
  assert.equal(counting.inTransactions.length, 10, show())
  // The sandbox clocks, the endpoints to derive, the endpoints with due deliveries, the attempts recorded.
  assert.equal(counting.outside.length, 4, show())
  assert.equal(all().length, 14)
})

test('a receipt run that sends one receipt', async () => {
  const tn = await t.tenant('ds-receipt', { grant: { receiptDeliveryOwner: 'service' } })
  const put = await t.call('PUT', '/v1/clients/ds-receipt/receipt-route', { key: tn.apiKey, body: { url: `${rx.url}/ds-receipt` } })
  assert.equal(put.status, 201, put.body)
  offsetMs += TEST_RECEIPT_DELAY_MS
  const before = rx.received.length
  counting.reset()
  assert.equal(await t.app.receiptDispatcher.runOnce(), true)
  assert.equal(rx.received.length, before + 1)
  // The claim, one transaction: BEGIN, the route and its grant locked, the test receipt claimed with its new code's
  // digest stored, COMMIT. (8 before the engine: the route and grant read outside the claim, a derivation chunk.)
  assert.equal(counting.inTransactions.length, 4, show())
  // The routes to derive, the clients with due receipts, the attempt recorded.
  assert.equal(counting.outside.length, 3, show())
})

test("a receipt run that derives and sends one Payment's receipt", async () => {
  const tn = await t.tenant('ds-paid', { grant: { receiptDeliveryOwner: 'service' } })
  const put = await t.call('PUT', '/v1/clients/ds-paid/receipt-route', { key: tn.apiKey, body: { url: `${rx.url}/ds-paid` } })
  assert.equal(put.status, 201, put.body)
  offsetMs += TEST_RECEIPT_DELAY_MS
  await t.app.receiptDispatcher.runOnce()
  const code = rx.received.at(-1)?.json.confirmationCode
  const ok = await t.call('POST', '/v1/clients/ds-paid/receipt-route/confirm', { key: tn.apiKey, body: { confirmationCode: code } })
  assert.equal(ok.status, 200, ok.body)
  const receivable = await payableReceivable(t, tn, 'rcv-ds')
  const pr = await t.call('PUT', '/v1/clients/ds-paid/payment-requests/pr-ds', {
    key: tn.apiKey,
    body: { externalReceivableId: receivable, amount: { amount: '10.00', currency: 'USD' } },
  })
  assert.equal(pr.status, 201, pr.body)
  const sim = await t.admin('POST', '/admin/v1/clients/ds-paid/payment-requests/pr-ds/simulate', { outcome: 'confirmed' })
  assert.equal(sim.status, 201, sim.body)
  const before = rx.received.length
  counting.reset()
  assert.equal(await t.app.receiptDispatcher.runOnce(), true)
  assert.equal(rx.received.length, before + 1)
  assert.equal(rx.received.at(-1)?.json.kind, 'payment')
  // Derivation: BEGIN, the route locked with its grant, the feed scanned with its Payments, the receipts inserted and
  // the sequence moved, COMMIT. The claim: BEGIN, the route and grant locked, the receipts claimed, COMMIT.
  assert.equal(counting.inTransactions.length, 9, show())
  // The routes to derive, the clients with due receipts, the attempts recorded.
  assert.equal(counting.outside.length, 3, show())
})
