import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { Store } from '../../src/store/store.ts'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { type CountingStore, countingTestApp } from '../helpers/counting-store.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * The gate in the write's first round trip (src/http/admission.ts, step 3; issue 36): on PostgreSQL a write of a key
 * this process admitted last time sends its gate ahead of the transaction's BEGIN, runs as the caller admitted last
 * time, and lets the gate's answer decide. Every refusal must still answer exactly as before (the same status and
 * problem, nothing saved, no slot kept), a changed grant must be the one the write runs with, and a body that fails
 * must not answer before the gate. On PGlite the gate is in memory and always runs first: the same answers hold.
 */
let db: TestDatabase
let counting: CountingStore
let t: TestApp
let close: () => Promise<void>

before(async () => {
  // The clock stands still: no test here may see the minute's budget renewed (the rate test spends one).
  const clock = { now: () => new Date('2026-11-23T10:00:05.000Z') }
  ;({ db, counting, t, close } = await countingTestApp({ RATE_LIMIT_PER_MINUTE: '1000', CONCURRENCY_PER_KEY: '1' }, { clock }))
})
after(() => close())

const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `ledger/c/${n}` })

/** Where the last request's gate ran: alone before the transaction, or ahead of its BEGIN. */
function gatePlacement(): 'alone' | 'ahead' | 'none' {
  const isGate = (sql: string) => /request_gate|FROM api_keys k/.test(sql)
  if (counting.ahead.some(isGate)) return 'ahead'
  return counting.outside.some(isGate) ? 'alone' : 'none'
}

async function put(k: Tenant, path: string, body: unknown, opts: { rawBody?: string; remoteAddress?: string } = {}): Promise<Response> {
  counting.reset()
  return t.call('PUT', `/v1/clients/${k.clientCode}${path}`, {
    key: k.apiKey,
    ...(opts.rawBody !== undefined ? { rawBody: opts.rawBody } : { body }),
    ...(opts.remoteAddress ? { remoteAddress: opts.remoteAddress } : {}),
  })
}

/** The Customers of a tenant's client, read from the store itself. */
const customersOf = async (k: Tenant) =>
  (
    await db.store.query<{ external_customer_id: string }>(
      'SELECT external_customer_id FROM customers WHERE client_code = $1 ORDER BY external_customer_id',
      [k.clientCode],
    )
  ).map((r) => r.external_customer_id)

const get = (k: Tenant, path: string) => t.call('GET', `/v1/clients/${k.clientCode}${path}`, { key: k.apiKey })

/** A tenant whose key has been admitted once (its first write met the gate alone). */
async function admittedTenant(code: string, opts: Parameters<TestApp['tenant']>[1] = {}): Promise<Tenant> {
  const k = await t.tenant(code, opts)
  const first = await put(k, '/customers/c0', customer(0), opts.ipAllowlist ? { remoteAddress: '10.0.0.5' } : {})
  assert.equal(first.status, 201, first.body)
  assert.equal(gatePlacement(), 'alone', 'a key not admitted before meets the gate alone')
  return k
}

describe('the gate in the write first round trip', () => {
  test('a key admitted before: its gate leaves ahead of BEGIN on PostgreSQL, the write answers as ever', async () => {
    const k = await admittedTenant('giw-ok')
    const res = await put(k, '/customers/c1', customer(1))
    assert.equal(res.status, 201, res.body)
    assert.equal(gatePlacement(), onPostgres ? 'ahead' : 'alone')
    assert.equal(res.headers['ratelimit-policy'], '"per-minute";q=1000;w=60')
    assert.match(String(res.headers.ratelimit), /^"per-minute";r=99[0-9];t=\d+$/)
    // Its slot was freed by its transaction: the next request of the key (one at a time) is admitted.
    const again = await put(k, '/customers/c1', customer(1))
    assert.equal(again.status, 200, again.body)
  })

  test('a key revoked since: 401 from the gate, nothing saved, and its next request meets the gate alone', async () => {
    const k = await admittedTenant('giw-revoked')
    const revoked = await t.admin('POST', `/admin/v1/api-keys/${k.apiKeyId}/revoke`, {})
    assert.equal(revoked.status, 200, revoked.body)
    const res = await put(k, '/customers/c1', customer(1))
    assert.equal(res.status, 401, res.body)
    assert.equal(problemCode(res), 'invalid_api_key')
    assert.equal(gatePlacement(), onPostgres ? 'ahead' : 'alone')
    // Rolled back whole: the write sent ahead of the gate's answer saved nothing.
    assert.deepEqual(await customersOf(k), ['c0'])
    const retry = await put(k, '/customers/c1', customer(1))
    assert.equal(retry.status, 401)
    assert.equal(gatePlacement(), 'alone', 'a key refused last time never reaches a transaction before its gate')
  })

  test('a grant revoked since: 403 client_scope_denied, nothing saved', async () => {
    const k = await admittedTenant('giw-grant')
    const revoke = await t.admin('POST', `/admin/v1/integrations/${k.integrationId}/grants/${k.clientCode}/revoke`, {})
    assert.equal(revoke.status, 200, revoke.body)
    const res = await put(k, '/customers/c1', customer(1))
    assert.equal(res.status, 403, res.body)
    assert.equal(problemCode(res), 'client_scope_denied')
    assert.equal(gatePlacement(), onPostgres ? 'ahead' : 'alone')
    // Granted again: the Customer was never created by the refused write.
    const regrant = await t.admin('PUT', `/admin/v1/integrations/${k.integrationId}/grants/${k.clientCode}`, {
      scopes: ['customers:read', 'customers:write'],
    })
    assert.ok(regrant.status < 300, regrant.body)
    assert.equal((await get(k, '/customers/c1')).status, 404)
    assert.deepEqual(await customersOf(k), ['c0'])
  })

  test('an IP allowlist narrowed since: 403 from the gate, nothing saved', async () => {
    const k = await admittedTenant('giw-ip', { ipAllowlist: ['10.0.0.0/8'] })
    const narrowed = await t.admin('PUT', `/admin/v1/integrations/${k.integrationId}/grants/${k.clientCode}`, {
      scopes: ['customers:read', 'customers:write'],
      ipAllowlist: ['10.9.0.0/16'],
    })
    assert.ok(narrowed.status < 300, narrowed.body)
    const res = await put(k, '/customers/c1', customer(1), { remoteAddress: '10.0.0.5' })
    assert.equal(res.status, 403, res.body)
    assert.equal(problemCode(res), 'client_scope_denied')
    assert.deepEqual(await customersOf(k), ['c0'])
  })

  test('a grant changed but still sufficient: the write runs once more as the caller the gate returned', async () => {
    const k = await admittedTenant('giw-changed', { grant: { feedMode: 'transaction' } })
    const feedMode = async () =>
      (await db.store.query<{ feed_mode: string }>('SELECT feed_mode FROM source_activity WHERE client_code = $1', [k.clientCode]))[0]
        ?.feed_mode
    assert.equal(await feedMode(), 'transaction')
    const changed = await t.admin('PUT', `/admin/v1/integrations/${k.integrationId}/grants/${k.clientCode}`, {
      scopes: ['customers:read', 'customers:write'],
      feedMode: 'snapshot_only',
    })
    assert.ok(changed.status < 300, changed.body)
    const res = await put(k, '/customers/c1', customer(1))
    assert.equal(res.status, 201, res.body)
    assert.equal(gatePlacement(), onPostgres ? 'ahead' : 'alone')
    // The Source activity the write recorded carries the grant's new feed mode (the run as the old caller rolled back).
    assert.equal(await feedMode(), 'snapshot_only')
    assert.equal((await get(k, '/customers/c1')).json.revision, 1)
    // Its slot held once, freed once: the next request is admitted.
    assert.equal((await put(k, '/customers/c1', customer(1))).status, 200)
  })

  test('over the minute budget: 429 with Retry-After, nothing saved', async () => {
    const k = await admittedTenant('giw-rate')
    const used = Number(/r=(\d+)/.exec(String((await put(k, '/customers/c0', customer(0))).headers.ratelimit))?.[1])
    // Spend the rest of the minute on reads, then write once more.
    for (let i = 0; i < used; i++) assert.equal((await get(k, '/customers/c0')).status, 200)
    const res = await put(k, '/customers/c9', customer(9))
    assert.equal(res.status, 429, res.body)
    assert.equal(problemCode(res), 'rate_limit_exceeded')
    assert.ok(Number(res.headers['retry-after']) >= 1)
    // The last read was admitted (the minute's last request), so the write's gate left ahead of BEGIN and refused it.
    assert.equal(gatePlacement(), onPostgres ? 'ahead' : 'alone')
    assert.deepEqual(await customersOf(k), ['c0'])
    // Refused last time: the next write meets its gate alone, before anything of its body is read.
    assert.equal((await put(k, '/customers/c9', customer(9))).status, 429)
    assert.equal(gatePlacement(), 'alone')
  })

  test('a body that fails answers after the gate: a revoked key gets 401, never 400 or 422', async () => {
    const k = await admittedTenant('giw-body')
    await t.admin('POST', `/admin/v1/api-keys/${k.apiKeyId}/revoke`, {})
    const malformed = await put(k, '/customers/c1', undefined, { rawBody: '{"type": ' })
    assert.equal(malformed.status, 401, malformed.body)
    const k2 = await admittedTenant('giw-body-2')
    await t.admin('POST', `/admin/v1/api-keys/${k2.apiKeyId}/revoke`, {})
    const invalid = await put(k2, '/customers/c1', { type: 'robot' })
    assert.equal(invalid.status, 401, invalid.body)
    // An admitted key with a bad body: the body's own answer, its gate met alone first.
    const k3 = await admittedTenant('giw-body-3')
    const bad = await put(k3, '/customers/c1', { type: 'robot' })
    assert.equal(bad.status, 422, bad.body)
    assert.equal(problemCode(bad), 'validation_error')
    assert.equal(gatePlacement(), 'alone')
    assert.equal((await put(k3, '/customers/c1', customer(1))).status, 201, 'its slot was given back')
  })

  test('a batch whose records need a scope the grant lost since: 403 once the gate answers, nothing queued', async () => {
    const k = await admittedTenant('giw-batch')
    const batch = (id: string) => ({ records: [{ recordId: 'x', kind: 'customer', externalId: `c-${id}`, body: customer(5) }] })
    const queued = await put(k, '/batches/b1', batch('b1'))
    assert.equal(queued.status, 202, queued.body)
    assert.equal(gatePlacement(), onPostgres ? 'ahead' : 'alone')
    // The grant loses customers:write, which a customer record needs (a batch itself needs no scope of its own).
    const narrowed = await t.admin('PUT', `/admin/v1/integrations/${k.integrationId}/grants/${k.clientCode}`, {
      scopes: ['customers:read', 'receivables:write'],
    })
    assert.ok(narrowed.status < 300, narrowed.body)
    const refused = await put(k, '/batches/b2', batch('b2'))
    assert.equal(refused.status, 403, refused.body)
    assert.equal(problemCode(refused), 'client_scope_denied')
    assert.equal(gatePlacement(), onPostgres ? 'ahead' : 'alone')
    const batches = await db.store.query<{ external_batch_id: string }>(
      'SELECT external_batch_id FROM batches WHERE client_code = $1 ORDER BY external_batch_id',
      [k.clientCode],
    )
    assert.deepEqual(
      batches.map((b) => b.external_batch_id),
      ['b1'],
    )
    // Remembered as the narrowed caller now: its next batch meets the same 403 from the scopes the body adds.
    assert.equal((await put(k, '/batches/b3', batch('b3'))).status, 403)
  })

  test('16 racing writes of one key (one at a time): each is saved exactly when it answered 201, the others 429', async () => {
    const k = await admittedTenant('giw-race')
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        t.call('PUT', `/v1/clients/${k.clientCode}/customers/r${i}`, { key: k.apiKey, body: customer(100 + i) }),
      ),
    )
    const created = results.flatMap((r, i) => (r.status === 201 ? [`r${i}`] : []))
    for (const r of results) {
      assert.ok(r.status === 201 || r.status === 429, `${r.status} ${r.body}`)
      if (r.status === 429) assert.equal(problemCode(r), 'rate_limit_exceeded')
    }
    assert.ok(created.length >= 1)
    assert.deepEqual(await customersOf(k), ['c0', ...created].sort())
    // Every slot was given back: the key writes again.
    assert.equal((await put(k, '/customers/c1', customer(1))).status, 201)
  })

  test('a store that drops the gate sent ahead of BEGIN runs no write: 503, nothing saved', {
    skip: !onPostgres && 'PGlite keeps the gate in memory: nothing is sent ahead',
  }, async () => {
    const db2 = await createTestDatabase()
    // A wrapper that forgets `ahead` (as a test wrapper once did): the write must fail loudly, never run unadmitted.
    const dropping: Store = {
      kind: db2.store.kind,
      query: (sql, params, options) => db2.store.query(sql, params, options),
      exec: (sql) => db2.store.exec(sql),
      transaction: (fn) => db2.store.transaction(fn),
      close: () => db2.store.close(),
    }
    const app = await startTestApp({}, { db: { ...db2, store: dropping } })
    try {
      const k = await app.tenant('giw-drop')
      const first = await app.call('PUT', `/v1/clients/${k.clientCode}/customers/c0`, { key: k.apiKey, body: customer(0) })
      assert.equal(first.status, 201, first.body)
      const res = await app.call('PUT', `/v1/clients/${k.clientCode}/customers/c1`, { key: k.apiKey, body: customer(1) })
      assert.equal(res.status, 503, res.body)
      assert.equal(problemCode(res), 'projection_unavailable')
      const saved = await db2.store.query<{ external_customer_id: string }>(
        'SELECT external_customer_id FROM customers WHERE client_code = $1 ORDER BY external_customer_id',
        [k.clientCode],
      )
      assert.deepEqual(
        saved.map((r) => r.external_customer_id),
        ['c0'],
      )
    } finally {
      await app.close()
      await db2.drop()
    }
  })
})
