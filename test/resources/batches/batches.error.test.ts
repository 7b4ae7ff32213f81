import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { SCOPES, type Scope } from '../../../src/domain/scopes.ts'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

/**
 * Batches, the refusals: the shape rules at submission (nothing is queued), the write scope of every kind
 * for submission and for reading, grants checked again when the records run, and tenant isolation.
 */

const PROBLEMS = 'https://docs.irs.test/problems/'
let t: TestApp

const usd = (amount: string) => ({ amount, currency: 'USD' })
const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `ref/${n}` })
const receivable = (customerId: string) => ({
  financialType: 'loan_balance',
  sourceRevision: 1,
  recoverableAmount: usd('10.00'),
  creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [{ externalCustomerId: customerId, role: 'primary' }],
  sourceReference: 'r/1',
})
const adjustment = (receivableId: string) => ({
  type: 'adjustment',
  amount: usd('1.00'),
  externalReceivableId: receivableId,
  sourceRevision: 2,
  effectiveAt: '2026-03-01T00:00:00Z',
  reason: 'source_adjustment',
  sourceReference: 'e/1',
  direction: 'increase',
})

/** One record of each kind, and the write scope each kind needs. */
const KIND_SCOPE: Record<string, Scope> = {
  customer: 'customers:write',
  receivable: 'receivables:write',
  payment_observation: 'payment_observations:write',
  adjustment: 'financial_corrections:write',
  credit_note: 'financial_corrections:write',
  write_off: 'financial_corrections:write',
}

const putBatch = (k: Tenant, id: string, body: unknown, client = k.clientCode) =>
  t.call('PUT', `/v1/clients/${client}/batches/${id}`, { key: k.apiKey, body })
const getBatch = (k: Tenant, id: string, client = k.clientCode) => t.call('GET', `/v1/clients/${client}/batches/${id}`, { key: k.apiKey })
const errors = (res: Response) => (res.json?.errors ?? []).map((e: { code: string; pointer: string }) => [e.code, e.pointer])
const count = async (sql: string, params: unknown[]) => Number((await t.store.query<{ n: number }>(sql, params))[0]?.n)
const batchRows = (client: string) => count('SELECT count(*)::int AS n FROM batches WHERE client_code = $1', [client])
const recordRows = (client: string) => count('SELECT count(*)::int AS n FROM batch_records WHERE client_code = $1', [client])
const eventCount = (client: string) => count('SELECT count(*)::int AS n FROM change_events WHERE client_code = $1', [client])
const grant = (k: Tenant, scopes: readonly Scope[]) =>
  t.admin('PUT', `/admin/v1/integrations/${k.integrationId}/grants/${k.clientCode}`, { scopes })

function assertProblem(res: Response, status: number, code: string) {
  assert.equal(res.status, status, res.body)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
  assert.equal(res.json.type, `${PROBLEMS}${code}`)
  assert.equal(res.json.status, status)
}

before(async () => {
  t = await startTestApp()
})
after(() => t.close())

describe('shape rules at submission', () => {
  const rec = (i: number, extra: Record<string, unknown> = {}) => ({
    recordId: `r${i}`,
    kind: 'customer',
    externalId: `x-${i}`,
    body: customer(i),
    ...extra,
  })

  test('each refusal is 422 validation_error with exactly its errors, and nothing is queued', async () => {
    const k = await t.tenant('bs')
    const cases: [string, unknown, [string, string][]][] = [
      ['101 records', { records: Array.from({ length: 101 }, (_, i) => rec(i)) }, [['too_big', '/records']]],
      ['0 records', { records: [] }, [['too_small', '/records']]],
      ['no records', {}, [['invalid_type', '/records']]],
      ['records not an array', { records: 'x' }, [['invalid_type', '/records']]],
      ['not an object', [], [['invalid_type', '']]],
      ['unknown top-level key', { records: [rec(1)], bookComplete: true }, [['unrecognized_keys', '/bookComplete']]],
      ['unknown record key', { records: [rec(1, { priority: 1 })] }, [['unrecognized_keys', '/records/0/priority']]],
      ['duplicate recordId', { records: [rec(1), rec(1, { externalId: 'x-2' })] }, [['custom', '/records/1/recordId']]],
      [
        'duplicate recordId later on',
        { records: [rec(1), rec(2), rec(3), rec(2, { externalId: 'x-4' })] },
        [['custom', '/records/3/recordId']],
      ],
      ['dependsOn a later record', { records: [rec(1, { dependsOn: ['r2'] }), rec(2)] }, [['custom', '/records/0/dependsOn/0']]],
      [
        'dependsOn a later record, second entry',
        { records: [rec(1), rec(2, { dependsOn: ['r1', 'r3'] }), rec(3)] },
        [['custom', '/records/1/dependsOn/1']],
      ],
      ['dependsOn itself', { records: [rec(1, { dependsOn: ['r1'] })] }, [['custom', '/records/0/dependsOn/0']]],
      ['dependsOn an unknown record', { records: [rec(1), rec(2, { dependsOn: ['ghost'] })] }, [['custom', '/records/1/dependsOn/0']]],
      ['unknown kind', { records: [rec(1, { kind: 'invoice' })] }, [['invalid_value', '/records/0/kind']]],
      ['missing kind', { records: [rec(1, { kind: undefined })] }, [['invalid_value', '/records/0/kind']]],
      ['bad externalId', { records: [rec(1, { externalId: 'a b' })] }, [['invalid_format', '/records/0/externalId']]],
      ['too long externalId', { records: [rec(1, { externalId: 'x'.repeat(129) })] }, [['invalid_format', '/records/0/externalId']]],
      [
        'sensitive externalId',
        { records: [rec(1, { externalId: 'acct-123456789' })] },
        [['sensitive_external_id', '/records/0/externalId']],
      ],
      ['bad recordId', { records: [rec(1, { recordId: 'a b' })] }, [['invalid_format', '/records/0/recordId']]],
      ['body not an object', { records: [rec(1, { body: 'x' })] }, [['invalid_type', '/records/0/body']]],
    ]
    for (const [what, body, expected] of cases) {
      const res = await putBatch(k, 'b-shape', body)
      assertProblem(res, 422, 'validation_error')
      assert.deepEqual(errors(res), expected, what)
    }
    assertProblem(await getBatch(k, 'b-shape'), 404, 'batch_not_found')
    assert.equal(await batchRows('bs'), 0)
    assert.equal(await recordRows('bs'), 0)

    // The bounds themselves are accepted: 100 records, each depending on every earlier one is fine too.
    const hundred = Array.from({ length: 100 }, (_, i) => rec(i + 1, i > 0 ? { dependsOn: [`r${i}`] } : {}))
    const ok = await putBatch(k, 'b-shape', { records: hundred })
    assert.equal(ok.status, 202, ok.body)
    assert.equal(ok.json.counts.total, 100)
  })

  test('route parameters are validated before authentication; JSON and media type rules hold', async () => {
    const k = await t.tenant('bs-p')
    const body = { records: [rec(1)] }
    const noKey = await t.call('PUT', '/v1/clients/bs-p/batches/b%20x', { body })
    assertProblem(noKey, 422, 'validation_error')
    assert.deepEqual(errors(noKey), [['invalid_format', '/path/externalBatchId']])
    assert.deepEqual(errors(await t.call('GET', '/v1/clients/bs-p/batches/b%20x')), [['invalid_format', '/path/externalBatchId']])
    assertProblem(await t.call('PUT', '/v1/clients/bs-p/batches/b-1', { body }), 401, 'invalid_api_key')
    assertProblem(await t.call('GET', '/v1/clients/bs-p/batches/b-1'), 401, 'invalid_api_key')
    assertProblem(await t.call('PUT', '/v1/clients/bs-p/batches/b-1', { key: k.apiKey, rawBody: '{"records":' }), 400, 'malformed_json')
    assertProblem(
      await t.call('PUT', '/v1/clients/bs-p/batches/b-1', { key: k.apiKey, rawBody: JSON.stringify(body), contentType: 'text/plain' }),
      415,
      'unsupported_media_type',
    )
    assert.equal(await batchRows('bs-p'), 0)
  })
})

describe('scopes', () => {
  const oneOfEach = [
    { recordId: 'c', kind: 'customer', externalId: 'c-1', body: customer(1) },
    { recordId: 'r', kind: 'receivable', externalId: 'r-1', body: receivable('c-1') },
    {
      recordId: 'p',
      kind: 'payment_observation',
      externalId: 'p-1',
      body: {
        type: 'payment',
        amount: usd('5.00'),
        allocations: [],
        effectiveAt: '2026-03-01T00:00:00Z',
        externalCustomerId: 'c-1',
        method: 'bank_transfer',
        sourceReference: 'p/1',
      },
    },
    { recordId: 'a', kind: 'adjustment', externalId: 'e-1', body: adjustment('r-1') },
    {
      recordId: 'n',
      kind: 'credit_note',
      externalId: 'e-2',
      body: { ...adjustment('r-1'), type: 'credit_note', reason: 'contractual_credit', direction: undefined, sourceRevision: 3 },
    },
    {
      recordId: 'w',
      kind: 'write_off',
      externalId: 'e-3',
      body: { ...adjustment('r-1'), type: 'write_off', reason: 'approved_write_off', direction: undefined, sourceRevision: 4 },
    },
  ]

  test('submission needs the write scope of every kind in the batch; a refusal queues nothing', async () => {
    // Without financial_corrections:write, a batch holding one adjustment is refused as a whole.
    const narrow = await t.tenant('sc-1', { scopes: ['customers:write', 'receivables:write', 'customers:read'] })
    const refused = await putBatch(narrow, 'b-adj', {
      records: [
        { recordId: 'c', kind: 'customer', externalId: 'c-1', body: customer(1) },
        { recordId: 'a', kind: 'adjustment', externalId: 'e-1', body: adjustment('r-1') },
      ],
    })
    assertProblem(refused, 403, 'client_scope_denied')
    assert.equal(await batchRows('sc-1'), 0)
    // Nothing was stored; to a grant that may not read every batch, an unknown batch answers 403 as well.
    assertProblem(await getBatch(narrow, 'b-adj'), 403, 'client_scope_denied')
    await t.app.batchRunner.drain()
    assert.equal((await t.call('GET', '/v1/clients/sc-1/customers/c-1', { key: narrow.apiKey })).status, 404)

    // The kinds it does hold are accepted.
    const ok = await putBatch(narrow, 'b-ok', { records: oneOfEach.slice(0, 2) })
    assert.equal(ok.status, 202, ok.body)

    // Each kind needs its own write scope: every scope but that one is refused.
    for (const rec of oneOfEach) {
      const code = `sc-${rec.kind.replace('_', '-')}`
      const k = await t.tenant(code, { scopes: SCOPES.filter((s) => s !== (KIND_SCOPE[rec.kind] as Scope)) })
      const res = await putBatch(k, 'b-1', { records: [rec] })
      assertProblem(res, 403, 'client_scope_denied')
      assert.equal(await batchRows(code), 0, rec.kind)
      // Only the kind's write scope (plus nothing else) is enough.
      const only = await t.tenant(code, { integrationId: `only-${code}`, scopes: [KIND_SCOPE[rec.kind] as Scope] })
      assert.equal((await putBatch(only, 'b-1', { records: [rec] })).status, 202, rec.kind)
    }
  })

  test('GET needs the write scope of every kind in the batch', async () => {
    const full = await t.tenant('sc-get')
    assert.equal((await putBatch(full, 'b-cust', { records: oneOfEach.slice(0, 1) })).status, 202)
    assert.equal((await putBatch(full, 'b-all', { records: oneOfEach })).status, 202)
    // Another integration on the same client.
    const customersOnly = await t.tenant('sc-get', { integrationId: 'int-cust-only', scopes: ['customers:write'] })
    assert.equal((await getBatch(customersOnly, 'b-cust')).status, 200)
    assertProblem(await getBatch(customersOnly, 'b-all'), 403, 'client_scope_denied')
    const noFinancial = await t.tenant('sc-get', {
      integrationId: 'int-no-fin',
      scopes: SCOPES.filter((s) => s !== 'financial_corrections:write'),
    })
    assertProblem(await getBatch(noFinancial, 'b-all'), 403, 'client_scope_denied')
    const readers = await t.tenant('sc-get', { integrationId: 'int-readers', scopes: SCOPES.filter((s) => !s.endsWith(':write')) })
    assertProblem(await getBatch(readers, 'b-cust'), 403, 'client_scope_denied')
    const writers = await t.tenant('sc-get', {
      integrationId: 'int-writers',
      scopes: [...new Set(Object.values(KIND_SCOPE))],
    })
    const all = await getBatch(writers, 'b-all')
    assert.equal(all.status, 200)
    assert.deepEqual(all.json, (await getBatch(full, 'b-all')).json)
    // Only a grant that may read any batch learns that one does not exist.
    assertProblem(await getBatch(writers, 'b-none'), 404, 'batch_not_found')
    assertProblem(await getBatch(full, 'b-none'), 404, 'batch_not_found')
  })

  test('a refusal never tells whether a batch exists: a forbidden and an unknown batch answer alike', async () => {
    const full = await t.tenant('sc-leak')
    assert.equal((await putBatch(full, 'b-fin', { records: oneOfEach.slice(3) })).status, 202)
    assert.equal((await putBatch(full, 'b-cust', { records: oneOfEach.slice(0, 1) })).status, 202)
    const same = (r: Response) => ({ status: r.status, type: r.json.type, title: r.json.title, detail: r.json.detail })
    const grants: [string, Scope[]][] = [
      ['customers:write only', ['customers:write']],
      ['every scope but financial_corrections:write', SCOPES.filter((s) => s !== 'financial_corrections:write')],
      ['read scopes only', SCOPES.filter((s) => !s.endsWith(':write'))],
    ]
    for (const [i, [what, scopes]] of grants.entries()) {
      const k = await t.tenant('sc-leak', { integrationId: `int-leak-${i}`, scopes })
      const forbidden = await getBatch(k, 'b-fin')
      const unknown = await getBatch(k, 'b-none')
      assertProblem(forbidden, 403, 'client_scope_denied')
      assert.deepEqual(same(unknown), same(forbidden), what)
    }
    // The readable batch stays readable to the narrow grant.
    const customersOnly = await t.tenant('sc-leak', { integrationId: 'int-leak-c', scopes: ['customers:write'] })
    assert.equal((await getBatch(customersOnly, 'b-cust')).status, 200)
  })

  test('a revoked grant: records fail with 403 client_scope_denied when they run, and nothing is written', async () => {
    const k = await t.tenant('rv')
    const res = await putBatch(k, 'b-1', {
      records: [
        { recordId: 'c1', kind: 'customer', externalId: 'c-1', body: customer(1) },
        { recordId: 'c2', kind: 'customer', externalId: 'c-2', body: { broken: true } },
        { recordId: 'c3', kind: 'customer', externalId: 'c-3', dependsOn: ['c1'], body: customer(3) },
      ],
    })
    assert.equal(res.status, 202)
    assert.equal((await t.admin('POST', `/admin/v1/integrations/${k.integrationId}/grants/rv/revoke`, {})).status, 200)
    await t.app.batchRunner.drain()
    // While revoked, the batch cannot be read either.
    assertProblem(await getBatch(k, 'b-1'), 403, 'client_scope_denied')
    // Restoring the grant restores reading, not the records: they ran under the revoked grant.
    assert.equal((await grant(k, SCOPES)).status, 200)
    await t.app.batchRunner.drain()
    const done = (await getBatch(k, 'b-1')).json
    assert.equal(done.status, 'failed')
    assert.deepEqual(done.counts, { total: 3, pending: 0, succeeded: 0, failed: 2, dependencyFailed: 1 })
    assert.deepEqual(
      done.records.map((r: Record<string, unknown>) => [
        r.recordId,
        r.status,
        r.httpStatus,
        (r.problem as { type: string })?.type,
        r.blockedBy,
      ]),
      [
        ['c1', 'failed', 403, `${PROBLEMS}client_scope_denied`, undefined],
        ['c2', 'failed', 403, `${PROBLEMS}client_scope_denied`, undefined],
        ['c3', 'dependency_failed', undefined, undefined, 'c1'],
      ],
    )
    for (const id of ['c-1', 'c-2', 'c-3'])
      assert.equal((await t.call('GET', `/v1/clients/rv/customers/${id}`, { key: k.apiKey })).status, 404)
    assert.equal(await eventCount('rv'), 0)
  })

  test('a grant re-PUT without customers:write: customer records fail 403 as their synchronous route would, others run', async () => {
    const k = await t.tenant('nr')
    // A Customer accepted before the change, which the Receivable record references.
    assert.equal((await t.call('PUT', '/v1/clients/nr/customers/pre-1', { key: k.apiKey, body: customer(0) })).status, 201)
    const res = await putBatch(k, 'b-1', {
      records: [
        { recordId: 'c1', kind: 'customer', externalId: 'c-1', body: customer(1) },
        { recordId: 'r1', kind: 'receivable', externalId: 'r-1', body: receivable('pre-1') },
        { recordId: 'c2', kind: 'customer', externalId: 'c-2', dependsOn: ['r1'], body: customer(2) },
        { recordId: 'r2', kind: 'receivable', externalId: 'r-2', dependsOn: ['c1'], body: receivable('pre-1') },
      ],
    })
    assert.equal(res.status, 202)
    const narrowed: Scope[] = ['customers:read', 'receivables:read', 'receivables:write']
    assert.equal((await grant(k, narrowed)).status, 200)
    await t.app.batchRunner.drain()
    // The synchronous route answers the same to the same grant now.
    const syncRefusal = await t.call('PUT', '/v1/clients/nr/customers/c-1', { key: k.apiKey, body: customer(1) })
    assertProblem(syncRefusal, 403, 'client_scope_denied')
    // And the batch, holding customer records, cannot be read without customers:write.
    assertProblem(await getBatch(k, 'b-1'), 403, 'client_scope_denied')
    assert.equal((await grant(k, SCOPES)).status, 200)
    const done = (await getBatch(k, 'b-1')).json
    assert.equal(done.status, 'partially_succeeded')
    assert.deepEqual(done.counts, { total: 4, pending: 0, succeeded: 1, failed: 2, dependencyFailed: 1 })
    const { requestId: _requestId, ...refusal } = syncRefusal.json
    assert.deepEqual(done.records[0].problem, refusal)
    assert.deepEqual(
      done.records.map((r: Record<string, unknown>) => [
        r.recordId,
        r.status,
        r.httpStatus,
        (r.problem as { type: string })?.type,
        r.blockedBy,
      ]),
      [
        ['c1', 'failed', 403, `${PROBLEMS}client_scope_denied`, undefined],
        ['r1', 'succeeded', 201, undefined, undefined],
        ['c2', 'failed', 403, `${PROBLEMS}client_scope_denied`, undefined],
        ['r2', 'dependency_failed', undefined, undefined, 'c1'],
      ],
    )
    const get = (what: string) => t.call('GET', `/v1/clients/nr/${what}`, { key: k.apiKey })
    assert.equal((await get('customers/c-1')).status, 404)
    assert.equal((await get('customers/c-2')).status, 404)
    assert.equal((await get('receivables/r-1')).json.revision, 1)
    assert.equal((await get('receivables/r-2')).status, 404)
  })
})

describe('tenant isolation', () => {
  test("client B cannot read or write client A's batches; batch ids are per client", async () => {
    const a = await t.tenant('ti-a')
    const b = await t.tenant('ti-b')
    const recordsA = [{ recordId: 'c', kind: 'customer', externalId: 'c-1', body: customer(1) }]
    const recordsB = [{ recordId: 'c', kind: 'customer', externalId: 'c-1', body: customer(2) }]
    const queuedA = await putBatch(a, 'b-1', { records: recordsA })
    assert.equal(queuedA.status, 202)

    // B's key has no grant on A: 403, whether the batch exists or not.
    assertProblem(await getBatch(b, 'b-1', 'ti-a'), 403, 'client_scope_denied')
    assertProblem(await getBatch(b, 'b-none', 'ti-a'), 403, 'client_scope_denied')
    assertProblem(await putBatch(b, 'b-2', { records: recordsB }, 'ti-a'), 403, 'client_scope_denied')
    assertProblem(await putBatch(b, 'b-1', { records: recordsA }, 'ti-a'), 403, 'client_scope_denied')
    // In B's own namespace A's batch does not exist, and the same id is free.
    assertProblem(await getBatch(b, 'b-1'), 404, 'batch_not_found')
    const queuedB = await putBatch(b, 'b-1', { records: recordsB })
    assert.equal(queuedB.status, 202)
    assert.deepEqual([await batchRows('ti-a'), await batchRows('ti-b')], [1, 1])
    // An unknown client code is refused like a client without a grant.
    assertProblem(await getBatch(a, 'b-1', 'ti-nobody'), 403, 'client_scope_denied')

    await t.app.batchRunner.drain()
    const doneA = (await getBatch(a, 'b-1')).json
    const doneB = (await getBatch(b, 'b-1')).json
    assert.deepEqual([doneA.status, doneA.records[0].httpStatus], ['succeeded', 201])
    assert.deepEqual([doneB.status, doneB.records[0].httpStatus], ['succeeded', 201])
    // Each Customer was written in its own client only.
    const cA = (await t.call('GET', '/v1/clients/ti-a/customers/c-1', { key: a.apiKey })).json
    const cB = (await t.call('GET', '/v1/clients/ti-b/customers/c-1', { key: b.apiKey })).json
    assert.deepEqual([cA.name.lastName, cA.revision, cB.name.lastName, cB.revision], ['L1', 1, 'L2', 1])
    assert.equal(problemCode(await getBatch(b, 'b-1', 'ti-a')), 'client_scope_denied')
  })
})
