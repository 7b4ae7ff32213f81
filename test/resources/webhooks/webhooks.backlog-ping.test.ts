import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { ResolvedAddress } from '../../../src/outbound/destination.ts'
import { sign } from '../../../src/resources/webhooks/secrets.ts'
import { startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { engineName } from '../../helpers/store.ts'
import { type Receiver, startReceiver } from '../../helpers/webhook-receiver.ts'

/**
 * The bounded backlog (issue 27 item 2) and the test ping (issue 24 item 2), on the real app and store, the
 * dispatcher driven one run at a time (runOnce) on a clock moved a budget window (60 s) forward between runs.
 * WEBHOOK_BACKLOG_LIMIT is 100 here.
 */
let offsetMs = 0
const clock = { now: () => new Date(Date.now() + offsetMs) }
const advance = (ms = 60_000) => {
  offsetMs += ms
}
const resolver = async (): Promise<ResolvedAddress[]> => {
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
}
const LIMIT = 100

let t: TestApp
let rx: Receiver

before(async () => {
  t = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1', WEBHOOK_BACKLOG_LIMIT: String(LIMIT) }, { clock, resolver })
  rx = await startReceiver()
})
after(async () => {
  await t.app.webhookDispatcher.stop()
  await rx.close()
  await t.close()
})

const run = () => t.app.webhookDispatcher.runOnce()
const forClient = (client: string) => rx.received.filter((r) => r.json?.clientCode === client)

async function setup(client: string) {
  const tenant = await t.tenant(client)
  const put = await t.call('PUT', `/v1/clients/${client}/webhook-endpoint`, { key: tenant.apiKey, body: { url: `${rx.url}/${client}` } })
  assert.equal(put.status, 201, put.body)
  return { tenant, secret: put.json.signingSecret as string }
}

/** `n` feed events of `n` distinct Customers after the client's head, as the write path leaves them. */
async function appendEvents(client: string, n: number) {
  await t.store.query(
    `WITH head AS (SELECT COALESCE((SELECT last_seq FROM feed_heads WHERE client_code = $1), 0) AS h)
     INSERT INTO change_events (client_code, seq, event_id, type, resource_type, resource_id, revision, occurred_at)
     SELECT $1, h + g, gen_random_uuid(), 'customer.created', 'customer', 'bulk-' || (h + g), 1, now() FROM head, generate_series(1, $2::int) g`,
    [client, n],
  )
  await t.store.query(
    `INSERT INTO feed_heads (client_code, last_seq) VALUES ($1, (SELECT max(seq) FROM change_events WHERE client_code = $1))
     ON CONFLICT (client_code) DO UPDATE SET last_seq = EXCLUDED.last_seq`,
    [client],
  )
}

async function metric(name: string): Promise<number> {
  const res = await t.admin('GET', '/metrics')
  assert.equal(res.status, 200)
  const m = new RegExp(`^${name} (\\d+)`, 'm').exec(res.body)
  assert.ok(m, `${name} not in /metrics`)
  return Number(m[1])
}

const endpointOf = async (tenant: Tenant) =>
  (await t.call('GET', `/v1/clients/${tenant.clientCode}/webhook-endpoint`, { key: tenant.apiKey })).json
const logOf = async (tenant: Tenant) =>
  (await t.call('GET', `/v1/clients/${tenant.clientCode}/webhook-endpoint/deliveries?limit=200`, { key: tenant.apiKey })).json

describe(`bounded backlog (${engineName})`, () => {
  test('past WEBHOOK_BACKLOG_LIMIT pending notifications the endpoint lags: GET, the log, an audit event and a metric say so; it drains and catches up, nothing lost', async () => {
    const { tenant } = await setup('bl-lag')
    assert.equal(await metric('irs_webhook_endpoints_lagging'), 0)
    await appendEvents('bl-lag', 150)
    await run()
    // The first run queued LIMIT (the backlog's room), sent 10 of them, and left 50 events in the feed.
    assert.equal(forClient('bl-lag').length, 10)
    let endpoint = await endpointOf(tenant)
    assert.equal(endpoint.lagging, true)
    assert.equal(typeof endpoint.laggingSince, 'string')
    let log = await logOf(tenant)
    assert.equal(log.lagging.backlogLimit, LIMIT)
    assert.equal(log.lagging.since, endpoint.laggingSince)
    assert.match(log.lagging.detail, /change feed/)
    assert.equal(log.data.length, LIMIT)
    assert.equal(log.data.filter((d: { status: string }) => d.status === 'pending').length, LIMIT - 10)
    assert.equal(await metric('irs_webhook_endpoints_lagging'), 1)
    const audit = async () =>
      (
        await t.store.query<{ actor: string; action: string; details: Record<string, unknown> }>(
          `SELECT actor, action, details FROM audit_events WHERE target_type = 'webhook_endpoint' AND client_code = 'bl-lag' ORDER BY seq`,
        )
      ).map((a) => [a.actor, a.action, a.details.backlogLimit ?? null])
    assert.deepEqual(await audit(), [
      ['integration:int-bl-lag', 'webhook_endpoint.created', null],
      ['service', 'webhook_endpoint.lagging', LIMIT],
    ])
    // Window after window: 10 sent, 10 more taken from the feed, until the feed is all queued.
    for (let i = 0; i < 20 && forClient('bl-lag').length < 150; i++) {
      advance()
      await run()
    }
    assert.equal(forClient('bl-lag').length, 150)
    assert.equal(new Set(forClient('bl-lag').map((r) => r.json.resource.id)).size, 150)
    endpoint = await endpointOf(tenant)
    assert.equal(endpoint.lagging, false)
    assert.equal(endpoint.laggingSince, null)
    log = await logOf(tenant)
    assert.equal(log.lagging, null)
    assert.equal(await metric('irs_webhook_endpoints_lagging'), 0)
    assert.deepEqual((await audit()).slice(2), [['service', 'webhook_endpoint.caught_up', LIMIT]])
    // The table holds what was delivered, never more than the limit pending at once.
    const [row] = await t.store.query<{ n: string }>(`SELECT count(*) AS n FROM webhook_deliveries WHERE client_code = 'bl-lag'`)
    assert.equal(Number(row?.n), 150)
  })

  test('the budget is 10 per endpoint per window across runs; a retry and a ping wait for the next window, the ping first', async () => {
    const { tenant } = await setup('bl-budget')
    await appendEvents('bl-budget', 25)
    await run()
    await run()
    assert.equal(forClient('bl-budget').length, 10)
    const firstLog = await logOf(tenant)
    const delivered = firstLog.data.find((d: { status: string }) => d.status === 'delivered')
    const retry = await t.call('POST', `/v1/clients/bl-budget/webhook-endpoint/deliveries/${delivered.deliveryId}/retry`, {
      key: tenant.apiKey,
    })
    assert.equal(retry.status, 202, retry.body)
    const ping = await t.call('POST', '/v1/clients/bl-budget/webhook-endpoint/test', { key: tenant.apiKey })
    assert.equal(ping.status, 202, ping.body)
    await run()
    assert.equal(forClient('bl-budget').length, 10)
    advance()
    await run()
    const window2 = forClient('bl-budget').slice(10)
    assert.equal(window2.length, 10)
    // The ping is claimed ahead of the 15 notifications still due (sent together: their order of arrival is not).
    assert.deepEqual(
      window2.filter((r) => r.json.type === 'ping').map((r) => r.json.eventId),
      [ping.json.eventId],
    )
  })
})

describe(`POST /webhook-endpoint/test (${engineName})`, () => {
  test('202 with the ping delivery; the ping arrives signed, with its body; the log shows it delivered', async () => {
    const { tenant, secret } = await setup('ping-a')
    const res = await t.call('POST', '/v1/clients/ping-a/webhook-endpoint/test', { key: tenant.apiKey })
    assert.equal(res.status, 202, res.body)
    assert.equal(res.json.type, 'ping')
    assert.deepEqual(res.json.resource, { type: 'webhook_endpoint', id: 'ping-a' })
    assert.equal(res.json.revision, 0)
    assert.equal(res.json.status, 'pending')
    assert.equal(res.json.attemptCount, 0)
    assert.match(res.json.deliveryId, /^dlv_[0-9a-f]{32}$/)
    // Asked again while it waits: the same ping.
    const again = await t.call('POST', '/v1/clients/ping-a/webhook-endpoint/test', { key: tenant.apiKey })
    assert.equal(again.status, 202)
    assert.equal(again.json.deliveryId, res.json.deliveryId)
    await run()
    const got = forClient('ping-a')
    assert.equal(got.length, 1)
    const r = got[0] as (typeof got)[number]
    assert.deepEqual(r.json, {
      clientCode: 'ping-a',
      eventId: res.json.eventId,
      type: 'ping',
      resource: { type: 'webhook_endpoint', id: 'ping-a' },
      revision: 0,
      occurredAt: res.json.occurredAt,
    })
    assert.equal(r.headers['service-event-id'], res.json.eventId)
    const header = String(r.headers['service-signature'])
    const ts = Number(/t=(\d+)/.exec(header)?.[1])
    assert.ok(header.includes(`v1=${sign(secret, ts, r.rawBody)}`))
    const log = await logOf(tenant)
    assert.deepEqual(
      log.data.map((d: { deliveryId: string; status: string; attemptCount: number }) => [d.deliveryId, d.status, d.attemptCount]),
      [[res.json.deliveryId, 'delivered', 1]],
    )
    // Another ping once the first was sent: a new one.
    const third = await t.call('POST', '/v1/clients/ping-a/webhook-endpoint/test', { key: tenant.apiKey })
    assert.notEqual(third.json.deliveryId, res.json.deliveryId)
  })

  test('a failing ping is attempted once: abandoned, the log says why, never retried', async () => {
    const { tenant } = await setup('ping-fail')
    rx.behave((r) => (r.json?.clientCode === 'ping-fail' ? { status: 500 } : { status: 204 }))
    const res = await t.call('POST', '/v1/clients/ping-fail/webhook-endpoint/test', { key: tenant.apiKey })
    assert.equal(res.status, 202)
    await run()
    for (let i = 0; i < 3; i++) {
      advance(3600_000)
      await run()
    }
    rx.behave(() => ({ status: 204 }))
    assert.equal(forClient('ping-fail').length, 1)
    const [d] = (await logOf(tenant)).data
    assert.equal(d.status, 'abandoned')
    assert.equal(d.attemptCount, 1)
    assert.equal(d.lastError, 'http_status 500')
    assert.equal(d.nextAttemptAt, null)
  })

  test('no endpoint: 404; a disabled endpoint: 409 webhook_endpoint_disabled, nothing queued', async () => {
    const tenant = await t.tenant('ping-none')
    const none = await t.call('POST', '/v1/clients/ping-none/webhook-endpoint/test', { key: tenant.apiKey })
    assert.equal(none.status, 404)
    assert.equal(none.json.type.endsWith('/webhook_endpoint_not_found'), true)
    const { tenant: off } = await setup('ping-off')
    assert.equal((await t.call('POST', '/v1/clients/ping-off/webhook-endpoint/disable', { key: off.apiKey })).status, 200)
    const refused = await t.call('POST', '/v1/clients/ping-off/webhook-endpoint/test', { key: off.apiKey })
    assert.equal(refused.status, 409)
    assert.equal(refused.json.type.endsWith('/webhook_endpoint_disabled'), true)
    assert.deepEqual((await logOf(off)).data, [])
  })
})
