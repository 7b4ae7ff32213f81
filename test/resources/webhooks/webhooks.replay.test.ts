import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { encodeCursor } from '../../../src/domain/cursor.ts'
import type { ResolvedAddress } from '../../../src/outbound/destination.ts'
import { REPLAY_CHUNK_SIZE } from '../../../src/resources/webhooks/service.ts'
import type { QueryOptions, Store } from '../../../src/store/store.ts'
import { startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { createTestDatabase, engineName, onPostgres, type TestDatabase } from '../../helpers/store.ts'

/**
 * A replay of thousands of events (issue 20, item 8) is queued in chunks of REPLAY_CHUNK_SIZE, one transaction
 * each, before the 202 answers with the exact count; on PGlite, where a transaction excludes every other query,
 * another tenant's GET runs between the chunks instead of waiting for the whole replay.
 */
const resolver = async (): Promise<ResolvedAddress[]> => [{ address: '93.184.215.14', family: 4 }]
const EVENTS = 3000
/** Every tenth event is a Receivable's, which this grant may not read: never queued. */
const READABLE = EVENTS - EVENTS / 10

let db: TestDatabase
let t: TestApp
let a: Tenant
let b: Tenant
/** What the app's store saw, in order: a replay chunk's statement, and the other tenant's GET answered. */
const seen: string[] = []
let onChunk: (() => void) | null = null

before(async () => {
  db = await createTestDatabase()
  const inner = db.store
  const store: Store = {
    ...inner,
    transaction: (fn, ahead) =>
      inner.transaction(
        (tx) =>
          fn({
            ...tx,
            query: async <T extends object>(sql: string, params?: readonly unknown[], options?: QueryOptions) => {
              const rows = await tx.query<T>(sql, params, options)
              if (sql.includes('INSERT INTO webhook_deliveries') && sql.includes('change_events')) {
                seen.push('chunk')
                onChunk?.()
              }
              return rows
            },
          }),
        ahead,
      ),
  }
  t = await startTestApp({}, { resolver, db: { ...db, store } })
  a = await t.tenant('rp-a', { scopes: ['webhooks:manage', 'customers:read'] })
  b = await t.tenant('rp-b')
  const put = await t.call('PUT', '/v1/clients/rp-a/webhook-endpoint', { key: a.apiKey, body: { url: 'https://hooks.acme.com/irs' } })
  assert.equal(put.status, 201)
  // The feed as the write path leaves it, and an endpoint whose worker has scanned all of it.
  await inner.query(
    `INSERT INTO change_events (client_code, seq, event_id, type, resource_type, resource_id, revision, occurred_at)
     SELECT 'rp-a', g, gen_random_uuid(), CASE WHEN g % 10 = 0 THEN 'receivable.created' ELSE 'customer.created' END,
            CASE WHEN g % 10 = 0 THEN 'receivable' ELSE 'customer' END, 'r-' || g, 1, now()
       FROM generate_series(1, $1::int) g`,
    [EVENTS],
  )
  await inner.query(
    `INSERT INTO feed_heads (client_code, last_seq) VALUES ('rp-a', $1) ON CONFLICT (client_code) DO UPDATE SET last_seq = $1`,
    [EVENTS],
  )
  await inner.query(`UPDATE webhook_endpoints SET scanned_seq = $1 WHERE client_code = 'rp-a'`, [EVENTS])
  const customer = await t.call('PUT', '/v1/clients/rp-b/customers/cust-b', {
    key: b.apiKey,
    body: { type: 'person', name: { firstName: 'Ada', lastName: 'B' }, sourceReference: 'ref/b' },
  })
  assert.equal(customer.status, 201)
})
after(async () => {
  await t.close()
  await db.drop()
})

test(`a replay of ${READABLE} notifications (${engineName}): queued exactly, in chunks, the 202 says how many`, async (ctx) => {
  seen.length = 0
  let read: Promise<number> | undefined
  let readMs = 0
  onChunk = () => {
    onChunk = null
    // Sent while the first chunk's transaction is open.
    const sent = performance.now()
    read = t.call('GET', '/v1/clients/rp-b/customers/cust-b', { key: b.apiKey }).then((r) => {
      seen.push('get')
      readMs = performance.now() - sent
      return r.status
    })
  }
  const started = performance.now()
  const replay = await t.call('POST', '/v1/clients/rp-a/webhook-endpoint/replay', {
    key: a.apiKey,
    body: { after: encodeCursor('changes', { s: '0' }) },
  })
  ctx.diagnostic(
    `replay ${Math.round(performance.now() - started)} ms; the other tenant's GET ${Math.round(readMs)} ms (reported, not asserted)`,
  )
  assert.equal(replay.status, 202)
  assert.deepEqual(replay.json, { queued: READABLE })
  assert.equal(await read, 200)

  const chunks = Math.ceil(READABLE / REPLAY_CHUNK_SIZE)
  assert.equal(REPLAY_CHUNK_SIZE, 500)
  assert.equal(seen.filter((s) => s === 'chunk').length, chunks)
  if (!onPostgres) {
    // One backend: the GET could only run between two chunks, and it did, before the replay ended.
    const at = seen.indexOf('get')
    assert.ok(at >= 1 && at < seen.length - 1, seen.join(' '))
  }

  const rows = await db.store.query<{ n: number; seqs: number; first: string; last: string; types: string[]; rounds: number[] }>(
    `SELECT count(*)::int AS n, count(DISTINCT seq)::int AS seqs, min(seq) AS first, max(seq) AS last,
            array_agg(DISTINCT resource_type) AS types, array_agg(DISTINCT round_attempts) AS rounds
       FROM webhook_deliveries WHERE client_code = 'rp-a' AND status = 'pending' AND next_attempt_at IS NOT NULL`,
  )
  assert.deepEqual(rows, [{ n: READABLE, seqs: READABLE, first: '1', last: String(EVENTS - 1), types: ['customer'], rounds: [0] }])

  // Again from a later cursor: the same deliveries queued again, only those after it.
  const again = await t.call('POST', '/v1/clients/rp-a/webhook-endpoint/replay', {
    key: a.apiKey,
    body: { after: encodeCursor('changes', { s: String(EVENTS - 1000) }) },
  })
  assert.deepEqual([again.status, again.json], [202, { queued: 900 }])
  assert.deepEqual(await db.store.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE client_code = 'rp-a'`), [{ n: READABLE }])
})
