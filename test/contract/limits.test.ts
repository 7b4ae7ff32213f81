import assert from 'node:assert/strict'
import net from 'node:net'
import { after, describe, test } from 'node:test'
import { problemCode, startTestApp, type TestApp } from '../helpers/app.ts'
import { createTestDatabase, onPostgres } from '../helpers/store.ts'

const SPEC_LIMITS = { RATE_LIMIT_PER_MINUTE: '60', CONCURRENCY_PER_KEY: '1' }
const body = JSON.stringify({ type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' })

const apps: TestApp[] = []
after(async () => {
  for (const a of apps.reverse()) await a.close()
})

async function app(env: Record<string, string> = {}, opts = {}) {
  const t = await startTestApp({ ...SPEC_LIMITS, ...env }, opts)
  apps.push(t)
  return t
}

/** Windows are calendar minutes of the database clock: start a burst early in one. */
async function earlyInMinute(t: TestApp) {
  for (let i = 0; i < 3; i++) {
    const [row] = await t.store.query<{ s: number }>('SELECT extract(second FROM clock_timestamp())::float8 AS s')
    if ((row?.s ?? 0) < 45) return
    await new Promise((r) => setTimeout(r, (61 - (row?.s ?? 0)) * 1000))
  }
}

/** A PUT whose body is only half sent: it holds its concurrency slot until `finish` is called. */
async function slowPut(port: number, path: string, key: string) {
  const socket = net.connect(port, '127.0.0.1')
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
  let data = ''
  socket.on('data', (d) => {
    data += d.toString()
  })
  socket.write(
    `PUT ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body.slice(0, 10)}`,
  )
  return {
    async finish(): Promise<string> {
      socket.write(body.slice(10))
      await new Promise<void>((resolve) => socket.once('close', () => resolve()))
      return data
    },
  }
}

/** Polls until the slow request's slot is visible in the store (its onRequest gate has run). */
async function slotTaken(t: TestApp, bucket: string) {
  for (let i = 0; i < 200; i++) {
    const rows = await t.store.query('SELECT 1 FROM inflight_requests WHERE bucket = $1 AND expires_at > clock_timestamp()', [bucket])
    if (rows.length > 0) return
    await new Promise((r) => setTimeout(r, 10))
  }
  throw new Error(`slot ${bucket} never taken`)
}

async function listen(t: TestApp): Promise<number> {
  await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  return (t.app.app.server.address() as net.AddressInfo).port
}

describe('request rate: 60 a minute per key', () => {
  test('the 61st request in a minute is refused with Retry-After; every request counts, GET included', async () => {
    const t = await app()
    const k = await t.tenant('rate')
    await earlyInMinute(t)
    const statuses: number[] = []
    for (let i = 0; i < 60; i++) statuses.push((await t.call('GET', '/v1/clients/rate/customers/none', { key: k.apiKey })).status)
    assert.deepEqual(new Set(statuses), new Set([404]))
    const last = await t.call('GET', '/v1/clients/rate/customers/none', { key: k.apiKey })
    assert.equal(last.status, 429)
    assert.equal(problemCode(last), 'rate_limit_exceeded')
    const retry = Number(last.headers['retry-after'])
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${retry}`)
    assert.equal(last.headers['ratelimit-policy'], '"per-minute";q=60;w=60')
    // A refused request counted too, and another key of another client is unaffected.
    const other = await t.tenant('rate-other')
    assert.equal((await t.call('GET', '/v1/clients/rate-other/customers/none', { key: other.apiKey })).status, 404)
  })

  test('requests with an invalid key do not spend a key budget', async () => {
    const t = await app()
    const k = await t.tenant('rate401')
    await earlyInMinute(t)
    for (let i = 0; i < 70; i++)
      assert.equal((await t.call('GET', '/v1/clients/rate401/customers/x', { key: `irk_sandbox_${'Z'.repeat(40)}` })).status, 401)
    const ok = await t.call('GET', '/v1/clients/rate401/customers/x', { key: k.apiKey })
    assert.equal(ok.status, 404)
    assert.equal(ok.headers.ratelimit, `"per-minute";r=59;t=${ok.headers.ratelimit?.toString().split('t=')[1]}`)
  })
})

describe('concurrency: one request at a time', () => {
  test('a second request with the same key while one is in flight: 429 with Retry-After 1; afterwards accepted', async () => {
    const t = await app()
    const k = await t.tenant('conc')
    const port = await listen(t)
    const slow = await slowPut(port, '/v1/clients/conc/customers/c-1', k.apiKey)
    await slotTaken(t, `key:${k.apiKeyId}`)
    const refused = await t.call('GET', '/v1/clients/conc/customers/c-1', { key: k.apiKey })
    assert.equal(refused.status, 429)
    assert.equal(problemCode(refused), 'rate_limit_exceeded')
    assert.equal(refused.headers['retry-after'], '1')
    assert.match(await slow.finish(), /^HTTP\/1\.1 201 /)
    assert.equal((await t.call('GET', '/v1/clients/conc/customers/c-1', { key: k.apiKey })).status, 200)
  })

  test('in sandbox another key of the same client is refused too; in production it is not', async () => {
    for (const env of ['sandbox', 'production'] as const) {
      const t = await app({ SERVICE_ENVIRONMENT: env })
      const k = await t.tenant(`conc-${env}`)
      const second = await t.admin('POST', `/admin/v1/integrations/${k.integrationId}/api-keys`, {})
      const port = await listen(t)
      const slow = await slowPut(port, `/v1/clients/conc-${env}/customers/c-1`, k.apiKey)
      await slotTaken(t, `key:${k.apiKeyId}`)
      const res = await t.call('GET', `/v1/clients/conc-${env}/customers/c-1`, { key: second.json.apiKey })
      if (env === 'sandbox') {
        assert.equal(res.status, 429, env)
        assert.equal(problemCode(res), 'rate_limit_exceeded')
      } else {
        assert.equal(res.status, 404, env)
      }
      assert.match(await slow.finish(), /^HTTP\/1\.1 201 /)
    }
  })
})

describe('limits hold across instances sharing one PostgreSQL', () => {
  test('rate and concurrency are counted across two instances', {
    skip: onPostgres ? false : 'needs PostgreSQL (set DATABASE_URL)',
  }, async () => {
    const db = await createTestDatabase()
    const one = await startTestApp(SPEC_LIMITS, { db })
    const otherStore = db.open()
    const two = await startTestApp(SPEC_LIMITS, { db: { ...db, store: otherStore } })
    try {
      const k = await one.tenant('multi')
      await earlyInMinute(one)
      for (let i = 0; i < 60; i++) {
        const t = i % 2 === 0 ? one : two
        assert.equal((await t.call('GET', '/v1/clients/multi/customers/none', { key: k.apiKey })).status, 404)
      }
      assert.equal((await two.call('GET', '/v1/clients/multi/customers/none', { key: k.apiKey })).status, 429)
      assert.equal((await one.call('GET', '/v1/clients/multi/customers/none', { key: k.apiKey })).status, 429)

      const k2 = await one.tenant('multi-conc')
      const port = await listen(one)
      const slow = await slowPut(port, '/v1/clients/multi-conc/customers/c-1', k2.apiKey)
      await slotTaken(two, `key:${k2.apiKeyId}`)
      assert.equal((await two.call('GET', '/v1/clients/multi-conc/customers/c-1', { key: k2.apiKey })).status, 429)
      assert.match(await slow.finish(), /^HTTP\/1\.1 201 /)
      assert.equal((await two.call('GET', '/v1/clients/multi-conc/customers/c-1', { key: k2.apiKey })).status, 200)
    } finally {
      await one.app.app.close()
      await two.app.app.close()
      await db.drop()
    }
  })
})
