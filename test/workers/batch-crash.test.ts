import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import {
  assertAllCreated,
  assertEachCustomerWrittenOnce,
  customerRecords,
  getBatch,
  harness,
  waitFor,
  waitingOnAdvisoryLock,
} from '../helpers/batch-process.ts'
import { http, seedTenant } from '../helpers/service-process.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * A SIGKILLed service process loses no accepted batch and runs no record twice. The real service runs as
 * a child process (node --import tsx src/main.ts) on this file's own PostgreSQL database, with chunks of
 * 10 records and a 2 s lease. To kill it at a known point, the test holds the advisory lock the worker
 * needs to write one Customer (src/store/locks.ts) from its own session: the worker commits the chunks
 * before that record and then waits inside the next chunk's transaction.
 */
const skip = onPostgres ? false : 'needs PostgreSQL: set DATABASE_URL (a child process cannot share the in-memory PGlite store)'

let db: TestDatabase | undefined
const h = harness(() => db as TestDatabase)
after(async () => {
  await h.cleanup()
  await db?.drop()
})

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i + 1}`)

async function batchRow(clientCode: string, id: string) {
  const rows = await (db as TestDatabase).store.query<{
    status: string
    runner_id: string | null
    attempts: number
    completed_at: unknown
  }>('SELECT status, runner_id, attempts, completed_at FROM batches WHERE client_code = $1 AND external_batch_id = $2', [clientCode, id])
  assert.equal(rows.length, 1)
  return rows[0] as { status: string; runner_id: string | null; attempts: number; completed_at: unknown }
}

async function recordStatuses(clientCode: string, id: string) {
  return (
    await (db as TestDatabase).store.query<{ status: string; n: number; first: number; last: number }>(
      `SELECT status, count(*)::int AS n, min(position)::int AS first, max(position)::int AS last
         FROM batch_records WHERE client_code = $1 AND external_batch_id = $2 GROUP BY status ORDER BY status`,
      [clientCode, id],
    )
  ).map((r) => [r.status, Number(r.n), Number(r.first), Number(r.last)])
}

describe('a killed service process', { skip }, () => {
  test('SIGKILL mid-batch: a new process resumes after the last committed chunk; every record ran exactly once', async () => {
    db = await createTestDatabase()
    const one = await h.service()
    const key = await seedTenant(one.url, 'crash', ['customers:write', 'customers:read'])
    const lock = await h.blockCustomer('crash', 'cust-50')

    const put = await http(one.url, 'PUT', '/v1/clients/crash/batches/b-1', { token: key, body: { records: customerRecords('cust', 100) } })
    assert.equal(put.status, 202)
    assert.equal(put.json.status, 'queued')
    assert.deepEqual(put.json.counts, { total: 100, pending: 100, succeeded: 0, failed: 0, dependencyFailed: 0 })

    // Chunks 1-4 (records 1-40) commit; chunk 5 waits on record 50's lock.
    const mid = await waitFor('40 records committed', async () => {
      const b = await getBatch(one.url, key, 'crash', 'b-1')
      return b.counts.succeeded >= 40 ? b : undefined
    })
    await waitFor('the worker waiting on the lock of record 50', async () =>
      (await waitingOnAdvisoryLock(db as TestDatabase)) === 1 ? true : undefined,
    )
    assert.equal(mid.status, 'running')
    assert.equal('completedAt' in mid, false)
    assert.deepEqual(mid.counts, { total: 100, pending: 60, succeeded: 40, failed: 0, dependencyFailed: 0 })
    const before = await batchRow('crash', 'b-1')
    assert.deepEqual([before.status, before.attempts], ['running', 1])
    assert.ok(before.runner_id)

    await one.kill('SIGKILL')
    // The open chunk (records 41-50) never committed.
    assert.deepEqual(await recordStatuses('crash', 'b-1'), [
      ['pending', 60, 41, 100],
      ['succeeded', 40, 1, 40],
    ])
    await assertEachCustomerWrittenOnce(db, 'crash', ids('cust', 40))
    await lock.release()

    const two = await h.service()
    const done = await waitFor('the batch finished on the new process', async () => {
      const b = await getBatch(two.url, key, 'crash', 'b-1')
      return b.status === 'queued' || b.status === 'running' ? undefined : b
    })
    assertAllCreated(done, ids('cust', 100))
    await assertEachCustomerWrittenOnce(db, 'crash', ids('cust', 100))
    const after = await batchRow('crash', 'b-1')
    assert.equal(after.status, 'succeeded')
    assert.ok(after.completed_at)
    // Claimed once by each process: the second one took over the expired lease.
    assert.equal(after.attempts, 2)
    assert.ok(after.runner_id)
    assert.notEqual(after.runner_id, before.runner_id)
  })

  test('SIGKILL right after the 202: the accepted batch is not lost and completes after restart', async () => {
    db ??= await createTestDatabase()
    const one = await h.service()
    const key = await seedTenant(one.url, 'crash2', ['customers:write', 'customers:read'])
    // Nothing of the batch can commit before the kill: its first record is blocked.
    const lock = await h.blockCustomer('crash2', 'j-1')
    const put = await http(one.url, 'PUT', '/v1/clients/crash2/batches/b-2', { token: key, body: { records: customerRecords('j', 20) } })
    assert.equal(put.status, 202)
    await one.kill('SIGKILL')

    const row = await batchRow('crash2', 'b-2')
    assert.ok(['queued', 'running'].includes(row.status), row.status)
    assert.equal(row.completed_at, null)
    assert.deepEqual(await recordStatuses('crash2', 'b-2'), [['pending', 20, 1, 20]])
    assert.deepEqual(await db.store.query(`SELECT count(*)::int AS n FROM customers WHERE client_code = 'crash2'`), [{ n: 0 }])
    await lock.release()

    const two = await h.service()
    // The batch as the new process reports it right after start: the accepted submission is there.
    assert.equal((await getBatch(two.url, key, 'crash2', 'b-2')).counts.total, 20)
    const done = await waitFor('the batch finished on the new process', async () => {
      const b = await getBatch(two.url, key, 'crash2', 'b-2')
      return b.status === 'queued' || b.status === 'running' ? undefined : b
    })
    assertAllCreated(done, ids('j', 20))
    await assertEachCustomerWrittenOnce(db, 'crash2', ids('j', 20))
    // An identical retry after the restart is 200 with the finished state, not a second run.
    const retry = await http(two.url, 'PUT', '/v1/clients/crash2/batches/b-2', { token: key, body: { records: customerRecords('j', 20) } })
    assert.equal(retry.status, 200)
    assert.deepEqual(retry.json, done)
    assert.deepEqual(await db.store.query(`SELECT count(*)::int AS n FROM batches WHERE client_code = 'crash2'`), [{ n: 1 }])
  })
})
