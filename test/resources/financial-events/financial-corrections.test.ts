import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

/** Adjustments, credit notes and write-offs: each moves the source amount by its signed amount and revision. */
let t: TestApp
let k: Tenant
const base = '/v1/clients/fin'
const usd = (amount: string) => ({ amount, currency: 'USD' })
const customer = { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' }
const receivable = (sourceRevision = 1, amount = '100.00') => ({
  financialType: 'loan_balance',
  sourceRevision,
  recoverableAmount: usd(amount),
  creditUnion: { loanAccountReference: 'loans/LN-77', loanType: 'auto' },
  dueDate: '2026-02-28',
  responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'primary' }],
  sourceReference: 'ledger/r/1',
})
const pointers = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])

before(async () => {
  t = await startTestApp()
  k = await t.tenant('fin')
  assert.equal((await t.call('PUT', `${base}/customers/cust-1`, { key: k.apiKey, body: customer })).status, 201)
})
after(() => t.close())

const call = (method: 'PUT' | 'GET', path: string, body?: unknown) =>
  t.call(method, `${base}${path}`, { key: k.apiKey, ...(body ? { body } : {}) })
const position = async (id: string) => (await call('GET', `/receivables/${id}`)).json

describe('financial corrections', () => {
  const event = (type: string, sourceRevision: number, amount: string, extra: Record<string, unknown> = {}) => ({
    type,
    amount: usd(amount),
    externalReceivableId: 'r-fin',
    sourceRevision,
    effectiveAt: '2026-03-01T10:00:00Z',
    reason: type === 'write_off' ? 'approved_write_off' : 'billing_correction',
    sourceReference: 'ledger/e/1',
    ...(type === 'adjustment' ? { direction: 'increase' } : {}),
    ...extra,
  })

  test('each family moves the source amount by its signed amount and the source revision; retries are exact', async () => {
    assert.equal((await call('PUT', '/receivables/r-fin', receivable())).status, 201)
    const adj = await call('PUT', '/adjustments/e-1', event('adjustment', 2, '10.00', { staffNote: 'called the member' }))
    assert.equal(adj.status, 201, adj.body)
    assert.deepEqual(Object.keys(adj.json).sort(), [
      'acceptedAt',
      'amount',
      'direction',
      'effectiveAt',
      'externalEventId',
      'externalReceivableId',
      'reason',
      'sourceReference',
      'sourceRevision',
      'type',
    ])
    assert.ok(!adj.body.includes('called the member'))
    let r = await position('r-fin')
    assert.deepEqual([r.financialPosition.sourceAmount.amount, r.sourceRevision, r.revision], ['110.00', 2, 2])
    const retry = await call('PUT', '/adjustments/e-1', event('adjustment', 2, '10', { staffNote: 'called the member' }))
    assert.equal(retry.status, 200)
    assert.equal(retry.json.acceptedAt, adj.json.acceptedAt)
    assert.equal((await position('r-fin')).financialPosition.sourceAmount.amount, '110.00')
    const get = await call('GET', '/adjustments/e-1')
    assert.deepEqual(get.json, adj.json)

    assert.equal((await call('PUT', '/credit-notes/e-2', event('credit_note', 3, '30.00', { reason: 'contractual_credit' }))).status, 201)
    assert.equal((await call('PUT', '/write-offs/e-3', event('write_off', 4, '20.00'))).status, 201)
    assert.equal((await call('PUT', '/adjustments/e-4', event('adjustment', 5, '0.01', { direction: 'decrease' }))).status, 201)
    r = await position('r-fin')
    assert.deepEqual([r.financialPosition.sourceAmount.amount, r.sourceRevision, r.revision], ['59.99', 5, 5])
    const feed = await t.store.query<{ type: string; revision: string }>(
      `SELECT type, revision::text FROM change_events WHERE client_code = 'fin' AND resource_id = 'r-fin' ORDER BY seq`,
    )
    assert.deepEqual(
      feed.map((e) => Number(e.revision)),
      [1, 2, 3, 4, 5],
    )
  })

  test('conflicts, stale revisions, wrong families and reasons, and nothing moves on a refusal', async () => {
    const before = await position('r-fin')
    const changed = await call('PUT', '/adjustments/e-1', event('adjustment', 2, '11.00'))
    assert.equal(changed.status, 409)
    assert.equal(problemCode(changed), 'financial_event_conflict')
    for (const rev of [5, 4]) {
      const stale = await call('PUT', '/credit-notes/e-stale', event('credit_note', rev, '1.00'))
      assert.equal(problemCode(stale), 'stale_source_revision')
      assert.equal(stale.json.currentSourceRevision, 5)
    }
    assert.deepEqual(pointers(await call('PUT', '/adjustments/e-x', event('credit_note', 6, '1.00'))), [
      ['invalid_value', '/type'],
      ['invalid_value', '/direction'],
    ])
    assert.deepEqual(pointers(await call('PUT', '/credit-notes/e-x', event('adjustment', 6, '1.00', { direction: undefined }))), [
      ['invalid_value', '/type'],
    ])
    assert.deepEqual(pointers(await call('PUT', '/credit-notes/e-x', event('credit_note', 6, '1.00', { reason: 'approved_write_off' }))), [
      ['invalid_value', '/reason'],
    ])
    const { direction: _d, ...noDirection } = event('adjustment', 6, '1.00')
    assert.deepEqual(pointers(await call('PUT', '/adjustments/e-x', noDirection)), [['invalid_value', '/direction']])
    assert.deepEqual(pointers(await call('PUT', '/credit-notes/e-x', event('credit_note', 6, '1.00', { direction: 'decrease' }))), [
      ['unrecognized_keys', '/direction'],
    ])
    assert.deepEqual(pointers(await call('PUT', '/write-offs/e-x', event('write_off', 6, '60.00'))), [['custom', '/amount/amount']])
    assert.deepEqual(pointers(await call('PUT', '/write-offs/e-x', event('write_off', 6, '1.00', { externalReceivableId: 'ghost' }))), [
      ['unknown_reference', '/externalReceivableId'],
    ])
    assert.deepEqual(
      pointers(await call('PUT', '/write-offs/e-x', event('write_off', 6, '1.00', { amount: { amount: '1.00', currency: 'EUR' } }))),
      [['custom', '/amount/currency']],
    )
    assert.deepEqual(await position('r-fin'), before)
    assert.equal(problemCode(await call('GET', '/credit-notes/e-1')), 'financial_event_not_found')
    assert.equal(problemCode(await call('GET', '/write-offs/nothing')), 'financial_event_not_found')
  })

  test('a snapshot_only connection gets 409 feed_mode_mismatch for every family', async () => {
    const snap = await t.tenant('fin', { integrationId: 'int-snap', grant: { feedMode: 'snapshot_only' } })
    for (const [path, type] of [
      ['/adjustments/s-1', 'adjustment'],
      ['/credit-notes/s-1', 'credit_note'],
      ['/write-offs/s-1', 'write_off'],
    ] as const) {
      const res = await t.call('PUT', `${base}${path}`, { key: snap.apiKey, body: event(type, 9, '1.00') })
      assert.equal(res.status, 409)
      assert.equal(problemCode(res), 'feed_mode_mismatch')
    }
  })
})
