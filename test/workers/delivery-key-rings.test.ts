import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { TEST_RECEIPT_DELAY_MS } from '../../src/resources/receipts/service.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { createTestDatabase, engineName, type TestDatabase } from '../helpers/store.ts'
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * Issue 33 item 9, the delivery side: two instances on one store, each with its own WEBHOOK_SECRET_KEY (a rolling
 * rotation caught halfway, or an instance started with another key). The instance whose ring cannot open a target's
 * secret disables nothing and sends nothing; it hands the claim back and the instance that can open it sends it.
 */
const K1 = '11'.repeat(32)
const K2 = '22'.repeat(32)
let offsetMs = 0
const clock = { now: () => new Date(Date.now() + offsetMs) }

let db: TestDatabase
let a: TestApp
let b: TestApp
let rx: Receiver

before(async () => {
  db = await createTestDatabase()
  const env = { WEBHOOK_DEV_ALLOW_LOOPBACK: '1' }
  a = await startTestApp({ ...env, WEBHOOK_SECRET_KEY: K1 }, { db, clock })
  b = await startTestApp({ ...env, WEBHOOK_SECRET_KEY: K2 }, { db, clock })
  rx = await startReceiver()
})
after(async () => {
  await rx.close()
  await b.app.app.close()
  await a.app.app.close()
  await db.drop()
})

describe(`a secret another instance's key ring encrypted (${engineName})`, () => {
  test('webhooks: the instance that cannot open it leaves the endpoint enabled and the delivery to the other', async () => {
    const tn = await a.tenant('kr2-hook')
    const put = await a.call('PUT', '/v1/clients/kr2-hook/webhook-endpoint', { key: tn.apiKey, body: { url: `${rx.url}/kr2-hook` } })
    assert.equal(put.status, 201, put.body)
    const res = await a.call('PUT', '/v1/clients/kr2-hook/customers/c-1', {
      key: tn.apiKey,
      body: { type: 'person', name: { firstName: 'Ada', lastName: 'L' }, sourceReference: 'kr2/c/1' },
    })
    assert.equal(res.status, 201, res.body)
    assert.equal(await b.app.webhookDispatcher.runOnce(), false)
    assert.equal(rx.received.filter((r) => r.path === '/hooks/kr2-hook').length, 0)
    const [endpoint] = await db.store.query<{ status: string; disabled_reason: string | null }>(
      `SELECT status, disabled_reason FROM webhook_endpoints WHERE client_code = 'kr2-hook'`,
    )
    assert.deepEqual(endpoint, { status: 'enabled', disabled_reason: null })
    const rows = await db.store.query(
      `SELECT status, attempt_count, lease_token, last_error FROM webhook_deliveries WHERE client_code = 'kr2-hook'`,
    )
    assert.deepEqual(rows, [{ status: 'pending', attempt_count: 0, lease_token: null, last_error: null }])
    assert.deepEqual(await db.store.query(`SELECT action FROM audit_events WHERE client_code = 'kr2-hook' AND actor = 'service'`), [])
    // The instance whose ring opens it sends it, signed as configured.
    assert.equal(await a.app.webhookDispatcher.runOnce(), true)
    const got = rx.received.filter((r) => r.path === '/hooks/kr2-hook')
    assert.equal(got.length, 1)
    assert.equal(got[0]?.json.resource.id, 'c-1')
  })

  test('receipts: the route is not disabled; its test receipt goes from the instance that can open the secret', async () => {
    const tn = await a.tenant('kr2-rcpt', { grant: { receiptDeliveryOwner: 'service' } })
    const put = await a.call('PUT', '/v1/clients/kr2-rcpt/receipt-route', { key: tn.apiKey, body: { url: `${rx.url}/kr2-rcpt` } })
    assert.equal(put.status, 201, put.body)
    offsetMs += TEST_RECEIPT_DELAY_MS
    assert.equal(await b.app.receiptDispatcher.runOnce(), false)
    const route = await a.call('GET', '/v1/clients/kr2-rcpt/receipt-route', { key: tn.apiKey })
    assert.deepEqual(route.json, { url: `${rx.url}/kr2-rcpt`, state: 'unverified' })
    const rows = await db.store.query(`SELECT status, attempt_count, lease_token FROM receipt_deliveries WHERE client_code = 'kr2-rcpt'`)
    assert.deepEqual(rows, [{ status: 'pending', attempt_count: 0, lease_token: null }])
    assert.equal(await a.app.receiptDispatcher.runOnce(), true)
    const got = rx.received.filter((r) => r.path === '/hooks/kr2-rcpt')
    assert.equal(got.length, 1)
    assert.equal(
      (
        await a.call('POST', '/v1/clients/kr2-rcpt/receipt-route/confirm', {
          key: tn.apiKey,
          body: { confirmationCode: got[0]?.json.confirmationCode },
        })
      ).status,
      200,
    )
  })
})
