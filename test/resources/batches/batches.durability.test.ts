import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import pg from 'pg'
import { http, type ServiceProcess, seedTenant, startService } from '../../helpers/service-process.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../../helpers/store.ts'

/**
 * Durability of batches with real processes on PostgreSQL: a SIGKILL at any moment loses no accepted
 * batch and runs no record twice; two instances share the work without running any batch twice.
 */
const skip = onPostgres ? false : 'needs PostgreSQL (set DATABASE_URL)'
const children: ServiceProcess[] = []
const dbs: TestDatabase[] = []
after(async () => {
  for (const c of children) await c.kill()
  for (const d of dbs) await d.drop()
})

const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `ref/${n}` })
const records = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({
    recordId: `c${i + 1}`,
    kind: 'customer',
    externalId: `${prefix}-${i + 1}`,
    body: customer(i + 1),
  }))

async function service(db: TestDatabase, env: Record<string, string> = {}) {
  const s = await startService({
    DATABASE_URL: db.url as string,
    BATCH_CHUNK_SIZE: '10',
    BATCH_LEASE_SECONDS: '2',
    BATCH_POLL_MS: '50',
    ...env,
  })
  children.push(s)
  return s
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, tries = 600): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = await probe()
    if (v !== undefined) return v
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`timed out waiting for ${what}`)
}

/** Holds the advisory lock a worker needs to write this Customer (src/store/locks.ts), from another session. */
async function blockCustomer(url: string, clientCode: string, id: string) {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  await c.query('BEGIN')
  await c.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`${clientCode}/customer/${id}`])
  return {
    async release() {
      await c.query('ROLLBACK')
      await c.end()
    },
  }
}

async function assertEachRecordRanOnce(db: TestDatabase, clientCode: string, ids: string[]) {
  const customers = await db.store.query<{ external_customer_id: string; revision: string }>(
    'SELECT external_customer_id, revision::text FROM customers WHERE client_code = $1 ORDER BY 1',
    [clientCode],
  )
  assert.deepEqual(
    customers.map((c) => [c.external_customer_id, c.revision]),
    [...ids].sort().map((id) => [id, '1']),
  )
  const events = await db.store.query<{ resource_id: string; n: number }>(
    'SELECT resource_id, count(*)::int AS n FROM change_events WHERE client_code = $1 GROUP BY resource_id',
    [clientCode],
  )
  assert.equal(events.length, ids.length)
  assert.ok(events.every((e) => e.n === 1))
}

describe('batches survive a killed process', { skip }, () => {
  test('SIGKILL mid-batch: on restart the batch finishes, and no record runs twice', async () => {
    const db = await createTestDatabase()
    dbs.push(db)
    const one = await service(db)
    const key = await seedTenant(one.url, 'crash', ['customers:write', 'customers:read'])
    const lock = await blockCustomer(db.url as string, 'crash', 'k-50')
    const put = await http(one.url, 'PUT', '/v1/clients/crash/batches/b-1', { token: key, body: { records: records('k', 100) } })
    assert.equal(put.status, 202)
    // Four chunks of ten commit; the fifth waits on record 50.
    await waitFor('40 records', async () => {
      const b = await http(one.url, 'GET', '/v1/clients/crash/batches/b-1', { token: key })
      return b.json.counts.succeeded >= 40 ? b : undefined
    })
    await one.kill('SIGKILL')
    const mid = await db.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM customers WHERE client_code = 'crash'`)
    assert.equal(mid[0]?.n, 40)
    await lock.release()
    const two = await service(db)
    const done = await waitFor('batch finished', async () => {
      const b = await http(two.url, 'GET', '/v1/clients/crash/batches/b-1', { token: key })
      return b.json.status === 'succeeded' ? b : undefined
    })
    assert.deepEqual(done.json.counts, { total: 100, pending: 0, succeeded: 100, failed: 0, dependencyFailed: 0 })
    assert.ok(done.json.records.every((r: { httpStatus: number }) => r.httpStatus === 201))
    await assertEachRecordRanOnce(
      db,
      'crash',
      Array.from({ length: 100 }, (_, i) => `k-${i + 1}`),
    )
    await two.kill()
  })

  test('SIGKILL right after the 202: the accepted batch is not lost', async () => {
    const db = await createTestDatabase()
    dbs.push(db)
    const one = await service(db)
    const key = await seedTenant(one.url, 'crash2', ['customers:write', 'customers:read'])
    const lock = await blockCustomer(db.url as string, 'crash2', 'j-1')
    assert.equal(
      (await http(one.url, 'PUT', '/v1/clients/crash2/batches/b-2', { token: key, body: { records: records('j', 20) } })).status,
      202,
    )
    await one.kill('SIGKILL')
    await lock.release()
    const two = await service(db)
    const done = await waitFor('batch finished', async () => {
      const b = await http(two.url, 'GET', '/v1/clients/crash2/batches/b-2', { token: key })
      return b.json.status === 'succeeded' ? b : undefined
    })
    assert.equal(done.json.counts.succeeded, 20)
    await assertEachRecordRanOnce(
      db,
      'crash2',
      Array.from({ length: 20 }, (_, i) => `j-${i + 1}`),
    )
    await two.kill()
  })
})

describe('several instances share the work', { skip }, () => {
  test('two instances run 20 batches of 50 records; every record runs exactly once', async () => {
    const db = await createTestDatabase()
    dbs.push(db)
    const env = { BATCH_WORKER_CONCURRENCY: '2', CONCURRENCY_PER_KEY: '100', RATE_LIMIT_PER_MINUTE: '100000' }
    const [a, b] = [await service(db, env), await service(db, env)]
    const key = await seedTenant(a.url, 'multi', ['customers:write', 'customers:read'])
    for (let i = 0; i < 20; i++) {
      const target = i % 2 === 0 ? a : b
      const res = await http(target.url, 'PUT', `/v1/clients/multi/batches/m-${i}`, { token: key, body: { records: records(`m${i}`, 50) } })
      assert.equal(res.status, 202)
    }
    await waitFor(
      'all batches finished',
      async () => {
        const open = await db.store.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM batches WHERE client_code = 'multi' AND status IN ('queued', 'running')`,
        )
        return open[0]?.n === 0 ? true : undefined
      },
      1200,
    )
    const statuses = await db.store.query<{ status: string; runner_id: string | null }>(
      `SELECT status, runner_id FROM batches WHERE client_code = 'multi'`,
    )
    assert.equal(statuses.length, 20)
    assert.ok(statuses.every((s) => s.status === 'succeeded' && s.runner_id))
    const ids = Array.from({ length: 20 }, (_, i) => Array.from({ length: 50 }, (_, j) => `m${i}-${j + 1}`)).flat()
    await assertEachRecordRanOnce(db, 'multi', ids)
    const runners = new Set(statuses.map((s) => s.runner_id))
    console.log(`# batches ran on ${runners.size} instance(s)`)
  })
})
