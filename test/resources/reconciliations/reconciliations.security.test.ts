import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { SCOPES, type Scope } from '../../../src/domain/scopes.ts'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { calls, confirmedPayment, expectStatus, line, usd } from '../../helpers/reconciliations.ts'
import { engineName } from '../../helpers/store.ts'

/**
 * Scopes, tenant isolation and concurrency of payment reconciliations. (test/api/security.test.ts walks
 * these routes too, with the generic authentication and authorization checks.)
 */
let t: TestApp
let a: Tenant
let b: Tenant
before(async () => {
  t = await startTestApp()
  a = await t.tenant('recsa')
  b = await t.tenant('recsb')
  await confirmedPayment(t, a, 'R', 'pr-1')
  expectStatus(await calls(t, a).put('rec-1', { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '70.00')] }), 201)
})
after(() => t.close())

function denied(res: Response) {
  assert.equal(res.status, 403, res.body)
  assert.equal(problemCode(res), 'client_scope_denied')
}

async function keyLacking(lacking: Scope[], n: number): Promise<string> {
  const tenant = await t.tenant('recsa', { integrationId: `int-recsa-lack-${n}`, scopes: SCOPES.filter((s) => !lacking.includes(s)) })
  return tenant.apiKey
}

test('writes need financial_corrections:write, reads financial_corrections:read', async () => {
  const c = calls(t, a)
  const noWrite = await keyLacking(['financial_corrections:write'], 1)
  const noRead = await keyLacking(['financial_corrections:read'], 2)
  const resolution = { basis: 'authorized_correction', reference: 'ledger/c/1' }
  // Refused before any lookup: the same answer for an existing and a missing reconciliation.
  for (const id of ['rec-1', 'rec-none']) {
    denied(await c.put(id, { externalPaymentRequestId: 'pr-1', lines: [line('rl-9', 'R', '1.00')] }, noWrite))
    denied(await c.resolve(id, resolution, noWrite))
    denied(await c.get(id, noRead))
  }
  // Each key still does what its scopes allow.
  expectStatus(await c.get('rec-1', noWrite), 200)
  assert.equal((await c.get('rec-1')).json.status, 'held', 'the refused resolution changed nothing')
  expectStatus(await c.resolve('rec-1', resolution, noRead), 200)
})

test("one client never sees or touches another's reconciliations, Payments or Receivables", async () => {
  const ca = calls(t, a)
  const cb = calls(t, b)
  // B's key on A's client: refused.
  denied(await ca.get('rec-1', b.apiKey))
  denied(await ca.put('rec-2', { externalPaymentRequestId: 'pr-1', lines: [line('rl-2', 'R', '1.00')] }, b.apiKey))
  denied(await ca.resolve('rec-1', { basis: 'authorized_correction', reference: 'x/1' }, b.apiKey))
  // Under B's own client, A's ids do not exist.
  assert.equal(problemCode(await cb.get('rec-1')), 'payment_reconciliation_not_found')
  assert.equal(
    problemCode(await cb.resolve('rec-1', { basis: 'authorized_correction', reference: 'x/1' })),
    'payment_reconciliation_not_found',
  )
  const unknown = await cb.put('rec-1', { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '70.00')] })
  assert.equal(unknown.status, 422, unknown.body)
  assert.deepEqual(
    unknown.json.errors.map((e: { code: string; pointer: string }) => `${e.code} ${e.pointer}`),
    ['unknown_reference /externalPaymentRequestId', 'unknown_reference /lines/0/externalReceivableId'],
  )
  // B may use the same ids for its own Payment: a separate namespace, with its own amounts.
  await confirmedPayment(t, b, 'R', 'pr-1', { amount: '80.00', pay: '20.00' })
  const own = expectStatus(await cb.put('rec-1', { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '20.00')] }), 201)
  assert.equal(own.json.status, 'matched')
  assert.deepEqual(own.json.allocations, [
    { externalReceivableId: 'R', allocatedAmount: usd('20.00'), matchedAmount: usd('20.00'), unmatchedAmount: usd('0.00') },
  ])
  // A's reconciliation and Receivable are untouched by B's.
  const aRec = await ca.get('rec-1')
  assert.deepEqual(aRec.json.lines, [{ externalReceiptLineId: 'rl-1', externalReceivableId: 'R', amount: usd('70.00'), state: 'differs' }])
  assert.deepEqual((await ca.receivable('R')).json.financialPosition.receiptAcknowledgedAmount, usd('0.00'))
})

test('reconciliation events are in the feed only for a grant holding financial_corrections:read', async () => {
  const c = calls(t, a)
  const types = async (key: string) => {
    const res = await t.call('GET', `/v1/clients/${a.clientCode}/changes?limit=200`, { key })
    assert.equal(res.status, 200, res.body)
    return res.json.data
      .filter((e: { resource: { type: string } }) => e.resource.type === 'payment_reconciliation')
      .map((e: { type: string }) => e.type)
  }
  assert.ok((await types(a.apiKey)).includes('payment_reconciliation.held'))
  assert.deepEqual(await types(await keyLacking(['financial_corrections:read'], 3)), [])
  assert.ok((await c.get('rec-1')).status === 200)
})

test(`two concurrent reconciliations of one Payment never match more than its allocation (${engineName})`, async () => {
  const tenant = await t.tenant('recrace')
  const c = calls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  for (let round = 0; round < 5; round++) {
    // Each round: a fresh 60.00 Payment, two reconciliations of 40.00 each, at the same moment.
    const pr = `pr-race-${round}`
    if (round > 0) await confirmedPayment(t, tenant, `R${round}`, pr)
    const receivable = round > 0 ? `R${round}` : 'R'
    const request = round > 0 ? pr : 'pr-1'
    const [x, y] = await Promise.all([
      c.put(`rec-${round}-x`, { externalPaymentRequestId: request, lines: [line('rl-x', receivable, '40.00')] }),
      c.put(`rec-${round}-y`, { externalPaymentRequestId: request, lines: [line('rl-y', receivable, '40.00')] }),
    ])
    expectStatus(x, 201)
    expectStatus(y, 201)
    assert.deepEqual([x.json.status, y.json.status].sort(), ['held', 'matched'], `round ${round}`)
    const position = (await c.receivable(receivable)).json.financialPosition
    assert.deepEqual(position.receiptAcknowledgedAmount, usd('40.00'), `round ${round}`)
    assert.deepEqual(position.confirmedUnreconciledAmount, usd('20.00'), `round ${round}`)
    const latest = expectStatus(await c.get(`rec-${round}-x`), 200)
    assert.deepEqual(latest.json.allocations[0].matchedAmount, usd('40.00'))
  }
})

test(`an identical PUT racing itself creates one reconciliation and answers the other 200 (${engineName})`, async () => {
  const tenant = await t.tenant('recrace2')
  const c = calls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  const body = { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '30.00')] }
  const results = await Promise.all([c.put('rec-1', body), c.put('rec-1', body), c.put('rec-1', body)])
  assert.deepEqual(results.map((r) => r.status).sort(), [200, 200, 201], results.map((r) => r.body).join('\n'))
  assert.deepEqual((await c.receivable('R')).json.financialPosition.receiptAcknowledgedAmount, usd('30.00'))
})
