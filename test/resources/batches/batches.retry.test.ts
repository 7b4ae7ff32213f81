import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { SCOPES, type Scope } from '../../../src/domain/scopes.ts'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { batchReceivable as receivable } from '../../helpers/receivables.ts'

/**
 * Retry only what failed (docs/decisions.md, "Retry only what failed"): a batch PUT with `{retryOf}` queues
 * exactly the failed and blocked records of a finished batch, in their order, each with `retriedFrom`; the
 * dependencies among them are kept and those on records that succeeded count as met. Identity as any batch;
 * the grant must be able to read the earlier batch. Every refusal queues nothing.
 */

let nowMs = Date.parse('2026-05-01T08:00:00.000Z')
const clock = { now: () => new Date(nowMs) }
const tick = (): string => {
  nowMs += 1000
  return new Date(nowMs).toISOString()
}

let t: TestApp
before(async () => {
  t = await startTestApp({ BATCH_CHUNK_SIZE: '3' }, { clock })
})
after(() => t.close())

const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `ref/${n}` })
const put = (k: Tenant, id: string, body: unknown) => t.call('PUT', `/v1/clients/${k.clientCode}/batches/${id}`, { key: k.apiKey, body })
const get = (k: Tenant, id: string) => t.call('GET', `/v1/clients/${k.clientCode}/batches/${id}`, { key: k.apiKey })
const count = async (sql: string, params: unknown[]) => Number((await t.store.query<{ n: number }>(sql, params))[0]?.n)
const stored = async (client: string) => ({
  batches: await count('SELECT count(*)::int AS n FROM batches WHERE client_code = $1', [client]),
  records: await count('SELECT count(*)::int AS n FROM batch_records WHERE client_code = $1', [client]),
})
const errors = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])
const outcomes = (res: Response) =>
  res.json.records.map((r: Record<string, unknown>) => [r.position, r.recordId, r.status, r.httpStatus ?? r.blockedBy ?? null])

/**
 * The earlier batch: c1 and r1 succeed; r2 names a Customer that does not exist (422); r3 waits for r2
 * (blocked); r4 waits for c1 and r2 (blocked by r2); c5 succeeds; r6 waits for r3 (blocked by r3).
 */
const earlierRecords = [
  { recordId: 'c1', kind: 'customer', externalId: 'cust-a', body: customer(1) },
  { recordId: 'r1', kind: 'receivable', externalId: 'rec-1', dependsOn: ['c1'], body: receivable('cust-a') },
  { recordId: 'r2', kind: 'receivable', externalId: 'rec-2', body: receivable('cust-late') },
  { recordId: 'r3', kind: 'receivable', externalId: 'rec-3', dependsOn: ['r2'], body: receivable('cust-a') },
  { recordId: 'r4', kind: 'receivable', externalId: 'rec-4', dependsOn: ['c1', 'r2'], body: receivable('cust-a') },
  { recordId: 'c5', kind: 'customer', externalId: 'cust-b', body: customer(5) },
  { recordId: 'r6', kind: 'receivable', externalId: 'rec-6', dependsOn: ['r3'], body: receivable('cust-b') },
]

async function earlierBatch(k: Tenant, id: string) {
  tick()
  assert.equal((await put(k, id, { records: earlierRecords })).status, 202)
  await t.app.batchRunner.drain()
  const done = await get(k, id)
  assert.equal(done.json.status, 'partially_succeeded')
  assert.deepEqual(outcomes(done), [
    [1, 'c1', 'succeeded', 201],
    [2, 'r1', 'succeeded', 201],
    [3, 'r2', 'failed', 422],
    [4, 'r3', 'dependency_failed', 'r2'],
    [5, 'r4', 'dependency_failed', 'r2'],
    [6, 'c5', 'succeeded', 201],
    [7, 'r6', 'dependency_failed', 'r3'],
  ])
}

describe('retry only what failed', () => {
  test('the failed and blocked records, in order, with retriedFrom; dependencies kept; the cause fixed, the retry succeeds', async () => {
    const k = await t.tenant('retry-1')
    await earlierBatch(k, 'b1')

    // Retried before the cause is fixed: r2 fails again, and what depends on it is blocked by it (r4's
    // dependency on c1, which succeeded, is met; its dependency on r2 is kept).
    const submittedAt = tick()
    const queued = await put(k, 'b1-retry', { retryOf: 'b1' })
    assert.equal(queued.status, 202, queued.body)
    const retried = (position: number, recordId: string, earlier: number, externalId: string, batch = 'b1') => ({
      position,
      recordId,
      kind: 'receivable',
      externalId,
      status: 'pending',
      retriedFrom: { externalBatchId: batch, position: earlier },
    })
    assert.deepEqual(queued.json, {
      externalBatchId: 'b1-retry',
      retryOf: 'b1',
      status: 'queued',
      bookCompleteness: 'not_declared',
      submittedAt,
      counts: { total: 4, pending: 4, succeeded: 0, failed: 0, dependencyFailed: 0 },
      records: [retried(1, 'r2', 3, 'rec-2'), retried(2, 'r3', 4, 'rec-3'), retried(3, 'r4', 5, 'rec-4'), retried(4, 'r6', 7, 'rec-6')],
    })
    const deps = await t.store.query<{ record_id: string; depends_on: string[] }>(
      `SELECT record_id, depends_on FROM batch_records WHERE client_code = $1 AND external_batch_id = 'b1-retry' ORDER BY position`,
      ['retry-1'],
    )
    assert.deepEqual(
      deps.map((d) => [d.record_id, d.depends_on]),
      [
        ['r2', []],
        ['r3', ['r2']],
        ['r4', ['r2']],
        ['r6', ['r3']],
      ],
    )
    await t.app.batchRunner.drain()
    const again = await get(k, 'b1-retry')
    assert.equal(again.json.status, 'failed')
    assert.deepEqual(outcomes(again), [
      [1, 'r2', 'failed', 422],
      [2, 'r3', 'dependency_failed', 'r2'],
      [3, 'r4', 'dependency_failed', 'r2'],
      [4, 'r6', 'dependency_failed', 'r3'],
    ])
    assert.equal(again.json.records[0].problem.errors[0].code, 'unknown_reference')

    // The cause fixed: the Customer r2 names now exists. A retry of the retry names the retry's positions.
    assert.equal((await t.call('PUT', '/v1/clients/retry-1/customers/cust-late', { key: k.apiKey, body: customer(9) })).status, 201)
    assert.equal((await put(k, 'b1-retry-2', { retryOf: 'b1-retry' })).status, 202)
    await t.app.batchRunner.drain()
    const done = await get(k, 'b1-retry-2')
    assert.equal(done.json.status, 'succeeded')
    assert.equal(done.json.retryOf, 'b1-retry')
    assert.deepEqual(outcomes(done), [
      [1, 'r2', 'succeeded', 201],
      [2, 'r3', 'succeeded', 201],
      [3, 'r4', 'succeeded', 201],
      [4, 'r6', 'succeeded', 201],
    ])
    assert.deepEqual(
      done.json.records.map((r: { retriedFrom: unknown }) => r.retriedFrom),
      [1, 2, 3, 4].map((position) => ({ externalBatchId: 'b1-retry', position })),
    )
    // Every Receivable of the earlier batch now exists once, at revision 1.
    const recs = await t.store.query<{ id: string; revision: number }>(
      'SELECT external_receivable_id AS id, revision::int AS revision FROM receivables WHERE client_code = $1 ORDER BY 1',
      ['retry-1'],
    )
    assert.deepEqual(
      recs.map((r) => [r.id, Number(r.revision)]),
      ['rec-1', 'rec-2', 'rec-3', 'rec-4', 'rec-6'].map((id) => [id, 1]),
    )
    // The earlier batches are as they were.
    assert.deepEqual(outcomes(await get(k, 'b1'))[2], [3, 'r2', 'failed', 422])
    assert.equal((await get(k, 'b1')).json.retryOf, undefined)
  })

  test('identical retry 200 queues nothing; another body under the id 409 batch_conflict', async () => {
    const k = await t.tenant('retry-2')
    await earlierBatch(k, 'b2')
    const first = await put(k, 'r', { retryOf: 'b2' })
    assert.equal(first.status, 202)
    const before = await stored('retry-2')
    const same = await put(k, 'r', { retryOf: 'b2' })
    assert.equal(same.status, 200, same.body)
    assert.deepEqual(same.json, first.json)
    assert.deepEqual(await stored('retry-2'), before)
    // Once it ran, the identical retry answers its current state.
    await t.app.batchRunner.drain()
    const ran = await put(k, 'r', { retryOf: 'b2' })
    assert.equal(ran.status, 200)
    assert.deepEqual(ran.json, (await get(k, 'r')).json)
    tick()
    assert.equal((await put(k, 'b2b', { records: earlierRecords.slice(0, 1) })).status, 202)
    await t.app.batchRunner.drain()
    for (const body of [{ retryOf: 'b2b' }, { records: earlierRecords.slice(0, 1) }]) {
      const res = await put(k, 'r', body)
      assert.equal(res.status, 409, res.body)
      assert.equal(problemCode(res), 'batch_conflict')
    }
    // And an ordinary batch's id with a retry body.
    assert.equal(problemCode(await put(k, 'b2b', { retryOf: 'b2' })), 'batch_conflict')
    assert.deepEqual(await stored('retry-2'), { batches: before.batches + 1, records: before.records + 1 })
  })

  test('refusals: nothing to retry, unknown, not finished, both fields, bad ids; each queues nothing', async () => {
    const k = await t.tenant('retry-3')
    assert.equal((await put(k, 'ok', { records: earlierRecords.slice(0, 2) })).status, 202)
    // Not finished: queued (the runner has not run).
    const early = await put(k, 'x', { retryOf: 'ok' })
    assert.equal(early.status, 409, early.body)
    assert.equal(problemCode(early), 'batch_not_finished')
    assert.deepEqual([early.json.retryOf, early.json.retryOfStatus], ['ok', 'queued'])
    await t.app.batchRunner.drain()
    assert.equal((await get(k, 'ok')).json.status, 'succeeded')
    const before = await stored('retry-3')
    const cases: [string, unknown, [string, string][]][] = [
      ['nothing to retry', { retryOf: 'ok' }, [['custom', '/retryOf']]],
      ['an unknown batch', { retryOf: 'ghost' }, [['unknown_reference', '/retryOf']]],
      ['records and retryOf', { retryOf: 'ok', records: earlierRecords.slice(0, 1) }, [['custom', '/retryOf']]],
      ['no records and no retryOf', {}, [['invalid_type', '/records']]],
      ['retryOf not an id', { retryOf: 'bad.id' }, [['invalid_format', '/retryOf']]],
      ['retryOf empty', { retryOf: '' }, [['invalid_format', '/retryOf']]],
      ['retryOf a number', { retryOf: 7 }, [['invalid_type', '/retryOf']]],
      ['an unknown key beside it', { retryOf: 'ok', note: 1 }, [['unrecognized_keys', '/note']]],
    ]
    for (const [what, body, expected] of cases) {
      const res = await put(k, 'x', body)
      assert.equal(res.status, 422, `${what}: ${res.body}`)
      assert.equal(problemCode(res), 'validation_error', what)
      assert.deepEqual(errors(res), expected, what)
    }
    // The batch itself cannot be its own earlier batch: it does not exist yet.
    assert.deepEqual(errors(await put(k, 'self', { retryOf: 'self' })), [['unknown_reference', '/retryOf']])
    // Running: the lease taken, not yet finished.
    await t.store.query(`UPDATE batches SET status = 'running' WHERE client_code = $1 AND external_batch_id = 'ok'`, ['retry-3'])
    const running = await put(k, 'x', { retryOf: 'ok' })
    assert.equal(problemCode(running), 'batch_not_finished')
    assert.equal(running.json.retryOfStatus, 'running')
    await t.store.query(`UPDATE batches SET status = 'succeeded' WHERE client_code = $1 AND external_batch_id = 'ok'`, ['retry-3'])
    assert.deepEqual(await stored('retry-3'), before)
  })

  test('the grant must read the earlier batch and write what the retry holds; records are checked again when they run', async () => {
    const k = await t.tenant('retry-4')
    await earlierBatch(k, 'b4')
    const without = async (lacking: Scope[], n: number) =>
      t.tenant('retry-4', { integrationId: `int-retry-4-${n}`, scopes: SCOPES.filter((s) => !lacking.includes(s)) })
    const before = await stored('retry-4')
    // Lacks the kind the retry holds; lacks a kind only the succeeded records hold (reading b4 needs it); holds no
    // batch scope at all (an unknown batch then answers the same refusal, so it tells nothing).
    const lackingReceivables = await without(['receivables:write'], 1)
    const lackingCustomers = await without(['customers:write'], 2)
    const none = await without(['customers:write', 'receivables:write', 'payment_observations:write', 'financial_corrections:write'], 3)
    const details = new Set<string>()
    for (const [who, key, earlier] of [
      ['lacking receivables:write', lackingReceivables, 'b4'],
      ['lacking customers:write', lackingCustomers, 'b4'],
      ['no batch scope, a batch that exists', none, 'b4'],
      ['no batch scope, a batch that does not', none, 'ghost'],
    ] as const) {
      const res = await put(key, 'x', { retryOf: earlier })
      assert.equal(res.status, 403, `${who}: ${res.body}`)
      assert.equal(problemCode(res), 'client_scope_denied', who)
      if (key === none) details.add(res.json.detail)
    }
    assert.equal(details.size, 1, 'an existing and an unknown batch answer alike')
    assert.deepEqual(await stored('retry-4'), before)

    // Queued with the full grant, then the grant loses receivables:write before the records run: each fails
    // 403 as its synchronous route would.
    assert.equal((await put(k, 'r4', { retryOf: 'b4' })).status, 202)
    await t.admin('PUT', `/admin/v1/integrations/${k.integrationId}/grants/retry-4`, {
      scopes: SCOPES.filter((s) => s !== 'receivables:write'),
    })
    await t.app.batchRunner.drain()
    const ran = await t.call('GET', '/v1/clients/retry-4/batches/r4', { key: lackingCustomers.apiKey })
    assert.equal(ran.json.status, 'failed')
    assert.deepEqual(
      ran.json.records.map((r: { status: string; httpStatus?: number; blockedBy?: string }) => [r.status, r.httpStatus ?? r.blockedBy]),
      [
        ['failed', 403],
        ['dependency_failed', 'r2'],
        ['dependency_failed', 'r2'],
        ['dependency_failed', 'r3'],
      ],
    )
  })

  test("client B cannot retry client A's batch: batch ids are per client", async () => {
    const a = await t.tenant('retry-5a')
    const b = await t.tenant('retry-5b')
    await earlierBatch(a, 'shared')
    const res = await put(b, 'x', { retryOf: 'shared' })
    assert.deepEqual(errors(res), [['unknown_reference', '/retryOf']])
    assert.deepEqual(await stored('retry-5b'), { batches: 0, records: 0 })
  })
})
