import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { recordOutcome } from '../../../src/resources/payment-requests/payment-rules.ts'
import { inUnitOfWork } from '../../../src/resources/unit-of-work.ts'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'
import { confirmedPayment, expectStatus, moneyBack, refundCalls, usd } from './helpers.ts'

/**
 * Refunds, reversals and unapplied money refunded automatically (docs/design/money.md; docs/decisions.md, "Refunds
 * and reversals"): exact amounts on the refund, the Payment and the Receivable, revisions and the change feed.
 */
let nowMs = Date.parse('2026-03-02T10:00:00.000Z')
const clock = { now: () => new Date(nowMs) }
const iso = () => new Date(nowMs).toISOString()

let t: TestApp
let n = 0
before(async () => {
  t = await startTestApp({}, { clock })
})
after(() => t.close())

async function client(): Promise<Tenant> {
  n += 1
  return t.tenant(`rfh${n}`)
}
const runWorker = () => t.app.refundWorker.runOnce()

test('a refund is pending until the provider decides; its success takes allocated money back into the working amount', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  assert.deepEqual(await c.position('R'), ['100.00', '40.00', '60.00', '0.00'])
  const revision = await c.revision('R')
  const feedBefore = await c.feed()

  const created = expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('20'), reason: 'requested_by_customer' }), 201)
  const pending = {
    externalRefundId: 'rf-1',
    externalPaymentRequestId: 'pr-1',
    amount: usd('20.00'),
    reason: 'requested_by_customer',
    status: 'pending',
    origin: 'service',
    createdAt: iso(),
  }
  assert.deepEqual(created.json, pending)
  // Pending moves nothing.
  assert.deepEqual(await c.position('R'), ['100.00', '40.00', '60.00', '0.00'])
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '0.00', '0.00'])
  // An identical retry answers the current state (amount written another way is the same body once read).
  assert.deepEqual(
    expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('20.00'), reason: 'requested_by_customer' }), 200).json,
    pending,
  )
  assert.deepEqual((await c.feed()).slice(feedBefore.length), ['refund.created refund/pr-1/rf-1 @1'])

  nowMs += 1000
  assert.equal(await runWorker(), true)
  const decided = { ...pending, status: 'succeeded', decidedAt: iso() }
  assert.deepEqual(expectStatus(await c.getRefund('pr-1', 'rf-1'), 200).json, decided)
  assert.deepEqual(
    expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('20.00'), reason: 'requested_by_customer' }), 200).json,
    decided,
  )
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '20.00', '0.00'])
  assert.deepEqual(await c.position('R'), ['100.00', '60.00', '40.00', '0.00'])
  assert.equal(await c.revision('R'), revision + 1)
  assert.deepEqual((await c.feed()).slice(feedBefore.length), [
    'refund.created refund/pr-1/rf-1 @1',
    `receivable.updated receivable/R @${revision + 1}`,
    'refund.succeeded refund/pr-1/rf-1 @2',
  ])
  // Nothing more to do.
  assert.equal(await runWorker(), false)
})

test('a refund of an amount ending in .13 fails in the sandbox and moves nothing; failed refunds do not count against the amount', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  const revision = await c.revision('R')
  expectStatus(await c.refund('pr-1', 'rf-13', { amount: usd('50.13'), reason: 'duplicate' }), 201)
  // 50.13 pending: only 9.87 remains.
  const over = expectStatus(await c.refund('pr-1', 'rf-x', { amount: usd('9.88'), reason: 'other' }), 422)
  assert.deepEqual(
    over.json.errors.map((e: { pointer: string }) => e.pointer),
    ['/amount/amount'],
  )
  nowMs += 1000
  assert.equal(await runWorker(), true)
  const failed = expectStatus(await c.getRefund('pr-1', 'rf-13'), 200).json
  assert.equal(failed.status, 'failed')
  assert.equal(failed.decidedAt, iso())
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '0.00', '0.00'])
  assert.deepEqual(await c.position('R'), ['100.00', '40.00', '60.00', '0.00'])
  assert.equal(await c.revision('R'), revision)
  assert.deepEqual(
    moneyBack(await c.feed()).filter((e) => e.startsWith('refund.')),
    ['refund.created refund/pr-1/rf-13 @1', 'refund.failed refund/pr-1/rf-13 @2'],
  )
  // The failed refund no longer counts: the whole 60.00 may be refunded now.
  expectStatus(await c.refund('pr-1', 'rf-all', { amount: usd('60.00'), reason: 'other' }), 201)
  await runWorker()
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '60.00', '0.00'])
  assert.deepEqual(await c.position('R'), ['100.00', '100.00', '0.00', '0.00'])
})

test('acknowledged money taken back leaves acknowledged-undeclared; money the Source has since declared stays out', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  // A receipt line acknowledges 30.00 of the 60.00: the working amount does not move.
  expectStatus(
    await c.put('rec-1', {
      externalPaymentRequestId: 'pr-1',
      lines: [{ externalReceiptLineId: 'l1', externalReceivableId: 'R', amount: usd('30.00') }],
    }),
    201,
  )
  assert.deepEqual(await c.position('R'), ['100.00', '40.00', '30.00', '30.00'])
  // 40.00 back: 30.00 unacknowledged first, then 10.00 acknowledged and undeclared.
  expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('40.00'), reason: 'requested_by_customer' }), 201)
  await runWorker()
  assert.deepEqual(await c.position('R'), ['100.00', '80.00', '0.00', '30.00'])
  // The Source declares the balance again (it posted the 30.00 receipt): nothing acknowledged is undeclared now.
  const receivable = expectStatus(await c.receivable('R'), 200).json
  const redeclared = await t.call('PUT', `/v1/clients/${tenant.clientCode}/receivables/R`, {
    key: tenant.apiKey,
    body: {
      financialType: 'loan_balance',
      sourceRevision: receivable.sourceRevision + 1,
      recoverableAmount: usd('70.00'),
      creditUnion: { loanAccountReference: 'loan/R', loanType: 'auto' },
      dueDate: '2026-01-01',
      responsibleCustomers: [{ externalCustomerId: 'pay-cust', role: 'primary' }],
      sourceReference: 'rcv/R',
    },
  })
  expectStatus(redeclared, 200)
  assert.deepEqual(await c.position('R'), ['70.00', '70.00', '0.00', '30.00'])
  const revision = await c.revision('R')
  // The remaining 20.00 was acknowledged and declared: a refund of it leaves the working amount alone (the Source
  // posts the refund and declares again), and the Receivable gets no revision.
  expectStatus(await c.refund('pr-1', 'rf-2', { amount: usd('20.00'), reason: 'other' }), 201)
  await runWorker()
  assert.equal(expectStatus(await c.getRefund('pr-1', 'rf-2'), 200).json.status, 'succeeded')
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '60.00', '0.00'])
  assert.deepEqual(await c.position('R'), ['70.00', '70.00', '0.00', '30.00'])
  assert.equal(await c.revision('R'), revision)
})

test('matching_evidence after money was taken back: matched lines need account only for the allocation still held', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  // 20.00 of the 60.00 matches; a line of 50.00 no longer fits and holds the reconciliation.
  const held = await c.put('rec-1', {
    externalPaymentRequestId: 'pr-1',
    lines: [
      { externalReceiptLineId: 'l1', externalReceivableId: 'R', amount: usd('20.00') },
      { externalReceiptLineId: 'l2', externalReceivableId: 'R', amount: usd('50.00') },
    ],
  })
  assert.equal(expectStatus(held, 201).json.status, 'held')
  const evidence = { basis: 'matching_evidence', reference: 'ledger/receipts/1' }
  const incomplete = async (detail: string, unmatched: string) => {
    const before = expectStatus(await c.get('rec-1'), 200).json
    const receivable = expectStatus(await c.receivable('R'), 200).json
    const res = expectStatus(await c.resolve('rec-1', evidence), 409)
    assert.equal(problemCode(res), 'matching_evidence_incomplete')
    assert.equal(res.json.detail, detail)
    assert.deepEqual(res.json.unmatched, [
      { externalReceivableId: 'R', allocatedAmount: usd('60.00'), matchedAmount: usd('20.00'), unmatchedAmount: usd(unmatched) },
    ])
    assert.deepEqual(before.allocations[0].unmatchedAmount, usd(unmatched))
    // Nothing changed: the reconciliation and the Receivable read as before.
    assert.deepEqual(expectStatus(await c.get('rec-1'), 200).json, before)
    assert.deepEqual(expectStatus(await c.receivable('R'), 200).json, receivable)
  }
  await incomplete(
    'Matched receipt lines do not yet account for the full allocation: Receivable R has 60.00 USD allocated, 20.00 USD matched, 40.00 USD unmatched.',
    '40.00',
  )
  // A refund of 30.00 takes unacknowledged money first: 10.00 of the allocation is still held and unmatched.
  expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('30.00'), reason: 'requested_by_customer' }), 201)
  await runWorker()
  assert.deepEqual(await c.position('R'), ['100.00', '70.00', '10.00', '20.00'])
  await incomplete(
    'Matched receipt lines do not yet account for the full allocation: Receivable R has 60.00 USD allocated (30.00 USD of it since taken back), 20.00 USD matched, 10.00 USD unmatched.',
    '10.00',
  )
  const delivery = expectStatus(
    await t.call('GET', `/v1/clients/${tenant.clientCode}/payment-requests/pr-1/receipt-delivery`, { key: tenant.apiKey }),
    200,
  )
  assert.deepEqual(delivery.json.acknowledgement, {
    status: 'held',
    allocatedAmount: usd('60.00'),
    matchedAmount: usd('20.00'),
    unmatchedAmount: usd('10.00'),
  })
  // A reversal of the last 10.00 unacknowledged: what is still allocated is all matched, and the evidence resolves it
  // (matched = allocated would never hold again: 20.00 matched of 60.00 allocated).
  expectStatus(await c.reverse('pr-1', '10.00'), 200)
  assert.deepEqual(await c.position('R'), ['100.00', '80.00', '0.00', '20.00'])
  assert.deepEqual(expectStatus(await c.get('rec-1'), 200).json.allocations, [
    { externalReceivableId: 'R', allocatedAmount: usd('60.00'), matchedAmount: usd('20.00'), unmatchedAmount: usd('0.00') },
  ])
  const resolved = expectStatus(await c.resolve('rec-1', evidence), 200)
  assert.equal(resolved.json.status, 'resolved')
  assert.equal(resolved.json.revision, 2)
  assert.equal(resolved.json.unmatchedAmount.amount, '0.00')
  const after = expectStatus(
    await t.call('GET', `/v1/clients/${tenant.clientCode}/payment-requests/pr-1/receipt-delivery`, { key: tenant.apiKey }),
    200,
  )
  assert.deepEqual(after.json.acknowledgement, {
    status: 'acknowledged',
    allocatedAmount: usd('60.00'),
    matchedAmount: usd('20.00'),
    unmatchedAmount: usd('0.00'),
  })
})

test('matching_evidence when acknowledged money was taken back: more matched than is still allocated resolves', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  await payableReceivable(t, tenant, 'O', { amount: '50.00' })
  // All 60.00 matched; a line naming O differs and holds the reconciliation (R and O).
  const held = await c.put('rec-1', {
    externalPaymentRequestId: 'pr-1',
    lines: [
      { externalReceiptLineId: 'l1', externalReceivableId: 'R', amount: usd('45.00') },
      { externalReceiptLineId: 'l2', externalReceivableId: 'O', amount: usd('5.00') },
    ],
  })
  assert.equal(expectStatus(held, 201).json.status, 'held')
  // 15.00 unacknowledged, then 10.00 of the acknowledged (undeclared) money back: 35.00 still allocated, all matched.
  expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('25.00'), reason: 'requested_by_customer' }), 201)
  await runWorker()
  assert.deepEqual(await c.position('R'), ['100.00', '65.00', '0.00', '45.00'])
  assert.deepEqual(expectStatus(await c.get('rec-1'), 200).json.allocations, [
    { externalReceivableId: 'R', allocatedAmount: usd('60.00'), matchedAmount: usd('45.00'), unmatchedAmount: usd('0.00') },
  ])
  const resolved = expectStatus(await c.resolve('rec-1', { basis: 'matching_evidence', reference: 'ledger/receipts/1' }), 200)
  assert.equal(resolved.json.status, 'resolved')
  assert.deepEqual(expectStatus(await c.receivable('R'), 200).json.recovery.holds.includes('reconciliation_hold'), false)
})

test('a reversal takes money back at once: default what remains, event payment.reversed, the Receivable revised', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  expectStatus(
    await c.put('rec-1', {
      externalPaymentRequestId: 'pr-1',
      lines: [{ externalReceiptLineId: 'l1', externalReceivableId: 'R', amount: usd('50.00') }],
    }),
    201,
  )
  assert.deepEqual(await c.position('R'), ['100.00', '40.00', '10.00', '50.00'])
  expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('15.00'), reason: 'requested_by_customer' }), 201)
  const revision = await c.revision('R')
  const feedBefore = await c.feed()

  // 20.00 reversed: 10.00 unacknowledged, 10.00 acknowledged-undeclared.
  const reversed = expectStatus(await c.reverse('pr-1', '20.00'), 200).json
  assert.equal(reversed.status, 'confirmed')
  assert.deepEqual(reversed.payment.reversedAmount, usd('20.00'))
  assert.deepEqual(reversed.payment.refundedAmount, usd('0.00'))
  assert.deepEqual(await c.position('R'), ['100.00', '60.00', '0.00', '50.00'])
  // The default: what remains after the pending refund and the reversal (60 - 15 - 20 = 25.00), all acknowledged.
  expectStatus(await c.reverse('pr-1'), 200)
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '0.00', '45.00'])
  assert.deepEqual(await c.position('R'), ['100.00', '85.00', '0.00', '50.00'])
  assert.deepEqual((await c.feed()).slice(feedBefore.length), [
    `receivable.updated receivable/R @${revision + 1}`,
    'payment.reversed payment/pr-1 @2',
    `receivable.updated receivable/R @${revision + 2}`,
    'payment.reversed payment/pr-1 @3',
  ])
  // The pending refund then succeeds: the last 15.00 acknowledged-undeclared money.
  await runWorker()
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '15.00', '45.00'])
  assert.deepEqual(await c.position('R'), ['100.00', '100.00', '0.00', '50.00'])
  // Nothing remains: another reversal is refused, nothing changes.
  expectStatus(await c.reverse('pr-1'), 409)
  assert.deepEqual(await c.payment('pr-1'), ['60.00', '60.00', '0.00', '15.00', '45.00'])
})

test('money a confirmation could not allocate is refunded automatically (unapplied_funds), unapplied first', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await payableReceivable(t, tenant, 'R')
  expectStatus(await c.request('pr-1', { externalReceivableId: 'R', amount: usd('80.00') }), 201)
  // A credit note lands after the request was made: the working amount is 50.00 now.
  expectStatus(
    await t.call('PUT', `/v1/clients/${tenant.clientCode}/credit-notes/cn-1`, {
      key: tenant.apiKey,
      body: {
        type: 'credit_note',
        amount: usd('50.00'),
        externalReceivableId: 'R',
        sourceRevision: 2,
        effectiveAt: '2026-03-01T00:00:00Z',
        reason: 'contractual_credit',
        sourceReference: 'cn/1',
      },
    }),
    201,
  )
  assert.deepEqual(await c.position('R'), ['50.00', '50.00', '0.00', '0.00'])
  // A real provider reports money already taken (its checkout completed): recorded whatever the working amount.
  const recorded = await inUnitOfWork(t.store, (uow) =>
    recordOutcome(
      uow,
      tenant.clientCode,
      'pr-1',
      'confirmed',
      () => ({ provider: 'sandbox', providerPaymentId: 'ext-pay-1', outcome: 'confirmed', amountMinor: 8000n, currency: 'USD' }),
      iso(),
      { refuseWhileHeld: false },
    ),
  )
  assert.equal(recorded.created, true)
  assert.deepEqual(await c.payment('pr-1'), ['80.00', '50.00', '30.00', '0.00', '0.00'])
  assert.deepEqual(await c.position('R'), ['50.00', '0.00', '50.00', '0.00'])
  const unapplied = {
    externalRefundId: 'unapplied-funds',
    externalPaymentRequestId: 'pr-1',
    amount: usd('30.00'),
    reason: 'unapplied_funds',
    status: 'pending',
    origin: 'service',
    createdAt: iso(),
  }
  assert.deepEqual(expectStatus(await c.listRefunds('pr-1'), 200).json, { data: [unapplied], nextCursor: null })
  const revision = await c.revision('R')
  nowMs += 1000
  await runWorker()
  assert.deepEqual(expectStatus(await c.getRefund('pr-1', 'unapplied-funds'), 200).json, {
    ...unapplied,
    status: 'succeeded',
    decidedAt: iso(),
  })
  // Unapplied money was in no balance: the Receivable does not move.
  assert.deepEqual(await c.payment('pr-1'), ['80.00', '50.00', '30.00', '30.00', '0.00'])
  assert.deepEqual(await c.position('R'), ['50.00', '0.00', '50.00', '0.00'])
  assert.equal(await c.revision('R'), revision)
  assert.deepEqual(
    moneyBack(await c.feed()).filter((e) => e.startsWith('refund.')),
    ['refund.created refund/pr-1/unapplied-funds @1', 'refund.succeeded refund/pr-1/unapplied-funds @2'],
  )
  // What remains for the Integration to refund is the allocated 50.00.
  expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('50.01'), reason: 'other' }), 422)
  expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('50.00'), reason: 'other' }), 201)
  await runWorker()
  assert.deepEqual(await c.position('R'), ['50.00', '50.00', '0.00', '0.00'])
})

test('the list pages in identifier order with the common cursor', async () => {
  const tenant = await client()
  const c = refundCalls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  for (const id of ['rf-c', 'rf-a', 'rf-b']) expectStatus(await c.refund('pr-1', id, { amount: usd('1.00'), reason: 'other' }), 201)
  const first = expectStatus(await c.listRefunds('pr-1', '?limit=2'), 200).json
  assert.deepEqual(
    first.data.map((r: { externalRefundId: string }) => r.externalRefundId),
    ['rf-a', 'rf-b'],
  )
  assert.equal(typeof first.nextCursor, 'string')
  const second = expectStatus(await c.listRefunds('pr-1', `?limit=2&cursor=${first.nextCursor}`), 200).json
  assert.deepEqual(
    second.data.map((r: { externalRefundId: string }) => r.externalRefundId),
    ['rf-c'],
  )
  assert.equal(second.nextCursor, null)
  // A request with no refunds lists none.
  expectStatus(await c.request('pr-2', { externalReceivableId: 'R', amount: usd('1.00') }), 201)
  assert.deepEqual(expectStatus(await c.listRefunds('pr-2'), 200).json, { data: [], nextCursor: null })
})
