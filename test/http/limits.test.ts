import assert from 'node:assert/strict'
import net from 'node:net'
import { after, describe, test } from 'node:test'
import { digestSecret } from '../../src/access/keys.ts'
import { createGate } from '../../src/http/limits.ts'
import { problemCode, startTestApp, type TestApp } from '../helpers/app.ts'
import { slotTaken, slowPut } from '../helpers/slow-request.ts'
import { createTestDatabase, onPostgres } from '../helpers/store.ts'

/**
 * The limits on both stores (PostgreSQL: in the database, exact across instances; PGlite: in the one process
 * that owns the store). Windows are calendar minutes of the injected clock: the tests move the clock, they never
 * sleep to a minute boundary.
 */
const SPEC_LIMITS = { RATE_LIMIT_PER_MINUTE: '60', CONCURRENCY_PER_KEY: '1' }
const body = JSON.stringify({ type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' })

/** A clock the test moves by hand; every app of a test shares it, as instances share wall time. */
function manualClock(iso: string) {
  let now = Date.parse(iso)
  return {
    now: () => new Date(now),
    set(to: string) {
      now = Date.parse(to)
    },
    advance(ms: number) {
      now += ms
    },
  }
}

const apps: TestApp[] = []
after(async () => {
  for (const a of apps.reverse()) await a.close()
})

async function app(env: Record<string, string> = {}, clock = manualClock('2026-11-23T10:00:05.000Z')) {
  const t = await startTestApp({ ...SPEC_LIMITS, ...env }, { clock })
  apps.push(t)
  return { t, clock }
}

async function listen(t: TestApp): Promise<number> {
  await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  return (t.app.app.server.address() as net.AddressInfo).port
}

/**
 * `n` requests sent at once over real connections: every connection is open and accepted by the server first
 * (as a client's keep-alive connections are), then every request is written in the same tick.
 */
async function concurrently(t: TestApp, n: number, path: (i: number) => string, key: string, method = 'GET') {
  const server = t.app.app.server
  const port = (server.address() as net.AddressInfo).port
  let accepted = 0
  const onConnection = () => {
    accepted++
  }
  server.on('connection', onConnection)
  const sockets = await Promise.all(
    Array.from({ length: n }, async () => {
      const socket = net.connect(port, '127.0.0.1')
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
      let data = ''
      socket.on('data', (d) => {
        data += d.toString()
      })
      return { socket, closed: new Promise<void>((resolve) => socket.once('close', () => resolve())), data: () => data }
    }),
  )
  for (let i = 0; i < 500 && accepted < n; i++) await new Promise((r) => setTimeout(r, 2))
  server.off('connection', onConnection)
  const payload = method === 'PUT' ? body : ''
  for (const [i, s] of sockets.entries()) {
    s.socket.write(
      `${method} ${path(i)} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
        (payload ? `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n` : '') +
        `Connection: close\r\n\r\n${payload}`,
    )
  }
  return Promise.all(
    sockets.map(async (s) => {
      await s.closed
      const text = s.data()
      const [head = '', json = ''] = text.split('\r\n\r\n')
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1])
      const retryAfter = /\r\nretry-after: ([^\r]+)/i.exec(head)?.[1] ?? null
      const type = json.startsWith('{') ? (JSON.parse(json).type as string) : ''
      return { status, retryAfter, type }
    }),
  )
}

describe('request rate: 60 a minute per key, in minutes of the service clock', () => {
  test('the 61st request in a minute is refused with Retry-After to the minute end; every request counts, GET included', async () => {
    const { t, clock } = await app()
    const k = await t.tenant('rate')
    const statuses: number[] = []
    for (let i = 0; i < 60; i++) statuses.push((await t.call('GET', '/v1/clients/rate/customers/none', { key: k.apiKey })).status)
    assert.deepEqual(new Set(statuses), new Set([404]))
    const last = await t.call('GET', '/v1/clients/rate/customers/none', { key: k.apiKey })
    assert.equal(last.status, 429)
    assert.equal(problemCode(last), 'rate_limit_exceeded')
    assert.equal(last.headers['retry-after'], '55')
    assert.equal(last.headers['ratelimit-policy'], '"per-minute";q=60;w=60')
    assert.equal(last.headers.ratelimit, '"per-minute";r=0;t=55')
    // A refused request counted too, and another key of another client is unaffected.
    const other = await t.tenant('rate-other')
    assert.equal((await t.call('GET', '/v1/clients/rate-other/customers/none', { key: other.apiKey })).status, 404)
    // Half a second before the minute ends: Retry-After rounds up to 1.
    clock.set('2026-11-23T10:00:59.500Z')
    const late = await t.call('GET', '/v1/clients/rate/customers/none', { key: k.apiKey })
    assert.equal(late.status, 429)
    assert.equal(late.headers['retry-after'], '1')
    // The next minute of the clock is a fresh window.
    clock.set('2026-11-23T10:01:00.000Z')
    const fresh = await t.call('GET', '/v1/clients/rate/customers/none', { key: k.apiKey })
    assert.equal(fresh.status, 404)
    assert.equal(fresh.headers.ratelimit, '"per-minute";r=59;t=60')
  })

  test('requests with an invalid key do not spend a key budget', async () => {
    const { t } = await app()
    const k = await t.tenant('rate401')
    for (let i = 0; i < 70; i++)
      assert.equal((await t.call('GET', '/v1/clients/rate401/customers/x', { key: `irk_sandbox_${'Z'.repeat(40)}` })).status, 401)
    const ok = await t.call('GET', '/v1/clients/rate401/customers/x', { key: k.apiKey })
    assert.equal(ok.status, 404)
    assert.equal(ok.headers.ratelimit, '"per-minute";r=59;t=55')
  })

  test('in sandbox the client budget is shared by its keys; in production each key has its own', async () => {
    for (const env of ['sandbox', 'production'] as const) {
      const { t } = await app({ SERVICE_ENVIRONMENT: env })
      const code = `rate-${env}`
      const k = await t.tenant(code)
      const second = (await t.admin('POST', `/admin/v1/integrations/${k.integrationId}/api-keys`, {})).json.apiKey as string
      for (let i = 0; i < 60; i++) assert.equal((await t.call('GET', `/v1/clients/${code}/customers/none`, { key: k.apiKey })).status, 404)
      const res = await t.call('GET', `/v1/clients/${code}/customers/none`, { key: second })
      assert.equal(res.status, env === 'sandbox' ? 429 : 404, env)
    }
  })
})

describe('concurrency: one request at a time per key', () => {
  test('a second request with the same key while one is in flight: 429 with Retry-After 1; afterwards accepted', async () => {
    const { t } = await app()
    const k = await t.tenant('conc')
    await listen(t)
    const slow = await slowPut(t, '/v1/clients/conc/customers/c-1', k.apiKey, body)
    await slotTaken(t, slow, k.apiKeyId)
    const refused = await t.call('GET', '/v1/clients/conc/customers/c-1', { key: k.apiKey })
    assert.equal(refused.status, 429)
    assert.equal(problemCode(refused), 'rate_limit_exceeded')
    assert.equal(refused.headers['retry-after'], '1')
    assert.match(await slow.finish(), /^HTTP\/1\.1 201 /)
    assert.equal((await t.call('GET', '/v1/clients/conc/customers/c-1', { key: k.apiKey })).status, 200)
  })

  test('requests sent at once while one is in flight are all refused, over real connections', async () => {
    const { t } = await app()
    const k = await t.tenant('conc-burst')
    await listen(t)
    const slow = await slowPut(t, '/v1/clients/conc-burst/customers/c-1', k.apiKey, body)
    await slotTaken(t, slow, k.apiKeyId)
    const answers = await concurrently(t, 10, (i) => `/v1/clients/conc-burst/customers/c-${i + 2}`, k.apiKey, 'PUT')
    assert.deepEqual(
      answers,
      Array.from({ length: 10 }, () => ({ status: 429, retryAfter: '1', type: 'https://docs.irs.test/problems/rate_limit_exceeded' })),
    )
    assert.match(await slow.finish(), /^HTTP\/1\.1 201 /)
  })

  test('20 requests of one key sent at once: some are refused with 429 and Retry-After 1 (PGlite included)', async () => {
    const { t } = await app()
    const k = await t.tenant('conc-20')
    await listen(t)
    const answers = await concurrently(t, 20, (i) => `/v1/clients/conc-20/customers/b-${i}`, k.apiKey, 'PUT')
    const refused = answers.filter((a) => a.status === 429)
    const created = answers.filter((a) => a.status === 201)
    assert.equal(refused.length + created.length, 20, JSON.stringify(answers))
    assert.ok(created.length >= 1, 'the first one is served')
    assert.ok(refused.length >= 1, `a concurrent one is refused (${created.length} created)`)
    for (const r of refused)
      assert.deepEqual(r, { status: 429, retryAfter: '1', type: 'https://docs.irs.test/problems/rate_limit_exceeded' })
  })

  test('in sandbox another key of the same client is refused too; in production it is not', async () => {
    for (const env of ['sandbox', 'production'] as const) {
      const { t } = await app({ SERVICE_ENVIRONMENT: env })
      const k = await t.tenant(`conc-${env}`)
      const second = await t.admin('POST', `/admin/v1/integrations/${k.integrationId}/api-keys`, {})
      await listen(t)
      const slow = await slowPut(t, `/v1/clients/conc-${env}/customers/c-1`, k.apiKey, body)
      await slotTaken(t, slow, k.apiKeyId)
      const res = await t.call('GET', `/v1/clients/conc-${env}/customers/c-1`, { key: second.json.apiKey })
      if (env === 'sandbox') {
        assert.equal(res.status, 429, env)
        assert.equal(problemCode(res), 'rate_limit_exceeded')
        assert.equal(res.headers['retry-after'], '1')
      } else {
        assert.equal(res.status, 404, env)
      }
      assert.match(await slow.finish(), /^HTTP\/1\.1 201 /)
    }
  })
})

describe("a process that dies mid-request does not keep its key's slot", () => {
  test('its slot expires after the lease (PostgreSQL), or went with its memory (PGlite)', async () => {
    const clock = manualClock('2026-11-23T10:00:05.000Z')
    const { t } = await app({}, clock)
    const k = await t.tenant('crashed')
    const gateOf = () => createGate(t.store, { perMinute: 60, concurrency: 1, clock, leaseSeconds: 30 })
    const request = { digest: digestSecret(k.apiKey), environment: 'sandbox' as const, clientCode: 'crashed' }
    const refusal = async (g: ReturnType<typeof gateOf>) => {
      const o = await g.enter(request)
      assert.ok(o.caller, 'the key is known')
      return o
    }
    // A process admits a request and dies before releasing its slot.
    const dead = await refusal(gateOf())
    assert.equal(dead.caller?.apiKeyId, k.apiKeyId)
    assert.equal(dead.caller ? dead.refused : 'unknown key', null)
    // Another process (a new gate on the same store).
    const next = gateOf()
    const at = await refusal(next)
    if (onPostgres) {
      // The dead holder's lease runs 30 s of the service clock.
      assert.equal(at.caller ? at.refused : 'unknown key', 'concurrency')
      clock.advance(29_999)
      const still = await refusal(next)
      assert.equal(still.caller ? still.refused : 'unknown key', 'concurrency')
      clock.advance(1)
      const later = await refusal(next)
      assert.equal(later.caller ? later.refused : 'unknown key', null)
      if (later.caller) await later.lease?.release()
    } else {
      // The embedded store is one process's: its slots died with it.
      assert.equal(at.caller ? at.refused : 'unknown key', null)
      if (at.caller) await at.lease?.release()
    }
  })
})

describe('limits hold across instances sharing one PostgreSQL', () => {
  test('rate and concurrency are counted across two instances', {
    skip: onPostgres ? false : 'needs PostgreSQL (set DATABASE_URL)',
  }, async () => {
    const db = await createTestDatabase()
    const clock = manualClock('2026-11-23T10:00:05.000Z')
    const one = await startTestApp(SPEC_LIMITS, { db, clock })
    const otherStore = db.open()
    const two = await startTestApp(SPEC_LIMITS, { db: { ...db, store: otherStore }, clock })
    try {
      const k = await one.tenant('multi')
      for (let i = 0; i < 60; i++) {
        const t = i % 2 === 0 ? one : two
        assert.equal((await t.call('GET', '/v1/clients/multi/customers/none', { key: k.apiKey })).status, 404)
      }
      assert.equal((await two.call('GET', '/v1/clients/multi/customers/none', { key: k.apiKey })).status, 429)
      assert.equal((await one.call('GET', '/v1/clients/multi/customers/none', { key: k.apiKey })).status, 429)

      const k2 = await one.tenant('multi-conc')
      await listen(one)
      const slow = await slowPut(one, '/v1/clients/multi-conc/customers/c-1', k2.apiKey, body)
      await slotTaken(two, slow, k2.apiKeyId)
      assert.equal((await two.call('GET', '/v1/clients/multi-conc/customers/c-1', { key: k2.apiKey })).status, 429)
      assert.match(await slow.finish(), /^HTTP\/1\.1 201 /)
      assert.equal((await two.call('GET', '/v1/clients/multi-conc/customers/c-1', { key: k2.apiKey })).status, 200)
      // Requests sent at once to both instances: never more than one admitted at a time.
      await listen(two)
      const k3 = await one.tenant('multi-burst')
      const slow3 = await slowPut(one, '/v1/clients/multi-burst/customers/c-1', k3.apiKey, body)
      await slotTaken(two, slow3, k3.apiKeyId)
      const answers = [
        ...(await concurrently(one, 5, (i) => `/v1/clients/multi-burst/customers/a-${i}`, k3.apiKey, 'PUT')),
        ...(await concurrently(two, 5, (i) => `/v1/clients/multi-burst/customers/b-${i}`, k3.apiKey, 'PUT')),
      ]
      assert.deepEqual(
        answers.map((a) => a.status),
        Array.from({ length: 10 }, () => 429),
      )
      assert.match(await slow3.finish(), /^HTTP\/1\.1 201 /)
    } finally {
      await one.app.app.close()
      await two.app.app.close()
      await db.drop()
    }
  })
})
