import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { z } from 'zod'
import { digestSecret } from '../../src/access/keys.ts'
import { Problem } from '../../src/domain/problems.ts'
import { systemClock } from '../../src/domain/time.ts'
import { createGate } from '../../src/http/limits.ts'
import { defineRoute, type RouteDef } from '../../src/http/route.ts'
import { buildServer } from '../../src/http/server.ts'
import { gatedReadSql, splitGatedRows } from '../../src/store/gate-store.ts'
import { problemCode, startTestApp } from '../helpers/app.ts'
import { countingStore } from '../helpers/counting-store.ts'
import { createTestDatabase, onPostgres } from '../helpers/store.ts'

/**
 * Issue 12: on PostgreSQL a request whose whole work is one read (a route declared `oneRead`) runs its gate in
 * that read's statement: one round trip in all. Its concurrency slot is an advisory lock held for that
 * statement (migration 0015), which excludes, and is excluded by, the slot rows of every other request.
 */

const CUSTOMER = { type: 'person', name: { firstName: 'Ada', lastName: 'Read' }, sourceReference: 'ledger/1' }

describe('gatedReadSql and splitGatedRows', () => {
  test('the read runs inside the gate statement, only for an admitted request with an active grant and the scopes', () => {
    assert.equal(
      gatedReadSql('SELECT * FROM gate($3)', 'SELECT a FROM t WHERE c = $1 AND d = $2', 4),
      'WITH _gate AS MATERIALIZED (SELECT * FROM gate($3)) SELECT g.key_id AS _gate_key_id, ' +
        'g.key_integration_id AS _gate_key_integration_id, g.grant_status AS _gate_grant_status, ' +
        'g.grant_scopes AS _gate_grant_scopes, g.grant_ip_allowlist AS _gate_grant_ip_allowlist, ' +
        'g.grant_recovery_entry_mode AS _gate_grant_recovery_entry_mode, g.grant_feed_mode AS _gate_grant_feed_mode, ' +
        'g.grant_industry_profile AS _gate_grant_industry_profile, ' +
        'g.grant_receipt_delivery_owner AS _gate_grant_receipt_delivery_owner, g.used AS _gate_used, ' +
        'g.admitted AS _gate_admitted, r.* FROM _gate g LEFT JOIN LATERAL (SELECT row_number() OVER () AS _gate_row, ' +
        "q.* FROM (SELECT a FROM t WHERE c = $1 AND d = $2) q WHERE g.admitted AND g.grant_status = 'active' " +
        'AND g.grant_scopes @> $4::text[]) r ON true ORDER BY r._gate_row',
    )
  })

  const gateCols = (admitted: boolean) => ({
    _gate_key_id: 'k1',
    _gate_key_integration_id: 'i1',
    _gate_grant_status: 'active',
    _gate_grant_scopes: ['customers:read'],
    _gate_grant_ip_allowlist: [],
    _gate_grant_recovery_entry_mode: 'disabled',
    _gate_grant_feed_mode: 'full',
    _gate_grant_industry_profile: null,
    _gate_grant_receipt_delivery_owner: null,
    _gate_used: 3,
    _gate_admitted: admitted,
  })
  const gateRow = {
    key_id: 'k1',
    key_integration_id: 'i1',
    grant_status: 'active',
    grant_scopes: ['customers:read'],
    grant_ip_allowlist: [],
    grant_recovery_entry_mode: 'disabled',
    grant_feed_mode: 'full',
    grant_industry_profile: null,
    grant_receipt_delivery_owner: null,
    used: 3,
  }

  test('no row: the gate returned none (an unknown key)', () => {
    assert.deepEqual(splitGatedRows([]), { gate: undefined, read: [] })
  })

  test('one row without a read row: the gate, and nothing read', () => {
    assert.deepEqual(splitGatedRows([{ ...gateCols(false), _gate_row: null, a: null, b: null }]), {
      gate: { ...gateRow, admitted: false },
      read: [],
    })
  })

  test('read rows keep their order and lose the gate columns', () => {
    const rows = [
      { ...gateCols(true), _gate_row: '1', a: 'x', b: 1 },
      { ...gateCols(true), _gate_row: '2', a: 'y', b: null },
    ]
    assert.deepEqual(splitGatedRows(rows), {
      gate: { ...gateRow, admitted: true },
      read: [
        { a: 'x', b: 1 },
        { a: 'y', b: null },
      ],
    })
  })
})

describe('GET Customer on PostgreSQL is one statement: the gate and the read', {
  skip: !onPostgres && 'the embedded store keeps its limits in memory',
}, () => {
  test('200, 404, 401 and 403: one statement each, no transaction, no slot row left', async () => {
    const db = await createTestDatabase()
    const counting = countingStore(db.store)
    const c = await startTestApp({ SERVICE_ENVIRONMENT: 'production', CONCURRENCY_PER_KEY: '1' }, { db: { ...db, store: counting } })
    try {
      const k = await c.tenant('onestmt')
      const put = await c.call('PUT', '/v1/clients/onestmt/customers/cust-1', { key: k.apiKey, body: CUSTOMER })
      assert.equal(put.status, 201)
      const cases: [string, string, number, string | null][] = [
        ['cust-1', k.apiKey, 200, null],
        ['cust-none', k.apiKey, 404, 'customer_not_found'],
        ['cust-1', `${k.apiKey.slice(0, -4)}zzzz`, 401, 'invalid_api_key'],
      ]
      for (const [id, key, status, code] of cases) {
        counting.reset()
        const res = await c.call('GET', `/v1/clients/onestmt/customers/${id}`, { key })
        assert.equal(res.status, status, res.body)
        if (code) assert.equal(problemCode(res), code)
        else assert.equal(res.json.externalCustomerId, 'cust-1')
        assert.deepEqual(counting.inTransactions, [])
        assert.equal(counting.outside.length, 1, counting.outside.join('\n---\n'))
        assert.match(counting.outside[0] as string, /^WITH _gate AS MATERIALIZED \(SELECT \* FROM request_gate\(/)
        const held = await db.store.query<{ n: number }>('SELECT count(*)::int AS n FROM inflight_requests')
        assert.equal(held[0]?.n, 0)
      }
      // A key granted another client: refused (403), and its one statement read nothing.
      const other = await c.tenant('onestmt-other')
      counting.reset()
      const res = await c.call('GET', '/v1/clients/onestmt/customers/cust-1', { key: other.apiKey })
      assert.equal(res.status, 403, res.body)
      assert.equal(counting.outside.length, 1)
    } finally {
      await c.close()
      await db.drop()
    }
  })

  test('the rate limit counts one-statement reads: over the minute, 429 with Retry-After and nothing read', async () => {
    const db = await createTestDatabase()
    const c = await startTestApp({ SERVICE_ENVIRONMENT: 'production', RATE_LIMIT_PER_MINUTE: '2' }, { db })
    try {
      const k = await c.tenant('onestmt-rate')
      const gate = createGate(db.store, { perMinute: 2, concurrency: 1, clock: systemClock })
      const req = { digest: digestSecret(k.apiKey), environment: 'production' as const, clientCode: 'onestmt-rate' }
      const read = { sql: 'SELECT 1 AS one', params: [], scopes: ['customers:read'] }
      const first = await gate.enterWithRead?.<{ one: number }>(req, read)
      // The minute may turn between the two calls: the second is then the new minute's first.
      const second = await gate.enterWithRead?.<{ one: number }>(req, read)
      assert.deepEqual(first?.rows, [{ one: 1 }])
      assert.deepEqual(second?.rows, [{ one: 1 }])
      const third = await gate.enterWithRead?.<{ one: number }>(req, read)
      if (third?.outcome.caller && third.outcome.rate.remaining === 0 && third.outcome.refused) {
        assert.equal(third.outcome.refused, 'rate')
        assert.deepEqual(third.rows, [])
      }
      // Without the scope nothing is read, though the request is admitted (the route answers 403).
      const scoped = await gate.enterWithRead?.<{ one: number }>(
        { ...req, digest: digestSecret((await c.tenant('onestmt-scope')).apiKey), clientCode: 'onestmt-scope' },
        { ...read, scopes: ['no:such-scope'] },
      )
      assert.equal(scoped?.outcome.caller && scoped.outcome.refused, null)
      assert.deepEqual(scoped?.rows, [])
    } finally {
      await c.close()
      await db.drop()
    }
  })

  test('a one-statement read in flight holds the slot: a concurrent GET and PUT of the key get 429; after it, 200', async () => {
    const db = await createTestDatabase()
    const c = await startTestApp({ SERVICE_ENVIRONMENT: 'production', CONCURRENCY_PER_KEY: '1' }, { db })
    try {
      const k = await c.tenant('onestmt-conc')
      assert.equal((await c.call('PUT', '/v1/clients/onestmt-conc/customers/cust-1', { key: k.apiKey, body: CUSTOMER })).status, 201)
      // A read's statement, caught in the middle: it holds its slot's advisory lock (taken before it counts) until
      // its transaction ends.
      const keyId = k.apiKeyId
      await db.store.transaction(async (tx) => {
        const rows = await tx.query<{ locked: boolean }>('SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS locked', [
          `slot|key:${keyId}|0`,
        ])
        assert.deepEqual(rows, [{ locked: true }])
        const get = await c.call('GET', '/v1/clients/onestmt-conc/customers/cust-1', { key: k.apiKey })
        assert.equal(get.status, 429, get.body)
        assert.equal(problemCode(get), 'rate_limit_exceeded')
        assert.equal(get.headers['retry-after'], '1')
        const put = await c.call('PUT', '/v1/clients/onestmt-conc/customers/cust-2', { key: k.apiKey, body: CUSTOMER })
        assert.equal(put.status, 429, put.body)
        // No slot row was written by the read, and the refused PUT left none.
        const held = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM inflight_requests')
        assert.equal(held[0]?.n, 0)
      })
      assert.equal((await c.call('GET', '/v1/clients/onestmt-conc/customers/cust-1', { key: k.apiKey })).status, 200)
      assert.equal((await c.call('PUT', '/v1/clients/onestmt-conc/customers/cust-2', { key: k.apiKey, body: CUSTOMER })).status, 201)
    } finally {
      await c.close()
      await db.drop()
    }
  })

  test('a slot row held by another instance refuses the one-statement read, and a second transient holder too', async () => {
    const db = await createTestDatabase()
    const c = await startTestApp({ SERVICE_ENVIRONMENT: 'production', CONCURRENCY_PER_KEY: '1' }, { db })
    try {
      const k = await c.tenant('onestmt-row')
      const gate = createGate(db.store, { perMinute: 1000, concurrency: 1, clock: systemClock })
      const req = { digest: digestSecret(k.apiKey), environment: 'production' as const, clientCode: 'onestmt-row' }
      const held = await gate.enter(req)
      assert.equal(held.caller && held.refused, null)
      const read = { sql: 'SELECT 1 AS one', params: [], scopes: [] }
      const refused = await gate.enterWithRead?.<{ one: number }>(req, read)
      assert.equal(refused?.outcome.caller && refused.outcome.refused, 'concurrency')
      assert.deepEqual(refused?.rows, [])
      if (held.caller && !held.refused) await held.lease.release()
      const served = await gate.enterWithRead?.<{ one: number }>(req, read)
      assert.equal(served?.outcome.caller && served.outcome.refused, null)
      assert.deepEqual(served?.rows, [{ one: 1 }])
    } finally {
      await c.close()
      await db.drop()
    }
  })
})

describe('a oneRead route whose read runs no statement still meets its gate', () => {
  function probe(read: () => Promise<number>): RouteDef {
    return defineRoute({
      method: 'GET',
      path: '/v1/clients/:clientCode/probe',
      operationId: 'probeNoRead',
      summary: 'probe',
      tags: [],
      auth: { kind: 'api_key', scopes: ['customers:read'] },
      params: z.object({ clientCode: z.string() }),
      responses: { 200: { schema: z.object({ n: z.number() }), description: '' } },
      problems: ['customer_not_found'],
      public: false,
      oneRead: read,
      handler: async ({ read: n }) => ({ status: 200, body: { n } }),
    })
  }

  for (const [name, read, served] of [
    ['answers without reading', async () => 1, 200],
    [
      'throws before reading',
      async () => {
        throw new Problem('customer_not_found', 'none')
      },
      404,
    ],
  ] as const) {
    test(`${name}: 401 for a wrong key, 403 for another client's key, ${served} for the right one`, async () => {
      const db = await createTestDatabase()
      const c = await startTestApp({}, { db })
      const app = buildServer(
        {
          db: db.store,
          config: { environment: 'sandbox', docsUrl: 'https://docs.irs.test', logLevel: 'silent' },
          gate: createGate(db.store, { perMinute: 1000, concurrency: 1, clock: systemClock }),
          adminTokenDigest: '00',
        },
        [probe(read)],
      )
      try {
        const k = await c.tenant('noread')
        const other = await c.tenant('noread-other')
        const get = (key: string) =>
          app.inject({ method: 'GET', url: '/v1/clients/noread/probe', headers: { authorization: `Bearer ${key}` } })
        assert.equal((await get(`${k.apiKey.slice(0, -4)}zzzz`)).statusCode, 401)
        assert.equal((await get(other.apiKey)).statusCode, 403)
        const ok = await get(k.apiKey)
        assert.equal(ok.statusCode, served, ok.body)
        assert.match(String(ok.headers.ratelimit), /^"per-minute";r=999;t=\d+$/)
        // The slot was given back: the next request is served too.
        assert.equal((await get(k.apiKey)).statusCode, served)
      } finally {
        await app.close()
        await c.close()
        await db.drop()
      }
    })
  }
})
