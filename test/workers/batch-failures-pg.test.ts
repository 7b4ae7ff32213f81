import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import pg from 'pg'
import { systemClock } from '../../src/domain/time.ts'
import { migrate } from '../../src/store/migrate.ts'
import { openPostgres } from '../../src/store/postgres.ts'
import { createBatchRunner } from '../../src/workers/batch-runner.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { assertEachCustomerWrittenOnce, customerRecords, waitFor, waitingOnAdvisoryLock } from '../helpers/batch-process.ts'
import { createPrivateCluster, type PrivateCluster, privateClusterUnavailable } from '../helpers/private-cluster.ts'
import { onPostgres } from '../helpers/store.ts'

/**
 * Batch worker failures that only a server with several sessions can produce: a deadlock between the worker
 * and another session, and the worker's backend terminated (pg_terminate_backend) in the middle of a chunk.
 * Both roll the chunk back and retry it; no record's outcome is a 503 and no record runs twice. And a crash
 * of the database server itself (a private cluster, never the shared one) in the middle of a chunk.
 */
const skip = onPostgres ? false : 'needs PostgreSQL: set DATABASE_URL (deadlocks and backends need sessions of a server)'

let t: TestApp
const sessions: pg.Client[] = []
const errors: unknown[] = []
before(async () => {
  if (!skip) t = await startTestApp()
})
after(async () => {
  for (const s of sessions) await s.end().catch(() => {})
  await t?.close()
})

function runner() {
  return createBatchRunner({
    store: t.store,
    clock: systemClock,
    operations: t.app.operations,
    chunkSize: 4,
    leaseSeconds: 30,
    maxChunkFailures: 3,
    retryBaseMs: 30,
    retryCapMs: 100,
    onError: (err) => errors.push(err),
  })
}

async function session(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: t.db.url as string })
  await c.connect()
  sessions.push(c)
  return c
}

const lockKey = (clientCode: string, id: string) => `${clientCode}/customer/${id}`
const putBatch = (k: Tenant, id: string, records: unknown[]) =>
  t.call('PUT', `/v1/clients/${k.clientCode}/batches/${id}`, { key: k.apiKey, body: { records } })
// biome-ignore lint/suspicious/noExplicitAny: batch responses are inspected field by field
const getBatch = async (k: Tenant, id: string): Promise<any> =>
  (await t.call('GET', `/v1/clients/${k.clientCode}/batches/${id}`, { key: k.apiKey })).json

async function runToEnd(r: ReturnType<typeof runner>, k: Tenant, id: string) {
  return waitFor(`batch ${id} finished`, async () => {
    await r.runOnce()
    const b = await getBatch(k, id)
    return b.status === 'queued' || b.status === 'running' ? undefined : b
  })
}

async function batchRow(clientCode: string, id: string) {
  const rows = await t.store.query<{ status: string; attempts: number; failed_attempts: number; last_error: string | null }>(
    'SELECT status, attempts, failed_attempts, last_error FROM batches WHERE client_code = $1 AND external_batch_id = $2',
    [clientCode, id],
  )
  const r = rows[0]
  return r ? [r.status, Number(r.attempts), Number(r.failed_attempts), r.last_error] : undefined
}

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i + 1}`)
const created = (list: string[]) =>
  list.map((externalId, i) => ({
    position: i + 1,
    recordId: `c${i + 1}`,
    kind: 'customer',
    externalId,
    status: 'succeeded',
    httpStatus: 201,
  }))

describe('failures between sessions', { skip }, () => {
  test('a deadlock between the worker and another session: the worker is the victim, its chunk is retried, every record 201 once', async () => {
    const k = await t.tenant('bfp-dl')
    assert.equal((await putBatch(k, 'b-1', customerRecords('dl', 8))).status, 202)
    // The other session holds dl-6 and will ask for dl-5, which the worker's second chunk takes before dl-6.
    const other = await session()
    await other.query('BEGIN')
    // Its own deadlock check waits long, so the worker's (1 s) finds the cycle and the worker is the victim.
    await other.query(`SET LOCAL deadlock_timeout = '20s'`)
    await other.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [lockKey('bfp-dl', 'dl-6')])
    const r = runner()
    const first = r.runOnce()
    await waitFor('the worker waiting on dl-6', async () => ((await waitingOnAdvisoryLock(t.db)) === 1 ? true : undefined))
    assert.deepEqual(
      (await getBatch(k, 'b-1')).counts,
      { total: 8, pending: 4, succeeded: 4, failed: 0, dependencyFailed: 0 },
      'the first chunk committed',
    )
    // Closing the cycle: this waits until the worker's deadlock check aborts the worker's transaction.
    await other.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [lockKey('bfp-dl', 'dl-5')])
    assert.equal(await first, true)
    await other.query('ROLLBACK')
    assert.deepEqual(
      errors.splice(0).map((e) => (e as { code?: string }).code),
      ['40P01'],
    )
    const b = await runToEnd(r, k, 'b-1')
    assert.equal(b.status, 'succeeded')
    assert.deepEqual(b.records, created(ids('dl', 8)))
    await assertEachCustomerWrittenOnce(t.db, 'bfp-dl', ids('dl', 8))
    const row = await batchRow('bfp-dl', 'b-1')
    assert.deepEqual(row?.slice(0, 3), ['succeeded', 2, 0])
    assert.match(String(row?.[3]), /^40P01: deadlock detected/)
  })

  test('the worker’s backend terminated mid-chunk (pg_terminate_backend): the chunk is retried on a new connection, every record 201 once', async () => {
    const k = await t.tenant('bfp-term')
    assert.equal((await putBatch(k, 'b-2', customerRecords('tm', 10))).status, 202)
    const other = await session()
    await other.query('BEGIN')
    await other.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [lockKey('bfp-term', 'tm-7')])
    const r = runner()
    const first = r.runOnce()
    // The worker's backend is the one waiting for the lock of tm-7 (the second chunk: records 5 to 8).
    const pid = await waitFor('the worker waiting on tm-7', async () => {
      const rows = await t.store.query<{ pid: number }>(
        `SELECT l.pid FROM pg_locks l JOIN pg_database d ON d.oid = l.database
          WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = current_database()`,
      )
      return rows[0]?.pid
    })
    assert.deepEqual((await t.store.query('SELECT pg_terminate_backend($1) AS done', [pid]))[0], { done: true })
    assert.equal(await first, true)
    await other.query('ROLLBACK')
    assert.deepEqual(
      errors.splice(0).map((e) => (e as { code?: string }).code),
      ['57P01'],
    )
    // Nothing of the open chunk committed; the first chunk did.
    assert.deepEqual((await getBatch(k, 'b-2')).counts, { total: 10, pending: 6, succeeded: 4, failed: 0, dependencyFailed: 0 })
    const b = await runToEnd(r, k, 'b-2')
    assert.deepEqual(b.records, created(ids('tm', 10)))
    await assertEachCustomerWrittenOnce(t.db, 'bfp-term', ids('tm', 10))
    const row = await batchRow('bfp-term', 'b-2')
    assert.deepEqual(row?.slice(0, 3), ['succeeded', 2, 0])
    assert.match(String(row?.[3]), /^57P01: terminating connection due to administrator command/)
  })
})

const noCluster = skip || (privateClusterUnavailable() ?? false)

describe('the database server crashes mid-chunk', { skip: noCluster }, () => {
  let cluster: PrivateCluster | undefined
  let app: TestApp | undefined
  after(async () => {
    await app?.close()
    await cluster?.destroy()
  })

  test('pg_ctl stop -m immediate while a chunk waits, then start: the batch finishes, every record 201 once', async () => {
    cluster = await createPrivateCluster()
    const admin = new pg.Client({ connectionString: cluster.url })
    await admin.connect()
    await admin.query('CREATE DATABASE irs')
    await admin.end()
    const url = cluster.urlOf('irs')
    const store = openPostgres(url, { connectionTimeoutMillis: 2000 })
    await migrate(store)
    app = await startTestApp({}, { db: { store, url, open: () => openPostgres(url), drop: () => store.close() } })
    const k = await app.tenant('bfp-crash')
    const records = customerRecords('cr', 10)
    assert.equal((await app.call('PUT', '/v1/clients/bfp-crash/batches/b-3', { key: k.apiKey, body: { records } })).status, 202)
    const holder = new pg.Client({ connectionString: url })
    holder.on('error', () => {})
    await holder.connect()
    await holder.query('BEGIN')
    await holder.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [lockKey('bfp-crash', 'cr-6')])
    const crashErrors: unknown[] = []
    const r = createBatchRunner({
      store,
      clock: systemClock,
      operations: app.app.operations,
      chunkSize: 4,
      leaseSeconds: 2,
      maxChunkFailures: 3,
      retryBaseMs: 30,
      retryCapMs: 100,
      onError: (err) => crashErrors.push(err),
    })
    const first = r.runOnce().catch((err) => err)
    await waitFor('the worker waiting on cr-6', async () => {
      const rows = await store.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)
      return rows[0]?.n === 1 ? true : undefined
    })
    await cluster.stop('immediate')
    await first
    await holder.end().catch(() => {})
    await cluster.start()
    const done = await waitFor('the batch finished after the crash', async () => {
      try {
        await r.runOnce()
        const rows = await store.query<{ status: string }>(`SELECT status FROM batches WHERE external_batch_id = 'b-3'`)
        return rows[0]?.status === 'succeeded' ? true : undefined
      } catch {
        return undefined
      }
    })
    assert.equal(done, true)
    assert.ok(crashErrors.length >= 1)
    const b = (await app.call('GET', '/v1/clients/bfp-crash/batches/b-3', { key: k.apiKey })).json
    assert.deepEqual(b.records, created(ids('cr', 10)))
    await assertEachCustomerWrittenOnce(app.db, 'bfp-crash', ids('cr', 10))
    const [row] = await store.query<{ failed_attempts: number }>(`SELECT failed_attempts FROM batches WHERE external_batch_id = 'b-3'`)
    assert.equal(Number(row?.failed_attempts), 0)
  })
})
