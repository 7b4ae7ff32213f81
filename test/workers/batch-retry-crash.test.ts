import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import { ADMIN_TOKEN } from '../helpers/app.ts'
import {
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
 * A retry batch (`{retryOf}`: docs/decisions.md, "Retry only what failed") is a batch like any other for the
 * runner: a SIGKILL while it runs loses nothing and runs no record twice. The real service runs as child
 * processes on this file's own PostgreSQL database (chunks of 10 records, a 2 s lease); the test holds the
 * identity lock of one Customer to stop the worker at a known point (test/helpers/batch-process.ts).
 */
const skip = onPostgres ? false : 'needs PostgreSQL: set DATABASE_URL (a child process cannot share the in-memory PGlite store)'

let db: TestDatabase | undefined
const h = harness(() => db as TestDatabase)
after(async () => {
  await h.cleanup()
  await db?.drop()
})

const ids = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `cust-${from + i}`)
const final = (b: { status: string }) => !['queued', 'running'].includes(b.status)

describe('a killed service process during a retry batch', { skip }, () => {
  test('SIGKILL mid-retry: the new process finishes it; every retried record ran exactly once', async () => {
    db = await createTestDatabase()
    const one = await h.service()
    const key = await seedTenant(one.url, 'rcrash', ['customers:write', 'customers:read'])
    const grant = (scopes: string[]) =>
      http(one.url, 'PUT', '/admin/v1/integrations/int-rcrash/grants/rcrash', { token: ADMIN_TOKEN, body: { scopes } })

    // The earlier batch: its first chunk (cust-1..10) runs with the grant it loaded; the grant then loses
    // customers:write, so the other 30 records fail 403 as their synchronous route would.
    const first = await h.blockCustomer('rcrash', 'cust-1')
    const records = customerRecords('cust', 40)
    assert.equal((await http(one.url, 'PUT', '/v1/clients/rcrash/batches/b-0', { token: key, body: { records } })).status, 202)
    await waitFor('the first chunk waiting on cust-1', async () =>
      (await waitingOnAdvisoryLock(db as TestDatabase)) === 1 ? true : undefined,
    )
    assert.equal((await grant(['customers:read'])).status, 200)
    await first.release()
    // Read from the database: the narrowed grant may not read the batch.
    await waitFor('the earlier batch finished', async () => {
      const rows = await (db as TestDatabase).store.query<{ status: string }>(
        `SELECT status FROM batches WHERE client_code = 'rcrash' AND external_batch_id = 'b-0'`,
      )
      return rows[0] && final(rows[0]) ? true : undefined
    })
    assert.equal((await grant(['customers:write', 'customers:read'])).status, 200)
    const earlier = await getBatch(one.url, key, 'rcrash', 'b-0')
    assert.equal(earlier.status, 'partially_succeeded')
    assert.deepEqual(earlier.counts, { total: 40, pending: 0, succeeded: 10, failed: 30, dependencyFailed: 0 })
    assert.ok(earlier.records.slice(10).every((r: { httpStatus: number }) => r.httpStatus === 403))

    // The cause fixed (the grant again holds customers:write), the retry: cust-11..40 at positions 1..30. Its
    // first chunk (cust-11..20) commits; the second waits on cust-25 and the process is killed there.
    const lock = await h.blockCustomer('rcrash', 'cust-25')
    const put = await http(one.url, 'PUT', '/v1/clients/rcrash/batches/b-1', { token: key, body: { retryOf: 'b-0' } })
    assert.equal(put.status, 202, JSON.stringify(put.json))
    assert.deepEqual(put.json.counts, { total: 30, pending: 30, succeeded: 0, failed: 0, dependencyFailed: 0 })
    await waitFor('10 retried records committed', async () => {
      const b = await getBatch(one.url, key, 'rcrash', 'b-1')
      return b.counts.succeeded >= 10 ? b : undefined
    })
    await waitFor('the worker waiting on cust-25', async () => ((await waitingOnAdvisoryLock(db as TestDatabase)) === 1 ? true : undefined))
    await one.kill('SIGKILL')
    await assertEachCustomerWrittenOnce(db, 'rcrash', ids(1, 20))
    await lock.release()

    const two = await h.service()
    const done = await waitFor('the retry finished on the new process', async () => {
      const b = await getBatch(two.url, key, 'rcrash', 'b-1')
      return final(b) ? b : undefined
    })
    assert.equal(done.status, 'succeeded')
    assert.equal(done.retryOf, 'b-0')
    assert.deepEqual(
      done.records.map((r: { recordId: string; externalId: string; httpStatus: number; retriedFrom: unknown }) => [
        r.recordId,
        r.externalId,
        r.httpStatus,
        r.retriedFrom,
      ]),
      Array.from({ length: 30 }, (_, i) => [`c${i + 11}`, `cust-${i + 11}`, 201, { externalBatchId: 'b-0', position: i + 11 }]),
    )
    await assertEachCustomerWrittenOnce(db, 'rcrash', ids(1, 40))
    // The identical retry after the restart answers the finished state and queues nothing.
    const again = await http(two.url, 'PUT', '/v1/clients/rcrash/batches/b-1', { token: key, body: { retryOf: 'b-0' } })
    assert.equal(again.status, 200)
    assert.deepEqual(again.json, done)
    assert.deepEqual(await (db as TestDatabase).store.query(`SELECT count(*)::int AS n FROM batches WHERE client_code = 'rcrash'`), [
      { n: 2 },
    ])
  })
})
