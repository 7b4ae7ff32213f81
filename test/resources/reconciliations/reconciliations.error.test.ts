import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'
import { calls, confirmedPayment, expectStatus, line, usd } from '../../helpers/reconciliations.ts'

/** Every 4xx of the reconciliation and resolution routes, with its exact code, pointers and field codes. */
let t: TestApp
let tenant: Tenant
let c: ReturnType<typeof calls>
before(async () => {
  t = await startTestApp()
  tenant = await t.tenant('recerr')
  c = calls(t, tenant)
  await confirmedPayment(t, tenant, 'R', 'pr-1')
  await payableReceivable(t, tenant, 'O', { amount: '50.00' })
  // An open request (no Payment yet) and a failed one.
  expectStatus(await c.request('pr-open', { externalReceivableId: 'O', amount: usd('5.00') }), 201)
  expectStatus(await c.request('pr-failed', { externalReceivableId: 'O', amount: usd('5.00') }), 201)
  expectStatus(await c.simulate('pr-failed', 'failed'), 201)
  expectStatus(await c.put('rec-matched', { externalPaymentRequestId: 'pr-1', lines: [line('rl-used', 'R', '10.00')] }), 201)
})
after(() => t.close())

function problem(res: Response, status: number, code: string) {
  assert.equal(res.status, status, res.body)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
  assert.equal(problemCode(res), code)
  return res.json
}

/** A 422 validation_error with exactly these `code pointer` field errors. */
function fields(res: Response, expected: string[]) {
  const body = problem(res, 422, 'validation_error')
  assert.deepEqual(
    body.errors.map((e: { code: string; pointer: string }) => `${e.code} ${e.pointer}`),
    expected,
  )
  return body
}

const valid = (lines: unknown[] = [line('rl-new', 'R', '1.00')]) => ({ externalPaymentRequestId: 'pr-1', lines })

describe('PUT payment-reconciliations: the body', () => {
  const cases: [string, unknown, string[]][] = [
    ['no lines', { externalPaymentRequestId: 'pr-1', lines: [] }, ['too_small /lines']],
    [
      '101 lines',
      { externalPaymentRequestId: 'pr-1', lines: Array.from({ length: 101 }, (_, i) => line(`rl-${i}`, 'R', '0.01')) },
      ['too_big /lines'],
    ],
    ['lines missing', { externalPaymentRequestId: 'pr-1' }, ['invalid_type /lines']],
    ['request missing', { lines: [line('a', 'R', '1.00')] }, ['invalid_type /externalPaymentRequestId']],
    ['unknown key at the top', { ...valid(), note: 'x' }, ['unrecognized_keys /note']],
    ['unknown key in a line', valid([{ ...line('a', 'R', '1.00'), memo: 'x' }]), ['unrecognized_keys /lines/0/memo']],
    ['line id not an ExternalId', valid([line('bad.id', 'R', '1.00')]), ['invalid_format /lines/0/externalReceiptLineId']],
    ['line id looks sensitive', valid([line('123456789012', 'R', '1.00')]), ['sensitive_external_id /lines/0/externalReceiptLineId']],
    ['Receivable id not an ExternalId', valid([line('a', 'R R', '1.00')]), ['invalid_format /lines/0/externalReceivableId']],
    ['request id not an ExternalId', { ...valid(), externalPaymentRequestId: '' }, ['invalid_format /externalPaymentRequestId']],
    ['amount with three decimals', valid([line('a', 'R', '1.001')]), ['invalid_format /lines/0/amount/amount']],
    ['negative amount', valid([line('a', 'R', '-1.00')]), ['invalid_format /lines/0/amount/amount']],
    ['zero amount', valid([line('a', 'R', '1.00'), line('b', 'R', '0.00')]), ['custom /lines/1/amount/amount']],
    [
      'unknown currency',
      valid([{ ...line('a', 'R', '1.00'), amount: { amount: '1.00', currency: 'ABC' } }]),
      ['custom /lines/0/amount/currency'],
    ],
    [
      'a line id twice in the body',
      valid([line('a', 'R', '1.00'), line('b', 'R', '1.00'), line('a', 'R', '2.00')]),
      ['custom /lines/2/externalReceiptLineId'],
    ],
  ]
  for (const [what, body, expected] of cases) {
    test(what, async () => {
      fields(await c.put('rec-x', body), expected)
      assert.equal((await c.get('rec-x')).status, 404, 'nothing was saved')
    })
  }

  test('a body that is not JSON, and the wrong media type', async () => {
    const base = `/v1/clients/${tenant.clientCode}/payment-reconciliations/rec-x`
    problem(await t.call('PUT', base, { key: tenant.apiKey, rawBody: '{"lines": [' }), 400, 'malformed_json')
    problem(await t.call('PUT', base, { key: tenant.apiKey, body: valid(), contentType: 'text/plain' }), 415, 'unsupported_media_type')
  })

  test('the reconciliation id is validated', async () => {
    const res = await t.call('PUT', `/v1/clients/${tenant.clientCode}/payment-reconciliations/bad.id`, {
      key: tenant.apiKey,
      body: valid(),
    })
    fields(res, ['invalid_format /path/externalReconciliationId'])
  })
})

describe('PUT payment-reconciliations: references and the Payment', () => {
  test('an unknown Payment request: unknown_reference at /externalPaymentRequestId', async () => {
    const body = fields(await c.put('rec-x', { ...valid(), externalPaymentRequestId: 'pr-none' }), [
      'unknown_reference /externalPaymentRequestId',
    ])
    assert.equal(body.errors[0].detail, 'Payment request pr-none does not exist for this client')
  })

  test('every unknown reference is reported at once, at its pointer', async () => {
    fields(
      await c.put('rec-x', {
        externalPaymentRequestId: 'pr-none',
        lines: [line('a', 'R', '1.00'), line('b', 'nope-1', '1.00'), line('c', 'nope-2', '1.00')],
      }),
      [
        'unknown_reference /externalPaymentRequestId',
        'unknown_reference /lines/1/externalReceivableId',
        'unknown_reference /lines/2/externalReceivableId',
      ],
    )
    fields(await c.put('rec-x', valid([line('a', 'R', '1.00'), line('b', 'nope', '1.00')])), [
      'unknown_reference /lines/1/externalReceivableId',
    ])
  })

  test('a Payment request with no Payment yet: 409 payment_not_confirmed', async () => {
    const body = problem(
      await c.put('rec-x', { externalPaymentRequestId: 'pr-open', lines: [line('a', 'O', '5.00')] }),
      409,
      'payment_not_confirmed',
    )
    assert.equal(body.detail, 'Payment request pr-open has no provider-confirmed Payment yet; there is nothing to reconcile.')
  })

  test('a Payment request whose Payment failed: 409 payment_not_confirmed', async () => {
    const body = problem(
      await c.put('rec-x', { externalPaymentRequestId: 'pr-failed', lines: [line('a', 'O', '5.00')] }),
      409,
      'payment_not_confirmed',
    )
    assert.equal(body.detail, 'The Payment of Payment request pr-failed failed; there is nothing to reconcile.')
  })

  test("a line in another currency than the Payment's: 422 custom at each such line", async () => {
    const eur = { ...line('e1', 'R', '1.00'), amount: { amount: '1.00', currency: 'EUR' } }
    const body = fields(await c.put('rec-x', valid([line('a', 'R', '1.00'), eur, { ...eur, externalReceiptLineId: 'e2' }])), [
      'custom /lines/1/amount/currency',
      'custom /lines/2/amount/currency',
    ])
    assert.equal(body.errors[0].detail, "must be USD, the Payment's currency")
  })

  test('a receipt line id another reconciliation of the Payment used: 422 custom', async () => {
    const body = fields(await c.put('rec-x', valid([line('rl-fresh', 'R', '1.00'), line('rl-used', 'R', '1.00')])), [
      'custom /lines/1/externalReceiptLineId',
    ])
    assert.equal(
      body.errors[0].detail,
      'receipt line rl-used was already reconciled for this Payment; a receipt line acknowledges money once',
    )
    assert.equal((await c.get('rec-x')).status, 404)
  })

  test('the same id with another body: 409 payment_reconciliation_conflict, and nothing changes', async () => {
    const before = await c.get('rec-matched')
    problem(
      await c.put('rec-matched', { externalPaymentRequestId: 'pr-1', lines: [line('rl-used', 'R', '10.01')] }),
      409,
      'payment_reconciliation_conflict',
    )
    problem(
      await c.put('rec-matched', {
        externalPaymentRequestId: 'pr-1',
        lines: [line('rl-used', 'R', '10.00'), line('rl-more', 'R', '1.00')],
      }),
      409,
      'payment_reconciliation_conflict',
    )
    assert.deepEqual((await c.get('rec-matched')).json, before.json)
  })
})

describe('GET payment-reconciliations', () => {
  test('an unknown reconciliation: 404 payment_reconciliation_not_found', async () => {
    const body = problem(await c.get('rec-none'), 404, 'payment_reconciliation_not_found')
    assert.equal(body.detail, 'No Payment reconciliation rec-none for this client.')
  })
})

describe('PUT payment-reconciliations/{id}/resolution', () => {
  const resolution = { basis: 'authorized_correction', reference: 'ledger/corrections/1' }

  const cases: [string, unknown, string[]][] = [
    ['unknown basis', { ...resolution, basis: 'other' }, ['invalid_value /basis']],
    ['basis missing', { reference: 'x' }, ['invalid_value /basis']],
    ['reference missing', { basis: 'authorized_correction' }, ['invalid_type /reference']],
    ['empty reference', { ...resolution, reference: '' }, ['too_small /reference']],
    ['reference of 201 characters', { ...resolution, reference: 'r'.repeat(201) }, ['too_big /reference']],
    [
      'reference that looks like an e-mail address',
      { ...resolution, reference: 'ann@example.com' },
      ['sensitive_source_reference /reference'],
    ],
    ['unknown key', { ...resolution, note: 'x' }, ['unrecognized_keys /note']],
  ]
  for (const [what, body, expected] of cases) {
    test(what, async () => {
      fields(await c.resolve('rec-matched', body), expected)
    })
  }

  test('a reference of exactly 200 characters is accepted (on a held reconciliation)', async () => {
    expectStatus(await c.put('rec-long', { externalPaymentRequestId: 'pr-1', lines: [line('rl-long', 'R', '99.00')] }), 201)
    const res = expectStatus(await c.resolve('rec-long', { ...resolution, reference: 'r'.repeat(200) }), 200)
    assert.equal(res.json.resolution.reference, 'r'.repeat(200))
  })

  test('an unknown reconciliation: 404 payment_reconciliation_not_found', async () => {
    problem(await c.resolve('rec-none', resolution), 404, 'payment_reconciliation_not_found')
  })

  test('a matched reconciliation: 409 reconciliation_not_held, whatever the basis', async () => {
    const before = await c.get('rec-matched')
    for (const basis of ['authorized_correction', 'matching_evidence']) {
      const body = problem(await c.resolve('rec-matched', { basis, reference: 'x/1' }), 409, 'reconciliation_not_held')
      assert.equal(body.detail, 'Payment reconciliation rec-matched is matched: it holds no difference to resolve.')
    }
    assert.deepEqual((await c.get('rec-matched')).json, before.json)
  })

  test('a resolved reconciliation with another resolution: 409 reconciliation_not_held; the identical one 200', async () => {
    expectStatus(await c.put('rec-held', { externalPaymentRequestId: 'pr-1', lines: [line('rl-held', 'R', '99.00')] }), 201)
    const resolved = expectStatus(await c.resolve('rec-held', resolution), 200)
    for (const other of [
      { ...resolution, reference: 'ledger/corrections/2' },
      { basis: 'matching_evidence', reference: resolution.reference },
    ]) {
      const body = problem(await c.resolve('rec-held', other), 409, 'reconciliation_not_held')
      assert.equal(body.detail, 'Payment reconciliation rec-held was already resolved with another resolution; it holds no difference now.')
    }
    assert.deepEqual(expectStatus(await c.resolve('rec-held', resolution), 200).json, resolved.json)
  })

  test('matching_evidence while the allocation is not fully matched: 409 matching_evidence_incomplete, nothing changes', async () => {
    expectStatus(await c.put('rec-short', { externalPaymentRequestId: 'pr-1', lines: [line('rl-short', 'R', '98.00')] }), 201)
    const before = await c.get('rec-short')
    const holdsBefore = (await c.receivable('R')).json
    const body = problem(
      await c.resolve('rec-short', { basis: 'matching_evidence', reference: 'x/1' }),
      409,
      'matching_evidence_incomplete',
    )
    // rl-used matched 10.00 of the 60.00 allocation.
    assert.equal(
      body.detail,
      'Matched receipt lines do not yet account for the full allocation: Receivable R has 60.00 USD allocated, 10.00 USD matched, 50.00 USD unmatched.',
    )
    assert.deepEqual(body.unmatched, [
      { externalReceivableId: 'R', allocatedAmount: usd('60.00'), matchedAmount: usd('10.00'), unmatchedAmount: usd('50.00') },
    ])
    assert.deepEqual((await c.get('rec-short')).json, before.json)
    assert.deepEqual((await c.receivable('R')).json, holdsBefore)
  })

  test('the reconciliation id is validated', async () => {
    fields(
      await t.call('PUT', `/v1/clients/${tenant.clientCode}/payment-reconciliations/bad.id/resolution`, {
        key: tenant.apiKey,
        body: resolution,
      }),
      ['invalid_format /path/externalReconciliationId'],
    )
  })
})
