import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'
import { createTestDatabase, engineName, onPostgres, type TestDatabase } from '../../helpers/store.ts'

/**
 * Issue 21, items 1 to 4 (docs/design/money.md): the working amount reconciliation cannot raise, open requests that
 * reserve what they ask, cancel, and the pay-time check; with the races of item 7 that concern them (a request
 * paid while a credit note lands; 20 concurrent creates on one Receivable), on each engine. On PostgreSQL the
 * races run through two apps on two store connections (two pools) of one database.
 */
let nowMs = Date.parse('2026-03-02T10:00:00.000Z')
const clock = { now: () => new Date(nowMs) }
const CLIENT = 'wa-client'
const base = `/v1/clients/${CLIENT}`
const usd = (amount: string) => ({ amount, currency: 'USD' })
const form = { rawBody: 'outcome=confirmed', contentType: 'application/x-www-form-urlencoded' }

let db: TestDatabase
let t: TestApp
/** A second app on its own store connection (PostgreSQL); the same app on PGlite. */
let t2: TestApp
let k: Tenant

before(async () => {
  db = await createTestDatabase()
  t = await startTestApp({}, { clock, db })
  t2 = onPostgres ? await startTestApp({}, { clock, db: { ...db, store: db.open() } }) : t
  k = await t.tenant(CLIENT)
})
after(async () => {
  if (t2 !== t) await t2.app.app.close()
  await t.app.app.close()
  await db.drop()
})

const put = (id: string, body: unknown, app = t) => app.call('PUT', `${base}/payment-requests/${id}`, { key: k.apiKey, body })
const request = (receivableId: string, amount: string) => ({ externalReceivableId: receivableId, amount: usd(amount) })
const get = (id: string) => t.call('GET', `${base}/payment-requests/${id}`, { key: k.apiKey })
const cancel = (id: string, body?: unknown, opts: { rawBody?: string; contentType?: string } = {}) =>
  t.call('POST', `${base}/payment-requests/${id}/cancel`, { key: k.apiKey, ...(body === undefined ? {} : { body }), ...opts })
const simulate = (id: string, outcome = 'confirmed', app = t) =>
  app.admin('POST', `/admin/v1/clients/${CLIENT}/payment-requests/${id}/simulate`, { outcome })
const pagePath = async (id: string) => new URL((await get(id)).json.hostedUrl).pathname
/** source/working/confirmedUnreconciled/acknowledged */
const position = async (id: string) => {
  const res = await t.call('GET', `${base}/receivables/${id}`, { key: k.apiKey })
  assert.equal(res.status, 200, res.body)
  const p = res.json.financialPosition
  return [p.sourceAmount, p.workingAmount, p.confirmedUnreconciledAmount, p.receiptAcknowledgedAmount].map((m) => m.amount).join('/')
}
const undeclared = async (id: string) =>
  (
    await t.store.query<{ a: string }>(
      'SELECT acknowledged_undeclared_minor::text AS a FROM receivables WHERE client_code = $1 AND external_receivable_id = $2',
      [CLIENT, id],
    )
  )[0]?.a
const paymentsOf = async (receivableId: string) =>
  (
    await t.store.query<{ id: string; allocated: string; unapplied: string }>(
      `SELECT external_payment_request_id AS id, allocated_minor::text AS allocated, unapplied_minor::text AS unapplied
         FROM payments WHERE client_code = $1 AND external_receivable_id = $2 ORDER BY 1`,
      [CLIENT, receivableId],
    )
  ).map((p) => `${p.id} ${p.allocated}/${p.unapplied}`)
const eventsOf = async (id: string) =>
  (
    await t.store.query<{ type: string; revision: string }>(
      `SELECT type, revision::text FROM change_events WHERE client_code = $1 AND resource_id = $2 ORDER BY seq`,
      [CLIENT, id],
    )
  ).map((e) => `${e.type} ${e.revision}`)
const receivableBody = (id: string, sourceRevision: number, amount: string, extra: Record<string, unknown> = {}) => ({
  financialType: 'loan_balance',
  sourceRevision,
  recoverableAmount: usd(amount),
  creditUnion: { loanAccountReference: `loan/${id}`, loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [{ externalCustomerId: 'pay-cust', role: 'primary' }],
  sourceReference: `rcv/${id}`,
  ...extra,
})
const creditNote = (id: string, receivableId: string, amount: string, sourceRevision: number) => ({
  type: 'credit_note',
  amount: usd(amount),
  externalReceivableId: receivableId,
  sourceRevision,
  effectiveAt: '2026-03-01T00:00:00Z',
  reason: 'billing_correction',
  sourceReference: `ledger/${id}`,
})
const reconcile = (id: string, requestId: string, receivableId: string, amount: string) =>
  t.call('PUT', `${base}/payment-reconciliations/${id}`, {
    key: k.apiKey,
    body: {
      externalPaymentRequestId: requestId,
      lines: [{ externalReceiptLineId: `${id}-l1`, externalReceivableId: receivableId, amount: usd(amount) }],
    },
  })
const ok = async (p: Promise<Response>, status: number) => {
  const res = await p
  assert.equal(res.status, status, res.body)
  return res
}
const paid = async (receivableId: string, requestId: string, amount: string) => {
  await ok(put(requestId, request(receivableId, amount)), 201)
  await ok(simulate(requestId), 201)
}

describe(`the working amount (${engineName})`, () => {
  test('reconciling a payment never raises it; the Source declaring the balance (PUT, higher sourceRevision) clears what was acknowledged', async () => {
    await payableReceivable(t, k, 'wa-recon')
    await paid('wa-recon', 'wa-recon-pr', '60.00')
    assert.equal(await position('wa-recon'), '100.00/40.00/60.00/0.00')
    await ok(reconcile('wa-recon-rec1', 'wa-recon-pr', 'wa-recon', '25.00'), 201)
    assert.equal(await position('wa-recon'), '100.00/40.00/35.00/25.00')
    await ok(reconcile('wa-recon-rec2', 'wa-recon-pr', 'wa-recon', '35.00'), 201)
    assert.equal(await position('wa-recon'), '100.00/40.00/0.00/60.00')
    assert.equal(await undeclared('wa-recon'), '6000')
    // The case: a new request for 100.00 after the reconciliation is refused.
    const refused = await put('wa-recon-pr2', request('wa-recon', '100.00'))
    assert.equal(refused.status, 422, refused.body)
    assert.deepEqual(refused.json.errors, [
      {
        code: 'amount_exceeds_reservable',
        detail:
          "must not exceed the Receivable's working amount (40.00 USD) less what its other open requests already reserve (0.00 USD): at most 40.00 USD",
        pointer: '/amount/amount',
      },
    ])
    // The Source declares 40.00 (its books include the receipt): nothing undeclared is left, working 40.00.
    await ok(t.call('PUT', `${base}/receivables/wa-recon`, { key: k.apiKey, body: receivableBody('wa-recon', 2, '40.00') }), 200)
    assert.equal(await position('wa-recon'), '40.00/40.00/0.00/60.00')
    assert.equal(await undeclared('wa-recon'), '0')
    // An identical retry of that declaration changes nothing.
    await ok(t.call('PUT', `${base}/receivables/wa-recon`, { key: k.apiKey, body: receivableBody('wa-recon', 2, '40.00') }), 200)
    assert.equal(await position('wa-recon'), '40.00/40.00/0.00/60.00')
  })

  test('a PUT that also changes restrictions (the per-record path) clears it too', async () => {
    await payableReceivable(t, k, 'wa-restr')
    await paid('wa-restr', 'wa-restr-pr', '30.00')
    await ok(reconcile('wa-restr-rec', 'wa-restr-pr', 'wa-restr', '30.00'), 201)
    assert.equal(await undeclared('wa-restr'), '3000')
    const body = receivableBody('wa-restr', 2, '70.00', { restrictions: [{ type: 'legal_hold', reference: 'case/1' }] })
    await ok(t.call('PUT', `${base}/receivables/wa-restr`, { key: k.apiKey, body }), 200)
    assert.equal(await position('wa-restr'), '70.00/70.00/0.00/30.00')
    assert.equal(await undeclared('wa-restr'), '0')
  })

  test('an applied balance-snapshot entry clears it; a credit note (a financial event) does not', async () => {
    await payableReceivable(t, k, 'wa-snap')
    await payableReceivable(t, k, 'wa-cn')
    for (const id of ['wa-snap', 'wa-cn']) {
      await paid(id, `${id}-pr`, '60.00')
      await ok(reconcile(`${id}-rec`, `${id}-pr`, id, '60.00'), 201)
    }
    await ok(t.call('PUT', `${base}/credit-notes/wa-cn-1`, { key: k.apiKey, body: creditNote('wa-cn-1', 'wa-cn', '10.00', 2) }), 201)
    assert.equal(await position('wa-cn'), '90.00/30.00/0.00/60.00')
    assert.equal(await undeclared('wa-cn'), '6000')
    const snapshot = {
      asOf: '2026-03-02T09:00:00Z',
      feedMode: 'transaction',
      sourcePosition: 10,
      balances: [{ externalReceivableId: 'wa-snap', recoverableAmount: usd('40.00'), sourceRevision: 2 }],
    }
    const res = await ok(t.call('PUT', `${base}/balance-snapshots/wa-snap-1`, { key: k.apiKey, body: snapshot }), 201)
    assert.equal(res.json.balances[0].outcome, 'applied')
    assert.equal(await position('wa-snap'), '40.00/40.00/0.00/60.00')
    assert.equal(await undeclared('wa-snap'), '0')
  })

  test('a receipt line acknowledges no more than the Payment allocated: a line above it is held and moves nothing', async () => {
    await payableReceivable(t, k, 'wa-cap')
    await paid('wa-cap', 'wa-cap-pr', '30.00')
    const held = await reconcile('wa-cap-rec', 'wa-cap-pr', 'wa-cap', '30.01')
    assert.equal(held.status, 201, held.body)
    assert.equal(held.json.status, 'held')
    assert.equal(await position('wa-cap'), '100.00/70.00/30.00/0.00')
    assert.equal(await undeclared('wa-cap'), '0')
  })
})

describe(`open requests reserve what they ask (${engineName})`, () => {
  test('the sum of open requests never exceeds the working amount: 422 at /amount/amount with both figures, nothing created', async () => {
    await payableReceivable(t, k, 'wa-res')
    await ok(put('wa-res-1', request('wa-res', '60.00')), 201)
    await ok(put('wa-res-2', request('wa-res', '30.00')), 201)
    const refused = await put('wa-res-3', request('wa-res', '10.01'))
    assert.equal(refused.status, 422, refused.body)
    assert.equal(problemCode(refused), 'validation_error')
    assert.deepEqual(refused.json.errors, [
      {
        code: 'amount_exceeds_reservable',
        detail:
          "must not exceed the Receivable's working amount (100.00 USD) less what its other open requests already reserve (90.00 USD): at most 10.00 USD",
        pointer: '/amount/amount',
      },
    ])
    assert.equal((await get('wa-res-3')).status, 404)
    assert.deepEqual(await eventsOf('wa-res-3'), [])
    // Exactly what is left fits.
    await ok(put('wa-res-3', request('wa-res', '10.00')), 201)
    const full = await put('wa-res-4', request('wa-res', '0.01'))
    assert.equal(full.status, 422)
    assert.match(full.json.errors[0].detail, /\(100\.00 USD\) less .* \(100\.00 USD\): at most 0\.00 USD$/)
    // A canceled request reserves nothing any more.
    await ok(cancel('wa-res-2'), 200)
    await ok(put('wa-res-4', request('wa-res', '30.00')), 201)
    // Expired requests reserve nothing: move past every expiry (7 days).
    nowMs += 8 * 86_400_000
    await ok(put('wa-res-5', request('wa-res', '100.00')), 201)
    assert.equal(await position('wa-res'), '100.00/100.00/0.00/0.00')
  })

  test('an identical retry of a request is no new reservation', async () => {
    await payableReceivable(t, k, 'wa-retry')
    await ok(put('wa-retry-1', request('wa-retry', '100.00')), 201)
    await ok(put('wa-retry-1', request('wa-retry', '100.00')), 200)
  })

  test('20 concurrent creates on one Receivable: exactly 3 of 30.00 fit its 100.00, the rest are refused', async () => {
    await payableReceivable(t, k, 'wa-race')
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => put(`wa-race-${i}`, request('wa-race', '30.00'), i % 2 === 0 ? t : t2)),
    )
    const statuses = results.map((r) => r.status).sort()
    assert.deepEqual(statuses, [...Array(3).fill(201), ...Array(17).fill(422)])
    for (const r of results.filter((x) => x.status === 422)) {
      assert.equal(r.json.errors[0].pointer, '/amount/amount')
      assert.match(r.json.errors[0].detail, /\(100\.00 USD\) less what its other open requests already reserve \(90\.00 USD\)/)
    }
    const open = await t.store.query<{ n: number; total: string }>(
      `SELECT count(*)::int AS n, sum(amount_minor)::text AS total FROM payment_requests
        WHERE client_code = $1 AND external_receivable_id = 'wa-race' AND status = 'open'`,
      [CLIENT],
    )
    assert.deepEqual(open, [{ n: 3, total: '9000' }])
  })
})

describe(`cancel (${engineName})`, () => {
  test('open -> canceled (requested), 200 with the reason as cancellationNote; again 200 unchanged; one event', async () => {
    await payableReceivable(t, k, 'wa-cancel')
    const created = await ok(put('wa-cancel-1', request('wa-cancel', '40.00')), 201)
    nowMs += 1000
    const res = await ok(cancel('wa-cancel-1', { reason: 'Replaced by a request for the full balance' }), 200)
    assert.deepEqual(res.json, {
      ...created.json,
      status: 'canceled',
      cancelReason: 'requested',
      cancellationNote: 'Replaced by a request for the full balance',
      revision: 2,
      updatedAt: new Date(nowMs).toISOString(),
    })
    nowMs += 1000
    const again = await ok(cancel('wa-cancel-1', { reason: 'another reason' }), 200)
    assert.deepEqual(again.json, res.json)
    assert.deepEqual((await get('wa-cancel-1')).json, res.json)
    assert.deepEqual(await eventsOf('wa-cancel-1'), ['payment_request.created 1', 'payment_request.canceled 2'])
    // The page says so, with no form; a payment is refused.
    const path = await pagePath('wa-cancel-1')
    const page = await t.call('GET', path)
    assert.match(page.body, /<h1>This payment request was canceled<\/h1>/)
    assert.doesNotMatch(page.body, /<form/)
    assert.doesNotMatch(page.body, /Replaced by/)
    const posted = await t.call('POST', path, form)
    assert.equal(posted.status, 409)
    const refused = await simulate('wa-cancel-1')
    assert.equal(refused.status, 409, refused.body)
    assert.equal(problemCode(refused), 'payment_request_state_conflict')
    assert.deepEqual(await paymentsOf('wa-cancel'), [])
    assert.equal(await position('wa-cancel'), '100.00/100.00/0.00/0.00')
  })

  test('the body may be empty ({}) or absent: no cancellationNote', async () => {
    await payableReceivable(t, k, 'wa-cancel2')
    await ok(put('wa-cancel2-1', request('wa-cancel2', '10.00')), 201)
    await ok(put('wa-cancel2-2', request('wa-cancel2', '10.00')), 201)
    const empty = await ok(cancel('wa-cancel2-1', {}), 200)
    assert.equal(empty.json.status, 'canceled')
    assert.equal(empty.json.cancelReason, 'requested')
    assert.equal('cancellationNote' in empty.json, false)
    const absent = await ok(cancel('wa-cancel2-2'), 200)
    assert.equal(absent.json.cancelReason, 'requested')
    assert.equal('cancellationNote' in absent.json, false)
    // An open request carries no cancelReason.
    await ok(put('wa-cancel2-3', request('wa-cancel2', '10.00')), 201)
    assert.equal('cancelReason' in (await get('wa-cancel2-3')).json, false)
  })

  test('bad bodies: 422 at the exact pointer, nothing changed', async () => {
    await payableReceivable(t, k, 'wa-cancel3')
    await ok(put('wa-cancel3-1', request('wa-cancel3', '10.00')), 201)
    const cases: [unknown, string, string][] = [
      [{ reason: '' }, '/reason', 'too_small'],
      [{ reason: 'x'.repeat(201) }, '/reason', 'too_big'],
      [{ reason: 12 }, '/reason', 'invalid_type'],
      [{ reason: null }, '/reason', 'invalid_type'],
      [{ note: 'x' }, '/note', 'unrecognized_keys'],
    ]
    for (const [body, pointer, code] of cases) {
      const res = await cancel('wa-cancel3-1', body)
      assert.equal(res.status, 422, `${JSON.stringify(body)}: ${res.body}`)
      assert.deepEqual(
        res.json.errors.map((e: { pointer: string; code: string }) => [e.pointer, e.code]),
        [[pointer, code]],
        JSON.stringify(body),
      )
    }
    const notJson = await cancel('wa-cancel3-1', undefined, { rawBody: '[1]', contentType: 'application/json' })
    assert.equal(notJson.status, 422, notJson.body)
    assert.deepEqual(
      notJson.json.errors.map((e: { pointer: string; code: string }) => [e.pointer, e.code]),
      [['', 'invalid_type']],
    )
    for (const id of ['bad.id', 'x'.repeat(129)]) {
      const res = await cancel(id, { reason: 'x' })
      assert.equal(res.status, 422, res.body)
      assert.deepEqual(
        res.json.errors.map((e: { pointer: string; code: string }) => [e.pointer, e.code]),
        [['/path/externalPaymentRequestId', 'invalid_format']],
      )
    }
    assert.equal((await get('wa-cancel3-1')).json.status, 'open')
    const exact = await ok(cancel('wa-cancel3-1', { reason: 'x'.repeat(200) }), 200)
    assert.equal(exact.json.cancellationNote, 'x'.repeat(200))
    assert.deepEqual(await eventsOf('wa-cancel3-1'), ['payment_request.created 1', 'payment_request.canceled 2'])
  })

  test('409 payment_request_state_conflict on confirmed, failed and expired requests; 404 on an unknown one', async () => {
    await payableReceivable(t, k, 'wa-cancel4')
    await ok(put('wa-c4-confirmed', request('wa-cancel4', '10.00')), 201)
    await ok(simulate('wa-c4-confirmed'), 201)
    await ok(put('wa-c4-failed', request('wa-cancel4', '10.00')), 201)
    await ok(simulate('wa-c4-failed', 'failed'), 201)
    await ok(put('wa-c4-expired', { ...request('wa-cancel4', '10.00'), expiresAt: new Date(nowMs + 300_000).toISOString() }), 201)
    nowMs += 300_000
    for (const [id, status] of [
      ['wa-c4-confirmed', 'confirmed'],
      ['wa-c4-failed', 'failed'],
      ['wa-c4-expired', 'expired'],
    ] as const) {
      const res = await cancel(id, { reason: 'too late' })
      assert.equal(res.status, 409, res.body)
      assert.equal(problemCode(res), 'payment_request_state_conflict')
      assert.equal(res.json.paymentRequestStatus, status)
      assert.equal((await get(id)).json.status, status)
    }
    // The expiry was recorded by the cancel's transaction (its own event), the cancel itself changed nothing.
    assert.deepEqual(await eventsOf('wa-c4-expired'), ['payment_request.created 1', 'payment_request.expired 2'])
    const unknown = await cancel('wa-nope')
    assert.equal(unknown.status, 404)
    assert.equal(problemCode(unknown), 'payment_request_not_found')
  })
})

describe(`the pay-time check (${engineName})`, () => {
  test('a credit note since the request: the page cancels it (balance_changed), charges nothing, and says the balance changed', async () => {
    await payableReceivable(t, k, 'wa-pay')
    await ok(put('wa-pay-1', request('wa-pay', '80.00')), 201)
    await ok(t.call('PUT', `${base}/credit-notes/wa-pay-cn`, { key: k.apiKey, body: creditNote('wa-pay-cn', 'wa-pay', '30.00', 2) }), 201)
    const path = await pagePath('wa-pay-1')
    // The page still offers the form (the check is made when the debtor commits).
    assert.match((await t.call('GET', path)).body, /<form/)
    const posted = await t.call('POST', path, form)
    assert.equal(posted.status, 303)
    const res = (await get('wa-pay-1')).json
    assert.equal(res.status, 'canceled')
    assert.equal(res.cancelReason, 'balance_changed')
    assert.equal(res.payment, null)
    assert.deepEqual(await paymentsOf('wa-pay'), [])
    assert.equal(await position('wa-pay'), '70.00/70.00/0.00/0.00')
    const page = await t.call('GET', path)
    assert.match(page.body, /<h1>The balance has changed<\/h1>/)
    assert.match(page.body, /nothing has been charged/)
    assert.doesNotMatch(page.body, /<form/)
    assert.deepEqual(await eventsOf('wa-pay-1'), ['payment_request.created 1', 'payment_request.canceled 2'])
  })

  test('simulate on such a request: the cancel commits and the answer is 409 payment_request_state_conflict saying so', async () => {
    await payableReceivable(t, k, 'wa-sim')
    await ok(put('wa-sim-1', request('wa-sim', '50.00')), 201)
    await ok(put('wa-sim-2', request('wa-sim', '50.00')), 201)
    await ok(t.call('PUT', `${base}/credit-notes/wa-sim-cn`, { key: k.apiKey, body: creditNote('wa-sim-cn', 'wa-sim', '40.00', 2) }), 201)
    // The first request keeps its claim (made first): 50.00 fits the 60.00 left.
    await ok(simulate('wa-sim-1'), 201)
    const res = await simulate('wa-sim-2')
    assert.equal(res.status, 409, res.body)
    assert.equal(problemCode(res), 'payment_request_state_conflict')
    assert.equal(res.json.paymentRequestStatus, 'canceled')
    assert.equal(res.json.cancelReason, 'balance_changed')
    assert.equal(
      res.json.detail,
      "The Receivable's balance changed: 50.00 USD no longer fits its working amount less the open requests made before it, so the Payment request was canceled (balance_changed) and nothing was charged.",
    )
    const after = (await get('wa-sim-2')).json
    assert.equal(after.status, 'canceled')
    assert.equal(after.cancelReason, 'balance_changed')
    assert.deepEqual(await paymentsOf('wa-sim'), ['wa-sim-1 5000/0'])
    assert.equal(await position('wa-sim'), '60.00/10.00/50.00/0.00')
    // Again: the request is canceled, 409, nothing changes.
    const again = await simulate('wa-sim-2')
    assert.equal(again.status, 409)
    assert.deepEqual(await eventsOf('wa-sim-2'), ['payment_request.created 1', 'payment_request.canceled 2'])
  })

  test('a held Receivable refuses as before (409 recovery_held) and the request stays open', async () => {
    await payableReceivable(t, k, 'wa-held')
    await ok(put('wa-held-1', request('wa-held', '80.00')), 201)
    await ok(
      t.call('PUT', `${base}/credit-notes/wa-held-cn`, { key: k.apiKey, body: creditNote('wa-held-cn', 'wa-held', '30.00', 2) }),
      201,
    )
    await ok(
      t.call('POST', `${base}/receivables/wa-held/pause`, {
        key: k.apiKey,
        body: { effectiveAt: '2026-03-01T00:00:00Z', reason: 'hardship_review' },
      }),
      200,
    )
    const res = await simulate('wa-held-1')
    assert.equal(res.status, 409, res.body)
    assert.equal(problemCode(res), 'recovery_held')
    assert.equal((await get('wa-held-1')).json.status, 'open')
    assert.deepEqual(await eventsOf('wa-held-1'), ['payment_request.created 1'])
  })

  test('a request paid while a credit note lands: either the payment or the cancel, exact either way (8 races)', async () => {
    for (let i = 0; i < 8; i++) {
      const rid = `wa-racecn-${i}`
      await payableReceivable(t, k, rid)
      await ok(put(`${rid}-pr`, request(rid, '80.00')), 201)
      const path = await pagePath(`${rid}-pr`)
      const [paidRes, noteRes] = await Promise.all([
        (i % 2 === 0 ? t : t2).call('POST', path, form),
        (i % 2 === 0 ? t2 : t).call('PUT', `${base}/credit-notes/${rid}-cn`, {
          key: k.apiKey,
          body: creditNote(`${rid}-cn`, rid, '30.00', 2),
        }),
      ])
      assert.equal(paidRes.status, 303, paidRes.body)
      assert.equal(noteRes.status, 201, noteRes.body)
      const req = (await get(`${rid}-pr`)).json
      if (req.status === 'confirmed') {
        // Paid first (working 100.00): 80.00 allocated; the credit note then leaves 70.00 owed, 80.00 taken.
        assert.deepEqual(await paymentsOf(rid), [`${rid}-pr 8000/0`])
        assert.equal(await position(rid), '70.00/0.00/80.00/0.00')
      } else {
        // The credit note first (working 70.00): 80.00 no longer fits, canceled, nothing taken.
        assert.equal(req.status, 'canceled')
        assert.equal(req.cancelReason, 'balance_changed')
        assert.deepEqual(await paymentsOf(rid), [])
        assert.equal(await position(rid), '70.00/70.00/0.00/0.00')
      }
    }
  })
})
