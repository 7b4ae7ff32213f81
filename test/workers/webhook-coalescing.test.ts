import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { ResolvedAddress } from '../../src/outbound/destination.ts'
import { createWebhookDispatcher } from '../../src/workers/webhook-dispatcher.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { engineName, onPostgres } from '../helpers/store.ts'
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * Coalescing (issue 27 item 1): a pending notification of a resource is superseded when a newer revision of the
 * same resource is queued for the endpoint; only the newest is sent, the delivery log shows what was superseded
 * (folded into the newer delivery before any attempt, or `superseded` after one), and at-least-once holds for the
 * newest revision of every resource, with 16 concurrent writers and two dispatcher instances. The dispatcher's
 * clock is moved a window (WEBHOOK_INTERVAL_MS, 60 s) forward between runs to give each endpoint a new budget.
 */
let offsetMs = 0
const clock = { now: () => new Date(Date.now() + offsetMs) }
const advance = (ms = 60_000) => {
  offsetMs += ms
}
const resolver = async (): Promise<ResolvedAddress[]> => {
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
}

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

async function setup(client: string) {
  const tenant = await t.tenant(client)
  const put = await t.call('PUT', `/v1/clients/${client}/webhook-endpoint`, { key: tenant.apiKey, body: { url: `${rx.url}/${client}` } })
  assert.equal(put.status, 201, put.body)
  return tenant
}

const forClient = (client: string) => rx.received.filter((r) => r.json?.clientCode === client)

/** A PUT of Customer `id` whose name carries `n`: each new `n` is a new revision. */
async function putCustomer(tenant: Tenant, id: string, n: number) {
  const res = await t.call('PUT', `/v1/clients/${tenant.clientCode}/customers/${id}`, {
    key: tenant.apiKey,
    body: { type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `co/${id}` },
  })
  assert.ok(res.status === 201 || res.status === 200, res.body)
  return res.json.revision as number
}

interface Delivery {
  deliveryId: string
  eventId: string
  type: string
  resource: { type: string; id: string }
  revision: number
  status: string
  supersededBy: string | null
  supersedes: { notifications: number; fromRevision: number } | null
  attemptCount: number
}

async function deliveries(tenant: Tenant): Promise<Delivery[]> {
  const all: Delivery[] = []
  let cursor: string | null = null
  do {
    const q: string = cursor ? `&cursor=${cursor}` : ''
    const res = await t.call('GET', `/v1/clients/${tenant.clientCode}/webhook-endpoint/deliveries?limit=200${q}`, { key: tenant.apiKey })
    assert.equal(res.status, 200, res.body)
    all.push(...res.json.data)
    cursor = res.json.nextCursor
  } while (cursor)
  return all
}

async function feedEvents(tenant: Tenant) {
  const events: { eventId: string; resource: { type: string; id: string }; revision: number }[] = []
  let cursor: string | null = null
  do {
    const q: string = cursor ? `&after=${cursor}` : ''
    const res = await t.call('GET', `/v1/clients/${tenant.clientCode}/changes?limit=200${q}`, { key: tenant.apiKey })
    assert.equal(res.status, 200, res.body)
    events.push(...res.json.data)
    cursor = res.json.data.length > 0 ? res.json.nextCursor : null
  } while (cursor)
  return events
}

describe(`webhook coalescing (${engineName})`, () => {
  test('changes queued before an attempt fold into one notification of the newest revision; the log says what it supersedes', async () => {
    const tenant = await setup('co-fold')
    for (let n = 1; n <= 5; n++) assert.equal(await putCustomer(tenant, 'c-1', n), n)
    await putCustomer(tenant, 'c-2', 1)
    await run()
    const got = forClient('co-fold').map((r) => [r.json.resource.id, r.json.revision, r.json.type])
    assert.deepEqual(
      got.sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
      [
        ['c-1', 5, 'customer.updated'],
        ['c-2', 1, 'customer.created'],
      ],
    )
    const log = await deliveries(tenant)
    assert.equal(log.length, 2)
    const c1 = log.find((d) => d.resource.id === 'c-1') as Delivery
    assert.equal(c1.status, 'delivered')
    assert.equal(c1.revision, 5)
    assert.deepEqual(c1.supersedes, { notifications: 4, fromRevision: 1 })
    const feed = await feedEvents(tenant)
    assert.equal(c1.eventId, feed.find((e) => e.resource.id === 'c-1' && e.revision === 5)?.eventId)
    assert.equal(log.find((d) => d.resource.id === 'c-2')?.supersedes, null)
    // Every feed event is accounted for: its own delivery, or one of those a delivery says it supersedes.
    assert.equal(
      log.reduce((n, d) => n + 1 + (d.supersedes?.notifications ?? 0), 0),
      feed.length,
    )
  })

  test('a notification waiting for a retry is superseded by a newer revision: only the newer one is sent, the log names it', async () => {
    const tenant = await setup('co-retry')
    await putCustomer(tenant, 'c-1', 1)
    rx.behave((r) => (r.json?.clientCode === 'co-retry' && r.json.revision === 1 ? { status: 500 } : { status: 204 }))
    await run()
    let log = await deliveries(tenant)
    assert.deepEqual(
      log.map((d) => [d.revision, d.status, d.attemptCount]),
      [[1, 'pending', 1]],
    )
    const first = log[0] as Delivery
    await putCustomer(tenant, 'c-1', 2)
    await run()
    log = await deliveries(tenant)
    const second = log.find((d) => d.revision === 2) as Delivery
    assert.deepEqual(
      log.map((d) => [d.revision, d.status, d.attemptCount]),
      [
        [2, 'delivered', 1],
        [1, 'superseded', 1],
      ],
    )
    assert.equal(log.find((d) => d.revision === 1)?.supersededBy, second.deliveryId)
    assert.equal(log.find((d) => d.revision === 1)?.deliveryId, first.deliveryId)
    // The retry of revision 1 is never made: a minute (its retry) and more later, nothing more arrives.
    for (let i = 0; i < 3; i++) {
      advance(10 * 60_000)
      await run()
    }
    assert.deepEqual(
      forClient('co-retry').map((r) => r.json.revision),
      [1, 2],
    )
    rx.behave(() => ({ status: 204 }))
  })

  test('a revision queued and sent by another instance while the older one is being attempted: the older one, failing, is superseded', async () => {
    const tenant = await setup('co-flight')
    await putCustomer(tenant, 'c-1', 1)
    const second = createWebhookDispatcher({
      store: onPostgres ? t.db.open() : t.store,
      clock,
      resolver,
      allowLoopback: true,
      keyRing: t.app.services.webhooks.keyRing,
      intervalMs: 60_000,
      retryScheduleMs: [60_000],
    })
    let during: Promise<unknown> | null = null
    rx.behave((r) => {
      if (r.json?.clientCode !== 'co-flight' || r.json.revision !== 1) return { status: 204 }
      // While revision 1 is on the wire (its receiver never answers: a timeout), revision 2 is committed, derived and
      // sent by the other instance; revision 1's lease keeps it out of reach meanwhile.
      during = (async () => {
        await putCustomer(tenant, 'c-1', 2)
        await second.runOnce()
      })()
      return { hang: true }
    })
    await run()
    await during
    await second.stop()
    const log = await deliveries(tenant)
    assert.deepEqual(
      log.map((d) => [d.revision, d.status, d.attemptCount]),
      [
        [2, 'delivered', 1],
        [1, 'superseded', 1],
      ],
    )
    advance(10 * 60_000)
    await run()
    assert.deepEqual(
      forClient('co-flight').map((r) => r.json.revision),
      [1, 2],
    )
    rx.behave(() => ({ status: 204 }))
  })

  test('16 concurrent writers and two dispatcher instances: the newest revision of every resource arrives, none twice, nothing dropped', async () => {
    const tenant = await setup('co-race')
    const second = createWebhookDispatcher({
      store: onPostgres ? t.db.open() : t.store,
      clock,
      resolver,
      allowLoopback: true,
      keyRing: t.app.services.webhooks.keyRing,
      intervalMs: 60_000,
      retryScheduleMs: [60_000],
    })
    const RESOURCES = 12
    const WRITERS = 16
    const WRITES = 6
    let writing = true
    const refused: string[] = []
    const writers = Array.from({ length: WRITERS }, async (_, w) => {
      for (let i = 0; i < WRITES; i++) {
        const id = `c-${(w * 7 + i * 5) % RESOURCES}`
        const res = await t.call('PUT', `/v1/clients/co-race/customers/${id}`, {
          key: tenant.apiKey,
          body: { type: 'person', name: { firstName: 'Ada', lastName: `L${w * 100 + i}` }, sourceReference: `co/${id}` },
        })
        if (res.status !== 200 && res.status !== 201) refused.push(`${res.status} ${res.body}`)
      }
    })
    const dispatching = (async () => {
      while (writing) {
        await Promise.all([run(), second.runOnce()])
        advance()
        // Requests get their turn (on PGlite every query resolves through promises alone).
        await new Promise((r) => setTimeout(r, 20))
      }
    })()
    try {
      await Promise.all(writers)
    } finally {
      writing = false
      await dispatching
    }
    assert.deepEqual(refused, [])
    // Drain: windows until nothing is pending.
    for (let i = 0; i < 20; i++) {
      await Promise.all([run(), second.runOnce()])
      advance()
    }
    await second.stop()
    const feed = await feedEvents(tenant)
    assert.equal(feed.length, WRITERS * WRITES)
    const newest = new Map<string, number>()
    for (const e of feed) newest.set(e.resource.id, Math.max(newest.get(e.resource.id) ?? 0, e.revision))
    assert.equal(newest.size, RESOURCES)
    const got = forClient('co-race').map((r) => `${r.json.resource.id}@${r.json.revision}`)
    // Never the same revision twice (the receiver answers 204 to all: no retry explains a duplicate).
    assert.equal(new Set(got).size, got.length, got.join(' '))
    for (const [id, revision] of newest) assert.ok(got.includes(`${id}@${revision}`), `${id}@${revision} missing from ${got.join(' ')}`)
    const log = await deliveries(tenant)
    assert.deepEqual(
      log.filter((d) => d.status !== 'delivered' && d.status !== 'superseded'),
      [],
    )
    // Each delivery the log says delivered was received. (More may have been received: on a loaded machine an
    // attempt can outlive its 5 s timeout or its lease, and is then superseded rather than recorded delivered.)
    for (const d of log.filter((x) => x.status === 'delivered')) assert.ok(got.includes(`${d.resource.id}@${d.revision}`), d.deliveryId)
    // Nothing silently dropped: every feed event is a delivery or one a delivery says it supersedes.
    assert.equal(
      log.reduce((n, d) => n + 1 + (d.supersedes?.notifications ?? 0), 0),
      feed.length,
    )
    // Far fewer notifications than changes.
    assert.ok(got.length < feed.length, `${got.length} of ${feed.length}`)
  })

  test('replay still re-sends what the feed holds: the newest revision of each resource after the cursor', async () => {
    const tenant = await setup('co-replay')
    for (let n = 1; n <= 3; n++) {
      await putCustomer(tenant, 'c-1', n)
      await run()
    }
    await putCustomer(tenant, 'c-2', 1)
    await run()
    assert.deepEqual(
      forClient('co-replay').map((r) => `${r.json.resource.id}@${r.json.revision}`),
      ['c-1@1', 'c-1@2', 'c-1@3', 'c-2@1'],
    )
    const replay = await t.call('POST', '/v1/clients/co-replay/webhook-endpoint/replay', {
      key: tenant.apiKey,
      body: { after: Buffer.from(JSON.stringify({ s: '0' })).toString('base64url') },
    })
    assert.equal(replay.status, 202, replay.body)
    assert.deepEqual(replay.json, { queued: 2 })
    advance()
    await run()
    const again = forClient('co-replay')
      .slice(4)
      .map((r) => `${r.json.resource.id}@${r.json.revision}`)
      .sort()
    assert.deepEqual(again, ['c-1@3', 'c-2@1'])
    const feed = await feedEvents(tenant)
    assert.deepEqual(
      forClient('co-replay')
        .slice(4)
        .map((r) => r.json.eventId)
        .sort(),
      feed
        .filter((e) => (e.resource.id === 'c-1' && e.revision === 3) || e.resource.id === 'c-2')
        .map((e) => e.eventId)
        .sort(),
    )
    const log = await deliveries(tenant)
    assert.deepEqual(log.map((d) => [d.resource.id, d.revision, d.status, d.attemptCount]).sort(), [
      ['c-1', 1, 'delivered', 1],
      ['c-1', 2, 'delivered', 1],
      ['c-1', 3, 'delivered', 2],
      ['c-2', 1, 'delivered', 2],
    ])
  })
})
