import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'

let t: TestApp
let k: Tenant
let sync: Tenant
before(async () => {
  t = await startTestApp()
  k = await t.tenant('bat')
  sync = await t.tenant('bat-sync')
})
after(() => t.close())

const usd = (amount: string) => ({ amount, currency: 'USD' })
const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `ref/${n}` })
const receivable = (customerId: string, sourceRevision = 1, extra: Record<string, unknown> = {}) => ({
  financialType: 'loan_balance',
  sourceRevision,
  recoverableAmount: usd('10.00'),
  creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [{ externalCustomerId: customerId, role: 'primary' }],
  sourceReference: 'r/1',
  ...extra,
})
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
