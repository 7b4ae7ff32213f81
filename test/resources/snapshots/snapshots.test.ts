import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

/** Balance snapshots (docs/design/domain-rules.md, "Balance snapshots"): outcomes, order, feed mode. */
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

describe('balance snapshots', () => {
  test('applied, stale and unknown outcomes; ordered; immutable', async () => {
    const k = await tenant('snap')
    const c = (m: 'PUT' | 'GET', p: string, body?: unknown) =>
      t.call(m, `/v1/clients/snap${p}`, { key: k.apiKey, ...(body ? { body } : {}) })
    for (const id of ['a', 'b']) await c('PUT', `/receivables/${id}`, receivable(5))
    const body = {
      asOf: '2026-11-21T00:00:00Z',
      feedMode: 'transaction',
      sourcePosition: 100,
      balances: [
        { externalReceivableId: 'a', recoverableAmount: usd('7.5'), sourceRevision: 6 },
        { externalReceivableId: 'b', recoverableAmount: usd('1.00'), sourceRevision: 5 },
        { externalReceivableId: 'ghost', recoverableAmount: usd('1.00'), sourceRevision: 1 },
      ],
    }
    const res = await c('PUT', '/balance-snapshots/s1', body)
    assert.equal(res.status, 201, res.body)
    assert.deepEqual(
      res.json.balances.map((b: { outcome: string }) => b.outcome),
      ['applied', 'stale', 'unknown_receivable'],
    )
    assert.deepEqual(res.json.balances[0].recoverableAmount, usd('7.50'))
    const a = (await c('GET', '/receivables/a')).json
    assert.deepEqual([a.financialPosition.sourceAmount.amount, a.sourceRevision, a.revision], ['7.50', 6, 2])
    const b = (await c('GET', '/receivables/b')).json
    assert.deepEqual([b.financialPosition.sourceAmount.amount, b.revision], ['10.00', 1])
    assert.deepEqual((await c('GET', '/balance-snapshots/s1')).json, res.json)
    assert.equal((await c('PUT', '/balance-snapshots/s1', body)).status, 200)
    assert.equal((await c('GET', '/receivables/a')).json.revision, 2)
    assert.equal(problemCode(await c('PUT', '/balance-snapshots/s1', { ...body, asOf: '2026-11-22T00:00:00Z' })), 'snapshot_conflict')
    for (const pos of [100, 99])
      assert.equal(problemCode(await c('PUT', '/balance-snapshots/s2', { ...body, sourcePosition: pos })), 'snapshot_out_of_order')
    assert.equal(
      problemCode(await c('PUT', '/balance-snapshots/s3', { ...body, sourcePosition: 101, feedMode: 'snapshot_only' })),
      'feed_mode_mismatch',
    )
    assert.deepEqual(
      pointers(
        await c('PUT', '/balance-snapshots/s4', {
          ...body,
          sourcePosition: 102,
          balances: [{ externalReceivableId: 'a', recoverableAmount: { amount: '1', currency: 'EUR' }, sourceRevision: 9 }],
        }),
      ),
      [['custom', '/balances/0/recoverableAmount/currency']],
    )
    assert.deepEqual(pointers(await c('PUT', '/balance-snapshots/s4', { ...body, balances: [body.balances[0], body.balances[0]] })), [
      ['custom', '/balances/1/externalReceivableId'],
    ])
    assert.deepEqual(
      pointers(
        await c('PUT', '/balance-snapshots/s4', {
          ...body,
          balances: Array.from({ length: 101 }, (_, i) => ({
            externalReceivableId: `r${i}`,
            recoverableAmount: usd('1'),
            sourceRevision: 1,
          })),
        }),
      ),
      [['too_big', '/balances']],
    )
    assert.equal(problemCode(await c('GET', '/balance-snapshots/none')), 'financial_event_not_found')
  })

  test('a snapshot_only connection sends snapshot_only snapshots', async () => {
    const k = await tenant('snap2', { feedMode: 'snapshot_only' })
    await t.call('PUT', '/v1/clients/snap2/receivables/a', { key: k.apiKey, body: receivable() })
    const body = {
      asOf: '2026-11-21T00:00:00Z',
      sourcePosition: 1,
      balances: [{ externalReceivableId: 'a', recoverableAmount: usd('1'), sourceRevision: 2 }],
    }
    assert.equal(
      problemCode(
        await t.call('PUT', '/v1/clients/snap2/balance-snapshots/x', { key: k.apiKey, body: { ...body, feedMode: 'transaction' } }),
      ),
      'feed_mode_mismatch',
    )
    assert.equal(
      (await t.call('PUT', '/v1/clients/snap2/balance-snapshots/x', { key: k.apiKey, body: { ...body, feedMode: 'snapshot_only' } }))
        .status,
      201,
    )
  })
})
