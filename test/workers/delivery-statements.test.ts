import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { ResolvedAddress } from '../../src/outbound/destination.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { type CountingStore, countingStore } from '../helpers/counting-store.ts'
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
const resolver = async (_name: string): Promise<ResolvedAddress[]> => {
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
}

before(async () => {
  db = await createTestDatabase()
  counting = countingStore(db.store)
  t = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1' }, { db: { ...db, store: counting }, resolver })
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
  console.log('WEBHOOK', counting.inTransactions.length, counting.outside.length, all().length)
  console.log(show())
})

test('a receipt run that sends one receipt', async () => {
  const tn = await t.tenant('ds-receipt', { grant: { receiptDeliveryOwner: 'service' } })
  const put = await t.call('PUT', '/v1/clients/ds-receipt/receipt-route', { key: tn.apiKey, body: { url: `${rx.url}/ds-receipt` } })
  assert.equal(put.status, 201, put.body)
  const before = rx.received.length
  counting.reset()
  assert.equal(await t.app.receiptDispatcher.runOnce(), true)
  assert.equal(rx.received.length, before + 1)
  console.log('RECEIPT', counting.inTransactions.length, counting.outside.length, all().length)
  console.log(show())
})
