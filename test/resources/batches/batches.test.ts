import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { batchReceivable as receivable, usd } from '../../helpers/receivables.ts'

/**
 * Batches, the happy and the mixed paths: what the 202 promises (queued, nothing accepted), identical
 * retries, and after the runner drained the queue, per-record outcomes that are exactly what the
 * synchronous routes answer for the same inputs (proved side by side against a second client).
 *
 * Chunks of 4 records, so dependencies and array order are exercised across chunk boundaries too.
 */

/** A clock the test moves by hand, so submittedAt and completedAt are exact values. */
let nowMs = Date.parse('2026-04-01T08:00:00.000Z')
const clock = { now: () => new Date(nowMs) }
const tick = (): string => {
  nowMs += 1000
  return new Date(nowMs).toISOString()
}

const PROBLEMS = 'https://docs.irs.test/problems/'
let t: TestApp

const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `ref/${n}` })
const { creditUnion: _dropped, ...receivableWithoutContext } = receivable('cust-1')
const event = (type: 'adjustment' | 'credit_note' | 'write_off', receivableId: string, sourceRevision: number, amount = '1.00') => ({
  type,
  amount: usd(amount),
  externalReceivableId: receivableId,
  sourceRevision,
  effectiveAt: '2026-03-01T00:00:00Z',
  reason: { adjustment: 'source_adjustment', credit_note: 'contractual_credit', write_off: 'approved_write_off' }[type],
  sourceReference: `e/${sourceRevision}`,
  ...(type === 'adjustment' ? { direction: 'increase' } : {}),
})
const observation = (receivableId: string) => ({
  type: 'payment',
  amount: usd('5.00'),
  allocations: [{ amount: usd('5.00'), externalReceivableId: receivableId }],
  effectiveAt: '2026-03-02T00:00:00Z',
  externalCustomerId: 'cust-1',
  method: 'bank_transfer',
  sourceReference: 'p/1',
})

interface BatchRecordIn {
  recordId: string
  kind: string
  externalId: string
  dependsOn?: string[]
  body: unknown
}

const kindPath: Record<string, string> = {
  customer: 'customers',
  receivable: 'receivables',
  payment_observation: 'payment-observations',
  adjustment: 'adjustments',
  credit_note: 'credit-notes',
  write_off: 'write-offs',
}

const putBatch = (k: Tenant, id: string, records: unknown[]) =>
  t.call('PUT', `/v1/clients/${k.clientCode}/batches/${id}`, { key: k.apiKey, body: { records } })
const getBatch = (k: Tenant, id: string) => t.call('GET', `/v1/clients/${k.clientCode}/batches/${id}`, { key: k.apiKey })
const getResource = (k: Tenant, kind: string, id: string) =>
  t.call('GET', `/v1/clients/${k.clientCode}/${kindPath[kind]}/${id}`, { key: k.apiKey })
const count = async (sql: string, params: unknown[]) => Number((await t.store.query<{ n: number }>(sql, params))[0]?.n)
const batchRows = (client: string) => count('SELECT count(*)::int AS n FROM batches WHERE client_code = $1', [client])
const recordRows = (client: string) => count('SELECT count(*)::int AS n FROM batch_records WHERE client_code = $1', [client])
const eventCount = (client: string) => count('SELECT count(*)::int AS n FROM change_events WHERE client_code = $1', [client])
const feed = async (client: string) =>
  (
    await t.store.query<{ type: string; resource_type: string; resource_id: string; revision: number }>(
      'SELECT type, resource_type, resource_id, revision::int AS revision FROM change_events WHERE client_code = $1 ORDER BY seq',
      [client],
    )
  ).map((e) => [e.type, e.resource_type, e.resource_id, Number(e.revision)])

/** The same JSON with every object's keys in reverse order. */
function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys)
  if (value === null || typeof value !== 'object') return value
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([key, v]) => [key, reverseKeys(v)]),
  )
}

/** A read-back representation without the fields that carry the moment of the write. */
function timeless(json: Record<string, unknown>): Record<string, unknown> {
  const { updatedAt: _u, acceptedAt: _a, ...rest } = json
  return rest
}

before(async () => {
  t = await startTestApp({ BATCH_CHUNK_SIZE: '4' }, { clock })
})
after(() => t.close())

describe('submission', () => {
  test('202: queued, bookCompleteness not_declared, every record pending from position 1, nothing accepted yet', async () => {
    const k = await t.tenant('bq')
    const records: BatchRecordIn[] = [
      { recordId: 'c1', kind: 'customer', externalId: 'cust-1', body: customer(1) },
      { recordId: 'r1', kind: 'receivable', externalId: 'r-1', dependsOn: ['c1'], body: receivable('cust-1') },
      { recordId: 'a1', kind: 'adjustment', externalId: 'e-1', dependsOn: ['r1'], body: event('adjustment', 'r-1', 2) },
    ]
    const submittedAt = tick()
    const res = await putBatch(k, 'b-1', records)
    assert.equal(res.status, 202, res.body)
    assert.match(String(res.headers['content-type']), /^application\/json/)
    const queued = {
      externalBatchId: 'b-1',
      status: 'queued',
      bookCompleteness: 'not_declared',
      submittedAt,
      counts: { total: 3, pending: 3, succeeded: 0, failed: 0, dependencyFailed: 0 },
      records: [
        { position: 1, recordId: 'c1', kind: 'customer', externalId: 'cust-1', status: 'pending' },
        { position: 2, recordId: 'r1', kind: 'receivable', externalId: 'r-1', status: 'pending' },
        { position: 3, recordId: 'a1', kind: 'adjustment', externalId: 'e-1', status: 'pending' },
      ],
    }
    assert.deepEqual(res.json, queued)
    assert.equal('completedAt' in res.json, false)

    // Nothing is accepted by the 202: no resource, no change event.
    tick()
    assert.equal(problemCode(await getResource(k, 'customer', 'cust-1')), 'customer_not_found')
    assert.equal((await getResource(k, 'customer', 'cust-1')).status, 404)
    assert.equal((await getResource(k, 'receivable', 'r-1')).status, 404)
    assert.equal((await getResource(k, 'adjustment', 'e-1')).status, 404)
    assert.equal(await eventCount('bq'), 0)
    assert.deepEqual((await getBatch(k, 'b-1')).json, queued)

    // An identical retry, keys re-ordered at every level: 200 with the current state, nothing new queued.
    const reordered = await t.call('PUT', '/v1/clients/bq/batches/b-1', { key: k.apiKey, body: reverseKeys({ records }) })
    assert.equal(reordered.status, 200, reordered.body)
    assert.deepEqual(reordered.json, queued)
    const plain = await putBatch(k, 'b-1', records)
    assert.equal(plain.status, 200)
    assert.deepEqual(plain.json, queued)
    assert.equal(await batchRows('bq'), 1)
    assert.equal(await recordRows('bq'), 3)

    const completedAt = tick()
    await t.app.batchRunner.drain()
    assert.equal(await t.app.batchRunner.runOnce(), false, 'the queue is empty after one drain')
    const done = await getBatch(k, 'b-1')
    assert.equal(done.status, 200)
    const finished = {
      externalBatchId: 'b-1',
      status: 'succeeded',
      bookCompleteness: 'not_declared',
      submittedAt,
      completedAt,
      counts: { total: 3, pending: 0, succeeded: 3, failed: 0, dependencyFailed: 0 },
      records: [
        { position: 1, recordId: 'c1', kind: 'customer', externalId: 'cust-1', status: 'succeeded', httpStatus: 201 },
        { position: 2, recordId: 'r1', kind: 'receivable', externalId: 'r-1', status: 'succeeded', httpStatus: 201 },
        { position: 3, recordId: 'a1', kind: 'adjustment', externalId: 'e-1', status: 'succeeded', httpStatus: 201 },
      ],
    }
    assert.deepEqual(done.json, finished)
    assert.equal((await getResource(k, 'customer', 'cust-1')).json.revision, 1)
    // The receivable was created (revision 1) and the adjustment moved it (revision 2, source amount 11.00).
    const r1 = (await getResource(k, 'receivable', 'r-1')).json
    assert.deepEqual([r1.revision, r1.sourceRevision, r1.financialPosition.sourceAmount], [2, 2, usd('11.00')])

    // A retry after completion answers the finished state and queues nothing again.
    tick()
    const late = await putBatch(k, 'b-1', records)
    assert.equal(late.status, 200)
    assert.deepEqual(late.json, finished)
    assert.equal(await t.app.batchRunner.runOnce(), false)
    assert.equal(await batchRows('bq'), 1)
    assert.deepEqual(await feed('bq'), [
      ['customer.created', 'customer', 'cust-1', 1],
      ['receivable.created', 'receivable', 'r-1', 1],
      ['receivable.updated', 'receivable', 'r-1', 2],
    ])
  })

  test('the same id with a different body is 409 batch_conflict and leaves the first submission as it was', async () => {
    const k = await t.tenant('bc')
    const records = [
      { recordId: 'c1', kind: 'customer', externalId: 'cust-1', body: customer(1) },
      { recordId: 'c2', kind: 'customer', externalId: 'cust-2', body: customer(2) },
    ]
    const first = await putBatch(k, 'b-c', records)
    assert.equal(first.status, 202)
    const variants: unknown[][] = [
      [records[0], { ...records[1], externalId: 'cust-3' }],
      [records[0], { ...records[1], body: customer(3) }],
      [records[1], records[0]],
      [records[0]],
      [records[0], { ...records[1], dependsOn: ['c1'] }],
    ]
    for (const v of variants) {
      const res = await putBatch(k, 'b-c', v)
      assert.equal(res.status, 409, res.body)
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
      assert.equal(res.json.type, `${PROBLEMS}batch_conflict`)
      assert.equal(res.json.status, 409)
    }
    assert.deepEqual((await getBatch(k, 'b-c')).json, first.json)
    assert.equal(await batchRows('bc'), 1)
    assert.equal(await recordRows('bc'), 2)
    await t.app.batchRunner.drain()
    const done = (await getBatch(k, 'b-c')).json
    assert.deepEqual(
      done.records.map((r: { externalId: string; httpStatus: number }) => [r.externalId, r.httpStatus]),
      [
        ['cust-1', 201],
        ['cust-2', 201],
      ],
    )
    assert.equal((await getResource(k, 'customer', 'cust-3')).status, 404)
    // After completion a different body is still a conflict.
    assert.equal(problemCode(await putBatch(k, 'b-c', [records[0]])), 'batch_conflict')
  })

  test('only a queued batch wakes the runner, after its COMMIT: an identical retry, a conflict and a refusal do not', async () => {
    const k = await t.tenant('bw')
    const narrow = await t.tenant('bw', { scopes: ['customers:write'], integrationId: 'ti-bw-narrow' })
    const runner = t.app.batchRunner
    const wake = runner.wake
    /** At each wake-up, the batches of the client a fresh query sees (the committed ones). */
    const seen: Promise<number>[] = []
    runner.wake = () => {
      seen.push(batchRows('bw'))
      wake.call(runner)
    }
    try {
      const records = [{ recordId: 'c1', kind: 'customer', externalId: 'cust-1', body: customer(1) }]
      assert.equal((await putBatch(k, 'b-w', records)).status, 202)
      assert.equal((await putBatch(k, 'b-w', records)).status, 200)
      assert.equal(problemCode(await putBatch(k, 'b-w', [{ ...records[0], externalId: 'cust-2' }])), 'batch_conflict')
      const adjustment = { recordId: 'a1', kind: 'adjustment', externalId: 'e-1', body: event('adjustment', 'r-1', 2) }
      assert.equal(problemCode(await putBatch(narrow, 'b-w2', [adjustment])), 'client_scope_denied')
      assert.deepEqual(await Promise.all(seen), [1])
    } finally {
      runner.wake = wake
    }
    assert.equal(await batchRows('bw'), 1)
  })

  test('GET of an unknown batch is 404 batch_not_found', async () => {
    const k = await t.tenant('bnf')
    const res = await getBatch(k, 'b-none')
    assert.equal(res.status, 404)
    assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
    assert.equal(res.json.type, `${PROBLEMS}batch_not_found`)
    assert.equal(res.json.status, 404)
  })
})

describe('processing', () => {
  /**
   * Expected outcome of each record: [httpStatus, problem code] when attempted, or the record it was
   * blocked by. The synchronous routes of a second client must answer exactly the same, record by record.
   */
  const cases: [BatchRecordIn, [number, string | null] | { blockedBy: string }][] = [
    [{ recordId: 'c1', kind: 'customer', externalId: 'cust-1', body: customer(1) }, [201, null]],
    [{ recordId: 'c1-again', kind: 'customer', externalId: 'cust-1', body: customer(1) }, [200, null]],
    [{ recordId: 'c2', kind: 'customer', externalId: 'cust-2', body: customer(2) }, [201, null]],
    [{ recordId: 'c2-replaced', kind: 'customer', externalId: 'cust-2', body: customer(22) }, [200, null]],
    [{ recordId: 'c-bad', kind: 'customer', externalId: 'cust-bad', body: { type: 'robot' } }, [422, 'validation_error']],
    // Array order: cust-3 does not exist yet when this record runs.
    [{ recordId: 'r-early', kind: 'receivable', externalId: 'r-0', body: receivable('cust-3') }, [422, 'validation_error']],
    [{ recordId: 'c3', kind: 'customer', externalId: 'cust-3', body: customer(3) }, [201, null]],
    [{ recordId: 'r1', kind: 'receivable', externalId: 'r-1', body: receivable('cust-1') }, [201, null]],
    [{ recordId: 'r3', kind: 'receivable', externalId: 'r-3', body: receivable('cust-3') }, [201, null]],
    [{ recordId: 'r1-same', kind: 'receivable', externalId: 'r-1', body: receivable('cust-1') }, [200, null]],
    [
      { recordId: 'r1-stale', kind: 'receivable', externalId: 'r-1', body: receivable('cust-1', 1, { sourceReference: 'r/changed' }) },
      [409, 'stale_source_revision'],
    ],
    [{ recordId: 'r-profile', kind: 'receivable', externalId: 'r-2', body: receivableWithoutContext }, [422, 'profile_mismatch']],
    [{ recordId: 'r-unknown', kind: 'receivable', externalId: 'r-4', body: receivable('ghost') }, [422, 'validation_error']],
    [{ recordId: 'adj', kind: 'adjustment', externalId: 'e-1', body: event('adjustment', 'r-1', 2) }, [201, null]],
    [{ recordId: 'adj-same', kind: 'adjustment', externalId: 'e-1', body: event('adjustment', 'r-1', 2) }, [200, null]],
    [
      { recordId: 'adj-conflict', kind: 'adjustment', externalId: 'e-1', body: event('adjustment', 'r-1', 2, '2.00') },
      [409, 'financial_event_conflict'],
    ],
    [{ recordId: 'adj-stale', kind: 'adjustment', externalId: 'e-2', body: event('adjustment', 'r-1', 2) }, [409, 'stale_source_revision']],
    [
      { recordId: 'adj-unknown', kind: 'adjustment', externalId: 'e-5', body: event('adjustment', 'r-ghost', 9) },
      [422, 'validation_error'],
    ],
    [{ recordId: 'cn', kind: 'credit_note', externalId: 'e-3', body: event('credit_note', 'r-1', 3) }, [201, null]],
    [{ recordId: 'wo', kind: 'write_off', externalId: 'e-4', body: event('write_off', 'r-1', 4) }, [201, null]],
    [{ recordId: 'wo-wrong-type', kind: 'write_off', externalId: 'e-6', body: event('credit_note', 'r-1', 5) }, [422, 'validation_error']],
    [{ recordId: 'po', kind: 'payment_observation', externalId: 'p-1', body: observation('r-1') }, [201, null]],
    [{ recordId: 'po-same', kind: 'payment_observation', externalId: 'p-1', body: observation('r-1') }, [200, null]],
    [{ recordId: 'po-unknown', kind: 'payment_observation', externalId: 'p-2', body: observation('r-ghost') }, [422, 'validation_error']],
    [
      {
        recordId: 'r3-replaced',
        kind: 'receivable',
        externalId: 'r-3',
        body: receivable('cust-3', 2, { recoverableAmount: usd('20.00') }),
      },
      [200, null],
    ],
    [
      { recordId: 'blocked', kind: 'receivable', externalId: 'r-9', dependsOn: ['c1', 'c-bad'], body: receivable('cust-1') },
      { blockedBy: 'c-bad' },
    ],
    [
      { recordId: 'chain', kind: 'customer', externalId: 'cust-9', dependsOn: ['c1', 'blocked'], body: customer(9) },
      { blockedBy: 'blocked' },
    ],
    [{ recordId: 'dep-ok', kind: 'customer', externalId: 'cust-8', dependsOn: ['c1', 'c3', 'r1-same'], body: customer(8) }, [201, null]],
    [
      { recordId: 'dep-stale', kind: 'write_off', externalId: 'e-7', dependsOn: ['r1-stale'], body: event('write_off', 'r-1', 9) },
      { blockedBy: 'r1-stale' },
    ],
  ]

  test('each record answers exactly what its synchronous route answers, in array order, across chunks', async () => {
    const k = await t.tenant('bp')
    const sync = await t.tenant('bp-sync')
    const records = cases.map(([r]) => r)
    const submittedAt = tick()
    assert.equal((await putBatch(k, 'b-mixed', records)).status, 202)
    const completedAt = tick()
    await t.app.batchRunner.drain()
    const res = await getBatch(k, 'b-mixed')
    assert.equal(res.status, 200)
    const batch = res.json

    // The expected outcomes, exactly.
    const expected = cases.map(([r, outcome], i) => ({
      position: i + 1,
      recordId: r.recordId,
      kind: r.kind,
      externalId: r.externalId,
      ...('blockedBy' in outcome
        ? { status: 'dependency_failed', blockedBy: outcome.blockedBy }
        : {
            status: outcome[0] < 300 ? 'succeeded' : 'failed',
            httpStatus: outcome[0],
            ...(outcome[1] ? { problem: { type: `${PROBLEMS}${outcome[1]}` } } : {}),
          }),
    }))
    // Here only each problem's type; its whole body is compared with the synchronous route's below.
    const typeOnly = (o: { problem?: { type: string } }) => (o.problem ? { ...o, problem: { type: o.problem.type } } : o)
    assert.deepEqual(batch.records.map(typeOnly), expected)
    assert.deepEqual(batch.counts, { total: 29, pending: 0, succeeded: 16, failed: 10, dependencyFailed: 3 })
    assert.equal(batch.status, 'partially_succeeded')
    assert.equal(batch.submittedAt, submittedAt)
    assert.equal(batch.completedAt, completedAt)
    assert.equal(batch.bookCompleteness, 'not_declared')

    // The same inputs, one by one and in order, through the synchronous routes of another client.
    // A dependency_failed record is never attempted, so it is not sent.
    tick()
    for (const [i, rec] of records.entries()) {
      const outcome = batch.records[i]
      if (outcome.status === 'dependency_failed') continue
      const r: Response = await t.call('PUT', `/v1/clients/bp-sync/${kindPath[rec.kind]}/${rec.externalId}`, {
        key: sync.apiKey,
        body: rec.body,
      })
      assert.equal(outcome.httpStatus, r.status, `${rec.recordId}: ${r.body}`)
      if (r.status >= 400) {
        assert.equal(outcome.status, 'failed', rec.recordId)
        // The whole problem, exactly: type, title, status, detail, errors[] (pointers into the body) and
        // any extension member; only requestId is the synchronous request's own.
        const { requestId: _requestId, ...problem } = r.json
        assert.deepEqual(outcome.problem, problem, rec.recordId)
      } else {
        assert.equal(outcome.status, 'succeeded', rec.recordId)
        assert.equal(outcome.problem, undefined, rec.recordId)
      }
    }

    // The two clients now hold the same data, and their change feeds tell the same story.
    const resources = new Map(records.map((r) => [`${r.kind}/${r.externalId}`, r]))
    for (const r of resources.values()) {
      const a = await getResource(k, r.kind, r.externalId)
      const b = await getResource(sync, r.kind, r.externalId)
      assert.equal(a.status, b.status, `${r.kind}/${r.externalId}`)
      if (a.status === 200) assert.deepEqual(timeless(a.json), timeless(b.json), `${r.kind}/${r.externalId}`)
    }
    assert.deepEqual(await feed('bp'), await feed('bp-sync'))

    // Never attempted: the blocked records' resources do not exist, and nothing in the feed names them.
    for (const [kind, id] of [
      ['receivable', 'r-9'],
      ['customer', 'cust-9'],
      ['write_off', 'e-7'],
    ] as const) {
      assert.equal((await getResource(k, kind, id)).status, 404, id)
    }
    assert.equal(
      await count(`SELECT count(*)::int AS n FROM change_events WHERE client_code = 'bp' AND resource_id IN ('r-9', 'cust-9')`, []),
      0,
    )

    // Array order decided the outcomes: the second write of cust-2 is the one kept (revision 2).
    const c2 = (await getResource(k, 'customer', 'cust-2')).json
    assert.deepEqual([c2.name, c2.revision], [{ firstName: 'Ada', lastName: 'L22' }, 2])
    const r1 = (await getResource(k, 'receivable', 'r-1')).json
    // 10.00 + 1.00 (adjustment) - 1.00 (credit note) - 1.00 (write-off); the observation moves nothing.
    assert.deepEqual([r1.revision, r1.sourceRevision, r1.financialPosition.sourceAmount], [4, 4, usd('9.00')])
    const r3 = (await getResource(k, 'receivable', 'r-3')).json
    assert.deepEqual([r3.revision, r3.recoverableAmount], [2, usd('20.00')])
  })

  test('no record succeeded: failed; every record succeeded: succeeded; each with completedAt', async () => {
    const k = await t.tenant('bf')
    assert.equal(
      (
        await putBatch(k, 'b-fail', [
          { recordId: 'x', kind: 'customer', externalId: 'x-1', body: {} },
          { recordId: 'y', kind: 'receivable', externalId: 'y-1', body: receivable('nobody') },
          { recordId: 'z', kind: 'customer', externalId: 'z-1', dependsOn: ['x'], body: customer(1) },
        ])
      ).status,
      202,
    )
    assert.equal(
      (
        await putBatch(k, 'b-ok', [
          { recordId: 'c', kind: 'customer', externalId: 'ok-1', body: customer(1) },
          { recordId: 'd', kind: 'customer', externalId: 'ok-1', body: customer(1) },
        ])
      ).status,
      202,
    )
    const completedAt = tick()
    await t.app.batchRunner.drain()
    const failed = (await getBatch(k, 'b-fail')).json
    assert.equal(failed.status, 'failed')
    assert.equal(failed.completedAt, completedAt)
    assert.deepEqual(failed.counts, { total: 3, pending: 0, succeeded: 0, failed: 2, dependencyFailed: 1 })
    assert.deepEqual(
      failed.records.map((r: Record<string, unknown>) => [
        r.status,
        r.httpStatus,
        (r.problem as { type: string } | undefined)?.type,
        r.blockedBy,
      ]),
      [
        ['failed', 422, `${PROBLEMS}validation_error`, undefined],
        ['failed', 422, `${PROBLEMS}validation_error`, undefined],
        ['dependency_failed', undefined, undefined, 'x'],
      ],
    )
    const ok = (await getBatch(k, 'b-ok')).json
    assert.equal(ok.status, 'succeeded')
    assert.equal(ok.completedAt, completedAt)
    // A record that answers 200 (identical retry) succeeded too.
    assert.deepEqual(ok.counts, { total: 2, pending: 0, succeeded: 2, failed: 0, dependencyFailed: 0 })
    assert.deepEqual(
      ok.records.map((r: { httpStatus: number }) => r.httpStatus),
      [201, 200],
    )
    assert.equal(await eventCount('bf'), 1)
  })

  test('batches run in the order they were submitted, each record once', async () => {
    const k = await t.tenant('bo')
    // Two batches write the same Customer: the later submission's write is the one kept.
    assert.equal((await putBatch(k, 'b-first', [{ recordId: 'a', kind: 'customer', externalId: 'o-1', body: customer(1) }])).status, 202)
    tick()
    assert.equal((await putBatch(k, 'b-second', [{ recordId: 'a', kind: 'customer', externalId: 'o-1', body: customer(2) }])).status, 202)
    await t.app.batchRunner.drain()
    assert.equal((await getBatch(k, 'b-first')).json.records[0].httpStatus, 201)
    assert.equal((await getBatch(k, 'b-second')).json.records[0].httpStatus, 200)
    const o1 = (await getResource(k, 'customer', 'o-1')).json
    assert.deepEqual([o1.name.lastName, o1.revision], ['L2', 2])
    assert.deepEqual(await feed('bo'), [
      ['customer.created', 'customer', 'o-1', 1],
      ['customer.updated', 'customer', 'o-1', 2],
    ])
  })

  test('a batch of exactly 100 records spans chunks and every record runs once', async () => {
    const k = await t.tenant('b100')
    const records = Array.from({ length: 100 }, (_, i) => ({
      recordId: `c${i + 1}`,
      kind: 'customer',
      externalId: `h-${i + 1}`,
      // Each record depends on the one before it: a chain across 25 chunks of 4.
      ...(i > 0 ? { dependsOn: [`c${i}`] } : {}),
      body: customer(i + 1),
    }))
    const res = await putBatch(k, 'b-100', records)
    assert.equal(res.status, 202)
    assert.equal(res.json.records.length, 100)
    assert.deepEqual(
      res.json.records.map((r: { position: number }) => r.position),
      Array.from({ length: 100 }, (_, i) => i + 1),
    )
    await t.app.batchRunner.drain()
    const done = (await getBatch(k, 'b-100')).json
    assert.equal(done.status, 'succeeded')
    assert.deepEqual(done.counts, { total: 100, pending: 0, succeeded: 100, failed: 0, dependencyFailed: 0 })
    assert.ok(done.records.every((r: { httpStatus: number; status: string }) => r.httpStatus === 201 && r.status === 'succeeded'))
    assert.deepEqual(
      await t.store.query(
        `SELECT count(*)::int AS n, count(DISTINCT resource_id)::int AS ids, max(revision)::int AS rev FROM change_events WHERE client_code = 'b100'`,
      ),
      [{ n: 100, ids: 100, rev: 1 }],
    )
  })
})
