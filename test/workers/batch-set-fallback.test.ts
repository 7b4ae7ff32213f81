import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { MAX_BATCH_CHUNK_SIZE } from '../../src/config.ts'
import { systemClock } from '../../src/domain/time.ts'
import type { SetOperation, WriteOperation } from '../../src/resources/operations.ts'
import type { Store } from '../../src/store/store.ts'
import { createBatchRunner, MAX_RECORD_SAVEPOINTS_PER_CHUNK } from '../../src/workers/batch-runner.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { customerRecords } from '../helpers/batch-process.ts'

/**
 * The set-based run of a chunk is a fast path, never the only one (issue 11): when a multi-row write fails with
 * an error that is not the store's (a bug, a constraint the rules did not foresee), the chunk's writes so far are
 * rolled back to the chunk's savepoint and its records run again one by one, each through its synchronous rules,
 * with exactly their outcomes and effects. A transient store error is not that: the chunk is retried.
 */
let t: TestApp
before(async () => {
  t = await startTestApp()
})
after(() => t.close())

const putBatch = (k: Tenant, id: string, records: unknown[]) =>
  t.call('PUT', `/v1/clients/${k.clientCode}/batches/${id}`, { key: k.apiKey, body: { records } })
// biome-ignore lint/suspicious/noExplicitAny: batch responses are inspected field by field
const getBatch = async (k: Tenant, id: string): Promise<any> =>
  (await t.call('GET', `/v1/clients/${k.clientCode}/batches/${id}`, { key: k.apiKey })).json

/** The Customer operation whose set-based run writes its records and then throws `error` (`times` times). */
function failingCustomers(error: () => Error, times: number): { op: WriteOperation; calls: () => number } {
  const real = t.app.operations.customer
  const many = real.many as SetOperation
  let calls = 0
  const op: WriteOperation = {
    ...real,
    many: {
      keys: many.keys,
      async runMany(uow, ctx, records, now) {
        calls++
        const outcomes = await many.runMany(uow, ctx, records, now)
        if (calls <= times) throw error()
        return outcomes
      },
    },
  }
  return { op, calls: () => calls }
}

async function feed(clientCode: string) {
  const rows = await t.store.query<{ type: string; resource_id: string; revision: string }>(
    'SELECT type, resource_id, revision FROM change_events WHERE client_code = $1 ORDER BY seq',
    [clientCode],
  )
  return rows.map((r) => `${r.type} ${r.resource_id} @${r.revision}`)
}

describe('when the set-based run fails', () => {
  test('an unexpected error: the chunk runs record by record, each written once, with its synchronous outcome', async () => {
    const k = await t.tenant('set-fallback')
    const errors: unknown[] = []
    const failing = failingCustomers(() => new Error('a multi-row write went wrong'), 1)
    const runner = createBatchRunner({
      store: t.store,
      clock: systemClock,
      operations: { ...t.app.operations, customer: failing.op },
      chunkSize: 10,
      onError: (err) => errors.push(err),
    })
    const records = [
      ...customerRecords('sf', 3),
      { recordId: 'again', kind: 'customer', externalId: 'sf-1', body: customerRecords('sf', 1)[0]?.body },
    ]
    assert.equal((await putBatch(k, 'b1', records)).status, 202)
    await runner.drain()
    const b = await getBatch(k, 'b1')
    assert.deepEqual(
      b.records.map((r: { recordId: string; status: string; httpStatus: number }) => [r.recordId, r.status, r.httpStatus]),
      [
        ['c1', 'succeeded', 201],
        ['c2', 'succeeded', 201],
        ['c3', 'succeeded', 201],
        ['again', 'succeeded', 200],
      ],
    )
    assert.equal(b.status, 'succeeded')
    assert.deepEqual(
      errors.map((e) => (e as Error).message),
      ['a multi-row write went wrong'],
    )
    // The set-based writes were rolled back: one creation each, one event each.
    assert.deepEqual(await feed(k.clientCode), ['customer.created sf-1 @1', 'customer.created sf-2 @1', 'customer.created sf-3 @1'])
    const rows = await t.store.query<{ failed_attempts: number }>(
      'SELECT failed_attempts FROM batches WHERE client_code = $1 AND external_batch_id = $2',
      [k.clientCode, 'b1'],
    )
    assert.equal(Number(rows[0]?.failed_attempts), 0)
  })

  test('a transient store error: the chunk is rolled back and retried set-based, not run record by record', async () => {
    const k = await t.tenant('set-transient')
    const errors: unknown[] = []
    const failing = failingCustomers(() => Object.assign(new Error('could not serialize access'), { code: '40001' }), 1)
    const runner = createBatchRunner({
      store: t.store,
      clock: systemClock,
      operations: { ...t.app.operations, customer: failing.op },
      chunkSize: 10,
      retryBaseMs: 10,
      retryCapMs: 10,
      onError: (err) => errors.push(err),
    })
    assert.equal((await putBatch(k, 'b2', customerRecords('st', 2))).status, 202)
    await runner.runOnce()
    const failed = await t.store.query<{ failed_attempts: number; last_error: string }>(
      'SELECT failed_attempts, last_error FROM batches WHERE client_code = $1 AND external_batch_id = $2',
      [k.clientCode, 'b2'],
    )
    assert.deepEqual([Number(failed[0]?.failed_attempts), failed[0]?.last_error], [1, '40001: could not serialize access'])
    assert.deepEqual(await feed(k.clientCode), [])
    await new Promise((r) => setTimeout(r, 50))
    await runner.drain()
    const b = await getBatch(k, 'b2')
    assert.deepEqual(
      b.records.map((r: { status: string; httpStatus: number }) => [r.status, r.httpStatus]),
      [
        ['succeeded', 201],
        ['succeeded', 201],
      ],
    )
    assert.equal(failing.calls(), 2)
    assert.deepEqual(await feed(k.clientCode), ['customer.created st-1 @1', 'customer.created st-2 @1'])
  })
})

describe('savepoints per chunk stay within the subtransaction cache of a PostgreSQL backend', () => {
  /** The store, counting each transaction's per-record savepoints (`SAVEPOINT batch_record`), in order. */
  function countingSavepoints() {
    const perTransaction: number[] = []
    const store: Store = {
      ...t.store,
      query: (sql, params, options) => t.store.query(sql, params, options),
      exec: (sql) => t.store.exec(sql),
      transaction(fn, ahead) {
        return t.store.transaction((tx) => {
          const i = perTransaction.push(0) - 1
          return fn({
            ...tx,
            serialized: tx.serialized,
            query(sql, params, options) {
              if (sql === 'SAVEPOINT batch_record') perTransaction[i] = (perTransaction[i] ?? 0) + 1
              return tx.query(sql, params, options)
            },
          })
        }, ahead)
      },
    }
    return { store, perTransaction }
  }

  const outcomes = async (k: Tenant, id: string) =>
    (await getBatch(k, id)).records.map(
      (r: { recordId: string; status: string; httpStatus: number }) => `${r.recordId} ${r.status} ${r.httpStatus}`,
    )

  test(`records that run alone: at most ${MAX_RECORD_SAVEPOINTS_PER_CHUNK} per chunk, the rest in the next chunk, in array order`, async () => {
    const k = await t.tenant('savepoint-cap')
    const counted = countingSavepoints()
    // The Customer operation without its set-based form: each record runs alone, in its savepoint.
    const { many: _many, ...alone } = t.app.operations.customer
    const runner = createBatchRunner({
      store: counted.store,
      clock: systemClock,
      operations: { ...t.app.operations, customer: alone },
      chunkSize: MAX_BATCH_CHUNK_SIZE,
    })
    assert.equal((await putBatch(k, 'many-alone', customerRecords('sa', 70))).status, 202)
    await runner.drain()
    // The chunk's lease and outcome statements are not savepoints; the claim runs outside a transaction.
    assert.deepEqual(
      counted.perTransaction.filter((n) => n > 0),
      [MAX_RECORD_SAVEPOINTS_PER_CHUNK, 70 - MAX_RECORD_SAVEPOINTS_PER_CHUNK],
    )
    assert.deepEqual(
      await outcomes(k, 'many-alone'),
      Array.from({ length: 70 }, (_, i) => `c${i + 1} succeeded 201`),
    )
    const events = await feed(k.clientCode)
    assert.deepEqual(
      events,
      Array.from({ length: 70 }, (_, i) => `customer.created sa-${i + 1} @1`),
    )
  })

  test('a chunk whose set-based run failed runs at most that many records again one by one; the rest run set-based next', async () => {
    const k = await t.tenant('savepoint-fallback')
    const counted = countingSavepoints()
    const errors: unknown[] = []
    const failing = failingCustomers(() => new Error('a multi-row write went wrong'), 1)
    const runner = createBatchRunner({
      store: counted.store,
      clock: systemClock,
      operations: { ...t.app.operations, customer: failing.op },
      chunkSize: MAX_BATCH_CHUNK_SIZE,
      onError: (err) => errors.push(err),
    })
    assert.equal((await putBatch(k, 'fallback-cap', customerRecords('sf', 70))).status, 202)
    await runner.drain()
    assert.deepEqual(
      counted.perTransaction.filter((n) => n > 0),
      [MAX_RECORD_SAVEPOINTS_PER_CHUNK],
    )
    assert.equal(failing.calls(), 2)
    assert.deepEqual(
      errors.map((e) => (e as Error).message),
      ['a multi-row write went wrong'],
    )
    assert.deepEqual(
      await outcomes(k, 'fallback-cap'),
      Array.from({ length: 70 }, (_, i) => `c${i + 1} succeeded 201`),
    )
    assert.deepEqual(
      await feed(k.clientCode),
      Array.from({ length: 70 }, (_, i) => `customer.created sf-${i + 1} @1`),
    )
  })
})
