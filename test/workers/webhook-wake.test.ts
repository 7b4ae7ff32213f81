import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * The webhook dispatcher is woken after a commit that appended feed events (src/app.ts, onFeedAppended): with its
 * schedule an hour long, a write's notification still arrives within seconds.
 */
let t: TestApp
let rx: Receiver

before(async () => {
  t = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1', WEBHOOK_INTERVAL_MS: '3600000' })
  rx = await startReceiver()
})
after(async () => {
  await t.app.webhookDispatcher.stop()
  await rx.close()
  await t.close()
})

test('a committed write wakes the dispatcher: its notification arrives long before the next scheduled run', async () => {
  const tenant = await t.tenant('wake-1')
  const put = await t.call('PUT', '/v1/clients/wake-1/webhook-endpoint', { key: tenant.apiKey, body: { url: `${rx.url}/wake-1` } })
  assert.equal(put.status, 201, put.body)
  t.app.webhookDispatcher.start()
  // The first run is the one at start; let it pass with nothing to send.
  await new Promise((r) => setTimeout(r, 300))
  assert.equal(rx.received.length, 0)
  const res = await t.call('PUT', '/v1/clients/wake-1/customers/c-1', {
    key: tenant.apiKey,
    body: { type: 'person', name: { firstName: 'Ada', lastName: 'L' }, sourceReference: 'wake/c/1' },
  })
  assert.equal(res.status, 201, res.body)
  const deadline = Date.now() + 5_000
  while (rx.received.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
  assert.equal(rx.received.length, 1)
  assert.equal(rx.received[0]?.json?.type, 'customer.created')
})

test('a retry from the delivery log and a test ping are attempted within seconds, not at the next scheduled run', async () => {
  const tenant = await t.tenant('wake-2')
  const put = await t.call('PUT', '/v1/clients/wake-2/webhook-endpoint', { key: tenant.apiKey, body: { url: `${rx.url}/wake-2` } })
  assert.equal(put.status, 201, put.body)
  t.app.webhookDispatcher.start()
  const mine = () => rx.received.filter((r) => r.json?.clientCode === 'wake-2')
  const waitFor = async (n: number) => {
    const deadline = Date.now() + 5_000
    while (mine().length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    assert.equal(mine().length, n)
  }
  const ping = await t.call('POST', '/v1/clients/wake-2/webhook-endpoint/test', { key: tenant.apiKey })
  assert.equal(ping.status, 202, ping.body)
  await waitFor(1)
  assert.equal(mine()[0]?.json?.type, 'ping')
  assert.equal(mine()[0]?.json?.eventId, ping.json.eventId)
  const retry = await t.call('POST', `/v1/clients/wake-2/webhook-endpoint/deliveries/${ping.json.deliveryId}/retry`, { key: tenant.apiKey })
  assert.equal(retry.status, 202, retry.body)
  await waitFor(2)
  assert.equal(mine()[1]?.json?.eventId, ping.json.eventId)
})
