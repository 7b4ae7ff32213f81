import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type { Clock } from '../../src/domain/time.ts'
import { fanoutStatus } from '../../src/resources/holds/client-facts-store.ts'
import type { Store } from '../../src/store/store.ts'
import { createClientFanout } from '../../src/workers/client-fanout.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { bulkReceivables, checkedFeed, customerBody, idsInOrder, lastSeq, receivableBody, revisionsOf } from '../helpers/client-fanout.ts'
import { type CountingStore, countingStore } from '../helpers/counting-store.ts'
import { createTestDatabase, engineName, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * Client-wide changes in the background (docs/decisions.md): a collection toggle or a freshness flip records
 * one fact in its request; every Receivable of the client then gets exactly one new revision and one
 * `receivable.updated` event from the fan-out worker, in chunks, in feed order, unless a write already gave it a
 * revision that includes the fact. Until the fan-out reaches a Receivable, it reads as its current revision.
 * The worker here is the test's own instance (the app's is not started in tests), driven chunk by chunk.
 */
let nowMs = Date.parse('2026-11-01T00:00:00.000Z')
const clock: Clock = { now: () => new Date(nowMs) }
let db: TestDatabase
let counting: CountingStore
let t: TestApp

before(async () => {
  db = await createTestDatabase()
  counting = countingStore(db.store)
  t = await startTestApp({}, { clock, db: { ...db, store: counting } })
})
after(async () => {
  await t.close()
  await db.drop()
})

function api(k: Tenant) {
  const base = `/v1/clients/${k.clientCode}`
  return {
    put: (path: string, body: unknown) => t.call('PUT', `${base}${path}`, { key: k.apiKey, body }),
    get: async (path: string) => {
      const res = await t.call('GET', `${base}${path}`, { key: k.apiKey })
      assert.equal(res.status, 200, res.body)
      return res.json
    },
  }
}

/** A client with `n` bulk Receivables `b-…` plus `a-tpl` and `a-write` written through the API. */
async function clientWith(code: string, n: number) {
  const k = await t.tenant(code)
  const c = api(k)
  assert.equal((await c.put('/customers/c1', customerBody())).status, 201)
  assert.equal((await c.put('/receivables/a-tpl', receivableBody('c1'))).status, 201)
  assert.equal((await c.put('/receivables/a-write', receivableBody('c1'))).status, 201)
  await bulkReceivables(db.store, code, 'a-tpl', 'b', n)
  return { k, c }
}

/** The statements (in transactions, BEGIN and COMMIT included) of one request. */
async function statementsOf<T>(request: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
  counting.reset()
  const result = await request()
  return { result, statements: [...counting.inTransactions] }
}

describe(`a collection toggle (${engineName})`, () => {
  const code = 'fan-toggle'
  const worker = () => createClientFanout({ store: db.store, chunkSize: 100 })

  test('one fact in the request; then every Receivable once, 100 per chunk, in id order; a GET reads the current revision', async () => {
    const { c } = await clientWith(code, 350)
    const ids = await idsInOrder(db.store, code)
    assert.equal(ids.length, 352)
    const feedStart = await lastSeq(db.store, code)

    const toggle = await statementsOf(() => t.admin('PUT', `/admin/v1/clients/${code}`, { collectionEnabled: true }))
    assert.equal(toggle.result.status, 200, toggle.result.body)
    // BEGIN, the client row locked, the upsert, the fact's number, the fact, the audit event, COMMIT: no Receivable.
    assert.equal(toggle.statements.length, 7, toggle.statements.join('\n---\n'))
    assert.equal(toggle.statements.filter((s) => /receivables/.test(s)).length, 0)
    assert.equal(await lastSeq(db.store, code), feedStart, 'the toggle itself writes no feed event')

    // Not reached yet: each Receivable reads as its revision 1, hold included; the summary agrees.
    const before = await c.get('/receivables/b-000001')
    assert.deepEqual([before.revision, before.recovery.holds], [1, ['recovery_not_authorized', 'collection_not_enabled']])
    assert.equal((await c.get('/collection-summary')).recovery.holds.collection_not_enabled, 352)

    // A write before the fan-out: its revision includes the toggle, and the fan-out will skip it.
    const written = await c.put('/receivables/a-write', receivableBody('c1', 2, '90.00'))
    assert.equal(written.status, 200, written.body)
    assert.deepEqual([written.json.revision, written.json.recovery.holds], [2, ['recovery_not_authorized']])

    const w = worker()
    assert.equal(await w.runOnce(), true)
    const firstChunk = ids.filter((id) => id !== 'a-write').slice(0, 100)
    assert.deepEqual(await revisionsOf(db.store, code), [
      [1, 251],
      [2, 101],
    ])
    const progress = await fanoutStatus(db.store, code)
    assert.deepEqual(
      [progress?.last_seq, progress?.done_seq, progress?.target_seq, progress?.after_id, progress?.reached],
      ['1', '0', '1', firstChunk[99], '100'],
    )
    const reached = await c.get(`/receivables/${firstChunk[99]}`)
    assert.deepEqual([reached.revision, reached.recovery.holds], [2, ['recovery_not_authorized']])
    const notYet = await c.get(`/receivables/${ids.at(-1)}`)
    assert.deepEqual([notYet.revision, notYet.recovery.holds], [1, ['recovery_not_authorized', 'collection_not_enabled']])
    assert.equal((await c.get('/collection-summary')).recovery.holds.collection_not_enabled, 251)

    await w.runUntilIdle()
    assert.deepEqual(await revisionsOf(db.store, code), [[2, 352]])
    assert.equal((await c.get('/collection-summary')).recovery.holds.collection_not_enabled, 0)
    // The feed: the write's event, then one event per other Receivable, in id order (chunk after chunk).
    assert.deepEqual(await checkedFeed(db.store, code, feedStart), [
      ['a-write', 2],
      ...ids.filter((id) => id !== 'a-write').map((id) => [id, 2]),
    ])
    const done = await fanoutStatus(db.store, code)
    assert.deepEqual([done?.done_seq, done?.target_seq, done?.after_id, done?.reached, done?.failed_attempts], ['1', '1', null, '351', 0])
    assert.deepEqual(await db.store.query('SELECT seq FROM client_facts WHERE client_code = $1', [code]), [])

    // Nothing left: running again changes nothing.
    await w.runUntilIdle()
    assert.equal(await w.runOnce(), false)
    assert.deepEqual(await revisionsOf(db.store, code), [[2, 352]])
  })

  test('a fact recorded during a pass: every Receivable ends at the last fact, with increasing revisions in feed order', async () => {
    const ids = await idsInOrder(db.store, code)
    const feedStart = await lastSeq(db.store, code)
    assert.equal((await t.admin('PUT', `/admin/v1/clients/${code}`, { collectionEnabled: false })).status, 200)
    const w = worker()
    assert.equal(await w.runOnce(), true)
    assert.equal((await t.admin('PUT', `/admin/v1/clients/${code}`, { collectionEnabled: true })).status, 200)
    await w.runUntilIdle()
    // The first chunk reached the first fact before the second was recorded: it gets one revision for each.
    // Everything the pass reached after the second fact was recorded includes both in one revision.
    const firstChunk = new Set(ids.slice(0, 100))
    const finalRevisions = await db.store.query<{ id: string; revision: string; client_fact_seq: string }>(
      'SELECT external_receivable_id AS id, revision, client_fact_seq FROM receivables WHERE client_code = $1 ORDER BY 1',
      [code],
    )
    for (const r of finalRevisions) {
      assert.equal(Number(r.revision), firstChunk.has(r.id) ? 4 : 3, r.id)
      assert.equal(r.client_fact_seq, '3', r.id)
    }
    const feed = await checkedFeed(db.store, code, feedStart)
    assert.equal(feed.length, 352 + 100)
    assert.deepEqual(
      feed.slice(0, 100),
      ids.slice(0, 100).map((id) => [id, 3]),
    )
    assert.deepEqual(
      feed.slice(352),
      ids.slice(0, 100).map((id) => [id, 4]),
    )
    assert.deepEqual(await db.store.query('SELECT seq FROM client_facts WHERE client_code = $1', [code]), [])
  })
})

describe(`a chunk that fails (${engineName})`, () => {
  test('rolls back whole, is counted with its error and retried after a back-off; the retry completes it once', async () => {
    const code = 'fan-fail'
    const { c } = await clientWith(code, 30)
    assert.equal((await t.admin('PUT', `/admin/v1/clients/${code}`, { collectionEnabled: true })).status, 200)
    // A store whose next chunk fails after its Receivables were bumped, before anything committed: its feed statement
    // fails in the database (a serialization failure), so COMMIT, sent with it on PostgreSQL, rolls back.
    let failures = 1
    const failing: Store = {
      ...db.store,
      transaction: (fn) =>
        db.store.transaction((tx) =>
          fn({
            ...tx,
            query: async <T extends object>(sql: string, params?: readonly unknown[]) => {
              if (/INSERT INTO change_events/.test(sql) && failures > 0) {
                failures--
                return tx.query<T>(`DO $$ BEGIN RAISE EXCEPTION 'injected failure' USING ERRCODE = '40001'; END $$`)
              }
              return tx.query<T>(sql, params)
            },
          }),
        ),
    }
    const errors: unknown[] = []
    const w = createClientFanout({ store: failing, chunkSize: 10, onError: (e) => errors.push(e) })
    assert.equal(await w.runOnce(), true)
    assert.deepEqual(
      errors.map((e) => (e as Error).message),
      ['injected failure'],
    )
    assert.deepEqual(await revisionsOf(db.store, code), [[1, 32]], 'the failed chunk left nothing')
    const failed = await fanoutStatus(db.store, code)
    assert.deepEqual(
      [failed?.done_seq, failed?.target_seq, failed?.failed_attempts, failed?.last_error],
      ['0', '0', 1, 'SQLSTATE 40001: injected failure'],
    )
    // Backing off: not due now.
    assert.equal(await w.runOnce(), false)
    assert.equal((await c.get('/collection-summary')).recovery.holds.collection_not_enabled, 32)
    await db.store.query(`UPDATE client_fanouts SET next_attempt_at = '-infinity' WHERE client_code = $1`, [code])
    await w.runUntilIdle()
    assert.deepEqual(await revisionsOf(db.store, code), [[2, 32]])
    const ok = await fanoutStatus(db.store, code)
    assert.deepEqual([ok?.done_seq, ok?.failed_attempts, ok?.last_error, ok?.reached], ['1', 0, null, '32'])
  })
})

describe(`freshness flips (${engineName})`, () => {
  test('the sweep and the first Source write after it each record one fact; the write’s own Receivable gets one revision', async () => {
    const code = 'fan-fresh'
    const { c } = await clientWith(code, 200)
    const w = createClientFanout({ store: db.store, chunkSize: 64 })
    nowMs += 49 * 3600_000
    const sweep = await statementsOf(() => t.app.services.freshness.sweepClient(t.store, code))
    assert.equal(sweep.result, true)
    assert.equal(sweep.statements.filter((s) => /UPDATE receivables|INSERT INTO change_events/.test(s)).length, 0)
    await w.runUntilIdle()
    assert.deepEqual(await revisionsOf(db.store, code), [[2, 202]])
    assert.equal((await c.get('/receivables/b-000200')).recovery.holds.includes('source_stale'), true)

    const feedStart = await lastSeq(db.store, code)
    nowMs += 1000
    const put = await c.put('/receivables/a-write', receivableBody('c1', 2, '80.00'))
    assert.equal(put.status, 200, put.body)
    assert.deepEqual([put.json.revision, put.json.recovery.holds.includes('source_stale')], [3, false])
    assert.deepEqual(await checkedFeed(db.store, code, feedStart), [['a-write', 3]])
    // Others are not reached yet: revision 2, still stale.
    const other = await c.get('/receivables/b-000001')
    assert.deepEqual([other.revision, other.recovery.holds.includes('source_stale')], [2, true])
    await w.runUntilIdle()
    assert.deepEqual(await revisionsOf(db.store, code), [[3, 202]])
    const feed = await checkedFeed(db.store, code, feedStart)
    assert.equal(feed.length, 202)
    assert.equal(feed.filter(([id]) => id === 'a-write').length, 1, 'the write’s Receivable is not bumped twice')
    assert.equal((await c.get('/collection-summary')).recovery.holds.source_stale, 0)
  })
})

describe('two workers on one PostgreSQL database', { skip: onPostgres ? false : 'needs PostgreSQL: set DATABASE_URL' }, () => {
  test('three clients fanned out by two workers at once: every Receivable exactly once, feed order kept', async () => {
    const codes = ['fan-two-1', 'fan-two-2', 'fan-two-3']
    for (const code of codes) await clientWith(code, 600)
    const starts = new Map<string, number>()
    for (const code of codes) starts.set(code, await lastSeq(db.store, code))
    for (const code of codes) assert.equal((await t.admin('PUT', `/admin/v1/clients/${code}`, { collectionEnabled: true })).status, 200)
    const one = createClientFanout({ store: db.store, chunkSize: 50 })
    const two = createClientFanout({ store: db.open(), chunkSize: 50 })
    await Promise.all([one.runUntilIdle(), two.runUntilIdle()])
    for (const code of codes) {
      assert.deepEqual(await revisionsOf(db.store, code), [[2, 602]], code)
      const ids = await idsInOrder(db.store, code)
      assert.deepEqual(
        await checkedFeed(db.store, code, starts.get(code)),
        ids.map((id) => [id, 2]),
        code,
      )
    }
  })
})

describe(`100,000 Receivables (${engineName})`, () => {
  test('the first Source write after a stale flip and a collection toggle answer in a few statements; every Receivable then reaches its new revision once', async (ctx) => {
    // A control client with 2 Receivables: the same requests must run exactly the same statements.
    const small = await clientWith('fan-small', 0)
    const big = await clientWith('fan-big', 99_998)
    const w = createClientFanout({ store: db.store })
    nowMs += 49 * 3600_000
    const sweeps: string[][] = []
    for (const code of ['fan-small', 'fan-big'])
      sweeps.push((await statementsOf(() => t.app.services.freshness.sweepClient(t.store, code))).statements)
    assert.deepEqual(sweeps[1], sweeps[0])
    let started = Date.now()
    await w.runUntilIdle()
    const staleMs = Date.now() - started
    assert.deepEqual(await revisionsOf(db.store, 'fan-big'), [[2, 100_000]])

    nowMs += 1000
    const bigStart = await lastSeq(db.store, 'fan-big')
    const requests = async (k: Tenant, c: ReturnType<typeof api>) => {
      const put = await statementsOf(() => c.put('/customers/c1', { ...customerBody(), sourceReference: 'cust/again' }))
      assert.equal(put.result.status, 200, put.result.body)
      const toggle = await statementsOf(() => t.admin('PUT', `/admin/v1/clients/${k.clientCode}`, { collectionEnabled: true }))
      assert.equal(toggle.result.status, 200, toggle.result.body)
      return [put.statements, toggle.statements]
    }
    const [smallPut, smallToggle] = await requests(small.k, small.c)
    const [bigPut, bigToggle] = await requests(big.k, big.c)
    assert.deepEqual(bigPut, smallPut)
    assert.deepEqual(bigToggle, smallToggle)
    ctx.diagnostic(`statements: Customer PUT that flips the client fresh ${bigPut?.length}, collection toggle ${bigToggle?.length}`)
    // Both answered before the fan-out began: no Receivable has moved, the feed has only the Customer's event.
    assert.deepEqual(await revisionsOf(db.store, 'fan-big'), [[2, 100_000]])
    assert.deepEqual(
      (
        await db.store.query<{ type: string }>('SELECT type FROM change_events WHERE client_code = $1 AND seq > $2', ['fan-big', bigStart])
      ).map((e) => e.type),
      ['customer.updated'],
    )
    const pending = await big.c.get('/receivables/b-050000')
    assert.deepEqual([pending.revision, pending.recovery.holds], [2, ['recovery_not_authorized', 'collection_not_enabled', 'source_stale']])

    started = Date.now()
    await w.runUntilIdle()
    const bothMs = Date.now() - started
    // Both facts were pending when the pass began: one revision each, including both.
    assert.deepEqual(await revisionsOf(db.store, 'fan-big'), [[3, 100_000]])
    const events = await db.store.query<{ n: string; distinct_ids: string; min_rev: string; max_rev: string }>(
      `SELECT count(*) AS n, count(DISTINCT resource_id) AS distinct_ids, min(revision) AS min_rev, max(revision) AS max_rev
         FROM change_events WHERE client_code = $1 AND seq > $2 AND type = 'receivable.updated'`,
      ['fan-big', bigStart],
    )
    assert.deepEqual(events, [{ n: '100000', distinct_ids: '100000', min_rev: '3', max_rev: '3' }])
    const done = await big.c.get('/receivables/b-050000')
    assert.deepEqual([done.revision, done.recovery.holds], [3, ['recovery_not_authorized']])
    const summary = await big.c.get('/collection-summary')
    assert.deepEqual(
      [summary.receivables.total, summary.recovery.holds.collection_not_enabled, summary.recovery.holds.source_stale],
      [100_000, 0, 0],
    )
    ctx.diagnostic(
      `fan-out of 100,000 Receivables: stale flip ${staleMs} ms (${Math.round(100_000 / (staleMs / 1000))}/s), ` +
        `fresh flip + toggle ${bothMs} ms (${Math.round(100_000 / (bothMs / 1000))}/s)`,
    )
  })
})
