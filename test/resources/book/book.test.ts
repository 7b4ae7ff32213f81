import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

/** Complete-book declarations (docs/design/domain-rules.md, "Complete-book declarations"): covered, omitted, held and released. */
const usd = (amount: string) => ({ amount, currency: 'USD' })
const customer = { type: 'person', name: { firstName: 'Ada', lastName: 'L' }, sourceReference: 'ref/1' }
const receivable = (sourceRevision = 1, amount = '10.00') => ({
  financialType: 'loan_balance',
  sourceRevision,
  recoverableAmount: usd(amount),
  creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'primary' }],
  sourceReference: 'r/1',
})
const pointers = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])

const now = new Date('2026-11-22T12:00:00.000Z')
const clock = { now: () => now }
let t: TestApp
before(async () => {
  t = await startTestApp({}, { clock })
})
after(() => t.close())

async function tenant(code: string, grant: Record<string, unknown> = {}): Promise<Tenant> {
  const k = await t.tenant(code, { grant })
  assert.equal((await t.call('PUT', `/v1/clients/${code}/customers/cust-1`, { key: k.apiKey, body: customer })).status, 201)
  return k
}

describe('complete-book declarations', () => {
  test('covered, omitted and held; released when the Source writes or closes the Receivable', async () => {
    const k = await tenant('book')
    const c = (m: 'PUT' | 'GET' | 'POST', p: string, body?: unknown) =>
      t.call(m, `/v1/clients/book${p}`, { key: k.apiKey, ...(body ? { body } : {}) })
    for (const id of ['a', 'b', 'c', 'd', 'e']) assert.equal((await c('PUT', `/receivables/${id}`, receivable())).status, 201)
    assert.equal((await c('POST', '/receivables/e/close', { effectiveAt: '2026-01-01T00:00:00Z', reason: 'settled' })).status, 200)
    const rec = (id: string, extra = {}) => ({ recordId: id, kind: 'receivable', externalId: id, body: { ...receivable(2), ...extra } })
    assert.equal(
      (
        await c('PUT', '/batches/b1', {
          records: [
            rec('a'),
            { ...rec('zz'), body: { ...receivable(2), responsibleCustomers: [{ externalCustomerId: 'ghost', role: 'primary' }] } },
          ],
        })
      ).status,
      202,
    )
    assert.equal(
      (await c('PUT', '/batches/b2', { records: [rec('a', { sourceReference: 'again' }), { ...rec('b'), recordId: 'b' }] })).status,
      202,
    )
    const early = await c('PUT', '/book-completions/d1', { asOf: '2026-11-22T00:00:00Z', sourcePosition: 10, batches: ['b1', 'b2'] })
    assert.equal(early.status, 409)
    assert.equal(problemCode(early), 'batches_not_finished')
    await t.app.batchRunner.drain()
    const before = (await c('GET', '/receivables/c')).json.revision
    const declared = await c('PUT', '/book-completions/d1', { asOf: '2026-11-22T00:00:00Z', sourcePosition: 10, batches: ['b1', 'b2'] })
    assert.equal(declared.status, 201, declared.body)
    assert.deepEqual(declared.json, {
      externalCompletionId: 'd1',
      acceptedAt: '2026-11-22T12:00:00.000Z',
      asOf: '2026-11-22T00:00:00Z',
      batches: ['b1', 'b2'],
      coveredReceivableCount: 2,
      omissions: [
        { externalReceivableId: 'c', flaggedAt: '2026-11-22T12:00:00.000Z', state: 'held' },
        { externalReceivableId: 'd', flaggedAt: '2026-11-22T12:00:00.000Z', state: 'held' },
      ],
      omissionsTruncated: false,
      omittedReceivableCount: 2,
      scope: 'all_receivables',
      sourcePosition: 10,
    })
    const held = (await c('GET', '/receivables/c')).json
    assert.equal(held.revision, before + 1)
    assert.ok(held.recovery.holds.includes('other_protection'))
    assert.equal(
      (await c('PUT', '/book-completions/d1', { asOf: '2026-11-22T00:00:00Z', sourcePosition: 10, batches: ['b1', 'b2'] })).status,
      200,
    )
    assert.equal(
      problemCode(await c('PUT', '/book-completions/d1', { asOf: '2026-11-22T00:00:00Z', sourcePosition: 11, batches: ['b1'] })),
      'book_completion_conflict',
    )
    for (const pos of [10, 9]) {
      assert.equal(
        problemCode(await c('PUT', '/book-completions/d2', { asOf: '2026-11-22T00:00:00Z', sourcePosition: pos, batches: ['b1'] })),
        'stale_source_position',
      )
    }
    // Released by an identical re-write of c, and by closing d.
    assert.equal((await c('PUT', '/receivables/c', receivable())).status, 200)
    assert.ok(!(await c('GET', '/receivables/c')).json.recovery.holds.includes('other_protection'))
    assert.equal((await c('POST', '/receivables/d/close', { effectiveAt: '2026-01-02T00:00:00Z', reason: 'settled' })).status, 200)
    const after = await c('GET', '/book-completions/d1')
    assert.deepEqual(
      after.json.omissions.map((o: { state: string }) => o.state),
      ['released', 'released'],
    )
    assert.equal(problemCode(await c('GET', '/book-completions/nothing')), 'financial_event_not_found')
  })

  test('bad declarations', async () => {
    const k = await tenant('book2')
    const put = (body: unknown) => t.call('PUT', '/v1/clients/book2/book-completions/x', { key: k.apiKey, body })
    const base = { asOf: '2026-11-22T00:00:00Z', sourcePosition: 1 }
    assert.deepEqual(pointers(await put({ ...base, batches: ['ghost'] })), [['unknown_reference', '/batches/0']])
    assert.deepEqual(pointers(await put({ ...base, batches: [] })), [['too_small', '/batches']])
    assert.deepEqual(pointers(await put({ ...base, batches: Array.from({ length: 51 }, (_, i) => `b${i}`) })), [['too_big', '/batches']])
    assert.deepEqual(pointers(await put({ ...base, batches: ['a', 'a'] })), [['custom', '/batches/1']])
    assert.deepEqual(pointers(await put({ ...base, batches: ['a'], asOf: '2026-11-22' })), [['invalid_format', '/asOf']])
  })

  test('more than 100 omissions: 100 listed, truncated, exact count', async () => {
    const k = await tenant('book3')
    for (let i = 0; i < 105; i++)
      await t.call('PUT', `/v1/clients/book3/receivables/o-${String(i).padStart(3, '0')}`, { key: k.apiKey, body: receivable() })
    await t.call('PUT', '/v1/clients/book3/batches/b', {
      key: k.apiKey,
      body: { records: ['o-000', 'o-001'].map((id) => ({ recordId: id, kind: 'receivable', externalId: id, body: receivable(2) })) },
    })
    await t.app.batchRunner.drain()
    const res = await t.call('PUT', '/v1/clients/book3/book-completions/big', {
      key: k.apiKey,
      body: { asOf: '2026-11-22T00:00:00Z', sourcePosition: 1, batches: ['b'] },
    })
    assert.equal(res.status, 201)
    assert.deepEqual(
      [res.json.omissions.length, res.json.omissionsTruncated, res.json.omittedReceivableCount, res.json.coveredReceivableCount],
      [100, true, 103, 2],
    )
  })
})
