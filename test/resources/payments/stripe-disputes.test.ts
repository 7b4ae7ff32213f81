import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import type Stripe from 'stripe'
import { SCOPES } from '../../../src/domain/scopes.ts'
import { TEST_RECEIPT_DELAY_MS } from '../../../src/resources/receipts/service.ts'
import {
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
import { type Receiver, startReceiver } from '../../helpers/webhook-receiver.ts'

/**
 * Disputes through Stripe (issue 32 items 4 and 7), against the stand-in's dispute lifecycle (opened, funds
 * withdrawn, closed won with the funds reinstated, or lost): a dispute won after its funds were withdrawn undoes its
 * reversal exactly once (`reversedAmount` and the working amount back, `payment.reinstated`, a receipt of kind
 * `reinstatement`), whichever of its events arrive, in any order, however often, by the route or the sweep; a won
 * dispute that withdrew nothing changes nothing; a lost one stays one reversal.
 */
let s: StripeTest
let rx: Receiver
before(async () => {
  s = await startStripeTest({ env: { WEBHOOK_DEV_ALLOW_LOOPBACK: '1' } })
  rx = await startReceiver()
})
after(async () => {
  await rx?.close()
  await s?.close()
})

const usd = (amount: string) => ({ amount, currency: 'USD' })
const sync = (client: string) => s.t.admin('POST', `/admin/v1/clients/${client}/payment-provider/sync`)
const latest = (type: string): Stripe.Event => eventOf(s.stripe.events().reverse(), type)

/** A client with Stripe whose request of USD 30.00 (on a Receivable of 100.00) was paid by card. */
async function paid(client: string): Promise<StripePayable & { intent: string }> {
  const p = await stripePayable(s, client)
  const sessionId = await startCheckout(s, p)
  const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
  assert.equal((await deliver(s, p.client, completed)).json.effect, 'confirmed')
  return { ...p, intent: s.stripe.session(sessionId)?.payment_intent as string }
}

/** The Payment's reversed and refunded amounts and the Receivable's working and confirmed amounts. */
async function money(p: StripePayable) {
  const payment = (await readRequest(s, p)).payment
  const position = await readPosition(s, p)
  return {
    reversed: payment.reversedAmount.amount,
    refunded: payment.refundedAmount.amount,
    working: position.workingAmount.amount,
    confirmed: position.confirmedUnreconciledAmount.amount,
  }
}

const paymentEvents = async (p: StripePayable) =>
  (
    await s.t.store.query<{ type: string; revision: string }>(
      `SELECT type, revision::text FROM change_events WHERE client_code = $1 AND resource_type = 'payment' ORDER BY seq`,
      [p.client],
    )
  ).map((r) => `${r.type}@${r.revision}`)

describe('a won dispute reinstates', () => {
  test('withdrawn then won: one reversal, then one reinstatement, whatever arrives again or late', async () => {
    const p = await paid('sd-won')
    assert.deepEqual(await money(p), { reversed: '0.00', refunded: '0.00', working: '70.00', confirmed: '30.00' })
    const dispute = s.stripe.openDispute(p.intent, 3000)
    const created = latest('charge.dispute.created')
    // Opened, nothing withdrawn yet: nothing to record.
    assert.deepEqual((await deliver(s, p.client, created)).json, {
      received: true,
      eventId: created.id,
      ignored: 'dispute needs_response',
    })
    s.stripe.withdrawDisputeFunds(dispute.id)
    const withdrawn = latest('charge.dispute.funds_withdrawn')
    assert.equal((await deliver(s, p.client, withdrawn)).json.effect, 'reversed')
    assert.deepEqual(await money(p), { reversed: '30.00', refunded: '0.00', working: '100.00', confirmed: '0.00' })

    // Won a minute later (the timeline below is in time order).
    s.clock.advance(60_000)
    const won = s.stripe.closeDispute(dispute.id, 'won')
    assert.deepEqual(
      won.balance_transactions.map((t) => [t.amount, t.reporting_category]),
      [
        [-3000, 'dispute'],
        [3000, 'dispute_reversal'],
      ],
    )
    const closed = latest('charge.dispute.closed')
    const reinstated = latest('charge.dispute.funds_reinstated')
    assert.equal((closed.data.object as Stripe.Dispute).status, 'won')
    assert.deepEqual((await deliver(s, p.client, closed)).json, { received: true, eventId: closed.id, effect: 'reinstated' })
    assert.deepEqual(await money(p), { reversed: '0.00', refunded: '0.00', working: '70.00', confirmed: '30.00' })
    // Its other event, the same ones again, the withdrawal late again: nothing more.
    assert.equal((await deliver(s, p.client, reinstated)).json.effect, 'reinstatement_already_recorded')
    assert.equal((await deliver(s, p.client, closed)).json.effect, 'duplicate')
    assert.equal((await deliver(s, p.client, withdrawn)).json.effect, 'duplicate')
    const lateCopy = { ...withdrawn, id: `${withdrawn.id}late` } as Stripe.Event
    assert.equal((await deliver(s, p.client, lateCopy)).json.effect, 'reinstatement_already_recorded')
    // The sweep reads the same events: each already handled, or the dispute already reinstated.
    const swept = await sync(p.client)
    assert.equal(swept.status, 200, swept.body)
    assert.equal(swept.json.eventsApplied, 0)
    assert.deepEqual(await money(p), { reversed: '0.00', refunded: '0.00', working: '70.00', confirmed: '30.00' })

    const request = await readRequest(s, p)
    assert.equal(request.status, 'confirmed')
    assert.deepEqual(
      [request.payment.amount, request.payment.allocatedAmount, request.payment.unappliedAmount],
      [usd('30.00'), usd('30.00'), usd('0.00')],
    )
    assert.deepEqual(await paymentEvents(p), ['payment.confirmed@1', 'payment.reversed@2', 'payment.reinstated@3'])
    const rows = await s.t.store.query<{ amount_minor: string; reinstated_minor: string }>(
      'SELECT amount_minor::text, reinstated_minor::text FROM provider_reversals WHERE client_code = $1',
      [p.client],
    )
    assert.deepEqual(rows, [{ amount_minor: '3000', reinstated_minor: '3000' }])
    // The Integration reads it in the feed: payment.reinstated, with the Payment's revision.
    const feed = await s.t.call('GET', `/v1/clients/${p.client}/changes?limit=100`, { key: p.apiKey })
    assert.equal(feed.status, 200, feed.body)
    const event = feed.json.data.find((e: { type: string }) => e.type === 'payment.reinstated')
    assert.deepEqual([event?.resource, event?.revision], [{ type: 'payment', id: p.requestId }, 3])
    // The Receivable's timeline tells the reversal and the reinstatement, both the provider's.
    const timeline = await s.t.call('GET', `/v1/clients/${p.client}/receivables/${p.receivableId}/timeline?limit=100`, { key: p.apiKey })
    assert.equal(timeline.status, 200, timeline.body)
    assert.deepEqual(
      timeline.json.data
        .filter((e: { kind: string }) => e.kind === 'reversal' || e.kind === 'reinstatement')
        .map((e: { kind: string; actor: { type: string }; summary: string }) => [e.kind, e.actor.type, e.summary]),
      [
        ['reversal', 'provider', `Payment ${p.requestId} reversed: 30.00 USD`],
        ['reinstatement', 'provider', `Payment ${p.requestId} reinstated (a dispute won): 30.00 USD`],
      ],
    )
  })

  test('every event read after the win (late withdrawal events, out of order): nothing reversed, nothing to undo, and no reversal after', async () => {
    const p = await paid('sd-late')
    s.stripe.winDispute(p.intent, 3000)
    const withdrawn = latest('charge.dispute.funds_withdrawn')
    const closed = latest('charge.dispute.closed')
    const reinstated = latest('charge.dispute.funds_reinstated')
    // The withdrawal event arrives when the dispute is already won: read as it is now, there is nothing to take back.
    assert.equal((await deliver(s, p.client, reinstated)).json.effect, 'nothing_to_reinstate')
    assert.equal((await deliver(s, p.client, withdrawn)).json.effect, 'reinstatement_already_recorded')
    assert.equal((await deliver(s, p.client, closed)).json.effect, 'reinstatement_already_recorded')
    assert.deepEqual(await money(p), { reversed: '0.00', refunded: '0.00', working: '70.00', confirmed: '30.00' })
    assert.deepEqual(await paymentEvents(p), ['payment.confirmed@1'])
  })

  test('won with nothing withdrawn changes nothing; lost after the withdrawal stays one reversal', async () => {
    const p = await paid('sd-nothing')
    const inquiry = s.stripe.openDispute(p.intent, 3000)
    s.stripe.closeDispute(inquiry.id, 'won')
    assert.equal(
      s.stripe.events().some((e) => e.type === 'charge.dispute.funds_reinstated' && (e.data.object as Stripe.Dispute).id === inquiry.id),
      false,
    )
    assert.deepEqual((await deliver(s, p.client, latest('charge.dispute.closed'))).json.ignored, 'dispute won')
    assert.deepEqual(await money(p), { reversed: '0.00', refunded: '0.00', working: '70.00', confirmed: '30.00' })

    const lost = s.stripe.openDispute(p.intent, 2000)
    s.stripe.withdrawDisputeFunds(lost.id)
    assert.equal((await deliver(s, p.client, latest('charge.dispute.funds_withdrawn'))).json.effect, 'reversed')
    s.stripe.closeDispute(lost.id, 'lost')
    assert.equal((await deliver(s, p.client, latest('charge.dispute.closed'))).json.effect, 'reversal_already_recorded')
    assert.deepEqual(await money(p), { reversed: '20.00', refunded: '0.00', working: '90.00', confirmed: '10.00' })
    assert.deepEqual(await paymentEvents(p), ['payment.confirmed@1', 'payment.reversed@2'])
  })

  test('the sweep brings the withdrawal, then the win: reversed once, reinstated once; the route finds both done', async () => {
    const p = await paid('sd-sweep')
    const dispute = s.stripe.openDispute(p.intent, 1200)
    s.stripe.withdrawDisputeFunds(dispute.id)
    const first = await sync(p.client)
    assert.equal(first.status, 200, first.body)
    assert.equal(first.json.eventsApplied, 1)
    assert.deepEqual(await money(p), { reversed: '12.00', refunded: '0.00', working: '82.00', confirmed: '18.00' })
    s.stripe.closeDispute(dispute.id, 'won')
    const second = await sync(p.client)
    assert.deepEqual(second.json, { eventsRead: 2, eventsApplied: 1 })
    assert.deepEqual(await money(p), { reversed: '0.00', refunded: '0.00', working: '70.00', confirmed: '30.00' })
    assert.equal((await deliver(s, p.client, latest('charge.dispute.closed'))).json.effect, 'duplicate')
    assert.equal((await deliver(s, p.client, latest('charge.dispute.funds_reinstated'))).json.effect, 'duplicate')
    assert.deepEqual((await sync(p.client)).json, { eventsRead: 0, eventsApplied: 0 })
    assert.deepEqual(await paymentEvents(p), ['payment.confirmed@1', 'payment.reversed@2', 'payment.reinstated@3'])
  })

  test('won after the debtor paid the money again: what no longer fits the Receivable is refunded at once, never held twice', async () => {
    const p = await paid('sd-again')
    const dispute = s.stripe.openDispute(p.intent, 3000)
    s.stripe.withdrawDisputeFunds(dispute.id)
    assert.equal((await deliver(s, p.client, latest('charge.dispute.funds_withdrawn'))).json.effect, 'reversed')
    // The debtor pays the whole 100.00 again on a second request.
    const second = await s.t.call('PUT', `/v1/clients/${p.client}/payment-requests/pr-again-2`, {
      key: p.apiKey,
      body: { externalReceivableId: p.receivableId, amount: usd('100.00'), expiresAt: '2026-11-30T12:00:00Z' },
    })
    assert.equal(second.status, 201, second.body)
    const path = new URL(second.json.hostedUrl).pathname
    const sessionId = await startCheckout(s, { ...p, requestId: 'pr-again-2', path, token: path.slice('/pay/'.length) })
    const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
    assert.equal((await deliver(s, p.client, completed)).json.effect, 'confirmed')
    assert.deepEqual((await readPosition(s, p)).workingAmount, usd('0.00'))

    s.stripe.closeDispute(dispute.id, 'won')
    assert.equal((await deliver(s, p.client, latest('charge.dispute.closed'))).json.effect, 'reinstated')
    // The 30.00 given back cannot be owed again (the Receivable is paid): unapplied, and refunded to the debtor.
    const refund = await s.t.call('GET', `/v1/clients/${p.client}/payment-requests/${p.requestId}/refunds/reinstated-${dispute.id}`, {
      key: p.apiKey,
    })
    assert.equal(refund.status, 200, refund.body)
    assert.deepEqual([refund.json.amount, refund.json.reason, refund.json.status], [usd('30.00'), 'unapplied_funds', 'pending'])
    assert.equal(await s.t.app.refundWorker.runOnce(), true)
    const asked = s.stripe.calls.filter((c) => c.method === 'POST' && c.path === '/v1/refunds').at(-1)
    assert.equal(asked?.idempotencyKey, `refund/${p.client}/${p.requestId}/reinstated-${dispute.id}`)
    const payment = (await readRequest(s, p)).payment
    assert.deepEqual(
      [payment.reversedAmount, payment.refundedAmount, payment.allocatedAmount, payment.unappliedAmount],
      [usd('0.00'), usd('30.00'), usd('0.00'), usd('30.00')],
    )
    const position = await readPosition(s, p)
    assert.deepEqual([position.workingAmount, position.confirmedUnreconciledAmount], [usd('0.00'), usd('100.00')])
  })
})

describe('a refund made at Stripe while a dispute holds the money', () => {
  /** The request's refunds as the API lists them: id, amount, origin, reason, status. */
  const refunds = async (p: StripePayable) => {
    const res = await s.t.call('GET', `/v1/clients/${p.client}/payment-requests/${p.requestId}/refunds?limit=100`, { key: p.apiKey })
    assert.equal(res.status, 200, res.body)
    return res.json.data.map((r: { externalRefundId: string; amount: { amount: string }; origin: string; status: string }) => [
      r.externalRefundId,
      r.amount.amount,
      r.origin,
      r.status,
    ])
  }
  const withheld = (p: StripePayable) =>
    s.t.store.query<{ provider_refund_id: string; amount_minor: string; recorded_minor: string }>(
      `SELECT provider_refund_id, amount_minor::text, recorded_minor::text FROM provider_refunds_withheld
        WHERE client_code = $1 ORDER BY provider_refund_id`,
      [p.client],
    )
  const refundCalls = () => s.stripe.calls.filter((c) => c.method === 'POST' && c.path === '/v1/refunds').length
  /** A paid request of 30.00 whose dispute of `cents` withdrew its funds, the withdrawal recorded. */
  const withdrawn = async (client: string, cents: number) => {
    const p = await paid(client)
    const dispute = s.stripe.openDispute(p.intent, cents)
    s.stripe.withdrawDisputeFunds(dispute.id)
    assert.equal((await deliver(s, p.client, latest('charge.dispute.funds_withdrawn'))).json.effect, 'reversed')
    return { p, dispute }
  }

  test('all of it withheld: nothing recorded then, the whole refund recorded when the dispute is won, nothing refunded twice', async () => {
    const { p, dispute } = await withdrawn('sd-held-all', 3000)
    const refund = s.stripe.dashboardRefund(p.intent, 3000)
    const created = latest('refund.created')
    assert.equal((await deliver(s, p.client, created)).json.effect, 'nothing_to_refund')
    // The same refund again (another event naming it): already kept, once.
    const again = { ...created, id: `${created.id}again` } as Stripe.Event
    assert.equal((await deliver(s, p.client, again)).json.effect, 'refund_already_recorded')
    assert.deepEqual(await withheld(p), [{ provider_refund_id: refund.id, amount_minor: '3000', recorded_minor: '0' }])
    assert.deepEqual(await refunds(p), [])
    assert.deepEqual(await money(p), { reversed: '30.00', refunded: '0.00', working: '100.00', confirmed: '0.00' })

    const asked = refundCalls()
    s.stripe.closeDispute(dispute.id, 'won')
    assert.equal((await deliver(s, p.client, latest('charge.dispute.closed'))).json.effect, 'reinstated')
    // The 30.00 Stripe gave back had already gone to the debtor: the Payment is refunded in full, nothing is owed again.
    assert.deepEqual(await money(p), { reversed: '0.00', refunded: '30.00', working: '100.00', confirmed: '0.00' })
    assert.deepEqual(await refunds(p), [[refund.id, '30.00', 'provider', 'succeeded']])
    assert.deepEqual(await withheld(p), [{ provider_refund_id: refund.id, amount_minor: '3000', recorded_minor: '3000' }])
    // No refund of its own: Stripe is not asked for money it no longer has.
    assert.equal(await s.t.app.refundWorker.runOnce(), false)
    assert.equal(refundCalls(), asked)
    assert.equal(
      (await deliver(s, p.client, { ...created, id: `${created.id}late` } as Stripe.Event)).json.effect,
      'refund_already_recorded',
    )
    const payment = (await readRequest(s, p)).payment
    assert.deepEqual([payment.allocatedAmount, payment.unappliedAmount], [usd('30.00'), usd('0.00')])
  })

  test('part of it withheld: the part the Payment held recorded then, the rest when the dispute is won', async () => {
    const { p, dispute } = await withdrawn('sd-held-part', 2000)
    const refund = s.stripe.dashboardRefund(p.intent, 3000)
    assert.equal((await deliver(s, p.client, latest('refund.created'))).json.effect, 'provider_refund_recorded')
    assert.deepEqual(await refunds(p), [[refund.id, '10.00', 'provider', 'succeeded']])
    assert.deepEqual(await withheld(p), [{ provider_refund_id: refund.id, amount_minor: '2000', recorded_minor: '0' }])
    assert.deepEqual(await money(p), { reversed: '20.00', refunded: '10.00', working: '100.00', confirmed: '0.00' })

    s.stripe.closeDispute(dispute.id, 'won')
    const swept = await sync(p.client)
    assert.equal(swept.status, 200, swept.body)
    assert.deepEqual(await money(p), { reversed: '0.00', refunded: '30.00', working: '100.00', confirmed: '0.00' })
    assert.deepEqual(await refunds(p), [
      [refund.id, '10.00', 'provider', 'succeeded'],
      [`${refund.id}-${dispute.id}`, '20.00', 'provider', 'succeeded'],
    ])
    assert.deepEqual(await withheld(p), [{ provider_refund_id: refund.id, amount_minor: '2000', recorded_minor: '2000' }])
    assert.equal(await s.t.app.refundWorker.runOnce(), false)
  })

  test('a dispute lost keeps the refund waiting: the money never came back', async () => {
    const { p, dispute } = await withdrawn('sd-held-lost', 3000)
    const refund = s.stripe.dashboardRefund(p.intent, 1200)
    assert.equal((await deliver(s, p.client, latest('refund.created'))).json.effect, 'nothing_to_refund')
    s.stripe.closeDispute(dispute.id, 'lost')
    assert.equal((await deliver(s, p.client, latest('charge.dispute.closed'))).json.effect, 'reversal_already_recorded')
    assert.deepEqual(await money(p), { reversed: '30.00', refunded: '0.00', working: '100.00', confirmed: '0.00' })
    assert.deepEqual(await refunds(p), [])
    assert.deepEqual(await withheld(p), [{ provider_refund_id: refund.id, amount_minor: '1200', recorded_minor: '0' }])
  })
})

describe('receipts of a won dispute', () => {
  test('the Source receives the payment, the reversal and the reinstatement, each once, of kind reinstatement for the win', async () => {
    const p = await stripePayable(s, 'sd-receipts')
    // The client's Integration delivers receipts through the service, to a verified route.
    const grant = await s.t.admin('PUT', `/admin/v1/integrations/int-${p.client}/grants/${p.client}`, {
      scopes: [...SCOPES],
      receiptDeliveryOwner: 'service',
    })
    assert.ok(grant.status < 300, grant.body)
    const put = await s.t.call('PUT', `/v1/clients/${p.client}/receipt-route`, { key: p.apiKey, body: { url: `${rx.url}/${p.client}` } })
    assert.ok(put.status < 300, put.body)
    s.clock.advance(TEST_RECEIPT_DELAY_MS)
    await s.t.app.receiptDispatcher.runOnce()
    const routePath = new URL(`${rx.url}/${p.client}`).pathname
    const mine = () => rx.received.filter((r) => r.path === routePath).map((r) => r.json as Record<string, unknown>)
    const code = mine().find((r) => r.kind === 'test')?.confirmationCode
    const confirmed = await s.t.call('POST', `/v1/clients/${p.client}/receipt-route/confirm`, {
      key: p.apiKey,
      body: { confirmationCode: code },
    })
    assert.equal(confirmed.status, 200, confirmed.body)
    const sessionId = await startCheckout(s, p)
    const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
    assert.equal((await deliver(s, p.client, completed)).json.effect, 'confirmed')
    const intent = s.stripe.session(sessionId)?.payment_intent as string

    const dispute = s.stripe.openDispute(intent, 3000)
    s.stripe.withdrawDisputeFunds(dispute.id)
    assert.equal((await deliver(s, p.client, latest('charge.dispute.funds_withdrawn'))).json.effect, 'reversed')
    s.stripe.closeDispute(dispute.id, 'won')
    assert.equal((await deliver(s, p.client, latest('charge.dispute.funds_reinstated'))).json.effect, 'reinstated')
    assert.equal((await deliver(s, p.client, latest('charge.dispute.closed'))).json.effect, 'reinstatement_already_recorded')
    await s.t.app.receiptDispatcher.runOnce()
    await s.t.app.receiptDispatcher.runOnce()
    // Sent over several connections at once: in any order.
    const rank = (kind: unknown) => ['payment', 'reversal', 'reinstatement'].indexOf(String(kind))
    const receipts = mine()
      .filter((r) => r.kind !== 'test')
      .sort((a, b) => rank(a.kind) - rank(b.kind))
    const allocations = [{ externalReceivableId: p.receivableId, amount: usd('30.00') }]
    assert.deepEqual(
      receipts.map((r) => [r.kind, r.externalPaymentRequestId, r.providerPaymentId, r.amount, r.allocations, r.unappliedAmount]),
      [
        ['payment', p.requestId, intent, usd('30.00'), allocations, usd('0.00')],
        ['reversal', p.requestId, intent, usd('30.00'), allocations, usd('0.00')],
        ['reinstatement', p.requestId, intent, usd('30.00'), allocations, usd('0.00')],
      ],
    )
    assert.equal(new Set(receipts.map((r) => r.receiptId)).size, 3)
    // Its delivery is listed with the request's receipts.
    const view = await s.t.call('GET', `/v1/clients/${p.client}/payment-requests/${p.requestId}/receipt-delivery`, { key: p.apiKey })
    assert.equal(view.status, 200, view.body)
    assert.deepEqual(
      view.json.deliveryAttempts
        .map((a: { kind: string; outcome: string }) => [a.kind, a.outcome])
        .sort((a: string[], b: string[]) => rank(a[0]) - rank(b[0])),
      [
        ['payment', 'delivered'],
        ['reversal', 'delivered'],
        ['reinstatement', 'delivered'],
      ],
    )
    assert.equal(
      await countRows(s, `SELECT count(*) AS n FROM receipt_deliveries WHERE client_code = $1 AND kind = 'reinstatement'`, [p.client]),
      1,
    )
  })
})
