import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

/** Payment observations: evidence, listed and in the feed, that never moves the financial position. */
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

describe('payment observations', () => {
  const observation = (extra: Record<string, unknown> = {}) => ({
    type: 'payment',
    amount: usd('50.00'),
    allocations: [{ amount: usd('30.00'), externalReceivableId: 'r-obs' }],
    effectiveAt: '2026-03-02T09:00:00Z',
    externalCustomerId: 'cust-1',
    method: 'bank_transfer',
    sourceReference: 'bank/stmt/1',
    ...extra,
  })
  test('evidence only: unapplied remainder kept apart, the financial position never moves', async () => {
    assert.equal((await call('PUT', '/receivables/r-obs', receivable())).status, 201)
    const before = await position('r-obs')
    const res = await call('PUT', '/payment-observations/p-1', observation())
    assert.equal(res.status, 201, res.body)
    assert.deepEqual(res.json.unappliedAmount, usd('20.00'))
    assert.deepEqual((await position('r-obs')).financialPosition, before.financialPosition)
    assert.equal((await position('r-obs')).revision, before.revision)
    assert.equal((await call('PUT', '/payment-observations/p-1', observation())).status, 200)
    assert.equal(
      problemCode(await call('PUT', '/payment-observations/p-1', observation({ method: 'card' }))),
      'payment_observation_conflict',
    )
    assert.deepEqual((await call('GET', '/payment-observations/p-1')).json, res.json)
    assert.equal(
      (await call('PUT', '/payment-observations/p-2', observation({ type: 'refund', reversesExternalEventId: 'p-1', allocations: [] })))
        .status,
      201,
    )
  })
  test('bad observations', async () => {
    const cases: [Record<string, unknown>, [string, string][]][] = [
      [observation({ allocations: [{ amount: usd('60.00'), externalReceivableId: 'r-obs' }] }), [['custom', '/allocations']]],
      [observation({ externalCustomerId: 'ghost' }), [['unknown_reference', '/externalCustomerId']]],
      [
        observation({ allocations: [{ amount: usd('1.00'), externalReceivableId: 'ghost' }] }),
        [['unknown_reference', '/allocations/0/externalReceivableId']],
      ],
      [
        observation({
          allocations: [
            { amount: usd('1.00'), externalReceivableId: 'r-obs' },
            { amount: usd('1.00'), externalReceivableId: 'r-obs' },
          ],
        }),
        [['custom', '/allocations/1/externalReceivableId']],
      ],
      [
        observation({ allocations: [{ amount: { amount: '1.00', currency: 'EUR' }, externalReceivableId: 'r-obs' }] }),
        [['custom', '/allocations/0/amount/currency']],
      ],
      [observation({ type: 'reversal' }), [['custom', '/reversesExternalEventId']]],
      [observation({ type: 'refund', reversesExternalEventId: 'ghost' }), [['unknown_reference', '/reversesExternalEventId']]],
      [observation({ method: 'barter' }), [['invalid_value', '/method']]],
    ]
    for (const [body, expected] of cases) assert.deepEqual(pointers(await call('PUT', '/payment-observations/p-bad', body)), expected)
    assert.equal(problemCode(await call('GET', '/payment-observations/p-bad')), 'payment_observation_not_found')
  })
})
