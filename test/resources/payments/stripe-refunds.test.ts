import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type Stripe from 'stripe'
import {
  configureStripe,
  countRows,
  deliver,
  eventOf,
  readPosition,
  readRequest,
  type StripePayable,
  type StripeTest,
  startCheckout,
  startStripeTest,
  stripePayable,
} from '../../helpers/stripe.ts'

/**
 * Money given back through Stripe (issue 22 items 3 and 4): refunds asked by the refund worker through Stripe's
 * Refunds API (the refund's identity as idempotency key), decided by Stripe's events when Stripe decides later;
 * the automatic refund of unapplied money; a lost dispute taken back once as a reversal.
 */
let s: StripeTest
before(async () => {
  s = await startStripeTest()
})
after(async () => {
  await s?.close()
})

const usd = (amount: string) => ({ amount, currency: 'USD' })
const runWorker = () => s.t.app.refundWorker.runOnce()
const refundCalls = () => s.stripe.calls.filter((c) => c.method === 'POST' && c.path === '/v1/refunds')

/** A client with Stripe whose request of USD 30.00 was paid by card; returns it with its PaymentIntent id. */
async function paid(client: string): Promise<StripePayable & { intent: string }> {
  const p = await stripePayable(s, client)
  const sessionId = await startCheckout(s, p)
  const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
  assert.equal((await deliver(s, p.client, completed)).json.effect, 'confirmed')
  return { ...p, intent: s.stripe.session(sessionId)?.payment_intent as string }
}

const putRefund = (p: StripePayable, refundId: string, amount: string) =>
  s.t.call('PUT', `/v1/clients/${p.client}/payment-requests/${p.requestId}/refunds/${refundId}`, {
    key: p.apiKey,
    body: { amount: usd(amount), reason: 'requested_by_customer' },
  })
const getRefund = async (p: StripePayable, refundId: string) =>
  (await s.t.call('GET', `/v1/clients/${p.client}/payment-requests/${p.requestId}/refunds/${refundId}`, { key: p.apiKey })).json
const latestRefund = (): Stripe.Refund => eventOf(s.stripe.events().reverse(), 'refund.created').data.object as Stripe.Refund

describe('refunds through Stripe', () => {
  test('a partial refund: asked under its identity, pending until Stripe decides, succeeded by its event; then the rest in full', async () => {
    const p = await paid('sr-partial')
    s.stripe.setRefundOutcome('pending')
    assert.equal((await putRefund(p, 'rf-1', '10.00')).status, 201)
    const before = refundCalls().length
    assert.equal(await runWorker(), true)
    const asked = refundCalls().slice(before)
    assert.equal(asked.length, 1)
    assert.equal(asked[0]?.idempotencyKey, `refund/${p.client}/${p.requestId}/rf-1`)
    const refund = latestRefund()
    assert.deepEqual([refund.payment_intent, refund.amount, refund.status], [p.intent, 1000, 'pending'])
    assert.deepEqual(refund.metadata, {
      clientCode: p.client,
      paymentRequestId: p.requestId,
      refundId: 'rf-1',
      reason: 'requested_by_customer',
    })
    // Accepted, decided later: pending, nothing moved, not asked again.
    assert.equal((await getRefund(p, 'rf-1')).status, 'pending')
    assert.equal(await runWorker(), false)
    assert.deepEqual((await readRequest(s, p)).payment.refundedAmount, usd('0.00'))
    // The created event (pending at Stripe still): nothing decided.
    assert.equal((await deliver(s, p.client, eventOf(s.stripe.events().reverse(), 'refund.created'))).json.ignored, 'refund pending')

    s.stripe.settleRefund(refund.id, 'succeeded')
    const updated = eventOf(s.stripe.events().reverse(), 'refund.updated')
    assert.equal((await deliver(s, p.client, updated)).json.effect, 'refund_succeeded')
    assert.equal((await getRefund(p, 'rf-1')).status, 'succeeded')
    assert.deepEqual((await readRequest(s, p)).payment.refundedAmount, usd('10.00'))
    assert.deepEqual((await readPosition(s, p)).workingAmount, usd('80.00'))
    // Again, and as the legacy charge.refund.updated type: decided once.
    assert.equal((await deliver(s, p.client, updated)).json.effect, 'duplicate')
    const legacy = { ...updated, id: `${updated.id}legacy`, type: 'charge.refund.updated' } as Stripe.Event
    assert.equal((await deliver(s, p.client, legacy)).json.effect, 'refund_already_decided')
    assert.deepEqual((await readRequest(s, p)).payment.refundedAmount, usd('10.00'))

    // The rest, which Stripe decides at once: recorded by the worker, the event finds it decided.
    s.stripe.setRefundOutcome('succeeded')
    assert.equal((await putRefund(p, 'rf-2', '20.00')).status, 201)
    assert.equal(await runWorker(), true)
    assert.equal((await getRefund(p, 'rf-2')).status, 'succeeded')
    assert.equal((await deliver(s, p.client, eventOf(s.stripe.events().reverse(), 'refund.created'))).json.effect, 'refund_already_decided')
    const payment = (await readRequest(s, p)).payment
    assert.deepEqual([payment.refundedAmount, payment.amount], [usd('30.00'), usd('30.00')])
    assert.deepEqual((await readPosition(s, p)).workingAmount, usd('100.00'))
  })

  test('a refund Stripe fails: failed by its event, nothing moves', async () => {
    const p = await paid('sr-fail')
    s.stripe.setRefundOutcome('failed')
    assert.equal((await putRefund(p, 'rf-f', '5.00')).status, 201)
    assert.equal(await runWorker(), true)
    assert.equal((await getRefund(p, 'rf-f')).status, 'pending')
    const failed = eventOf(s.stripe.events().reverse(), 'refund.failed')
    assert.equal((await deliver(s, p.client, failed)).json.effect, 'refund_failed')
    const refund = await getRefund(p, 'rf-f')
    assert.equal(refund.status, 'failed')
    assert.deepEqual((await readRequest(s, p)).payment.refundedAmount, usd('0.00'))
    assert.deepEqual((await readPosition(s, p)).workingAmount, usd('70.00'))
    s.stripe.setRefundOutcome('succeeded')
  })

  test("refunded in the Dashboard while the service's refund was under way: Stripe refuses ours, and the Dashboard's is recorded in full", async () => {
    const p = await paid('sr-dashboard-race')
    s.stripe.setRefundOutcome('succeeded')
    // The service's refund of 20.00 is pending (not asked yet) when someone refunds the whole 30.00 in the Dashboard.
    assert.equal((await putRefund(p, 'rf-race', '20.00')).status, 201)
    const dashboard = s.stripe.dashboardRefund(p.intent, 3000)
    const created = eventOf(s.stripe.events().reverse(), 'refund.created')
    assert.equal((await deliver(s, p.client, created)).json.effect, 'provider_refund_recorded')
    // Recorded as far as the Payment held money beside the pending refund: 10.00; 20.00 waits.
    assert.deepEqual((await getRefund(p, dashboard.id)).amount, usd('10.00'))
    assert.deepEqual((await readRequest(s, p)).payment.refundedAmount, usd('10.00'))

    // Stripe refuses the service's refund (nothing left to refund): failed, and the 20.00 waiting is recorded.
    assert.equal(await runWorker(), true)
    assert.equal((await getRefund(p, 'rf-race')).status, 'failed')
    const rest = await getRefund(p, `${dashboard.id}-rf-race`)
    assert.deepEqual([rest.amount, rest.origin, rest.status, rest.reason], [usd('20.00'), 'provider', 'succeeded', 'other'])
    const payment = (await readRequest(s, p)).payment
    assert.deepEqual([payment.refundedAmount, payment.allocatedAmount, payment.unappliedAmount], [usd('30.00'), usd('30.00'), usd('0.00')])
    assert.deepEqual((await readPosition(s, p)).workingAmount, usd('100.00'))
    // The event again: nothing more.
    assert.equal(
      (await deliver(s, p.client, { ...created, id: `${created.id}again` } as Stripe.Event)).json.effect,
      'refund_already_recorded',
    )
    assert.deepEqual((await readRequest(s, p)).payment.refundedAmount, usd('30.00'))
  })

  test('Stripe not answering (500): the worker asks again later under the same key, and one refund is made', async () => {
    const p = await paid('sr-retry')
    s.stripe.setRefundOutcome('succeeded')
    assert.equal((await putRefund(p, 'rf-r', '3.00')).status, 201)
    s.stripe.failNext({ status: 500 })
    const before = refundCalls().length
    await runWorker().catch(() => true)
    assert.equal((await getRefund(p, 'rf-r')).status, 'pending')
    // Its next attempt is due after the backoff: at the base clock.
    s.clock.advance(10_000)
    assert.equal(await runWorker(), true)
    assert.equal((await getRefund(p, 'rf-r')).status, 'succeeded')
    const asked = refundCalls().slice(before)
    assert.deepEqual(
      asked.map((c) => [c.status, c.idempotencyKey]),
      [
        [500, `refund/${p.client}/${p.requestId}/rf-r`],
        [200, `refund/${p.client}/${p.requestId}/rf-r`],
      ],
    )
  })

  test("a Stripe Payment's refund while its client has no Stripe configuration waits (never another provider), then goes through Stripe", async () => {
    const p = await paid('sr-removed')
    s.stripe.setRefundOutcome('succeeded')
    assert.equal((await s.t.admin('DELETE', `/admin/v1/clients/${p.client}/payment-provider`)).status, 204)
    assert.equal((await putRefund(p, 'rf-w', '4.00')).status, 201)
    const before = refundCalls().length
    assert.equal(await runWorker(), true)
    assert.equal(refundCalls().length, before)
    assert.equal((await getRefund(p, 'rf-w')).status, 'pending')
    const rows = await s.t.store.query<{ last_error: string }>(
      `SELECT last_error FROM refunds WHERE client_code = $1 AND external_refund_id = 'rf-w'`,
      [p.client],
    )
    assert.equal(rows[0]?.last_error, `client ${p.client}'s Payment was made by stripe, and it has none usable (none)`)
    await configureStripe(s, p.client)
    s.clock.advance(10_000)
    assert.equal(await runWorker(), true)
    assert.equal((await getRefund(p, 'rf-w')).status, 'succeeded')
    assert.equal(refundCalls().length, before + 1)
  })

  test('money the Receivable no longer needs is refunded through Stripe automatically (unapplied-funds)', async () => {
    const p = await stripePayable(s, 'sr-unapplied')
    const sessionId = await startCheckout(s, p)
    // After Pay, before Stripe's event: the Source declares 10.00.
    const res = await s.t.call('PUT', `/v1/clients/${p.client}/receivables/${p.receivableId}`, {
      key: p.apiKey,
      body: {
        financialType: 'loan_balance',
        sourceRevision: 2,
        recoverableAmount: usd('10.00'),
        creditUnion: { loanAccountReference: `loan/${p.receivableId}`, loanType: 'auto' },
        dueDate: '2026-01-01',
        responsibleCustomers: [{ externalCustomerId: 'pay-cust', role: 'primary' }],
        sourceReference: `rcv/${p.receivableId}`,
      },
    })
    assert.equal(res.status, 200, res.body)
    const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
    assert.equal((await deliver(s, p.client, completed)).json.effect, 'confirmed')
    const payment = (await readRequest(s, p)).payment
    assert.deepEqual([payment.allocatedAmount, payment.unappliedAmount], [usd('10.00'), usd('20.00')])
    assert.equal((await getRefund(p, 'unapplied-funds')).status, 'pending')
    const before = refundCalls().length
    assert.equal(await runWorker(), true)
    assert.deepEqual(
      refundCalls()
        .slice(before)
        .map((c) => c.idempotencyKey),
      [`refund/${p.client}/${p.requestId}/unapplied-funds`],
    )
    assert.equal(latestRefund().amount, 2000)
    assert.equal((await getRefund(p, 'unapplied-funds')).status, 'succeeded')
    assert.deepEqual((await readRequest(s, p)).payment.refundedAmount, usd('20.00'))
  })
})

describe('disputes', () => {
  test('a lost dispute is one reversal, whichever of its events arrive, in any order, however often', async () => {
    const p = await paid('sr-dispute')
    s.stripe.loseDispute(p.intent, 3000)
    const events = s.stripe.events()
    const created = eventOf(events, 'charge.dispute.created')
    const withdrawn = eventOf(events, 'charge.dispute.funds_withdrawn')
    const closed = eventOf(events, 'charge.dispute.closed')
    // Out of order: closed first. Every event reads the dispute as it is now (lost).
    assert.equal((await deliver(s, p.client, closed)).json.effect, 'reversed')
    assert.equal((await deliver(s, p.client, withdrawn)).json.effect, 'reversal_already_recorded')
    assert.equal((await deliver(s, p.client, created)).json.effect, 'reversal_already_recorded')
    assert.equal((await deliver(s, p.client, closed)).json.effect, 'duplicate')
    const payment = (await readRequest(s, p)).payment
    assert.deepEqual([payment.reversedAmount, payment.refundedAmount], [usd('30.00'), usd('0.00')])
    assert.deepEqual((await readPosition(s, p)).workingAmount, usd('100.00'))
    assert.equal(await countRows(s, 'SELECT count(*) AS n FROM provider_reversals WHERE client_code = $1', [p.client]), 1)
  })

  test('a dispute after a partial refund takes back at most what remains', async () => {
    const p = await paid('sr-dispute-cap')
    s.stripe.setRefundOutcome('succeeded')
    assert.equal((await putRefund(p, 'rf-1', '12.00')).status, 201)
    assert.equal(await runWorker(), true)
    s.stripe.loseDispute(p.intent, 1800)
    const closed = eventOf(s.stripe.events().reverse(), 'charge.dispute.closed')
    assert.equal((await deliver(s, p.client, closed)).json.effect, 'reversed')
    const payment = (await readRequest(s, p)).payment
    assert.deepEqual([payment.refundedAmount, payment.reversedAmount], [usd('12.00'), usd('18.00')])
  })
})
