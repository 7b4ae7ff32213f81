import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { ConfigError, loadConfig, MAX_BATCH_CHUNK_SIZE } from '../../src/config.ts'
import { systemClock } from '../../src/domain/time.ts'
import { CommitOutcomeUnknownError } from '../../src/store/store.ts'
import { createBatchRunner, isTransientStoreError } from '../../src/workers/batch-runner.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { assertEachCustomerWrittenOnce, customerRecords } from '../helpers/batch-process.ts'

/**
 * Batch worker failure handling, on both stores, with real failures raised by the database itself (triggers
 * that raise a chosen SQLSTATE: the store's own error objects, not fakes):
 * - a transient error inside a record (serialization failure, deadlock) rolls the chunk back and retries it;
 *   it never becomes the record's outcome;
 * - a chunk that keeps failing outside any record backs off (`next_attempt_at`, doubling, capped), keeps
 *   `last_error`, and after `maxChunkFailures` failures in a row fails its remaining records with 503
 *   `projection_unavailable` saying they were not run;
 * - a record's own unexpected error stays that record's 503, as its synchronous route answers.
 * Exact record outcomes, and every record's effect at most once (resources, revisions, feed events).
 */
let t: TestApp
const errors: unknown[] = []
before(async () => {
  t = await startTestApp()
})
after(() => t.close())

const retry = { maxChunkFailures: 3, retryBaseMs: 30, retryCapMs: 100 }
function runner(chunkSize = 2, backoff: Partial<typeof retry> = {}) {
  return createBatchRunner({
    store: t.store,
    clock: systemClock,
    operations: t.app.operations,
    chunkSize,
    leaseSeconds: 30,
    ...retry,
    ...backoff,
    onError: (err) => errors.push(err),
  })
}

const putBatch = (k: Tenant, id: string, records: unknown[]) =>
  t.call('PUT', `/v1/clients/${k.clientCode}/batches/${id}`, { key: k.apiKey, body: { records } })
// biome-ignore lint/suspicious/noExplicitAny: batch responses are inspected field by field
const getBatch = async (k: Tenant, id: string): Promise<any> =>
  (await t.call('GET', `/v1/clients/${k.clientCode}/batches/${id}`, { key: k.apiKey })).json

interface BatchRow {
  status: string
  attempts: number
  failed_attempts: number
  last_error: string | null
  backoff_ms: number | null
}
async function batchRow(clientCode: string, id: string): Promise<BatchRow> {
  const rows = await t.store.query<BatchRow>(
    `SELECT status, attempts, failed_attempts, last_error,
            round(extract(epoch FROM next_attempt_at - lease_expires_at) * 1000)::int AS backoff_ms
       FROM batches WHERE client_code = $1 AND external_batch_id = $2`,
    [clientCode, id],
  )
  const r = rows[0] as BatchRow
  return {
    ...r,
    attempts: Number(r.attempts),
    failed_attempts: Number(r.failed_attempts),
    backoff_ms: r.backoff_ms === null ? null : Number(r.backoff_ms),
  }
}

/** Runs the batch to its end through `runOnce`, waiting out backoffs; returns how many claims found it ready. */
async function runToEnd(r: ReturnType<typeof runner>, k: Tenant, id: string): Promise<number> {
  const deadline = Date.now() + 30_000
  let claims = 0
  for (;;) {
    if (await r.runOnce()) claims++
    const b = await getBatch(k, id)
    if (b.status !== 'queued' && b.status !== 'running') return claims
    if (Date.now() > deadline) throw new Error(`batch ${id} did not finish: ${JSON.stringify(b.counts)}`)
    await new Promise((res) => setTimeout(res, 15))
  }
}

const created = (ids: string[]) =>
  ids.map((externalId, i) => ({
    position: i + 1,
    recordId: `c${i + 1}`,
    kind: 'customer',
    externalId,
    status: 'succeeded',
    httpStatus: 201,
  }))
const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i + 1}`)

/** A trigger on `table` that raises `sqlstate` for rows matching `when`, the first `times` times (all, if null). */
async function failWith(name: string, table: string, when: string, sqlstate: string, times: number | null) {
  await t.store.exec(`
    CREATE SEQUENCE ${name}_n;
    CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF ${when} AND (${times === null ? 'true' : `nextval('${name}_n') <= ${times}`}) THEN
        RAISE EXCEPTION 'injected by ${name}' USING ERRCODE = '${sqlstate}';
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER ${name} BEFORE INSERT OR UPDATE ON ${table} FOR EACH ROW EXECUTE FUNCTION ${name}();`)
  return () => t.store.exec(`DROP TRIGGER ${name} ON ${table}; DROP FUNCTION ${name}(); DROP SEQUENCE ${name}_n;`)
}

const sqlstates = () => errors.splice(0).map((e) => (e as { code?: string }).code)

describe('transient errors inside a record retry the chunk', () => {
  test('two serialization failures (40001): the chunk is rolled back and retried; every record 201, each written once', async () => {
    const k = await t.tenant('bf-ser')
    const drop = await failWith('bf_ser', 'customers', `NEW.client_code = 'bf-ser'`, '40001', 2)
    assert.equal((await putBatch(k, 'b-1', customerRecords('ser', 5))).status, 202)
    const r = runner()
    const claims = await runToEnd(r, k, 'b-1')
    await drop()
    const b = await getBatch(k, 'b-1')
    assert.equal(b.status, 'succeeded')
    assert.deepEqual(b.counts, { total: 5, pending: 0, succeeded: 5, failed: 0, dependencyFailed: 0 })
    assert.deepEqual(b.records, created(ids('ser', 5)))
    await assertEachCustomerWrittenOnce(t.db, 'bf-ser', ids('ser', 5))
    // The first chunk failed twice, then the whole batch ran from one claim.
    assert.equal(claims, 3)
    assert.deepEqual(sqlstates(), ['40001', '40001'])
    const row = await batchRow('bf-ser', 'b-1')
    assert.deepEqual(
      { ...row, backoff_ms: undefined },
      { status: 'succeeded', attempts: 3, failed_attempts: 0, last_error: '40001: injected by bf_ser', backoff_ms: undefined },
    )
  })

  test('a persistent deadlock (40P01) in one record: after 3 failed chunks the remaining records fail with 503, not run', async () => {
    const k = await t.tenant('bf-dl')
    const drop = await failWith('bf_dl', 'customers', `NEW.client_code = 'bf-dl' AND NEW.external_customer_id = 'dl-3'`, '40P01', null)
    const records = [
      ...customerRecords('dl', 4),
      { recordId: 'c5', kind: 'customer', externalId: 'dl-5', dependsOn: ['c4'], body: customerRecords('dl', 5)[4]?.body },
    ]
    assert.equal((await putBatch(k, 'b-2', records)).status, 202)
    const claims = await runToEnd(runner(), k, 'b-2')
    await drop()
    const b = await getBatch(k, 'b-2')
    const notRun = {
      type: 'https://docs.irs.test/problems/projection_unavailable',
      title: 'Projection unavailable',
      status: 503,
      detail:
        'This record was not run: the batch stopped after its chunk transaction failed 3 times in a row (last: SQLSTATE 40P01). Nothing of this record was saved; submit it again in a new batch.',
    }
    assert.deepEqual(b.records, [
      ...created(ids('dl', 2)),
      { position: 3, recordId: 'c3', kind: 'customer', externalId: 'dl-3', status: 'failed', httpStatus: 503, problem: notRun },
      { position: 4, recordId: 'c4', kind: 'customer', externalId: 'dl-4', status: 'failed', httpStatus: 503, problem: notRun },
      { position: 5, recordId: 'c5', kind: 'customer', externalId: 'dl-5', status: 'dependency_failed', blockedBy: 'c4' },
    ])
    assert.deepEqual(b.counts, { total: 5, pending: 0, succeeded: 2, failed: 2, dependencyFailed: 1 })
    assert.equal(b.status, 'partially_succeeded')
    assert.equal(typeof b.completedAt, 'string')
    // dl-4 ran in the failed chunks but never committed: only the first chunk's Customers exist.
    await assertEachCustomerWrittenOnce(t.db, 'bf-dl', ids('dl', 2))
    assert.equal(claims, 4)
    assert.deepEqual(sqlstates(), ['40P01', '40P01', '40P01'])
    const row = await batchRow('bf-dl', 'b-2')
    assert.deepEqual(
      [row.status, row.attempts, row.failed_attempts, row.last_error],
      ['partially_succeeded', 4, 3, '40P01: injected by bf_dl'],
    )
  })
})

describe('a chunk that keeps failing outside any record', () => {
  test('backs off (next_attempt_at doubling up to the cap), keeps last_error, and fails its remaining records after 3', async () => {
    const k = await t.tenant('bf-out')
    // Saving the outcomes of positions 3 and later fails: the records ran, the chunk cannot commit.
    const drop = await failWith(
      'bf_out',
      'batch_records',
      `NEW.client_code = 'bf-out' AND NEW.status = 'succeeded' AND NEW.position >= 3`,
      'P0001',
      null,
    )
    const records = [
      ...customerRecords('out', 4),
      { recordId: 'c5', kind: 'customer', externalId: 'out-5', dependsOn: ['c3'], body: customerRecords('out', 5)[4]?.body },
    ]
    assert.equal((await putBatch(k, 'b-3', records)).status, 202)
    // Backoffs long enough that the claim right after a failure surely falls inside them: 300, 600, then the cap.
    const r = runner(2, { retryBaseMs: 300, retryCapMs: 800 })
    const steps: [number, number | null, string | null][] = []
    // Claim 1: chunk 1 commits, chunk 2 fails. Until the backoff has passed, no claim finds the batch.
    assert.equal(await r.runOnce(), true)
    for (const wait of [300, 600, 800]) {
      const row = await batchRow('bf-out', 'b-3')
      steps.push([row.failed_attempts, row.backoff_ms, row.last_error])
      assert.equal(row.status, 'running')
      assert.equal(await r.runOnce(), false, 'claimed during the backoff')
      await new Promise((res) => setTimeout(res, wait + 20))
      assert.equal(await r.runOnce(), true)
    }
    await drop()
    assert.deepEqual(steps, [
      [1, 300, 'P0001: injected by bf_out'],
      [2, 600, 'P0001: injected by bf_out'],
      [3, 800, 'P0001: injected by bf_out'],
    ])
    const b = await getBatch(k, 'b-3')
    const notRun = {
      type: 'https://docs.irs.test/problems/projection_unavailable',
      title: 'Projection unavailable',
      status: 503,
      detail:
        'This record was not run: the batch stopped after its chunk transaction failed 3 times in a row (last: SQLSTATE P0001). Nothing of this record was saved; submit it again in a new batch.',
    }
    assert.deepEqual(b.records, [
      ...created(ids('out', 2)),
      { position: 3, recordId: 'c3', kind: 'customer', externalId: 'out-3', status: 'failed', httpStatus: 503, problem: notRun },
      { position: 4, recordId: 'c4', kind: 'customer', externalId: 'out-4', status: 'failed', httpStatus: 503, problem: notRun },
      { position: 5, recordId: 'c5', kind: 'customer', externalId: 'out-5', status: 'dependency_failed', blockedBy: 'c3' },
    ])
    assert.equal(b.status, 'partially_succeeded')
    await assertEachCustomerWrittenOnce(t.db, 'bf-out', ids('out', 2))
    assert.deepEqual(sqlstates(), ['P0001', 'P0001', 'P0001'])
    const row = await batchRow('bf-out', 'b-3')
    assert.deepEqual([row.status, row.attempts, row.failed_attempts], ['partially_succeeded', 4, 3])
  })

  test('a failure in the first chunk of a batch whose every chunk fails: the batch is failed', async () => {
    const k = await t.tenant('bf-all')
    const drop = await failWith('bf_all', 'batch_records', `NEW.client_code = 'bf-all' AND NEW.status = 'succeeded'`, 'P0001', null)
    assert.equal((await putBatch(k, 'b-4', customerRecords('all', 3))).status, 202)
    await runToEnd(runner(), k, 'b-4')
    await drop()
    const b = await getBatch(k, 'b-4')
    assert.equal(b.status, 'failed')
    assert.deepEqual(
      b.records.map((x: { status: string; httpStatus: number }) => [x.status, x.httpStatus]),
      [
        ['failed', 503],
        ['failed', 503],
        ['failed', 503],
      ],
    )
    assert.deepEqual(await t.store.query(`SELECT count(*)::int AS n FROM customers WHERE client_code = 'bf-all'`), [{ n: 0 }])
    assert.deepEqual(await t.store.query(`SELECT count(*)::int AS n FROM change_events WHERE client_code = 'bf-all'`), [{ n: 0 }])
    sqlstates()
  })

  test('a chunk that commits after failures starts the count again', async () => {
    const k = await t.tenant('bf-reset')
    // Two failures of the first chunk, none after: the third attempt commits it, and the count is back to 0.
    const drop = await failWith('bf_reset', 'batch_records', `NEW.client_code = 'bf-reset' AND NEW.status = 'succeeded'`, 'P0001', 2)
    assert.equal((await putBatch(k, 'b-5', customerRecords('rs', 4))).status, 202)
    await runToEnd(runner(), k, 'b-5')
    await drop()
    assert.deepEqual((await getBatch(k, 'b-5')).records, created(ids('rs', 4)))
    await assertEachCustomerWrittenOnce(t.db, 'bf-reset', ids('rs', 4))
    const row = await batchRow('bf-reset', 'b-5')
    assert.deepEqual([row.status, row.failed_attempts, row.last_error], ['succeeded', 0, 'P0001: injected by bf_reset'])
    assert.deepEqual(sqlstates(), ['P0001', 'P0001'])
  })
})

describe('a record of its own', () => {
  test('an unexpected error of one record (not transient) is that record’s 503, as its route answers; no retry', async () => {
    const k = await t.tenant('bf-own')
    const sync = await t.tenant('bf-own-sync')
    const drop = await failWith('bf_own', 'customers', `NEW.external_customer_id = 'own-2'`, 'P0001', null)
    assert.equal((await putBatch(k, 'b-6', customerRecords('own', 3))).status, 202)
    const claims = await runToEnd(runner(), k, 'b-6')
    const route = await t.call('PUT', '/v1/clients/bf-own-sync/customers/own-2', {
      key: sync.apiKey,
      body: customerRecords('own', 2)[1]?.body,
    })
    await drop()
    assert.equal(route.status, 503)
    const b = await getBatch(k, 'b-6')
    assert.deepEqual(b.records[1], {
      position: 2,
      recordId: 'c2',
      kind: 'customer',
      externalId: 'own-2',
      status: 'failed',
      httpStatus: 503,
      problem: {
        type: route.json.type,
        title: route.json.title,
        status: 503,
        detail: 'An unexpected error prevented a safe commit. Nothing was saved. Retry with backoff.',
      },
    })
    assert.equal(route.json.detail, b.records[1].problem.detail)
    assert.deepEqual(
      b.records.map((x: { status: string }) => x.status),
      ['succeeded', 'failed', 'succeeded'],
    )
    assert.equal(claims, 1)
    await assertEachCustomerWrittenOnce(t.db, 'bf-own', ['own-1', 'own-3'])
    const row = await batchRow('bf-own', 'b-6')
    assert.deepEqual([row.failed_attempts, row.last_error], [0, null])
    sqlstates()
  })
})

describe('rules', () => {
  test('which errors are transient', () => {
    const e = (code: string, message = 'x') => Object.assign(new Error(message), { code })
    for (const code of ['40001', '40P01', '08006', '08003', '57P01', '57014', '53300', '58030', '55P03', 'ECONNRESET', 'ECONNREFUSED']) {
      assert.equal(isTransientStoreError(e(code)), true, code)
    }
    for (const code of ['23505', '23503', '22P02', '42P01', 'P0001', 'XX000', '55000'])
      assert.equal(isTransientStoreError(e(code)), false, code)
    assert.equal(isTransientStoreError(new Error('Connection terminated unexpectedly')), true)
    assert.equal(isTransientStoreError(new Error('timeout exceeded when trying to connect')), true)
    assert.equal(isTransientStoreError(new CommitOutcomeUnknownError(new Error('reset'))), true)
    assert.equal(isTransientStoreError(new TypeError('x is undefined')), false)
    assert.equal(isTransientStoreError('text'), false)
  })

  test('BATCH_CHUNK_SIZE is at most 100 (a whole batch of the benchmark), and the runner refuses more', () => {
    assert.equal(MAX_BATCH_CHUNK_SIZE, 100)
    assert.equal(loadConfig({ BATCH_CHUNK_SIZE: '100' }).batches.chunkSize, 100)
    assert.throws(
      () => loadConfig({ BATCH_CHUNK_SIZE: '101' }),
      (err: unknown) =>
        err instanceof ConfigError &&
        err.problems.length === 1 &&
        err.problems[0]?.fix === 'set BATCH_CHUNK_SIZE to a whole number from 1 to 100, or unset it for 100',
    )
    assert.throws(() => runner(101), { name: 'RangeError', message: 'chunkSize 101 is over 100' })
  })
})
