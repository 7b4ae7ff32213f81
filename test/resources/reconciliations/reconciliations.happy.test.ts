import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { z } from 'zod'
import { formatMinor } from '../../../src/domain/money.ts'
import { recordOutcome } from '../../../src/resources/payment-requests/payment-rules.ts'
import { ReconciliationResponse, ResolutionWrite } from '../../../src/resources/reconciliations/schema.ts'
import { inUnitOfWork } from '../../../src/resources/unit-of-work.ts'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'
import { calls, confirmedPayment, expectStatus, line, usd } from '../../helpers/reconciliations.ts'

/**
 * Payment reconciliations and their resolution (docs/decisions.md, "Payments", "Reconciliation"): exact
 * amounts on the reconciliation and on the Receivable, holds and suspended instructions, revisions and the
 * change feed.
 */
let t: TestApp
let n = 0
before(async () => {
  t = await startTestApp()
})
after(() => t.close())

/** A fresh client per test: its feed and its Receivables are the test's alone. */
async function client(): Promise<Tenant> {
  n += 1
  return t.tenant(`rech${n}`)
}

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/
const cents = (amount: string) => BigInt(amount.replace('.', ''))
/**
 * The financial position from its three stored amounts: workingAmount is sourceAmount minus
 * confirmedUnreconciledAmount, never below zero (docs/design/domain-rules.md). Acknowledging a receipt moves money from
 * confirmed-unreconciled to receipt-acknowledged and leaves sourceAmount to the Source, so workingAmount rises
 * back until the Source declares its balance after posting the receipt.
 */
/**
 * The financial position when no declaration came after the acknowledgements (none does in this file): every
 * acknowledged amount is still undeclared, so the working amount is source - unreconciled - acknowledged
 * (docs/design/money.md: reconciling never raises it).
 */
function position(source: string, unreconciled: string, acknowledged: string) {
  const rest = cents(source) - cents(unreconciled) - cents(acknowledged)
  const working = rest > 0n ? rest : 0n
  return {
    sourceAmount: usd(source),
    workingAmount: usd(formatMinor(working)),
    confirmedUnreconciledAmount: usd(unreconciled),
    receiptAcknowledgedAmount: usd(acknowledged),
  }
}
const allocation = (receivable: string, allocated: string, matched: string, unmatched: string) => ({
  externalReceivableId: receivable,
  allocatedAmount: usd(allocated),
  matchedAmount: usd(matched),
  unmatchedAmount: usd(unmatched),
})

test('lines that fit the allocation match: the amount moves from confirmed-unreconciled to receipt-acknowledged', async () => {
  const tenant = await client()
  const c = calls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  const before = await c.receivable('R')
  assert.deepEqual(before.json.financialPosition, position('100.00', '60.00', '0.00'))
  const feedBefore = await c.feed()

  const body = { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '25.00'), line('rl-2', 'R', '35')] }
  const res = expectStatus(await c.put('rec-1', body), 201)
  assert.match(res.json.acceptedAt, ISO)
  const expected = {
    externalReconciliationId: 'rec-1',
    externalPaymentRequestId: 'pr-1',
    acceptedAt: res.json.acceptedAt,
    revision: 1,
    status: 'matched',
    paymentAmount: usd('60.00'),
    allocations: [allocation('R', '60.00', '60.00', '0.00')],
    lines: [
      { externalReceiptLineId: 'rl-1', externalReceivableId: 'R', amount: usd('25.00'), state: 'matched' },
      { externalReceiptLineId: 'rl-2', externalReceivableId: 'R', amount: usd('35.00'), state: 'matched' },
    ],
    unappliedAmount: usd('0.00'),
    unmatchedAmount: usd('0.00'),
    resolution: null,
  }
  assert.deepEqual(res.json, expected)

  const after = await c.receivable('R')
  assert.deepEqual(after.json.financialPosition, position('100.00', '0.00', '60.00'))
  // The 60.00 paid stays out of the working amount: the Source has acknowledged it, not yet declared a balance.
  assert.deepEqual(after.json.financialPosition.workingAmount, usd('40.00'))
  assert.equal(after.json.revision, before.json.revision + 1)
  assert.deepEqual(after.json.recovery, { held: false, holds: [] })

  // Identical retry (amounts written differently, keys reordered): 200, the current state, nothing new.
  const retry = expectStatus(
    await c.put('rec-1', {
      lines: [{ amount: usd('25.00'), externalReceivableId: 'R', externalReceiptLineId: 'rl-1' }, line('rl-2', 'R', '35.00')],
      externalPaymentRequestId: 'pr-1',
    }),
    200,
  )
  assert.deepEqual(retry.json, expected)
  assert.deepEqual(expectStatus(await c.get('rec-1'), 200).json, expected)
  assert.equal((await c.receivable('R')).json.revision, after.json.revision)

  assert.deepEqual((await c.feed()).slice(feedBefore.length), [
    `receivable.updated receivable/R @${after.json.revision}`,
    'payment_reconciliation.matched payment_reconciliation/rec-1 @1',
  ])
})

test('allocations count the matched lines of every reconciliation of the Payment', async () => {
  const tenant = await client()
  const c = calls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  const first = expectStatus(await c.put('rec-a', { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '25.00')] }), 201)
  assert.equal(first.json.status, 'matched')
  assert.deepEqual(first.json.allocations, [allocation('R', '60.00', '25.00', '35.00')])
  assert.deepEqual(first.json.unmatchedAmount, usd('35.00'))
  assert.deepEqual((await c.receivable('R')).json.financialPosition, position('100.00', '35.00', '25.00'))

  const second = expectStatus(await c.put('rec-b', { externalPaymentRequestId: 'pr-1', lines: [line('rl-2', 'R', '35.00')] }), 201)
  assert.equal(second.json.status, 'matched')
  assert.deepEqual(second.json.allocations, [allocation('R', '60.00', '60.00', '0.00')])
  assert.deepEqual(second.json.lines, [
    { externalReceiptLineId: 'rl-2', externalReceivableId: 'R', amount: usd('35.00'), state: 'matched' },
  ])
  // The first one's read shows the Payment's allocation across both; its own lines are unchanged.
  const again = expectStatus(await c.get('rec-a'), 200)
  assert.deepEqual(again.json.allocations, [allocation('R', '60.00', '60.00', '0.00')])
  assert.deepEqual(again.json.unmatchedAmount, usd('0.00'))
  assert.deepEqual(again.json.lines, first.json.lines)
  assert.deepEqual((await c.receivable('R')).json.financialPosition, position('100.00', '0.00', '60.00'))
})

test('the unapplied part of a Payment is shown and never matched', async () => {
  const tenant = await client()
  const c = calls(t, tenant)
  await payableReceivable(t, tenant, 'R', { amount: '100.00' })
  expectStatus(await c.request('pr-1', { externalReceivableId: 'R', amount: usd('70.00') }), 201)
  expectStatus(await c.simulate('pr-1', 'confirmed'), 201)
  // A provider reports a second checkout of 70.00 completed (money already taken, as two checkouts completing at
  // the same moment would): the reserve and the pay-time check cannot stop what a provider already took, so its
  // report is recorded as it is, and only the 30.00 left is allocated. Its request is written directly: the API
  // would refuse it now (it no longer fits).
  await t.store.query(
    `INSERT INTO payment_requests (client_code, external_payment_request_id, external_receivable_id, revision, status, currency,
                                   amount_minor, description, expires_at, body, page_token, created_at, updated_at)
     SELECT client_code, 'pr-2', external_receivable_id, 1, 'open', currency, amount_minor, description, expires_at, body,
            'pr-2-token-for-a-provider-report', created_at, updated_at
       FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = 'pr-1'`,
    [tenant.clientCode],
  )
  await inUnitOfWork(t.store, (uow) =>
    recordOutcome(
      uow,
      tenant.clientCode,
      'pr-2',
      'confirmed',
      () => ({ provider: 'sandbox', providerPaymentId: 'prov-pr-2', outcome: 'confirmed', amountMinor: 7000n, currency: 'USD' }),
      new Date().toISOString(),
      { refuseWhileHeld: false },
    ),
  )
  const res = expectStatus(
    await c.put('rec-1', { externalPaymentRequestId: 'pr-2', lines: [line('rl-1', 'R', '30.00'), line('rl-2', 'R', '0.01')] }),
    201,
  )
  assert.equal(res.json.status, 'held')
  assert.deepEqual(res.json.paymentAmount, usd('70.00'))
  assert.deepEqual(res.json.unappliedAmount, usd('40.00'))
  assert.deepEqual(res.json.allocations, [allocation('R', '30.00', '30.00', '0.00')])
  assert.deepEqual(
    res.json.lines.map((l: { state: string }) => l.state),
    ['matched', 'differs'],
  )
  assert.deepEqual((await c.receivable('R')).json.financialPosition, position('100.00', '70.00', '30.00'))
})

test('a line beyond the allocation differs: the reconciliation is held, the Receivable held and its instruction suspended', async () => {
  const tenant = await client()
  const c = calls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  const before = await c.receivable('R')
  const instructionBefore = expectStatus(await c.instruction('ins-R'), 200)
  assert.equal(instructionBefore.json.state, 'authorized')
  const feedBefore = await c.feed()

  const res = expectStatus(await c.put('rec-1', { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '70.00')] }), 201)
  assert.equal(res.json.status, 'held')
  assert.equal(res.json.revision, 1)
  assert.deepEqual(res.json.lines, [{ externalReceiptLineId: 'rl-1', externalReceivableId: 'R', amount: usd('70.00'), state: 'differs' }])
  assert.deepEqual(res.json.allocations, [allocation('R', '60.00', '0.00', '60.00')])
  assert.deepEqual(res.json.unmatchedAmount, usd('60.00'))
  assert.equal(res.json.resolution, null)

  const after = await c.receivable('R')
  // A differing line acknowledges nothing.
  assert.deepEqual(after.json.financialPosition, position('100.00', '60.00', '0.00'))
  assert.deepEqual(after.json.recovery, { held: true, holds: ['recovery_not_authorized', 'reconciliation_hold'] })
  assert.equal(after.json.revision, before.json.revision + 1)
  const instruction = expectStatus(await c.instruction('ins-R'), 200)
  assert.equal(instruction.json.state, 'suspended')
  assert.equal(instruction.json.revision, instructionBefore.json.revision + 1)

  // New payment requests there are refused while it is held.
  const refused = await c.request('pr-2', { externalReceivableId: 'R', amount: usd('10.00') })
  assert.equal(refused.status, 409, refused.body)
  assert.equal(problemCode(refused), 'recovery_held')
  assert.deepEqual(refused.json.holds, ['recovery_not_authorized', 'reconciliation_hold'])

  assert.deepEqual((await c.feed()).slice(feedBefore.length), [
    `receivable.updated receivable/R @${after.json.revision}`,
    'payment_reconciliation.held payment_reconciliation/rec-1 @1',
  ])
})

test('matched and differing lines in one reconciliation: one Receivable revision carries both the amount and the hold', async () => {
  const tenant = await client()
  const c = calls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  const before = await c.receivable('R')
  const feedBefore = await c.feed()
  const res = expectStatus(
    await c.put('rec-1', { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '25.00'), line('rl-2', 'R', '40.00')] }),
    201,
  )
  assert.equal(res.json.status, 'held')
  assert.deepEqual(
    res.json.lines.map((l: { state: string }) => l.state),
    ['matched', 'differs'],
  )
  assert.deepEqual(res.json.allocations, [allocation('R', '60.00', '25.00', '35.00')])
  const after = await c.receivable('R')
  assert.deepEqual(after.json.financialPosition, position('100.00', '35.00', '25.00'))
  assert.equal(after.json.revision, before.json.revision + 1)
  assert.deepEqual((await c.feed()).slice(feedBefore.length), [
    `receivable.updated receivable/R @${after.json.revision}`,
    'payment_reconciliation.held payment_reconciliation/rec-1 @1',
  ])
})

test('a line naming another Receivable differs, and that Receivable is held too', async () => {
  const tenant = await client()
  const c = calls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  await payableReceivable(t, tenant, 'O', { amount: '50.00' })
  const otherBefore = await c.receivable('O')
  const res = expectStatus(
    await c.put('rec-1', { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '60.00'), line('rl-2', 'O', '5.00')] }),
    201,
  )
  assert.equal(res.json.status, 'held')
  assert.deepEqual(
    res.json.lines.map((l: { externalReceivableId: string; state: string }) => `${l.externalReceivableId} ${l.state}`),
    ['R matched', 'O differs'],
  )
  assert.deepEqual(res.json.allocations, [allocation('R', '60.00', '60.00', '0.00')])
  const other = await c.receivable('O')
  assert.deepEqual(other.json.financialPosition, position('50.00', '0.00', '0.00'))
  assert.deepEqual(other.json.recovery, { held: true, holds: ['recovery_not_authorized', 'reconciliation_hold'] })
  assert.equal(other.json.revision, otherBefore.json.revision + 1)
  assert.equal(expectStatus(await c.instruction('ins-O'), 200).json.state, 'suspended')
  assert.deepEqual((await c.receivable('R')).json.recovery, { held: true, holds: ['recovery_not_authorized', 'reconciliation_hold'] })
  assert.deepEqual((await c.receivable('R')).json.financialPosition, position('100.00', '0.00', '60.00'))

  // matching_evidence: the Payment's own Receivable is fully matched, and O has no allocation from it.
  const resolved = expectStatus(await c.resolve('rec-1', { basis: 'matching_evidence', reference: 'ledger/receipts/1' }), 200)
  assert.equal(resolved.json.status, 'resolved')
  for (const id of ['R', 'O']) {
    assert.deepEqual((await c.receivable(id)).json.recovery, { held: true, holds: ['recovery_not_authorized'] }, id)
  }
})

test('matching_evidence is refused until later lines match the whole allocation, then resolves', async () => {
  const tenant = await client()
  const c = calls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  const feedBefore = await c.feed()
  expectStatus(
    await c.put('rec-1', { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '25.00'), line('rl-x', 'R', '70.00')] }),
    201,
  )
  const afterHeld = await c.receivable('R')

  const refused = await c.resolve('rec-1', { basis: 'matching_evidence', reference: 'ledger/receipts/1' })
  assert.equal(refused.status, 409, refused.body)
  assert.equal(problemCode(refused), 'matching_evidence_incomplete')
  assert.equal(
    refused.json.detail,
    'Matched receipt lines do not yet account for the full allocation: Receivable R has 60.00 USD allocated, 25.00 USD matched, 35.00 USD unmatched.',
  )
  assert.deepEqual(refused.json.unmatched, [allocation('R', '60.00', '25.00', '35.00')])
  assert.equal((await c.get('rec-1')).json.status, 'held')

  // A later reconciliation of the same Payment matches the rest (it is itself matched).
  const rest = expectStatus(await c.put('rec-2', { externalPaymentRequestId: 'pr-1', lines: [line('rl-2', 'R', '35.00')] }), 201)
  assert.equal(rest.json.status, 'matched')
  const afterRest = await c.receivable('R')
  assert.deepEqual(afterRest.json.financialPosition, position('100.00', '0.00', '60.00'))

  const resolved = expectStatus(await c.resolve('rec-1', { basis: 'matching_evidence', reference: 'ledger/receipts/1' }), 200)
  assert.match(resolved.json.resolution.resolvedAt, ISO)
  assert.deepEqual(resolved.json, {
    externalReconciliationId: 'rec-1',
    externalPaymentRequestId: 'pr-1',
    acceptedAt: resolved.json.acceptedAt,
    revision: 2,
    status: 'resolved',
    paymentAmount: usd('60.00'),
    allocations: [allocation('R', '60.00', '60.00', '0.00')],
    // Original receipt figures are preserved.
    lines: [
      { externalReceiptLineId: 'rl-1', externalReceivableId: 'R', amount: usd('25.00'), state: 'matched' },
      { externalReceiptLineId: 'rl-x', externalReceivableId: 'R', amount: usd('70.00'), state: 'differs' },
    ],
    unappliedAmount: usd('0.00'),
    unmatchedAmount: usd('0.00'),
    resolution: { basis: 'matching_evidence', reference: 'ledger/receipts/1', resolvedAt: resolved.json.resolution.resolvedAt },
  })
  const afterResolved = await c.receivable('R')
  // The reconciliation hold is gone; recovery stays suspended until a new instruction revision.
  assert.deepEqual(afterResolved.json.recovery, { held: true, holds: ['recovery_not_authorized'] })
  assert.deepEqual(afterResolved.json.financialPosition, position('100.00', '0.00', '60.00'))
  assert.equal(afterResolved.json.revision, afterRest.json.revision + 1)
  assert.equal(expectStatus(await c.instruction('ins-R'), 200).json.state, 'suspended')

  // Identical retry: 200, the same body, nothing changes.
  const retry = expectStatus(await c.resolve('rec-1', { reference: 'ledger/receipts/1', basis: 'matching_evidence' }), 200)
  assert.deepEqual(retry.json, resolved.json)
  assert.equal((await c.receivable('R')).json.revision, afterResolved.json.revision)
  assert.deepEqual(expectStatus(await c.get('rec-1'), 200).json, resolved.json)

  assert.deepEqual((await c.feed()).slice(feedBefore.length), [
    `receivable.updated receivable/R @${afterHeld.json.revision}`,
    'payment_reconciliation.held payment_reconciliation/rec-1 @1',
    `receivable.updated receivable/R @${afterRest.json.revision}`,
    'payment_reconciliation.matched payment_reconciliation/rec-2 @1',
    `receivable.updated receivable/R @${afterResolved.json.revision}`,
    'payment_reconciliation.resolved payment_reconciliation/rec-1 @2',
  ])
})

test('authorized_correction resolves with its Source reference, whatever is still unmatched', async () => {
  const tenant = await client()
  const c = calls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  expectStatus(await c.put('rec-1', { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '70.00')] }), 201)
  const body = { basis: 'authorized_correction', reference: 'ledger/corrections/7' }
  const resolved = expectStatus(await c.resolve('rec-1', body), 200)
  assert.equal(resolved.json.status, 'resolved')
  assert.equal(resolved.json.revision, 2)
  assert.deepEqual(resolved.json.resolution, { ...body, resolvedAt: resolved.json.resolution.resolvedAt })
  assert.deepEqual(resolved.json.allocations, [allocation('R', '60.00', '0.00', '60.00')])
  assert.deepEqual(resolved.json.lines, [
    { externalReceiptLineId: 'rl-1', externalReceivableId: 'R', amount: usd('70.00'), state: 'differs' },
  ])
  const r = await c.receivable('R')
  assert.deepEqual(r.json.recovery, { held: true, holds: ['recovery_not_authorized'] })
  assert.deepEqual(r.json.financialPosition, position('100.00', '60.00', '0.00'))
  assert.deepEqual(expectStatus(await c.resolve('rec-1', body), 200).json, resolved.json)

  // Recovery resumes only by a new instruction revision; then payment requests are accepted again.
  const instruction = expectStatus(await c.instruction('ins-R'), 200)
  expectStatus(
    await t.call('PUT', `/v1/clients/${tenant.clientCode}/recovery-instructions/ins-R`, {
      key: tenant.apiKey,
      body: {
        scope: { type: 'receivable', externalReceivableId: 'R' },
        state: 'authorized',
        revision: instruction.json.revision + 1,
        effectiveAt: '2026-04-01T00:00:00Z',
      },
    }),
    200,
  )
  expectStatus(await c.request('pr-2', { externalReceivableId: 'R', amount: usd('10.00') }), 201)
})

test("a resolution releases only its own reconciliation's hold", async () => {
  const tenant = await client()
  const c = calls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  expectStatus(await c.put('rec-1', { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '70.00')] }), 201)
  const afterFirst = await c.receivable('R')
  expectStatus(await c.put('rec-2', { externalPaymentRequestId: 'pr-1', lines: [line('rl-2', 'R', '80.00')] }), 201)
  const afterSecond = await c.receivable('R')
  // The second hold changes no hold category: no new revision.
  assert.equal(afterSecond.json.revision, afterFirst.json.revision)

  expectStatus(await c.resolve('rec-1', { basis: 'authorized_correction', reference: 'ledger/corrections/1' }), 200)
  const stillHeld = await c.receivable('R')
  assert.deepEqual(stillHeld.json.recovery, { held: true, holds: ['recovery_not_authorized', 'reconciliation_hold'] })
  assert.equal(stillHeld.json.revision, afterSecond.json.revision)
  assert.equal((await c.get('rec-2')).json.status, 'held')

  const feedBefore = await c.feed()
  const second = expectStatus(await c.resolve('rec-2', { basis: 'authorized_correction', reference: 'ledger/corrections/2' }), 200)
  assert.equal(second.json.revision, 2)
  const released = await c.receivable('R')
  assert.deepEqual(released.json.recovery, { held: true, holds: ['recovery_not_authorized'] })
  assert.equal(released.json.revision, stillHeld.json.revision + 1)
  assert.deepEqual((await c.feed()).slice(feedBefore.length), [
    `receivable.updated receivable/R @${released.json.revision}`,
    'payment_reconciliation.resolved payment_reconciliation/rec-2 @2',
  ])
})

test('receipt line ids are per Payment: another Payment may reuse one', async () => {
  const tenant = await client()
  const c = calls(t, tenant)
  await payableReceivable(t, tenant, 'R', { amount: '100.00' })
  expectStatus(await c.request('pr-1', { externalReceivableId: 'R', amount: usd('10.00') }), 201)
  expectStatus(await c.request('pr-2', { externalReceivableId: 'R', amount: usd('20.00') }), 201)
  expectStatus(await c.simulate('pr-1', 'confirmed'), 201)
  expectStatus(await c.simulate('pr-2', 'confirmed'), 201)
  expectStatus(await c.put('rec-1', { externalPaymentRequestId: 'pr-1', lines: [line('rl-1', 'R', '10.00')] }), 201)
  const res = expectStatus(await c.put('rec-2', { externalPaymentRequestId: 'pr-2', lines: [line('rl-1', 'R', '20.00')] }), 201)
  assert.equal(res.json.status, 'matched')
  assert.deepEqual((await c.receivable('R')).json.financialPosition, position('100.00', '0.00', '30.00'))
})

test('status, line state and resolution basis are published as enums', () => {
  // z.enum is rendered as a JSON Schema enum in the OpenAPI document.
  assert.deepEqual(ReconciliationResponse.shape.status.options, ['matched', 'held', 'resolved'])
  assert.deepEqual(ReconciliationResponse.shape.lines.element.shape.state.options, ['matched', 'differs'])
  assert.deepEqual(z.toJSONSchema(ReconciliationResponse.shape.status), {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'string',
    enum: ['matched', 'held', 'resolved'],
  })
  assert.deepEqual(ResolutionWrite.shape.basis.options, ['matching_evidence', 'authorized_correction'])
})
