import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { sweepExpiredPaymentRequests } from '../../../src/resources/payment-requests/expiry.ts'
import { startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'

/** A clock the test moves by hand, so every timestamp is an exact value. */
let nowMs = Date.parse('2026-03-02T10:00:00.000Z')
const clock = { now: () => new Date(nowMs) }
const iso = (ms = nowMs) => new Date(ms).toISOString()
const tick = (ms = 1000): string => {
  nowMs += ms
  return iso()
}
const DAY = 86_400_000

const CLIENT = 'pr-happy'
const base = `/v1/clients/${CLIENT}`
const usd = (amount: string) => ({ amount, currency: 'USD' })
const TOKEN_URL = /^http:\/\/irs\.test\/pay\/[A-Za-z0-9_-]{43}$/

let t: TestApp
let k: Tenant

const put = (id: string, body: unknown, key = k.apiKey) => t.call('PUT', `${base}/payment-requests/${id}`, { key, body })
const get = (id: string) => t.call('GET', `${base}/payment-requests/${id}`, { key: k.apiKey })
const simulate = (id: string, outcome: string, client = CLIENT) =>
  t.admin('POST', `/admin/v1/clients/${client}/payment-requests/${id}/simulate`, { outcome })
const receivable = async (id: string) => (await t.call('GET', `${base}/receivables/${id}`, { key: k.apiKey })).json
const position = async (id: string) => {
  const r = await receivable(id)
  return {
    source: r.financialPosition.sourceAmount.amount,
    working: r.financialPosition.workingAmount.amount,
    confirmed: r.financialPosition.confirmedUnreconciledAmount.amount,
    acknowledged: r.financialPosition.receiptAcknowledgedAmount.amount,
  }
}
const payments = async (requestId: string) =>
  Number(
    (
      await t.store.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM payments WHERE client_code = $1 AND external_payment_request_id = $2',
        [CLIENT, requestId],
      )
    )[0]?.n,
  )
/** The change feed's events for one resource id, as `type revision` lines in feed order. */
const eventsOf = async (id: string, types: string[] = ['payment_request', 'payment', 'receivable']) => {
  const rows = await t.store.query<{ type: string; revision: string }>(
    `SELECT type, revision FROM change_events WHERE client_code = $1 AND resource_id = $2 AND resource_type = ANY($3::text[]) ORDER BY seq`,
    [CLIENT, id, types],
  )
  return rows.map((r) => `${r.type} ${r.revision}`)
}

before(async () => {
  t = await startTestApp({}, { clock })
  k = await t.tenant(CLIENT)
})
after(() => t.close())

describe('PUT and GET a Payment request', () => {
  test('create answers 201 with the exact body; the identical retry 200; GET the same', async () => {
    await payableReceivable(t, k, 'r-create')
    const createdAt = tick()
    const res = await put('pr-create', { externalReceivableId: 'r-create', amount: usd('30.00'), description: 'March instalment' })
    assert.equal(res.status, 201, res.body)
    assert.match(res.json.hostedUrl, TOKEN_URL)
    const expected = {
      externalPaymentRequestId: 'pr-create',
      externalReceivableId: 'r-create',
      amount: usd('30.00'),
      description: 'March instalment',
      expiresAt: iso(nowMs + 7 * DAY),
      status: 'open',
      hostedUrl: res.json.hostedUrl,
      revision: 1,
      createdAt,
      updatedAt: createdAt,
      payment: null,
    }
    assert.deepEqual(res.json, expected)
    assert.deepEqual(Object.keys(res.json), Object.keys(expected))

    tick(60_000)
    // Key order and number formatting do not count: "30" is 30.00.
    const retry = await put('pr-create', {
      description: 'March instalment',
      amount: { currency: 'USD', amount: '30' },
      externalReceivableId: 'r-create',
    })
    assert.equal(retry.status, 200, retry.body)
    assert.deepEqual(retry.json, expected)
    const read = await get('pr-create')
    assert.equal(read.status, 200)
    assert.deepEqual(read.json, expected)
    assert.deepEqual(await eventsOf('pr-create'), ['payment_request.created 1'])
  })

  test('an explicit expiresAt is kept (ms precision); description may be omitted', async () => {
    await payableReceivable(t, k, 'r-expiry')
    const at = new Date(nowMs + 2 * DAY).toISOString().replace('.000Z', 'Z')
    const res = await put('pr-expiry', { externalReceivableId: 'r-expiry', amount: usd('1.00'), expiresAt: at })
    assert.equal(res.status, 201, res.body)
    assert.equal(res.json.expiresAt, iso(nowMs + 2 * DAY))
    assert.equal('description' in res.json, false)
    // The bounds are inclusive: exactly 5 minutes and exactly 30 days ahead are accepted.
    assert.equal(
      (await put('pr-min', { externalReceivableId: 'r-expiry', amount: usd('1.00'), expiresAt: iso(nowMs + 300_000) })).status,
      201,
    )
    assert.equal(
      (await put('pr-max', { externalReceivableId: 'r-expiry', amount: usd('1.00'), expiresAt: iso(nowMs + 30 * DAY) })).status,
      201,
    )
    // A retry that omits expiresAt matches a create that omitted it, even days later.
    assert.equal((await put('pr-default', { externalReceivableId: 'r-expiry', amount: usd('2.00') })).status, 201)
    tick(DAY)
    const later = await put('pr-default', { externalReceivableId: 'r-expiry', amount: usd('2.00') })
    assert.equal(later.status, 200, later.body)
    assert.equal(later.json.expiresAt, iso(nowMs - DAY + 7 * DAY))
  })

  test('every PUT and GET of a new id is its own request with its own unguessable token', async () => {
    await payableReceivable(t, k, 'r-tokens')
    const a = await put('pr-tok-a', { externalReceivableId: 'r-tokens', amount: usd('1.00') })
    const b = await put('pr-tok-b', { externalReceivableId: 'r-tokens', amount: usd('1.00') })
    assert.notEqual(a.json.hostedUrl, b.json.hostedUrl)
    for (const url of [a.json.hostedUrl, b.json.hostedUrl]) {
      assert.match(url, TOKEN_URL)
      assert.ok(!url.includes(CLIENT) && !url.includes('pr-tok'), url)
    }
  })
})

describe('the sandbox provider confirms, and the Payment allocates', () => {
  test('confirmed: 201 with the Payment; the Receivable moves exactly; a second confirmation 200 changes nothing', async () => {
    await payableReceivable(t, k, 'r-pay')
    const before = await receivable('r-pay')
    assert.deepEqual(await position('r-pay'), { source: '100.00', working: '100.00', confirmed: '0.00', acknowledged: '0.00' })
    const createdAt = tick()
    const created = await put('pr-pay', { externalReceivableId: 'r-pay', amount: usd('30.00') })
    assert.equal(created.status, 201)
    const decidedAt = tick()
    const res = await simulate('pr-pay', 'confirmed')
    assert.equal(res.status, 201, res.body)
    const expected = {
      externalPaymentRequestId: 'pr-pay',
      externalReceivableId: 'r-pay',
      amount: usd('30.00'),
      expiresAt: iso(Date.parse(createdAt) + 7 * DAY),
      status: 'confirmed',
      hostedUrl: created.json.hostedUrl,
      revision: 2,
      createdAt,
      updatedAt: decidedAt,
      payment: {
        status: 'confirmed',
        amount: usd('30.00'),
        allocatedAmount: usd('30.00'),
        unappliedAmount: usd('0.00'),
        refundedAmount: usd('0.00'),
        reversedAmount: usd('0.00'),
        provider: 'sandbox',
        providerPaymentId: res.json.payment.providerPaymentId,
        decidedAt,
      },
    }
    assert.deepEqual(res.json, expected)
    assert.match(res.json.payment.providerPaymentId, /^sbx_[0-9a-f]{32}$/)
    assert.deepEqual(await position('r-pay'), { source: '100.00', working: '70.00', confirmed: '30.00', acknowledged: '0.00' })
    const after1 = await receivable('r-pay')
    assert.equal(after1.revision, before.revision + 1)
    assert.equal(after1.updatedAt, decidedAt)
    assert.deepEqual((await get('pr-pay')).json, expected)

    tick()
    const again = await simulate('pr-pay', 'confirmed')
    assert.equal(again.status, 200, again.body)
    assert.deepEqual(again.json, expected)
    assert.equal(await payments('pr-pay'), 1)
    // The operator's decision is audited once, when it made the Payment.
    const audit = await t.admin('GET', `/admin/v1/audit-events?clientCode=${CLIENT}&limit=200`)
    const simulated = audit.json.data.filter(
      (e: { action: string; targetId: string }) => e.action === 'payment_request.simulated' && e.targetId === 'pr-pay',
    )
    assert.equal(simulated.length, 1)
    assert.deepEqual(
      [simulated[0].targetType, simulated[0].details, simulated[0].occurredAt],
      ['payment_request', { outcome: 'confirmed' }, decidedAt],
    )
    assert.deepEqual(await position('r-pay'), { source: '100.00', working: '70.00', confirmed: '30.00', acknowledged: '0.00' })
    assert.equal((await receivable('r-pay')).revision, after1.revision)

    // Every state change is a feed event with the resource's revision, in the transaction's order.
    assert.deepEqual(await eventsOf('pr-pay'), ['payment_request.created 1', 'payment.confirmed 1', 'payment_request.confirmed 2'])
    const feed = await t.call('GET', `${base}/changes?limit=200`, { key: k.apiKey })
    const lines = feed.json.data.map(
      (e: { type: string; resource: { id: string }; revision: number }) => `${e.type} ${e.resource.id} ${e.revision}`,
    )
    const from = lines.indexOf('payment_request.created pr-pay 1')
    assert.deepEqual(lines.slice(from, from + 4), [
      'payment_request.created pr-pay 1',
      'payment.confirmed pr-pay 1',
      'payment_request.confirmed pr-pay 2',
      `receivable.updated r-pay ${after1.revision}`,
    ])
  })

  test('failed: 201 with a failed Payment that moves no amount and no Receivable revision', async () => {
    await payableReceivable(t, k, 'r-fail')
    const before = await receivable('r-fail')
    const receivableEvents = await eventsOf('r-fail', ['receivable'])
    await put('pr-fail', { externalReceivableId: 'r-fail', amount: usd('40.00') })
    const decidedAt = tick()
    const res = await simulate('pr-fail', 'failed')
    assert.equal(res.status, 201, res.body)
    assert.equal(res.json.status, 'failed')
    assert.equal(res.json.revision, 2)
    assert.deepEqual(res.json.payment, {
      status: 'failed',
      amount: usd('40.00'),
      allocatedAmount: usd('0.00'),
      unappliedAmount: usd('0.00'),
      refundedAmount: usd('0.00'),
      reversedAmount: usd('0.00'),
      provider: 'sandbox',
      providerPaymentId: res.json.payment.providerPaymentId,
      decidedAt,
    })
    assert.deepEqual(await position('r-fail'), { source: '100.00', working: '100.00', confirmed: '0.00', acknowledged: '0.00' })
    assert.equal((await receivable('r-fail')).revision, before.revision)
    assert.equal((await simulate('pr-fail', 'failed')).status, 200)
    assert.deepEqual(await eventsOf('pr-fail'), ['payment_request.created 1', 'payment.failed 1', 'payment_request.failed 2'])
    assert.deepEqual(await eventsOf('r-fail', ['receivable']), receivableEvents, 'no receivable event for the failure')
  })

  test('open requests that together take the whole working amount: each allocates in full, then nothing more can be asked for', async () => {
    await payableReceivable(t, k, 'r-over')
    assert.equal((await put('pr-over-1', { externalReceivableId: 'r-over', amount: usd('80.00') })).status, 201)
    assert.equal((await put('pr-over-2', { externalReceivableId: 'r-over', amount: usd('20.00') })).status, 201)
    const first = await simulate('pr-over-1', 'confirmed')
    assert.deepEqual([first.json.payment.allocatedAmount, first.json.payment.unappliedAmount], [usd('80.00'), usd('0.00')])
    assert.deepEqual(await position('r-over'), { source: '100.00', working: '20.00', confirmed: '80.00', acknowledged: '0.00' })
    const second = await simulate('pr-over-2', 'confirmed')
    assert.equal(second.status, 201)
    assert.deepEqual(
      [second.json.payment.amount, second.json.payment.allocatedAmount, second.json.payment.unappliedAmount],
      [usd('20.00'), usd('20.00'), usd('0.00')],
    )
    assert.deepEqual(await position('r-over'), { source: '100.00', working: '0.00', confirmed: '100.00', acknowledged: '0.00' })
    // A request is bounded by the working amount less the open requests when created: now nothing more can be asked for.
    const more = await put('pr-over-3', { externalReceivableId: 'r-over', amount: usd('0.01') })
    assert.equal(more.status, 422, more.body)
    assert.deepEqual(more.json.errors, [
      {
        code: 'amount_exceeds_reservable',
        detail:
          "must not exceed the Receivable's working amount (0.00 USD) less what its other open requests already reserve (0.00 USD): at most 0.00 USD",
        pointer: '/amount/amount',
      },
    ])
  })

  test('a confirmation whose amount no longer fits (a credit note since) takes nothing and leaves the Receivable alone', async () => {
    await payableReceivable(t, k, 'r-zero')
    assert.equal((await put('pr-zero-1', { externalReceivableId: 'r-zero', amount: usd('100.00') })).status, 201)
    const note = await t.call('PUT', `${base}/credit-notes/cn-zero`, {
      key: k.apiKey,
      body: {
        type: 'credit_note',
        amount: usd('0.01'),
        externalReceivableId: 'r-zero',
        sourceRevision: 2,
        effectiveAt: '2026-03-01T00:00:00Z',
        reason: 'billing_correction',
        sourceReference: 'ledger/cn/zero',
      },
    })
    assert.equal(note.status, 201, note.body)
    const revision = (await receivable('r-zero')).revision
    const res = await simulate('pr-zero-1', 'confirmed')
    assert.equal(res.status, 409, res.body)
    assert.equal(res.json.cancelReason, 'balance_changed')
    assert.equal(await payments('pr-zero-1'), 0)
    assert.equal((await receivable('r-zero')).revision, revision)
    assert.deepEqual(await position('r-zero'), { source: '99.99', working: '99.99', confirmed: '0.00', acknowledged: '0.00' })
  })

  test('two concurrent confirmations make one Payment and one allocation', async () => {
    await payableReceivable(t, k, 'r-race')
    await put('pr-race', { externalReceivableId: 'r-race', amount: usd('25.00') })
    const results = await Promise.all([
      simulate('pr-race', 'confirmed'),
      simulate('pr-race', 'confirmed'),
      simulate('pr-race', 'confirmed'),
    ])
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 200, 201])
    assert.equal(await payments('pr-race'), 1)
    assert.deepEqual(await position('r-race'), { source: '100.00', working: '75.00', confirmed: '25.00', acknowledged: '0.00' })
    assert.deepEqual(await eventsOf('pr-race'), ['payment_request.created 1', 'payment.confirmed 1', 'payment_request.confirmed 2'])
  })

  test('concurrent PUTs of one id create one request', async () => {
    await payableReceivable(t, k, 'r-put-race')
    const body = { externalReceivableId: 'r-put-race', amount: usd('5.00') }
    const other = await t.tenant(CLIENT, { integrationId: 'int-pr-happy-2' })
    const results = await Promise.all([put('pr-put-race', body), put('pr-put-race', body, other.apiKey)])
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 201])
    assert.equal(results[0]?.json.hostedUrl, results[1]?.json.hostedUrl)
    assert.deepEqual(await eventsOf('pr-put-race'), ['payment_request.created 1'])
  })
})

describe('receipt delivery', () => {
  test('the owner comes from the grant; no route is verified; the acknowledgement follows matched receipt lines', async () => {
    // The capability as each owner sees it with no receipt route (test/resources/receipts covers the routes).
    await payableReceivable(t, k, 'r-receipt')
    await put('pr-receipt', { externalReceivableId: 'r-receipt', amount: usd('60.00') })
    await simulate('pr-receipt', 'confirmed')
    const url = `${base}/payment-requests/pr-receipt/receipt-delivery`
    const capability = { state: 'disabled', disabledReason: 'delivery_owner_partner', unverifiedRoutes: [] }
    const ack = (status: string, matched: string, unmatched: string) => ({
      status,
      allocatedAmount: usd('60.00'),
      matchedAmount: usd(matched),
      unmatchedAmount: usd(unmatched),
    })
    const partner = await t.call('GET', url, { key: k.apiKey })
    assert.equal(partner.status, 200, partner.body)
    assert.deepEqual(partner.json, {
      externalPaymentRequestId: 'pr-receipt',
      deliveryOwner: 'partner',
      capability,
      deliveryAttempts: [],
      waitingFor: null,
      acknowledgement: ack('pending', '0.00', '60.00'),
    })
    const serviceOwned = await t.tenant(CLIENT, { integrationId: 'int-pr-service', grant: { receiptDeliveryOwner: 'service' } })
    const service = await t.call('GET', url, { key: serviceOwned.apiKey })
    assert.equal(service.status, 200)
    assert.deepEqual(service.json, {
      ...partner.json,
      deliveryOwner: 'service',
      capability: {
        state: 'disabled',
        disabledReason: 'no_verified_route',
        unverifiedRoutes: [{ route: 'vendor_receipt_posting', missingProof: 'source_posting_confirmation' }],
      },
    })

    // Receipt lines as a reconciliation writes them (reconciliations are their own family; the rows suffice here).
    const now = iso()
    await t.store.query(
      `INSERT INTO payment_reconciliations (client_code, external_reconciliation_id, external_payment_request_id, revision, status, body, accepted_at, updated_at)
       VALUES ($1, 'rec-1', 'pr-receipt', 1, 'matched', '{}', $2, $2), ($1, 'rec-2', 'pr-receipt', 1, 'held', '{}', $2, $2)`,
      [CLIENT, now],
    )
    await t.store.query(
      `INSERT INTO receipt_lines (client_code, external_reconciliation_id, position, external_payment_request_id, external_receipt_line_id,
                                  external_receivable_id, currency, amount_minor, state)
       VALUES ($1, 'rec-1', 1, 'pr-receipt', 'l-1', 'r-receipt', 'USD', 2500, 'matched'),
              ($1, 'rec-2', 1, 'pr-receipt', 'l-2', 'r-other', 'USD', 1000, 'differs')`,
      [CLIENT],
    )
    assert.deepEqual((await t.call('GET', url, { key: k.apiKey })).json.acknowledgement, ack('held', '25.00', '35.00'))
    await t.store.query(
      `UPDATE payment_reconciliations SET status = 'resolved' WHERE client_code = $1 AND external_reconciliation_id = 'rec-2'`,
      [CLIENT],
    )
    assert.deepEqual((await t.call('GET', url, { key: k.apiKey })).json.acknowledgement, ack('partially_acknowledged', '25.00', '35.00'))
    await t.store.query(
      `INSERT INTO receipt_lines (client_code, external_reconciliation_id, position, external_payment_request_id, external_receipt_line_id,
                                  external_receivable_id, currency, amount_minor, state)
       VALUES ($1, 'rec-1', 2, 'pr-receipt', 'l-3', 'r-receipt', 'USD', 3500, 'matched')`,
      [CLIENT],
    )
    assert.deepEqual((await t.call('GET', url, { key: k.apiKey })).json.acknowledgement, ack('acknowledged', '60.00', '0.00'))

    // Delivery attempts are listed as recorded.
    await t.store.query(
      `INSERT INTO receipt_deliveries (client_code, receipt_id, kind, source_key, external_payment_request_id, payload, status, created_at)
       VALUES ($1, 'rcpt_1', 'payment', 'pr-receipt', 'pr-receipt', '{}', 'pending', $2)`,
      [CLIENT, now],
    )
    await t.store.query(
      `INSERT INTO receipt_delivery_attempts (client_code, receipt_id, external_payment_request_id, attempt, route, outcome, attempted_at,
                                              http_status, next_attempt_at)
       VALUES ($1, 'rcpt_1', 'pr-receipt', 1, 'vendor_receipt_posting', 'failed', $2, 500, $3)`,
      [CLIENT, now, iso(nowMs + 3_600_000)],
    )
    assert.deepEqual((await t.call('GET', url, { key: k.apiKey })).json.deliveryAttempts, [
      {
        attempt: 1,
        route: 'vendor_receipt_posting',
        outcome: 'failed',
        httpStatus: 500,
        attemptedAt: now,
        nextAttemptAt: iso(nowMs + 3_600_000),
        receiptId: 'rcpt_1',
        kind: 'payment',
      },
    ])
  })
})

describe('expiry', () => {
  test('a read after expiresAt records the expiry first (revision 2, one event), then simulate is refused', async () => {
    await payableReceivable(t, k, 'r-exp-read')
    const res = await put('pr-exp-read', { externalReceivableId: 'r-exp-read', amount: usd('10.00'), expiresAt: iso(nowMs + 600_000) })
    tick(599_000)
    assert.equal((await get('pr-exp-read')).json.status, 'open')
    const expiredAt = tick(1000)
    const read = await get('pr-exp-read')
    assert.deepEqual([read.json.status, read.json.revision, read.json.updatedAt, read.json.payment], ['expired', 2, expiredAt, null])
    assert.equal(read.json.hostedUrl, res.json.hostedUrl)
    tick()
    assert.equal((await get('pr-exp-read')).json.revision, 2, 'recorded once')
    assert.deepEqual(await eventsOf('pr-exp-read'), ['payment_request.created 1', 'payment_request.expired 2'])
    // An identical retry of an expired request answers its current state.
    const retry = await put('pr-exp-read', { externalReceivableId: 'r-exp-read', amount: usd('10.00'), expiresAt: res.json.expiresAt })
    assert.deepEqual([retry.status, retry.json.status, retry.json.revision], [200, 'expired', 2])
  })

  test('the sweeper expires every due open request in bounded chunks, once, client by client, and leaves the rest alone', async () => {
    await payableReceivable(t, k, 'r-sweep')
    const ids = ['pr-sw-1', 'pr-sw-2', 'pr-sw-3', 'pr-sw-4', 'pr-sw-5']
    for (const id of ids) await put(id, { externalReceivableId: 'r-sweep', amount: usd('1.00'), expiresAt: iso(nowMs + 3_600_000) })
    // A second client's due requests: the sweep finds both clients, then expires each client's on its own.
    const k2 = await t.tenant(`${CLIENT}-2`)
    await payableReceivable(t, k2, 'r-sweep-2')
    const put2 = (id: string, body: unknown) => t.call('PUT', `/v1/clients/${CLIENT}-2/payment-requests/${id}`, { key: k2.apiKey, body })
    for (const id of ['pr-sw2-1', 'pr-sw2-2', 'pr-sw2-3'])
      assert.equal(
        (await put2(id, { externalReceivableId: 'r-sweep-2', amount: usd('1.00'), expiresAt: iso(nowMs + 3_600_000) })).status,
        201,
      )
    await put('pr-sw-late', { externalReceivableId: 'r-sweep', amount: usd('1.00'), expiresAt: iso(nowMs + 7_200_000) })
    await put('pr-sw-paid', { externalReceivableId: 'r-sweep', amount: usd('1.00'), expiresAt: iso(nowMs + 3_600_000) })
    await simulate('pr-sw-paid', 'confirmed')
    // Requests other tests left open and already due are swept as well: count them first.
    const dueBefore = Number(
      (
        await t.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM payment_requests WHERE status = 'open' AND expires_at <= $1`, [
          iso(nowMs + 3_600_000),
        ])
      )[0]?.n,
    )
    const sweptAt = tick(3_600_000)
    // Two sweepers at once (two instances): together they expire each due request exactly once.
    const swept = await Promise.all([
      sweepExpiredPaymentRequests(t.store, clock, { chunk: 2 }),
      sweepExpiredPaymentRequests(t.store, clock, { chunk: 2 }),
    ])
    assert.equal(swept[0] + swept[1], dueBefore)
    assert.equal(await sweepExpiredPaymentRequests(t.store, clock, { chunk: 2 }), 0)
    for (const id of ids) {
      const r = (await get(id)).json
      assert.deepEqual([r.status, r.revision, r.updatedAt], ['expired', 2, sweptAt], id)
      assert.deepEqual(await eventsOf(id), ['payment_request.created 1', 'payment_request.expired 2'], id)
    }
    assert.equal((await get('pr-sw-late')).json.status, 'open')
    assert.deepEqual([(await get('pr-sw-paid')).json.status, (await get('pr-sw-paid')).json.revision], ['confirmed', 2])
    for (const id of ['pr-sw2-1', 'pr-sw2-2', 'pr-sw2-3']) {
      const r = (await t.call('GET', `/v1/clients/${CLIENT}-2/payment-requests/${id}`, { key: k2.apiKey })).json
      assert.deepEqual([r.status, r.revision, r.updatedAt], ['expired', 2, sweptAt], id)
    }
  })
})

describe('the hosted page functions (page.ts builds on them)', () => {
  const svc = () => t.app.services.paymentRequests
  const tokenOf = (url: string) => url.split('/').pop() as string

  test('pageView by token only: payable with the sandbox form, then confirmed; settleFromPage is the sandbox path', async () => {
    await payableReceivable(t, k, 'r-page')
    const res = await put('pr-page', { externalReceivableId: 'r-page', amount: usd('12.50'), description: 'Car loan, March' })
    const token = tokenOf(res.json.hostedUrl)
    assert.deepEqual(await svc().pageView(token), {
      state: 'payable',
      cancelReason: null,
      creditorName: CLIENT,
      description: 'Car loan, March',
      amount: usd('12.50'),
      expiresAt: res.json.expiresAt,
      decidedAt: null,
      sandboxForm: true,
      branding: { displayName: null, accentColor: null, supportEmail: null, supportPhone: null, supportUrl: null, locale: null },
      confirmationNumber: null,
      refundedInFull: false,
    })
    assert.equal(await svc().pageView('pr-page'), undefined)
    assert.equal(await svc().pageView(`${token}x`), undefined)
    await t.admin('PUT', `/admin/v1/clients/${CLIENT}`, { name: 'Harbour Credit Union' })
    await t.admin('PUT', `/admin/v1/clients/${CLIENT}/branding`, { supportEmail: 'help@harbour.example', locale: 'en-CA' })
    const decidedAt = tick()
    await svc().settleFromPage(token, 'confirmed')
    const confirmationNumber = (await t.call('GET', `/v1/clients/${CLIENT}/payment-requests/pr-page`, { key: k.apiKey })).json.payment
      .providerPaymentId
    assert.match(confirmationNumber, /^sbx_[0-9a-f]{32}$/)
    assert.deepEqual(await svc().pageView(token), {
      state: 'confirmed',
      cancelReason: null,
      creditorName: 'Harbour Credit Union',
      description: 'Car loan, March',
      amount: usd('12.50'),
      expiresAt: res.json.expiresAt,
      decidedAt,
      sandboxForm: false,
      branding: {
        displayName: null,
        accentColor: null,
        supportEmail: 'help@harbour.example',
        supportPhone: null,
        supportUrl: null,
        locale: 'en-CA',
      },
      confirmationNumber,
      refundedInFull: false,
    })
    assert.deepEqual(await position('r-page'), { source: '100.00', working: '87.50', confirmed: '12.50', acknowledged: '0.00' })
    // The same outcome again changes nothing; the opposite is refused.
    await svc().settleFromPage(token, 'confirmed')
    assert.equal(await payments('pr-page'), 1)
    await assert.rejects(svc().settleFromPage(token, 'failed'), { code: 'payment_request_state_conflict' })
    await assert.rejects(svc().settleFromPage('no-such-token', 'confirmed'), { code: 'payment_request_not_found' })
  })

  test('failed, expired and held pages show no form', async () => {
    await payableReceivable(t, k, 'r-page-2')
    const failed = tokenOf((await put('pr-page-f', { externalReceivableId: 'r-page-2', amount: usd('1.00') })).json.hostedUrl)
    await svc().settleFromPage(failed, 'failed')
    assert.deepEqual([(await svc().pageView(failed))?.state, (await svc().pageView(failed))?.sandboxForm], ['failed', false])

    const expiring = await put('pr-page-e', { externalReceivableId: 'r-page-2', amount: usd('1.00'), expiresAt: iso(nowMs + 300_000) })
    tick(300_000)
    const expired = await svc().pageView(tokenOf(expiring.json.hostedUrl))
    assert.deepEqual([expired?.state, expired?.sandboxForm, expired?.decidedAt], ['expired', false, null])
    assert.equal((await get('pr-page-e')).json.revision, 2, 'the page recorded the expiry')
    await assert.rejects(svc().settleFromPage(tokenOf(expiring.json.hostedUrl), 'confirmed'), { code: 'payment_request_state_conflict' })

    const held = tokenOf((await put('pr-page-h', { externalReceivableId: 'r-page-2', amount: usd('1.00') })).json.hostedUrl)
    await t.call('POST', `${base}/receivables/r-page-2/pause`, {
      key: k.apiKey,
      body: { effectiveAt: '2026-03-01T00:00:00Z', reason: 'hardship_review' },
    })
    assert.deepEqual([(await svc().pageView(held))?.state, (await svc().pageView(held))?.sandboxForm], ['held', false])
    await assert.rejects(svc().settleFromPage(held, 'confirmed'), (err: { code: string; extensions: { holds: string[] } }) => {
      assert.equal(err.code, 'recovery_held')
      assert.deepEqual(err.extensions.holds, ['other_protection'])
      return true
    })
    assert.equal(await payments('pr-page-h'), 0)
  })
})
