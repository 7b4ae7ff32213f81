import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'
import { confirmedPayment, expectStatus, refundCalls, usd } from './helpers.ts'

/**
 * Bad refunds and reversals: each refused with its problem at its exact pointer, and nothing changed (the refunds,
 * the Payment, the Receivable and the change feed read the same before and after).
 */
let t: TestApp
let tenant: Tenant
let c: ReturnType<typeof refundCalls>
before(async () => {
  t = await startTestApp()
  tenant = await t.tenant('rfe')
  c = refundCalls(t, tenant)
  // pr-1: confirmed for 60.00 with a pending refund rf-1 of 10.00; pr-open: open; pr-failed: its Payment failed.
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  expectStatus(await c.refund('pr-1', 'rf-1', { amount: usd('10.00'), reason: 'requested_by_customer' }), 201)
  await payableReceivable(t, tenant, 'R2')
  expectStatus(await c.request('pr-open', { externalReceivableId: 'R2', amount: usd('5.00') }), 201)
  expectStatus(await c.request('pr-failed', { externalReceivableId: 'R2', amount: usd('5.00') }), 201)
  expectStatus(await c.simulate('pr-failed', 'failed'), 201)
})
after(() => t.close())

/** Everything a bad write must leave as it was. */
async function state() {
  return {
    refunds: (await c.listRefunds('pr-1')).json,
    payment: await c.payment('pr-1'),
    position: await c.position('R'),
    revision: await c.revision('R'),
    feed: await c.feed(),
    rows: (await t.store.query<{ n: number }>('SELECT count(*)::int AS n FROM refunds'))[0]?.n,
  }
}

function assertFieldProblem(res: Response, pointer: string, code = 'custom') {
  assert.equal(res.status, 422, res.body)
  assert.equal(problemCode(res), 'validation_error')
  assert.deepEqual(
    res.json.errors.map((e: { pointer: string; code: string }) => [e.pointer, e.code]),
    [[pointer, code]],
    res.body,
  )
}

const good = { amount: usd('5.00'), reason: 'other' }

test('bad refund bodies: 422 at the exact pointer, nothing changed', async () => {
  const before = await state()
  const cases: [unknown, string, string?][] = [
    [{ ...good, amount: usd('0.00') }, '/amount/amount'],
    [{ ...good, amount: { amount: '5.001', currency: 'USD' } }, '/amount/amount', 'invalid_format'],
    [{ ...good, amount: { amount: '-5.00', currency: 'USD' } }, '/amount/amount', 'invalid_format'],
    [{ ...good, amount: { amount: '5.00', currency: 'usd' } }, '/amount/currency', 'invalid_format'],
    [{ ...good, reason: 'unapplied_funds' }, '/reason', 'invalid_value'],
    [{ ...good, reason: 'because' }, '/reason', 'invalid_value'],
    [{ amount: usd('5.00') }, '/reason', 'invalid_value'],
    [{ reason: 'other' }, '/amount', 'invalid_type'],
    [{ ...good, extra: 1 }, '/extra', 'unrecognized_keys'],
  ]
  for (const [body, pointer, code] of cases) {
    const res = await c.refund('pr-1', 'rf-bad', body)
    assert.equal(res.status, 422, `${JSON.stringify(body)}: ${res.body}`)
    assert.deepEqual(
      res.json.errors.map((e: { pointer: string }) => e.pointer),
      [pointer],
      JSON.stringify(body),
    )
    if (code) assert.equal(res.json.errors[0].code, code, `${JSON.stringify(body)}: ${res.body}`)
  }
  assert.deepEqual(await state(), before)
})

test('bodies of the wrong shape and bad identifiers in the path: 422 at the exact pointer, nothing changed', async () => {
  const before = await state()
  const base = `/v1/clients/${tenant.clientCode}/payment-requests`
  const pointers = (res: Response) => {
    assert.equal(res.status, 422, res.body)
    assert.equal(problemCode(res), 'validation_error')
    return res.json.errors.map((e: { pointer: string; code: string }) => `${e.code} ${e.pointer}`)
  }
  const raw = (rawBody: string) =>
    t.call('PUT', `${base}/pr-1/refunds/rf-raw`, { key: tenant.apiKey, rawBody, contentType: 'application/json' })
  assert.deepEqual(pointers(await raw('[1]')), ['invalid_type '])
  assert.deepEqual(pointers(await raw('null')), ['invalid_type '])
  assert.deepEqual(pointers(await raw('"40.00"')), ['invalid_type '])
  assert.deepEqual(pointers(await c.refund('pr-1', 'rf-bad', { ...good, amount: 5 })), ['invalid_type /amount'])
  assert.deepEqual(pointers(await c.refund('pr-1', 'rf-bad', { ...good, amount: { amount: '5.00' } })), ['invalid_type /amount/currency'])
  assert.deepEqual(pointers(await c.refund('pr-1', 'rf-bad', { ...good, amount: { amount: 5, currency: 'USD' } })), [
    'invalid_type /amount/amount',
  ])
  // Identifiers in the path: 1 to 128 characters of A-Z, a-z, 0-9, _ and -.
  for (const id of ['bad.id', 'x'.repeat(129)]) {
    assert.deepEqual(pointers(await c.refund('pr-1', id, good)), ['invalid_format /path/externalRefundId'])
    assert.deepEqual(pointers(await c.refund(id, 'rf-ok', good)), ['invalid_format /path/externalPaymentRequestId'])
    assert.deepEqual(pointers(await c.getRefund('pr-1', id)), ['invalid_format /path/externalRefundId'])
    assert.deepEqual(pointers(await c.listRefunds(id)), ['invalid_format /path/externalPaymentRequestId'])
  }
  assert.deepEqual(await state(), before)
})

test('a currency other than the Payment’s: 422 at /amount/currency; above what remains: 422 at /amount/amount with both figures', async () => {
  const before = await state()
  assertFieldProblem(await c.refund('pr-1', 'rf-eur', { amount: { amount: '5.00', currency: 'EUR' }, reason: 'other' }), '/amount/currency')
  // 60.00 less the pending 10.00: 50.00 remains.
  const over = await c.refund('pr-1', 'rf-over', { amount: usd('50.01'), reason: 'other' })
  assertFieldProblem(over, '/amount/amount')
  assert.equal(
    over.json.errors[0].detail,
    'a refund of 50.01 USD exceeds what remains of the Payment (50.00 USD of 60.00 USD, after refunds pending or succeeded and reversals)',
  )
  assert.deepEqual(await state(), before)
})

test('the same refund id with another body: 409 refund_conflict, the refund unchanged', async () => {
  const before = await state()
  for (const body of [
    { amount: usd('10.01'), reason: 'requested_by_customer' },
    { amount: usd('10.00'), reason: 'duplicate' },
  ]) {
    const res = await c.refund('pr-1', 'rf-1', body)
    assert.equal(res.status, 409, res.body)
    assert.equal(problemCode(res), 'refund_conflict')
  }
  assert.deepEqual(await state(), before)
})

test('no confirmed Payment: 409 payment_not_confirmed; an unknown request: 404 payment_request_not_found', async () => {
  const before = await state()
  for (const id of ['pr-open', 'pr-failed']) {
    const res = await c.refund(id, 'rf-1', good)
    assert.equal(res.status, 409, res.body)
    assert.equal(problemCode(res), 'payment_not_confirmed')
  }
  for (const res of [await c.refund('pr-none', 'rf-1', good), await c.getRefund('pr-none', 'rf-1'), await c.listRefunds('pr-none')]) {
    assert.equal(res.status, 404, res.body)
    assert.equal(problemCode(res), 'payment_request_not_found')
  }
  const missing = await c.getRefund('pr-1', 'rf-none')
  assert.equal(missing.status, 404)
  assert.equal(problemCode(missing), 'refund_not_found')
  assert.deepEqual(expectStatus(await c.listRefunds('pr-open'), 200).json, { data: [], nextCursor: null })
  assert.deepEqual(await state(), before)
})

test('a list cursor the list did not return: 422 at /query/cursor', async () => {
  for (const cursor of ['nonsense', Buffer.from(JSON.stringify({ s: '1' })).toString('base64url')]) {
    const res = await c.listRefunds('pr-1', `?cursor=${cursor}`)
    assert.equal(res.status, 422, res.body)
    assert.deepEqual(
      res.json.errors.map((e: { pointer: string }) => e.pointer),
      ['/query/cursor'],
    )
  }
  assertFieldProblem(await c.listRefunds('pr-1', '?limit=0'), '/query/limit', 'too_small')
})

test('bad reversals: each refused at its pointer or with its problem, nothing changed', async () => {
  const before = await state()
  const field = async (body: unknown, pointer: string) => {
    const res = await t.admin('POST', `/admin/v1/clients/${tenant.clientCode}/payment-requests/pr-1/simulate`, body)
    assert.equal(res.status, 422, `${JSON.stringify(body)}: ${res.body}`)
    assert.deepEqual(
      res.json.errors.map((e: { pointer: string }) => e.pointer),
      [pointer],
    )
    return res
  }
  await field({ outcome: 'reversed', amount: usd('0.00') }, '/amount/amount')
  await field({ outcome: 'confirmed', amount: usd('1.00') }, '/amount')
  await field({ outcome: 'reversed', amount: { amount: '1.00', currency: 'EUR' } }, '/amount/currency')
  await field({ outcome: 'reversed', amount: 5 }, '/amount')
  await field({ outcome: 'refunded' }, '/outcome')
  await field({ outcome: 'reversed', amount: usd('1.00'), extra: true }, '/extra')
  const over = await field({ outcome: 'reversed', amount: usd('50.01') }, '/amount/amount')
  assert.equal(
    over.json.errors[0].detail,
    'a reversal of 50.01 USD exceeds what remains of the Payment (50.00 USD of 60.00 USD, after refunds pending or succeeded and reversals)',
  )
  for (const id of ['pr-open', 'pr-failed']) {
    const res = await c.reverse(id)
    assert.equal(res.status, 409, res.body)
    assert.equal(problemCode(res), 'payment_not_confirmed')
  }
  const unknown = await c.reverse('pr-none')
  assert.equal(unknown.status, 404)
  assert.equal(problemCode(unknown), 'payment_request_not_found')
  assert.deepEqual(await state(), before)
})
