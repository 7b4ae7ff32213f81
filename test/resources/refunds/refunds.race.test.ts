import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { confirmedPayment, expectStatus, refundCalls, usd } from './helpers.ts'

/**
 * Money back under concurrency (issue 21 item 7), on both stores: HTTP calls raced with Promise.all against one app
 * (on PostgreSQL each on its own pooled connection) and the refund worker's turn raced with them. Every test asserts
 * the exact final amounts.
 */
let t: TestApp
let n = 0
before(async () => {
  t = await startTestApp()
})
after(() => t.close())

async function client(): Promise<Tenant> {
  n += 1
  return t.tenant(`rfr${n}`)
}
const statuses = (rs: { status: number }[]) => rs.map((r) => r.status).sort()

test('two refunds racing past the Payment’s amount: exactly one is refused', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  for (let round = 0; round < 5; round++) {
    const requestId = `pr-r${round}`
    expectStatus(await c.request(requestId, { externalReceivableId: 'R', amount: usd('1.00') }), 201)
    expectStatus(await c.simulate(requestId, 'confirmed'), 201)
    const raced = await Promise.all([
      c.refund(requestId, 'a', { amount: usd('0.60'), reason: 'other' }),
      c.refund(requestId, 'b', { amount: usd('0.60'), reason: 'duplicate' }),
    ])
    assert.deepEqual(statuses(raced), [201, 422], raced.map((r) => r.body).join('\n'))
    const refused = raced.find((r) => r.status === 422)
    assert.deepEqual(
      refused?.json.errors.map((e: { pointer: string }) => e.pointer),
      ['/amount/amount'],
    )
    const listed = expectStatus(await c.listRefunds(requestId), 200).json.data
    assert.equal(listed.length, 1)
    assert.deepEqual(listed[0].amount, usd('0.60'))
  }
  // Ten refunds of 10.00 raced on the 60.00 Payment: exactly six pass, and they all succeed.
  const ten = await Promise.all(
    Array.from({ length: 10 }, (_, i) => c.refund('pr-1', `ten-${i}`, { amount: usd('10.00'), reason: 'other' })),
  )
  assert.deepEqual(statuses(ten), [201, 201, 201, 201, 201, 201, 422, 422, 422, 422])
  while (await t.app.refundWorker.runOnce()) {}
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '60.00', '0.00'])
  // 65.00 was allocated (60.00 and five times 1.00); 60.00 and five times 0.60 came back: 2.00 remains allocated.
  assert.deepEqual(await c.position('R'), ['100.00', '98.00', '2.00', '0.00'])
})

test('a refund racing a reconciliation of the same money: the money is counted once, whichever commits first', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  for (let round = 0; round < 4; round++) {
    const receivableId = `R${round}`
    const requestId = `pr-${round}`
    await confirmedPayment(t, tenant, receivableId, requestId, { existingReceivable: false })
    expectStatus(await c.refund(requestId, 'back', { amount: usd('60.00'), reason: 'requested_by_customer' }), 201)
    const [worked, reconciled] = await Promise.all([
      t.app.refundWorker.runOnce(),
      c.put(`rec-${round}`, {
        externalPaymentRequestId: requestId,
        lines: [{ externalReceiptLineId: 'l1', externalReceivableId: receivableId, amount: usd('60.00') }],
      }),
    ])
    assert.equal(worked, true)
    expectStatus(reconciled, 201)
    assert.equal(expectStatus(await c.getRefund(requestId, 'back'), 200).json.status, 'succeeded')
    assert.deepEqual(await c.payment(requestId), ['60.00', '60.00', '0.00', '60.00', '0.00'])
    // Reconciled first: 60.00 acknowledged, then refunded out of acknowledged-undeclared money. Refunded first:
    // nothing left to acknowledge, so the line differs and the reconciliation is held. Either way the working
    // amount is the whole source amount again, and nothing is left unreconciled.
    if (reconciled.json.status === 'matched') {
      assert.deepEqual(await c.position(receivableId), ['100.00', '100.00', '0.00', '60.00'])
    } else {
      assert.equal(reconciled.json.status, 'held')
      assert.deepEqual(await c.position(receivableId), ['100.00', '100.00', '0.00', '0.00'])
    }
  }
})

test('a reversal of acknowledged money racing a refund’s success: both take back, each once', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  expectStatus(
    await c.put('rec-1', {
      externalPaymentRequestId: 'pr-1',
      lines: [{ externalReceiptLineId: 'l1', externalReceivableId: 'R', amount: usd('60.00') }],
    }),
    201,
  )
  // All 60.00 acknowledged and undeclared: the working amount stays 40.00.
  assert.deepEqual(await c.position('R'), ['100.00', '40.00', '0.00', '60.00'])
  expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('30.00'), reason: 'fraudulent' }), 201)
  const [worked, reversed] = await Promise.all([t.app.refundWorker.runOnce(), c.reverse('pr-1', '30.00')])
  assert.equal(worked, true)
  expectStatus(reversed, 200)
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '30.00', '30.00'])
  assert.deepEqual(await c.position('R'), ['100.00', '100.00', '0.00', '60.00'])
})

test('a reversal racing a refund for more than remains together: exactly one passes', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  const [refund, reversal] = await Promise.all([
    c.refund('pr-1', 'rf-1', { amount: usd('35.00'), reason: 'other' }),
    c.reverse('pr-1', '35.00'),
  ])
  // 35.00 + 35.00 > 60.00: the refund's 201 and the reversal's 200 never both.
  const passed = [refund.status === 201, reversal.status === 200]
  assert.deepEqual(passed.filter(Boolean).length, 1, `${refund.body}\n${reversal.body}`)
  assert.ok(refund.status === 201 || refund.status === 422, refund.body)
  assert.ok(reversal.status === 200 || reversal.status === 422, reversal.body)
  while (await t.app.refundWorker.runOnce()) {}
  if (refund.status === 201) {
    assert.equal(problemCode(reversal), 'validation_error')
    assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '35.00', '0.00'])
  } else {
    assert.equal(reversal.status, 200, reversal.body)
    assert.equal(problemCode(refund), 'validation_error')
    assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '0.00', '35.00'])
  }
  assert.deepEqual(await c.position('R'), ['100.00', '75.00', '25.00', '0.00'])
})
