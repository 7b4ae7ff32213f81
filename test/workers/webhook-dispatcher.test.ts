import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import Stripe from 'stripe'
import { SCOPES } from '../../src/domain/scopes.ts'
import type { ResolvedAddress } from '../../src/outbound/destination.ts'
import { runRetention } from '../../src/resources/retention/service.ts'
import { sign } from '../../src/resources/webhooks/secrets.ts'
import { createWebhookDispatcher } from '../../src/workers/webhook-dispatcher.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { engineName, onPostgres } from '../helpers/store.ts'
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * Webhook delivery end to end on a loopback receiver (WEBHOOK_DEV_ALLOW_LOOPBACK=1), through the real app
 * and store: the dispatcher's runs are driven one at a time (runOnce) and its clock is moved forward to
 * reach each retry, so nothing here waits for a schedule. Durations are never asserted.
 */
let offsetMs = 0
const clock = { now: () => new Date(Date.now() + offsetMs) }
const advance = (ms: number) => {
  offsetMs += ms
}

const PUBLIC = '93.184.215.14'
/** hooks.rebind.com answers a public address at configuration, then a private one. */
let rebindLookups = 0
const resolver = async (name: string): Promise<ResolvedAddress[]> => {
  if (name === 'hooks.rebind.com') return [{ address: rebindLookups++ === 0 ? PUBLIC : '10.0.0.7', family: 4 }]
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
}

const stripe = new Stripe('sk_test_unused')
const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `wh/c/${n}` })

let t: TestApp
let rx: Receiver

before(async () => {
  t = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1', WEBHOOK_RETRY_SCHEDULE: '1m,5m,30m,2h,6h,12h,24h' }, { clock, resolver })
  rx = await startReceiver()
})
after(async () => {
  await t.app.webhookDispatcher.stop()
  await rx.close()
  await t.close()
})

const run = () => t.app.webhookDispatcher.runOnce()

async function setup(client: string, opts: { scopes?: readonly (typeof SCOPES)[number][] } = {}) {
  const tenant = await t.tenant(client, opts.scopes ? { scopes: opts.scopes } : {})
  const put = await t.call('PUT', `/v1/clients/${client}/webhook-endpoint`, { key: tenant.apiKey, body: { url: `${rx.url}/${client}` } })
  assert.equal(put.status, 201, put.body)
  return { tenant, secret: put.json.signingSecret as string }
}

const forClient = (client: string) => rx.received.filter((r) => r.json?.clientCode === client)

async function putCustomer(tenant: Tenant, id: string, n = 1) {
  const res = await t.call('PUT', `/v1/clients/${tenant.clientCode}/customers/${id}`, { key: tenant.apiKey, body: customer(n) })
  assert.ok(res.status === 201 || res.status === 200, res.body)
}

async function deliveries(tenant: Tenant) {
  const res = await t.call('GET', `/v1/clients/${tenant.clientCode}/webhook-endpoint/deliveries?limit=200`, { key: tenant.apiKey })
  assert.equal(res.status, 200, res.body)
  return res.json.data as {
    deliveryId: string
    eventId: string
    status: string
    attemptCount: number
    attempts: { attempt: number; httpStatus: number | null; errorClass: string | null; durationMs: number }[]
  }[]
}

describe(`webhook delivery (${engineName})`, () => {
  test('a signed notification: exact body, the feed eventId, headers; Stripe verifies the signature', async () => {
    const { tenant, secret } = await setup('whd-sign')
    await putCustomer(tenant, 'c-0')
    const { tenant: t2, secret: s2 } = await setup('whd-sign2')
    await putCustomer(t2, 'c-1')
    await run()
    const got = forClient('whd-sign2')
    assert.equal(got.length, 1)
    const feed = await t.call('GET', '/v1/clients/whd-sign2/changes', { key: t2.apiKey })
    const event = feed.json.data[0]
    assert.deepEqual(got[0]?.json, {
      clientCode: 'whd-sign2',
      eventId: event.eventId,
      type: 'customer.created',
      resource: { type: 'customer', id: 'c-1' },
      revision: 1,
      occurredAt: event.occurredAt,
    })
    assert.deepEqual(Object.keys(got[0]?.json), ['clientCode', 'eventId', 'type', 'resource', 'revision', 'occurredAt'])
    assert.match(event.occurredAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    const h = got[0]?.headers ?? {}
    assert.equal(h['service-event-id'], event.eventId)
    assert.equal(h['content-type'], 'application/json')
    const signature = String(h['service-signature'])
    assert.match(signature, /^t=\d+,v1=[0-9a-f]{64}$/)
    // The official Stripe library accepts it (its header is Stripe-Signature; the value format is the same).
    const verified = stripe.webhooks.constructEvent(got[0]?.rawBody as string, signature, s2)
    assert.equal((verified as unknown as { eventId: string }).eventId, event.eventId)
    assert.throws(() => stripe.webhooks.constructEvent(got[0]?.rawBody as string, signature, secret))
    assert.throws(() => stripe.webhooks.constructEvent(`${got[0]?.rawBody} `, signature, s2))
    // Each endpoint gets its own client's notifications only, signed with its own secret.
    assert.deepEqual(
      forClient('whd-sign').map((r) => r.json.resource.id),
      ['c-0'],
    )
    const [d] = await deliveries(t2)
    assert.equal(d?.status, 'delivered')
    assert.equal(d?.attempts[0]?.httpStatus, 204)
  })

  test('only changes committed after configuration are notified', async () => {
    const tenant = await t.tenant('whd-late')
    await putCustomer(tenant, 'early')
    await run()
    const put = await t.call('PUT', '/v1/clients/whd-late/webhook-endpoint', { key: tenant.apiKey, body: { url: rx.url } })
    assert.equal(put.status, 201)
    await putCustomer(tenant, 'late')
    await run()
    assert.deepEqual(
      forClient('whd-late').map((r) => r.json.resource.id),
      ['late'],
    )
  })

  test('a 500 is retried on the schedule; the delivery log shows each attempt without URL or secret', async () => {
    const { tenant } = await setup('whd-500')
    let calls = 0
    rx.behave((r) => (r.json?.clientCode === 'whd-500' && calls++ === 0 ? { status: 500, body: 'boom' } : { status: 204 }))
    await putCustomer(tenant, 'c')
    await run()
    let [d] = await deliveries(tenant)
    assert.equal(d?.status, 'pending')
    assert.deepEqual(
      d?.attempts.map((a) => [a.attempt, a.httpStatus, a.errorClass]),
      [[1, 500, 'http_status']],
    )
    await run()
    assert.equal(forClient('whd-500').length, 1, 'not due before 1 minute')
    advance(61_000)
    await run()
    ;[d] = await deliveries(tenant)
    assert.equal(d?.status, 'delivered')
    assert.deepEqual(
      d?.attempts.map((a) => [a.attempt, a.httpStatus, a.errorClass]),
      [
        [1, 500, 'http_status'],
        [2, 204, null],
      ],
    )
    const log = await t.call('GET', '/v1/clients/whd-500/webhook-endpoint/deliveries', { key: tenant.apiKey })
    assert.ok(!log.body.includes('127.0.0.1') && !log.body.includes('whsec_') && !log.body.includes('v1='))
    rx.behave(() => ({ status: 204 }))
  })

  test('a receiver that stalls 6 seconds times out (5 s) and the retry delivers', async () => {
    const { tenant } = await setup('whd-stall')
    let calls = 0
    rx.behave((r) => (r.json?.clientCode === 'whd-stall' && calls++ === 0 ? { status: 204, delayMs: 6000 } : { status: 204 }))
    await putCustomer(tenant, 'c')
    await run()
    let [d] = await deliveries(tenant)
    assert.deepEqual(
      d?.attempts.map((a) => [a.httpStatus, a.errorClass]),
      [[null, 'timeout']],
    )
    advance(61_000)
    await run()
    ;[d] = await deliveries(tenant)
    assert.equal(d?.status, 'delivered')
    rx.behave(() => ({ status: 204 }))
  })

  test('a redirect is a failure and is never followed', async () => {
    const { tenant } = await setup('whd-redirect')
    rx.behave((r) => (r.path.endsWith('/whd-redirect') ? { status: 307, headers: { location: `${rx.url}/elsewhere` } } : { status: 204 }))
    await putCustomer(tenant, 'c')
    await run()
    const [d] = await deliveries(tenant)
    assert.equal(d?.status, 'pending')
    assert.deepEqual(
      d?.attempts.map((a) => [a.httpStatus, a.errorClass]),
      [[307, 'redirect']],
    )
    assert.equal(rx.received.filter((r) => r.path.endsWith('/elsewhere')).length, 0)
    rx.behave(() => ({ status: 204 }))
  })

  test('hostile receivers: a huge body and a body that trickles forever do not hold the worker', async () => {
    const { tenant } = await setup('whd-hostile')
    rx.behave((r) => {
      if (r.json?.clientCode !== 'whd-hostile') return { status: 204 }
      return r.json.resource.id === 'huge' ? { status: 200, body: Buffer.alloc(20 * 1024 * 1024, 120) } : { trickle: true, status: 200 }
    })
    await putCustomer(tenant, 'huge')
    await putCustomer(tenant, 'trickle')
    await run()
    const ds = await deliveries(tenant)
    assert.deepEqual(ds.map((d) => d.status).sort(), ['delivered', 'delivered'])
    rx.behave(() => ({ status: 204 }))
  })

  test('after 8 failed attempts the delivery is abandoned', async () => {
    const { tenant } = await setup('whd-abandon')
    rx.behave((r) => (r.json?.clientCode === 'whd-abandon' ? { status: 503 } : { status: 204 }))
    await putCustomer(tenant, 'c')
    for (let i = 0; i < 10; i++) {
      await run()
      advance(25 * 3600 * 1000)
    }
    const [d] = await deliveries(tenant)
    assert.equal(d?.status, 'abandoned')
    assert.equal(d?.attemptCount, 8)
    assert.equal(forClient('whd-abandon').length, 8)
    // A manual retry starts a new round, due now.
    rx.behave(() => ({ status: 204 }))
    const retried = await t.call('POST', `/v1/clients/whd-abandon/webhook-endpoint/deliveries/${d?.deliveryId}/retry`, {
      key: tenant.apiKey,
    })
    assert.equal(retried.status, 202)
    assert.equal(retried.json.status, 'pending')
    await run()
    const [again] = await deliveries(tenant)
    assert.equal(again?.status, 'delivered')
    assert.equal(again?.attemptCount, 9)
  })

  test('at most 10 notifications per endpoint per window (WEBHOOK_INTERVAL_MS), however many runs', async () => {
    const { tenant } = await setup('whd-cap')
    for (let i = 0; i < 13; i++) await putCustomer(tenant, `c${i}`)
    await run()
    assert.equal(forClient('whd-cap').length, 10)
    // Another run in the same window (a wake-up after a commit) sends nothing more: the budget is the store's.
    await run()
    assert.equal(forClient('whd-cap').length, 10)
    advance(60_000)
    await run()
    assert.equal(forClient('whd-cap').length, 13)
    assert.equal(new Set(forClient('whd-cap').map((r) => r.json.eventId)).size, 13)
  })

  test('rotation: two v1 signatures (new and previous secret) for 24 hours, then one', async () => {
    const { tenant, secret: old } = await setup('whd-rotate')
    const rotated = await t.call('POST', '/v1/clients/whd-rotate/webhook-endpoint/rotate-secret', { key: tenant.apiKey })
    const fresh = rotated.json.signingSecret as string
    await putCustomer(tenant, 'c1')
    await run()
    const first = forClient('whd-rotate')[0]
    const header = String(first?.headers['service-signature'])
    const m = /^t=(\d+),v1=([0-9a-f]{64}),v1=([0-9a-f]{64})$/.exec(header)
    assert.ok(m, header)
    const [, ts, v1new, v1old] = m as unknown as [string, string, string, string]
    assert.equal(v1new, sign(fresh, Number(ts), first?.rawBody as string))
    assert.equal(v1old, sign(old, Number(ts), first?.rawBody as string))
    // Receivers holding either secret accept it (Stripe compares against every v1).
    const tolerance = Math.ceil(offsetMs / 1000) + 300
    stripe.webhooks.constructEvent(first?.rawBody as string, header, fresh, tolerance)
    stripe.webhooks.constructEvent(first?.rawBody as string, header, old, tolerance)
    advance(24 * 3600 * 1000 + 1000)
    await putCustomer(tenant, 'c2')
    await run()
    const second = forClient('whd-rotate')[1]
    const header2 = String(second?.headers['service-signature'])
    assert.match(header2, /^t=\d+,v1=[0-9a-f]{64}$/)
    stripe.webhooks.constructEvent(second?.rawBody as string, header2, fresh, Math.ceil(offsetMs / 1000) + 300)
    assert.throws(() => stripe.webhooks.constructEvent(second?.rawBody as string, header2, old, Math.ceil(offsetMs / 1000) + 300))
  })

  test('disable stops delivery; a PUT re-enables it for changes committed afterwards', async () => {
    const { tenant } = await setup('whd-disable')
    await t.call('POST', '/v1/clients/whd-disable/webhook-endpoint/disable', { key: tenant.apiKey })
    await putCustomer(tenant, 'while-disabled')
    await run()
    assert.equal(forClient('whd-disable').length, 0)
    await t.call('PUT', '/v1/clients/whd-disable/webhook-endpoint', { key: tenant.apiKey, body: { url: `${rx.url}/whd-disable` } })
    await putCustomer(tenant, 'after-enable')
    await run()
    assert.deepEqual(
      forClient('whd-disable').map((r) => r.json.resource.id),
      ['after-enable'],
    )
    // A replay from the start of the feed queues the change committed while disabled, and the later one again.
    const replay = await t.call('POST', '/v1/clients/whd-disable/webhook-endpoint/replay', {
      key: tenant.apiKey,
      body: { after: Buffer.from(JSON.stringify({ s: '0' })).toString('base64url') },
    })
    assert.equal(replay.status, 202)
    assert.deepEqual(replay.json, { queued: 2 })
    await run()
    assert.deepEqual(
      forClient('whd-disable')
        .map((r) => r.json.resource.id)
        .sort(),
      ['after-enable', 'after-enable', 'while-disabled'],
    )
  })

  test('grant revocation: the endpoint is disabled grant_revoked and nothing is sent', async () => {
    const { tenant } = await setup('whd-revoke')
    rx.behave((r) => (r.json?.clientCode === 'whd-revoke' ? { status: 500 } : { status: 204 }))
    await putCustomer(tenant, 'c')
    await run()
    assert.equal(forClient('whd-revoke').length, 1)
    await t.admin('POST', `/admin/v1/integrations/${tenant.integrationId}/grants/whd-revoke/revoke`, {})
    advance(61_000)
    await run()
    assert.equal(forClient('whd-revoke').length, 1)
    // Revoked behind the service's back (no hook ran): the re-check before the attempt catches it.
    const other = await setup('whd-revoke2')
    await putCustomer(other.tenant, 'c')
    await t.store.query(`UPDATE grants SET status = 'revoked' WHERE client_code = 'whd-revoke2'`)
    await run()
    assert.equal(forClient('whd-revoke2').length, 0)
    const [row] = await t.store.query<{ status: string; disabled_reason: string }>(
      `SELECT status, disabled_reason FROM webhook_endpoints WHERE client_code = 'whd-revoke2'`,
    )
    assert.deepEqual({ ...row }, { status: 'disabled', disabled_reason: 'grant_revoked' })
    rx.behave(() => ({ status: 204 }))
  })

  test('a resource type the grant cannot read sends nothing (at derivation, and when the scope goes later)', async () => {
    const { tenant } = await setup('whd-scope', { scopes: ['customers:write', 'webhooks:manage', 'receivables:read'] })
    await putCustomer(tenant, 'c')
    await run()
    assert.equal(forClient('whd-scope').length, 0)
    assert.deepEqual(await deliveries(tenant), [])
    const later = await setup('whd-scope2')
    await putCustomer(later.tenant, 'c')
    // Derived while the grant could read customers...
    await t.store.query(`UPDATE webhook_endpoints SET scanned_seq = scanned_seq WHERE client_code = 'whd-scope2'`)
    rx.behave((r) => (r.json?.clientCode === 'whd-scope2' ? { status: 500 } : { status: 204 }))
    await run()
    assert.equal(forClient('whd-scope2').length, 1)
    // ...then the scope is withdrawn: the retry sends nothing and the delivery is skipped.
    await t.admin('PUT', `/admin/v1/integrations/${later.tenant.integrationId}/grants/whd-scope2`, {
      scopes: SCOPES.filter((s) => s !== 'customers:read'),
    })
    advance(61_000)
    await run()
    assert.equal(forClient('whd-scope2').length, 1)
    const [d] = await deliveries(later.tenant)
    assert.equal(d?.status, 'skipped')
    rx.behave(() => ({ status: 204 }))
  })

  test('DNS rebinding: a name that resolves to a private address before an attempt disables the endpoint; nothing is sent', async () => {
    const tenant = await t.tenant('whd-rebind')
    const put = await t.call('PUT', '/v1/clients/whd-rebind/webhook-endpoint', {
      key: tenant.apiKey,
      body: { url: 'https://hooks.rebind.com/irs' },
    })
    assert.equal(put.status, 201, put.body)
    await putCustomer(tenant, 'c')
    await run()
    const got = await t.call('GET', '/v1/clients/whd-rebind/webhook-endpoint', { key: tenant.apiKey })
    assert.deepEqual(
      { status: got.json.status, disabledReason: got.json.disabledReason },
      {
        status: 'disabled',
        disabledReason: 'destination_unsafe',
      },
    )
    const [d] = await deliveries(tenant)
    assert.equal(d?.status, 'pending')
    assert.equal(d?.attemptCount, 0)
  })

  test('delivery log filters by eventId and pages with a cursor', async () => {
    const { tenant } = await setup('whd-log')
    for (let i = 0; i < 3; i++) await putCustomer(tenant, `c${i}`)
    await run()
    const all = await deliveries(tenant)
    assert.equal(all.length, 3)
    const one = await t.call('GET', `/v1/clients/whd-log/webhook-endpoint/deliveries?eventId=${all[1]?.eventId}`, { key: tenant.apiKey })
    assert.deepEqual(
      one.json.data.map((d: { deliveryId: string }) => d.deliveryId),
      [all[1]?.deliveryId],
    )
    const p1 = await t.call('GET', '/v1/clients/whd-log/webhook-endpoint/deliveries?limit=2', { key: tenant.apiKey })
    assert.equal(p1.json.data.length, 2)
    const p2 = await t.call('GET', `/v1/clients/whd-log/webhook-endpoint/deliveries?limit=2&cursor=${p1.json.nextCursor}`, {
      key: tenant.apiKey,
    })
    assert.deepEqual(
      [...p1.json.data, ...p2.json.data].map((d: { deliveryId: string }) => d.deliveryId),
      all.map((d) => d.deliveryId),
    )
    assert.equal(p2.json.nextCursor, null)
  })

  test('two instances running at once never send the same notification twice', async () => {
    const { tenant } = await setup('whd-multi')
    for (let i = 0; i < 40; i++) await putCustomer(tenant, `c${i}`)
    // A second instance: its own dispatcher (on PostgreSQL its own connection pool) over the same store.
    const second = createWebhookDispatcher({
      store: onPostgres ? t.db.open() : t.store,
      clock,
      resolver,
      allowLoopback: true,
      keyRing: t.app.services.webhooks.keyRing,
      intervalMs: 60_000,
      retryScheduleMs: [60_000],
    })
    // The budget (10 per endpoint per window) is the store's, shared by both: 40 notifications take 4 windows.
    for (let i = 0; i < 4; i++) {
      await Promise.all([run(), second.runOnce()])
      assert.equal(forClient('whd-multi').length, 10 * (i + 1))
      advance(60_000)
    }
    await second.stop()
    const ids = forClient('whd-multi').map((r) => r.json.resource.id)
    assert.equal(ids.length, 40)
    assert.equal(new Set(ids).size, 40)
  })

  test('Receivable changes are notified with their revision; the body carries no financial detail', async () => {
    const { tenant } = await setup('whd-recv')
    await putCustomer(tenant, 'owner')
    const receivable = {
      financialType: 'loan_balance',
      sourceRevision: 1,
      recoverableAmount: { amount: '10.00', currency: 'USD' },
      creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
      dueDate: '2026-01-01',
      responsibleCustomers: [{ externalCustomerId: 'owner', role: 'primary' }],
      sourceReference: 'wh/r/1',
    }
    const created = await t.call('PUT', '/v1/clients/whd-recv/receivables/r-1', { key: tenant.apiKey, body: receivable })
    assert.equal(created.status, 201, created.body)
    // Sent before the next change (a newer revision queued before this one is sent would supersede it).
    await run()
    const paused = await t.call('POST', '/v1/clients/whd-recv/receivables/r-1/pause', {
      key: tenant.apiKey,
      body: { effectiveAt: '2026-02-01T00:00:00Z', reason: 'hardship_review' },
    })
    await run()
    // Delivery is unordered (a run sends an endpoint's notifications at once): compare in revision order.
    const got = forClient('whd-recv')
      .filter((r) => r.json.resource.type === 'receivable')
      .sort((x, y) => x.json.revision - y.json.revision)
    const feed = await t.call('GET', '/v1/clients/whd-recv/changes?limit=200', { key: tenant.apiKey })
    const feedReceivable = feed.json.data.filter((e: { resource: { type: string } }) => e.resource.type === 'receivable')
    assert.deepEqual(
      got.map((r) => [r.json.type, r.json.revision, r.json.eventId]),
      feedReceivable.map((e: { type: string; revision: number; eventId: string }) => [e.type, e.revision, e.eventId]),
    )
    assert.equal(got[0]?.json.type, 'receivable.created')
    assert.equal(paused.status, 200, paused.body)
    assert.deepEqual(
      got.map((r) => [r.json.type, r.json.revision]),
      [
        ['receivable.created', 1],
        ['receivable.updated', 2],
      ],
    )
    for (const r of got) assert.ok(!/10\.00|USD|l\/1|owner/.test(r.rawBody), r.rawBody)
  })

  test('delivery records are kept 30 days: the retention worker purges older ones with their attempts', async () => {
    const { tenant } = await setup('whd-retain')
    await putCustomer(tenant, 'old')
    await putCustomer(tenant, 'new')
    await run()
    await t.store.query(
      `UPDATE webhook_deliveries SET created_at = now() - interval '31 days' WHERE client_code = 'whd-retain' AND resource_id = 'old'`,
    )
    await runRetention(t.store)
    const left = await deliveries(tenant)
    assert.deepEqual(
      left.map((d) => d.status),
      ['delivered'],
    )
    const attempts = await t.store.query(`SELECT delivery_id FROM webhook_attempts WHERE client_code = 'whd-retain'`)
    assert.equal(attempts.length, 1)
  })
})
