import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { batchReceivable as receivable, usd } from '../../helpers/receivables.ts'

let t: TestApp
let k: Tenant
let sync: Tenant
before(async () => {
  t = await startTestApp()
  k = await t.tenant('bat')
  sync = await t.tenant('bat-sync')
})
after(() => t.close())

const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `ref/${n}` })
const adjustment = (receivableId: string, sourceRevision: number, amount = '1.00') => ({
  type: 'adjustment',
  amount: usd(amount),
  externalReceivableId: receivableId,
  sourceRevision,
  effectiveAt: '2026-03-01T00:00:00Z',
  reason: 'source_adjustment',
  sourceReference: 'e/1',
  direction: 'increase',
})
const putBatch = (tenant: Tenant, id: string, records: unknown[]) =>
  t.call('PUT', `/v1/clients/${tenant.clientCode}/batches/${id}`, { key: tenant.apiKey, body: { records } })
const getBatch = (tenant: Tenant, id: string) => t.call('GET', `/v1/clients/${tenant.clientCode}/batches/${id}`, { key: tenant.apiKey })
const pointers = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])

const kindPath: Record<string, string> = {
  customer: 'customers',
  receivable: 'receivables',
  payment_observation: 'payment-observations',
  adjustment: 'adjustments',
  credit_note: 'credit-notes',
  write_off: 'write-offs',
}

describe('submission', () => {
  test('202 queued with nothing accepted yet; identical retry 200 queues nothing; a different body 409', async () => {
    const records = [{ recordId: 'c1', kind: 'customer', externalId: 'q-1', body: customer(1) }]
    const res = await putBatch(k, 'b-q', records)
    assert.equal(res.status, 202)
    assert.deepEqual(res.json, {
      externalBatchId: 'b-q',
      status: 'queued',
      bookCompleteness: 'not_declared',
      submittedAt: res.json.submittedAt,
      counts: { total: 1, pending: 1, succeeded: 0, failed: 0, dependencyFailed: 0 },
      records: [{ position: 1, recordId: 'c1', kind: 'customer', externalId: 'q-1', status: 'pending' }],
    })
    assert.equal((await t.call('GET', '/v1/clients/bat/customers/q-1', { key: k.apiKey })).status, 404)
    const retry = await t.call('PUT', '/v1/clients/bat/batches/b-q', {
      key: k.apiKey,
      rawBody: JSON.stringify({ records: [{ body: customer(1), externalId: 'q-1', kind: 'customer', recordId: 'c1' }] }),
    })
    assert.equal(retry.status, 200)
    assert.deepEqual(retry.json, res.json)
    const conflict = await putBatch(k, 'b-q', [{ recordId: 'c1', kind: 'customer', externalId: 'q-2', body: customer(1) }])
    assert.equal(conflict.status, 409)
    assert.equal(problemCode(conflict), 'batch_conflict')
    assert.deepEqual(
      await t.store.query(`SELECT count(*)::int AS n FROM batches WHERE client_code = 'bat' AND external_batch_id = 'b-q'`),
      [{ n: 1 }],
    )
    await t.app.batchRunner.drain()
    const done = await getBatch(k, 'b-q')
    assert.equal(done.json.status, 'succeeded')
    assert.ok(done.json.completedAt)
    assert.equal(problemCode(await getBatch(k, 'b-none')), 'batch_not_found')
  })

  test('shape rules', async () => {
    const rec = (i: number, extra: Record<string, unknown> = {}) => ({
      recordId: `r${i}`,
      kind: 'customer',
      externalId: `x-${i}`,
      body: customer(i),
      ...extra,
    })
    const cases: [unknown[], [string, string][]][] = [
      [Array.from({ length: 101 }, (_, i) => rec(i)), [['too_big', '/records']]],
      [[], [['too_small', '/records']]],
      [[rec(1), rec(1)], [['custom', '/records/1/recordId']]],
      [[rec(1, { dependsOn: ['r2'] }), rec(2)], [['custom', '/records/0/dependsOn/0']]],
      [[rec(1, { dependsOn: ['ghost'] })], [['custom', '/records/0/dependsOn/0']]],
      [[rec(1, { kind: 'invoice' })], [['invalid_value', '/records/0/kind']]],
      [[rec(1, { externalId: 'a b' })], [['invalid_format', '/records/0/externalId']]],
    ]
    for (const [records, expected] of cases) {
      const res = await putBatch(k, 'b-shape', records)
      assert.equal(res.status, 422)
      assert.deepEqual(pointers(res), expected)
    }
    assert.equal(problemCode(await getBatch(k, 'b-shape')), 'batch_not_found')
  })

  test('the write scope of every kind is needed to submit and to read', async () => {
    const limited = await t.tenant('bat-scope', { scopes: ['customers:write', 'receivables:write'] })
    const res = await putBatch(limited, 'b-s', [
      { recordId: 'c', kind: 'customer', externalId: 's-1', body: customer(1) },
      { recordId: 'a', kind: 'adjustment', externalId: 'e-1', body: adjustment('r', 2) },
    ])
    assert.equal(res.status, 403)
    assert.equal(problemCode(res), 'client_scope_denied')
    assert.equal((await putBatch(limited, 'b-s2', [{ recordId: 'c', kind: 'customer', externalId: 's-1', body: customer(1) }])).status, 202)
    const reader = await t.tenant('bat-scope', { integrationId: 'int-reader', scopes: ['customers:read'] })
    assert.equal(problemCode(await getBatch(reader, 'b-s2')), 'client_scope_denied')
  })
})

describe('processing', () => {
  test('each record answers exactly what its synchronous route answers', async () => {
    const records = [
      { recordId: 'c1', kind: 'customer', externalId: 'cust-1', body: customer(1) },
      { recordId: 'c1-again', kind: 'customer', externalId: 'cust-1', body: customer(1) },
      { recordId: 'bad', kind: 'customer', externalId: 'cust-bad', body: { type: 'robot' } },
      { recordId: 'r1', kind: 'receivable', externalId: 'r-1', body: receivable('cust-1') },
      { recordId: 'r-profile', kind: 'receivable', externalId: 'r-2', body: { ...receivable('cust-1'), creditUnion: undefined } },
      { recordId: 'r-unknown', kind: 'receivable', externalId: 'r-3', body: receivable('ghost') },
      { recordId: 'r1-stale', kind: 'receivable', externalId: 'r-1', body: receivable('cust-1', 1, { sourceReference: 'changed' }) },
      { recordId: 'adj', kind: 'adjustment', externalId: 'e-1', body: adjustment('r-1', 2) },
      { recordId: 'adj-conflict', kind: 'adjustment', externalId: 'e-1', body: adjustment('r-1', 2, '2.00') },
      {
        recordId: 'cn',
        kind: 'credit_note',
        externalId: 'e-2',
        body: { ...adjustment('r-1', 3), type: 'credit_note', reason: 'contractual_credit', direction: undefined },
      },
      {
        recordId: 'wo',
        kind: 'write_off',
        externalId: 'e-3',
        body: { ...adjustment('r-1', 4), type: 'write_off', reason: 'approved_write_off', direction: undefined },
      },
      {
        recordId: 'po',
        kind: 'payment_observation',
        externalId: 'p-1',
        body: {
          type: 'payment',
          amount: usd('5.00'),
          allocations: [],
          effectiveAt: '2026-03-01T00:00:00Z',
          externalCustomerId: 'cust-1',
          method: 'cash',
          sourceReference: 'p/1',
        },
      },
      { recordId: 'blocked', kind: 'receivable', externalId: 'r-9', dependsOn: ['bad'], body: receivable('cust-1') },
      { recordId: 'chain', kind: 'customer', externalId: 'cust-9', dependsOn: ['blocked', 'c1'], body: customer(9) },
    ]
    const clean = JSON.parse(JSON.stringify(records))
    assert.equal((await putBatch(k, 'b-same', clean)).status, 202)
    await t.app.batchRunner.drain()
    const batch = (await getBatch(k, 'b-same')).json
    // The same inputs, one by one, through the synchronous routes of another client.
    for (const rec of clean) {
      const outcome = batch.records.find((r: { recordId: string }) => r.recordId === rec.recordId)
      if (rec.dependsOn) continue
      const res = await t.call('PUT', `/v1/clients/bat-sync/${kindPath[rec.kind]}/${rec.externalId}`, { key: sync.apiKey, body: rec.body })
      assert.equal(outcome.httpStatus, res.status, `${rec.recordId}: ${res.body}`)
      if (res.status >= 400) {
        assert.equal(outcome.status, 'failed')
        assert.equal(outcome.problem.type, res.json.type, rec.recordId)
      } else {
        assert.equal(outcome.status, 'succeeded')
        assert.equal(outcome.problem, undefined)
      }
    }
    const blocked = batch.records.filter((r: { status: string }) => r.status === 'dependency_failed')
    assert.deepEqual(
      blocked.map((r: { recordId: string; blockedBy: string; httpStatus?: number }) => [r.recordId, r.blockedBy, r.httpStatus]),
      [
        ['blocked', 'bad', undefined],
        ['chain', 'blocked', undefined],
      ],
    )
    assert.equal((await t.call('GET', '/v1/clients/bat/receivables/r-9', { key: k.apiKey })).status, 404)
    assert.deepEqual(batch.counts, { total: 14, pending: 0, succeeded: 7, failed: 5, dependencyFailed: 2 })
    assert.equal(batch.status, 'partially_succeeded')
    assert.deepEqual(
      batch.records.map((r: { position: number }) => r.position),
      Array.from({ length: 14 }, (_, i) => i + 1),
    )
  })

  test('records touching the same resource in one chunk keep array order: outcomes, resources and feed as the synchronous routes', async () => {
    const b = await t.tenant('bat-order')
    const s = await t.tenant('bat-order-sync')
    const creditNote = (receivableId: string, sourceRevision: number, amount: { amount: string; currency: string }) => ({
      ...adjustment(receivableId, sourceRevision),
      type: 'credit_note',
      reason: 'contractual_credit',
      direction: undefined,
      amount,
    })
    const eur = (amount: string) => ({ amount, currency: 'EUR' })
    // No dependsOn anywhere: the order of the array alone decides, as it does for the same calls one by one.
    const records = [
      { recordId: 'c1', kind: 'customer', externalId: 'o-c1', body: customer(1) },
      { recordId: 'r1', kind: 'receivable', externalId: 'o-r1', body: receivable('o-c1') },
      { recordId: 'a1', kind: 'adjustment', externalId: 'o-a1', body: adjustment('o-r1', 2) },
      { recordId: 'r1-replace', kind: 'receivable', externalId: 'o-r1', body: receivable('o-c1', 3, { recoverableAmount: usd('20.00') }) },
      { recordId: 'a2-stale', kind: 'adjustment', externalId: 'o-a2', body: adjustment('o-r1', 3) },
      { recordId: 'a1-retry', kind: 'adjustment', externalId: 'o-a1', body: adjustment('o-r1', 2) },
      { recordId: 'a1-conflict', kind: 'adjustment', externalId: 'o-a1', body: adjustment('o-r1', 4) },
      { recordId: 'c1-change', kind: 'customer', externalId: 'o-c1', body: customer(11) },
      { recordId: 'c1-same', kind: 'customer', externalId: 'o-c1', body: customer(11) },
      { recordId: 'r2-early', kind: 'receivable', externalId: 'o-r2', body: receivable('o-c2') },
      { recordId: 'c2', kind: 'customer', externalId: 'o-c2', body: customer(2) },
      { recordId: 'r2', kind: 'receivable', externalId: 'o-r2', body: receivable('o-c2') },
      // A restriction change runs the per-record rules (fallback) in its place in the array.
      {
        recordId: 'r2-restrict',
        kind: 'receivable',
        externalId: 'o-r2',
        body: receivable('o-c2', 2, { restrictions: [{ type: 'hardship' }] }),
      },
      {
        recordId: 'r2-same',
        kind: 'receivable',
        externalId: 'o-r2',
        body: receivable('o-c2', 2, { restrictions: [{ type: 'hardship' }] }),
      },
      { recordId: 'c2-restrict', kind: 'customer', externalId: 'o-c2', body: { ...customer(2), restrictions: [{ type: 'dispute' }] } },
      { recordId: 'a3', kind: 'adjustment', externalId: 'o-a3', body: adjustment('o-r2', 3) },
      {
        recordId: 'po',
        kind: 'payment_observation',
        externalId: 'o-p1',
        body: {
          type: 'payment',
          amount: usd('5.00'),
          allocations: [],
          effectiveAt: '2026-03-01T00:00:00Z',
          externalCustomerId: 'o-c2',
          method: 'cash',
          sourceReference: 'p/1',
        },
      },
      { recordId: 'r3', kind: 'receivable', externalId: 'o-r3', body: receivable('o-c1', 1, { recoverableAmount: eur('5.00') }) },
      { recordId: 'r3-currency', kind: 'receivable', externalId: 'o-r3', body: receivable('o-c1', 2) },
      { recordId: 'cn-below-zero', kind: 'credit_note', externalId: 'o-cn1', body: creditNote('o-r3', 2, eur('50.00')) },
      { recordId: 'cn-currency', kind: 'credit_note', externalId: 'o-cn2', body: creditNote('o-r3', 2, usd('1.00')) },
      { recordId: 'cn', kind: 'credit_note', externalId: 'o-cn3', body: creditNote('o-r3', 2, eur('1.00')) },
      { recordId: 'c3', kind: 'customer', externalId: 'o-c3', body: { ...customer(3), restrictions: [{ type: 'deceased' }] } },
      { recordId: 'r4', kind: 'receivable', externalId: 'o-r4', body: receivable('o-c3', 1, { restrictions: [{ type: 'legal_hold' }] }) },
      { recordId: 'r4-profile', kind: 'receivable', externalId: 'o-r4', body: { ...receivable('o-c3', 2), creditUnion: undefined } },
      { recordId: 'r1-two', kind: 'receivable', externalId: 'o-r1', body: receivable('o-c2', 4, { recoverableAmount: usd('21.00') }) },
      { recordId: 'r1-again', kind: 'receivable', externalId: 'o-r1', body: receivable('o-c2', 4, { recoverableAmount: usd('21.00') }) },
    ]
    const clean = JSON.parse(JSON.stringify(records))
    assert.equal((await putBatch(b, 'b-order', clean)).status, 202)
    await t.app.batchRunner.drain()
    const batch = (await getBatch(b, 'b-order')).json
    const answers: [string, number, string | null][] = []
    for (const rec of clean) {
      const res = await t.call('PUT', `/v1/clients/${s.clientCode}/${kindPath[rec.kind]}/${rec.externalId}`, {
        key: s.apiKey,
        body: rec.body,
      })
      answers.push([rec.recordId, res.status, res.status >= 400 ? res.json.type : null])
    }
    assert.deepEqual(
      batch.records.map((r: { recordId: string; httpStatus: number; problem?: { type: string } }) => [
        r.recordId,
        r.httpStatus,
        r.problem?.type ?? null,
      ]),
      answers,
    )
    // The statuses themselves, so a change of both paths at once shows too.
    const code = (type: string | null) => (type ? type.slice(type.lastIndexOf('/') + 1) : null)
    assert.deepEqual(
      answers.map(([id, status, type]) => `${id} ${status}${type ? ` ${code(type)}` : ''}`),
      [
        'c1 201',
        'r1 201',
        'a1 201',
        'r1-replace 200',
        'a2-stale 409 stale_source_revision',
        'a1-retry 200',
        'a1-conflict 409 financial_event_conflict',
        'c1-change 200',
        'c1-same 200',
        'r2-early 422 validation_error',
        'c2 201',
        'r2 201',
        'r2-restrict 200',
        'r2-same 200',
        'c2-restrict 200',
        'a3 201',
        'po 201',
        'r3 201',
        'r3-currency 422 validation_error',
        'cn-below-zero 422 validation_error',
        'cn-currency 422 validation_error',
        'cn 201',
        'c3 201',
        'r4 201',
        'r4-profile 422 profile_mismatch',
        'r1-two 200',
        'r1-again 200',
      ],
    )
    // What the records left behind is what the same calls one by one left: every resource, and each
    // resource's feed events in order.
    const view = (json: Record<string, unknown>) => {
      const { updatedAt: _u, acceptedAt: _a, ...rest } = json
      return rest
    }
    for (const path of [
      'customers/o-c1',
      'customers/o-c2',
      'customers/o-c3',
      'receivables/o-r1',
      'receivables/o-r2',
      'receivables/o-r3',
      'receivables/o-r4',
    ]) {
      const got = await t.call('GET', `/v1/clients/${b.clientCode}/${path}`, { key: b.apiKey })
      const want = await t.call('GET', `/v1/clients/${s.clientCode}/${path}`, { key: s.apiKey })
      assert.equal(got.status, 200, path)
      assert.deepEqual(view(got.json), view(want.json), path)
    }
    const feed = async (clientCode: string) => {
      const rows = await t.store.query<{ type: string; resource_id: string; revision: string }>(
        'SELECT type, resource_id, revision FROM change_events WHERE client_code = $1 ORDER BY seq',
        [clientCode],
      )
      const byResource = new Map<string, string[]>()
      for (const r of rows) byResource.set(r.resource_id, [...(byResource.get(r.resource_id) ?? []), `${r.type} @${r.revision}`])
      return Object.fromEntries([...byResource].sort(([x], [y]) => (x < y ? -1 : 1)))
    }
    assert.deepEqual(await feed(b.clientCode), await feed(s.clientCode))
  })

  test('all failed is failed; grants are checked again when records run', async () => {
    const g = await t.tenant('bat-grant')
    assert.equal((await putBatch(g, 'b-f', [{ recordId: 'x', kind: 'customer', externalId: 'x', body: {} }])).status, 202)
    assert.equal((await putBatch(g, 'b-g', [{ recordId: 'c', kind: 'customer', externalId: 'g-1', body: customer(1) }])).status, 202)
    assert.equal(
      (await t.admin('PUT', `/admin/v1/integrations/${g.integrationId}/grants/bat-grant`, { scopes: ['customers:read'] })).status,
      200,
    )
    await t.app.batchRunner.drain()
    assert.equal(
      (
        await t.admin('PUT', `/admin/v1/integrations/${g.integrationId}/grants/bat-grant`, {
          scopes: ['customers:write', 'customers:read'],
        })
      ).status,
      200,
    )
    const f = (await getBatch(g, 'b-f')).json
    assert.equal(f.status, 'failed')
    const rechecked = (await getBatch(g, 'b-g')).json
    assert.equal(rechecked.status, 'failed')
    assert.deepEqual(
      [rechecked.records[0].httpStatus, rechecked.records[0].problem.type],
      [403, 'https://docs.irs.test/problems/client_scope_denied'],
    )
    assert.equal((await t.call('GET', '/v1/clients/bat-grant/customers/g-1', { key: g.apiKey })).status, 404)
  })
})

describe('failed records', () => {
  test('a failed record carries the whole problem its synchronous route answers: detail, errors[] with pointers into the body', async () => {
    const f = await t.tenant('bat-fail')
    const s = await t.tenant('bat-fail-sync')
    const records = [
      { recordId: 'c1', kind: 'customer', externalId: 'fc-1', body: customer(1) },
      { recordId: 'r1', kind: 'receivable', externalId: 'fr-1', body: receivable('fc-1') },
      // 422, several field errors at once.
      {
        recordId: 'bad',
        kind: 'customer',
        externalId: 'fc-bad',
        body: { type: 'person', name: { firstName: '' }, sourceReference: 'x', colour: 'red' },
      },
      // 422 unknown_reference: the Customer named does not exist.
      { recordId: 'ref', kind: 'receivable', externalId: 'fr-2', body: receivable('ghost') },
      // 409 with the extension member the synchronous route adds.
      { recordId: 'stale', kind: 'receivable', externalId: 'fr-1', body: receivable('fc-1', 1, { sourceReference: 'changed' }) },
      // 409 on a financial event, and 422 unknown_reference inside an event body.
      { recordId: 'adj', kind: 'adjustment', externalId: 'fe-1', body: adjustment('fr-1', 2) },
      { recordId: 'adj-conflict', kind: 'adjustment', externalId: 'fe-1', body: adjustment('fr-1', 2, '2.00') },
      { recordId: 'adj-ref', kind: 'adjustment', externalId: 'fe-2', body: adjustment('fr-ghost', 3) },
    ]
    assert.equal((await putBatch(f, 'b-fail', records)).status, 202)
    await t.app.batchRunner.drain()
    const batch = (await getBatch(f, 'b-fail')).json
    const byId = new Map(batch.records.map((r: { recordId: string }) => [r.recordId, r]))

    for (const rec of records) {
      const sync = await t.call('PUT', `/v1/clients/bat-fail-sync/${kindPath[rec.kind]}/${rec.externalId}`, {
        key: s.apiKey,
        body: rec.body,
      })
      // biome-ignore lint/suspicious/noExplicitAny: outcomes are inspected field by field
      const outcome: any = byId.get(rec.recordId)
      assert.equal(outcome.httpStatus, sync.status, rec.recordId)
      if (sync.status < 400) {
        assert.equal(outcome.problem, undefined, rec.recordId)
        continue
      }
      const { requestId: _requestId, ...expected } = sync.json
      assert.deepEqual(outcome.problem, expected, rec.recordId)
    }

    // What an integrator reads, spelled out for three of them.
    const bad = byId.get('bad') as { problem: { status: number; detail: string; errors: { code: string; pointer: string }[] } }
    assert.equal(bad.problem.status, 422)
    assert.deepEqual(
      bad.problem.errors.map((e) => [e.code, e.pointer]),
      [
        ['too_small', '/name/firstName'],
        ['invalid_type', '/name/lastName'],
        ['unrecognized_keys', '/colour'],
      ],
    )
    assert.match(bad.problem.detail, /^The request body is invalid: \/name\/firstName .* \(and 2 more\)$/)
    const ref = byId.get('ref') as { problem: { errors: { code: string; pointer: string }[] } }
    assert.deepEqual(
      ref.problem.errors.map((e) => [e.code, e.pointer]),
      [['unknown_reference', '/responsibleCustomers/0/externalCustomerId']],
    )
    const stale = byId.get('stale') as { problem: Record<string, unknown> }
    assert.equal(stale.problem.type, 'https://docs.irs.test/problems/stale_source_revision')
    assert.equal(stale.problem.currentSourceRevision, 1)
    assert.equal(stale.problem.errors, undefined)
  })

  test('the OpenAPI document describes the failed record problem', async () => {
    const doc = (await t.call('GET', '/v1/openapi.json')).json
    const schema = doc.components.schemas.BatchRecordProblem
    assert.deepEqual(schema.required, ['type', 'title', 'status', 'detail'])
    assert.deepEqual(Object.keys(schema.properties), ['type', 'title', 'status', 'detail', 'errors'])
    assert.match(schema.properties.errors.description, /JSON pointer into the record's `body`/)
    assert.deepEqual(doc.components.schemas.BatchRecordOutcome.properties.problem.$ref, '#/components/schemas/BatchRecordProblem')
  })
})
