import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'

/** A clock the test moves by hand (expiry, and the freshness threshold of the source_stale case). */
let nowMs = Date.parse('2026-03-02T10:00:00.000Z')
const clock = { now: () => new Date(nowMs) }
const iso = (ms = nowMs) => new Date(ms).toISOString()
const DAY = 86_400_000

const CLIENT = 'pr-errors'
const base = `/v1/clients/${CLIENT}`
const usd = (amount: string) => ({ amount, currency: 'USD' })

let t: TestApp
let k: Tenant

const put = (id: string, body: unknown, client = CLIENT, key = k.apiKey) =>
  t.call('PUT', `/v1/clients/${client}/payment-requests/${id}`, { key, body })
const simulate = (id: string, body: unknown, client = CLIENT) =>
  t.admin('POST', `/admin/v1/clients/${client}/payment-requests/${id}/simulate`, body)
const receiptDelivery = (id: string) => t.call('GET', `${base}/payment-requests/${id}/receipt-delivery`, { key: k.apiKey })
const errors = (res: Response) => (res.json?.errors ?? []).map((e: { code: string; pointer: string }) => [e.code, e.pointer])
const requestRows = async (id: string) =>
  Number(
    (
      await t.store.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = $2',
        [CLIENT, id],
      )
    )[0]?.n,
  )

function assertProblem(res: Response, status: number, code: string) {
  assert.equal(res.status, status, res.body)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
  assert.equal(problemCode(res), code, res.body)
}

let seq = 0
/** PUTs the body under a fresh id and asserts a 422 with exactly these errors, and that nothing was stored. */
async function refused(body: Record<string, unknown>, expected: [string, string][]) {
  const id = `pr-bad-${++seq}`
  const res = await put(id, { externalReceivableId: 'r-main', amount: usd('10.00'), ...body })
  assertProblem(res, 422, 'validation_error')
  assert.deepEqual(errors(res), expected)
  assert.equal(await requestRows(id), 0)
  return res
}

/** The Receivable as payableReceivable wrote it, at a later source revision and with these changes. */
const receivableBody = (id: string, overrides: Record<string, unknown>) => ({
  financialType: 'loan_balance',
  sourceRevision: 2,
  recoverableAmount: usd('100.00'),
  creditUnion: { loanAccountReference: `loan/${id}`, loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [{ externalCustomerId: 'pay-cust', role: 'primary' }],
  sourceReference: `rcv/${id}`,
  ...overrides,
})

before(async () => {
  t = await startTestApp({ FRESHNESS_STALE_AFTER_TRANSACTION_SECONDS: String(90 * 86_400) }, { clock })
  k = await t.tenant(CLIENT)
  await payableReceivable(t, k, 'r-main')
})
after(() => t.close())

describe('404s', () => {
  test('GET, receipt-delivery and simulate of an unknown request (or client) answer payment_request_not_found', async () => {
    assertProblem(await t.call('GET', `${base}/payment-requests/pr-none`, { key: k.apiKey }), 404, 'payment_request_not_found')
    assertProblem(await receiptDelivery('pr-none'), 404, 'payment_request_not_found')
    assertProblem(await simulate('pr-none', { outcome: 'confirmed' }), 404, 'payment_request_not_found')
    assert.equal((await put('pr-404', { externalReceivableId: 'r-main', amount: usd('1.00') })).status, 201)
    assertProblem(await simulate('pr-404', { outcome: 'confirmed' }, 'no-such-client'), 404, 'payment_request_not_found')
  })
})

describe('409 payment_request_conflict', () => {
  test('the same id with another body is refused, whatever differs', async () => {
    const body = { externalReceivableId: 'r-main', amount: usd('10.00'), description: 'March' }
    assert.equal((await put('pr-conflict', body)).status, 201)
    for (const other of [
      { ...body, amount: usd('10.01') },
      { ...body, description: 'April' },
      { externalReceivableId: 'r-main', amount: usd('10.00') },
      { ...body, expiresAt: iso(nowMs + 7 * DAY) },
    ]) {
      assertProblem(await put('pr-conflict', other), 409, 'payment_request_conflict')
    }
    assert.equal((await put('pr-conflict', body)).status, 200)
  })
})

describe('422s', () => {
  test('unknown Receivable: unknown_reference at /externalReceivableId', async () => {
    const res = await refused({ externalReceivableId: 'r-nobody' }, [['unknown_reference', '/externalReceivableId']])
    assert.equal(res.json.errors[0].detail, 'Receivable r-nobody does not exist for this client')
  })

  test("another currency than the Receivable's, and more than its working amount", async () => {
    const eur = await refused({ amount: { amount: '10.00', currency: 'EUR' } }, [['custom', '/amount/currency']])
    assert.equal(eur.json.errors[0].detail, "must be USD, the Receivable's currency")
    // A Receivable of its own: the other tests' open requests on r-main reserve part of its working amount.
    await payableReceivable(t, k, 'r-whole')
    const above = await refused({ externalReceivableId: 'r-whole', amount: usd('100.01') }, [
      ['amount_exceeds_reservable', '/amount/amount'],
    ])
    assert.equal(
      above.json.errors[0].detail,
      "must not exceed the Receivable's working amount (100.00 USD) less what its other open requests already reserve (0.00 USD): at most 100.00 USD",
    )
    assert.equal(
      (await put('pr-whole', { externalReceivableId: 'r-whole', amount: usd('100.00') })).status,
      201,
      'exactly the working amount',
    )
  })

  test('amounts: zero, negative, three decimals, not a string', async () => {
    const zero = await refused({ amount: usd('0.00') }, [['custom', '/amount/amount']])
    assert.equal(zero.json.errors[0].detail, 'must be above zero')
    await refused({ amount: usd('0') }, [['custom', '/amount/amount']])
    await refused({ amount: usd('-1.00') }, [['invalid_format', '/amount/amount']])
    await refused({ amount: usd('1.005') }, [['invalid_format', '/amount/amount']])
    await refused({ amount: { amount: 10, currency: 'USD' } }, [['invalid_type', '/amount/amount']])
    await refused({ amount: { amount: '1.00', currency: 'JPY' } }, [['custom', '/amount/currency']])
  })

  test('expiresAt: too soon, too far, not a timestamp', async () => {
    const soon = await refused({ expiresAt: iso(nowMs + 299_999) }, [['custom', '/expiresAt']])
    assert.equal(soon.json.errors[0].detail, 'must be at least 5 minutes from now')
    await refused({ expiresAt: iso(nowMs - 1000) }, [['custom', '/expiresAt']])
    const far = await refused({ expiresAt: iso(nowMs + 30 * DAY + 1) }, [['custom', '/expiresAt']])
    assert.equal(far.json.errors[0].detail, 'must be at most 30 days from now')
    await refused({ expiresAt: 'next tuesday' }, [['invalid_format', '/expiresAt']])
    await refused({ expiresAt: '2026-03-05T10:00:00+01:00' }, [['invalid_format', '/expiresAt']])
    await refused({ expiresAt: '2026-02-30T10:00:00Z' }, [['invalid_format', '/expiresAt']])
  })

  test('description: empty, too long, sensitive; unknown keys; missing fields', async () => {
    await refused({ description: '' }, [['too_small', '/description']])
    await refused({ description: 'x'.repeat(201) }, [['too_big', '/description']])
    assert.equal(
      (await put('pr-desc-200', { externalReceivableId: 'r-main', amount: usd('1.00'), description: 'x'.repeat(200) })).status,
      201,
    )
    for (const sensitive of ['Pay ada@example.com', 'Card 4111 1111 1111 1111', 'Member 123456789']) {
      await refused({ description: sensitive }, [['sensitive_source_reference', '/description']])
    }
    await refused({ status: 'confirmed', hostedUrl: 'x' }, [
      ['unrecognized_keys', '/status'],
      ['unrecognized_keys', '/hostedUrl'],
    ])
    const id = `pr-bad-${++seq}`
    const missing = await put(id, {})
    assertProblem(missing, 422, 'validation_error')
    assert.deepEqual(errors(missing), [
      ['invalid_type', '/externalReceivableId'],
      ['invalid_type', '/amount'],
    ])
    await refused({ externalReceivableId: 'bad.id' }, [['invalid_format', '/externalReceivableId']])
    assertProblem(await put('bad.id', { externalReceivableId: 'r-main', amount: usd('1.00') }), 422, 'validation_error')
  })
})

describe('409 recovery_held for every hold category', () => {
  /** A new payable Receivable, then `hold` applied; the PUT is refused with exactly `holds`, as the Receivable shows them. */
  async function heldBy(id: string, hold: () => Promise<unknown>, holds: string[], tenant = k) {
    await payableReceivable(t, tenant, id)
    await hold()
    const res = await put(`pr-${id}`, { externalReceivableId: id, amount: usd('10.00') }, tenant.clientCode, tenant.apiKey)
    assertProblem(res, 409, 'recovery_held')
    assert.deepEqual(res.json.holds, holds)
    const receivable = await t.call('GET', `/v1/clients/${tenant.clientCode}/receivables/${id}`, { key: tenant.apiKey })
    assert.deepEqual(receivable.json.recovery, { held: true, holds })
    assert.equal(
      (
        await t.store.query('SELECT 1 FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = $2', [
          tenant.clientCode,
          `pr-${id}`,
        ])
      ).length,
      0,
    )
  }
  const putReceivable = (id: string, overrides: Record<string, unknown>) =>
    t.call('PUT', `${base}/receivables/${id}`, { key: k.apiKey, body: receivableBody(id, overrides) })

  test('recovery_not_authorized: the instruction is withdrawn', async () => {
    await heldBy(
      'r-withdrawn',
      () =>
        t.call('PUT', `${base}/recovery-instructions/ins-r-withdrawn`, {
          key: k.apiKey,
          body: {
            scope: { type: 'receivable', externalReceivableId: 'r-withdrawn' },
            state: 'withdrawn',
            revision: 2,
            effectiveAt: '2026-02-01T00:00:00Z',
          },
        }),
      ['recovery_not_authorized'],
    )
  })

  test('collection_not_enabled: the client turned collection off', async () => {
    const other = await t.tenant('pr-errors-coll')
    await heldBy(
      'r-coll',
      async () => {
        const res = await t.admin('PUT', '/admin/v1/clients/pr-errors-coll', { collectionEnabled: false })
        // The toggle is one client fact; the Receivable's revision with the hold follows in the background.
        await t.app.clientFanout.runUntilIdle()
        return res
      },
      ['collection_not_enabled'],
      other,
    )
  })

  test('source_restriction and dispute (raising either also suspends the instruction)', async () => {
    await heldBy('r-hardship', () => putReceivable('r-hardship', { restrictions: [{ type: 'hardship' }] }), [
      'recovery_not_authorized',
      'source_restriction',
    ])
    await heldBy('r-dispute', () => putReceivable('r-dispute', { restrictions: [{ type: 'dispute', reference: 'case/7' }] }), [
      'recovery_not_authorized',
      'dispute',
    ])
  })

  test('other_protection: paused, and closed', async () => {
    const command = (id: string, name: string, reason: string) =>
      t.call('POST', `${base}/receivables/${id}/${name}`, { key: k.apiKey, body: { effectiveAt: '2026-03-01T00:00:00Z', reason } })
    await heldBy('r-paused', () => command('r-paused', 'pause', 'hardship_review'), ['other_protection'])
    await heldBy('r-closed', () => command('r-closed', 'close', 'settled'), ['other_protection'])
  })

  test('reconciliation_hold: a held reconciliation of a confirmed Payment touches it; the sandbox refuses to settle too', async () => {
    await payableReceivable(t, k, 'r-rec')
    assert.equal((await put('pr-rec-paid', { externalReceivableId: 'r-rec', amount: usd('10.00') })).status, 201)
    assert.equal((await put('pr-rec-open', { externalReceivableId: 'r-rec', amount: usd('10.00') })).status, 201)
    assert.equal((await simulate('pr-rec-paid', { outcome: 'confirmed' })).status, 201)
    // The rows a held reconciliation writes (the reconciliation family owns how; the hold is what matters here).
    await t.store.query(
      `INSERT INTO payment_reconciliations (client_code, external_reconciliation_id, external_payment_request_id, revision, status, body, accepted_at, updated_at)
       VALUES ($1, 'rec-held', 'pr-rec-paid', 1, 'held', '{}', $2, $2)`,
      [CLIENT, iso()],
    )
    await t.store.query(
      `INSERT INTO reconciliation_holds (client_code, external_reconciliation_id, external_receivable_id, held_at) VALUES ($1, 'rec-held', 'r-rec', $2)`,
      [CLIENT, iso()],
    )
    const res = await put('pr-rec-new', { externalReceivableId: 'r-rec', amount: usd('10.00') })
    assertProblem(res, 409, 'recovery_held')
    assert.deepEqual(res.json.holds, ['reconciliation_hold'])
    const sandbox = await simulate('pr-rec-open', { outcome: 'confirmed' })
    assertProblem(sandbox, 409, 'recovery_held')
    assert.deepEqual(sandbox.json.holds, ['reconciliation_hold'])
    // Held is no reason to refuse what is already recorded: the same outcome answers 200 unchanged.
    assert.equal((await simulate('pr-rec-paid', { outcome: 'confirmed' })).status, 200)
  })

  test('a hold raised after the request was created stops the sandbox from settling it, failures included', async () => {
    await payableReceivable(t, k, 'r-late-hold')
    assert.equal((await put('pr-late-hold', { externalReceivableId: 'r-late-hold', amount: usd('10.00') })).status, 201)
    await t.call('POST', `${base}/receivables/r-late-hold/pause`, {
      key: k.apiKey,
      body: { effectiveAt: '2026-03-01T00:00:00Z', reason: 'source_request' },
    })
    for (const outcome of ['confirmed', 'failed']) {
      const res = await simulate('pr-late-hold', { outcome })
      assertProblem(res, 409, 'recovery_held')
      assert.deepEqual(res.json.holds, ['other_protection'])
    }
    const read = await t.call('GET', `${base}/payment-requests/pr-late-hold`, { key: k.apiKey })
    assert.deepEqual([read.json.status, read.json.payment], ['open', null])
  })
})

describe('simulate and receipt delivery refusals', () => {
  test('simulate: a body other than {outcome: confirmed|failed} or {outcome: reversed, amount?} is a 422', async () => {
    await put('pr-sim-body', { externalReceivableId: 'r-main', amount: usd('1.00') })
    for (const [body, expected] of [
      [{}, [['invalid_value', '/outcome']]],
      [{ outcome: 'refunded' }, [['invalid_value', '/outcome']]],
      [{ outcome: 'confirmed', other: '1.00' }, [['unrecognized_keys', '/other']]],
      [{ outcome: 'confirmed', amount: '1.00' }, [['invalid_type', '/amount']]],
      [{ outcome: 'confirmed', amount: usd('1.00') }, [['custom', '/amount']]],
    ] as const) {
      const res = await simulate('pr-sim-body', body)
      assertProblem(res, 422, 'validation_error')
      assert.deepEqual(errors(res), expected)
    }
  })

  test('the opposite outcome after a decision is 409 payment_request_state_conflict, both ways', async () => {
    await put('pr-opp-1', { externalReceivableId: 'r-main', amount: usd('1.00') })
    await put('pr-opp-2', { externalReceivableId: 'r-main', amount: usd('1.00') })
    assert.equal((await simulate('pr-opp-1', { outcome: 'confirmed' })).status, 201)
    assert.equal((await simulate('pr-opp-2', { outcome: 'failed' })).status, 201)
    const opposite1 = await simulate('pr-opp-1', { outcome: 'failed' })
    assertProblem(opposite1, 409, 'payment_request_state_conflict')
    // The request's status is an extension of its own: a problem's `status` is the HTTP status.
    assert.deepEqual([opposite1.json.status, opposite1.json.paymentRequestStatus], [409, 'confirmed'])
    const opposite2 = await simulate('pr-opp-2', { outcome: 'confirmed' })
    assertProblem(opposite2, 409, 'payment_request_state_conflict')
    assert.deepEqual([opposite2.json.status, opposite2.json.paymentRequestStatus], [409, 'failed'])
  })

  test('receipt delivery: 409 payment_not_confirmed while open, after a failure, and once expired', async () => {
    await put('pr-rd-open', { externalReceivableId: 'r-main', amount: usd('1.00') })
    assertProblem(await receiptDelivery('pr-rd-open'), 409, 'payment_not_confirmed')
    await put('pr-rd-failed', { externalReceivableId: 'r-main', amount: usd('1.00') })
    await simulate('pr-rd-failed', { outcome: 'failed' })
    assertProblem(await receiptDelivery('pr-rd-failed'), 409, 'payment_not_confirmed')
    await put('pr-rd-expired', { externalReceivableId: 'r-main', amount: usd('1.00'), expiresAt: iso(nowMs + 300_000) })
    nowMs += 300_000
    assertProblem(await receiptDelivery('pr-rd-expired'), 409, 'payment_not_confirmed')
  })

  test('simulate on an expired request is 409 payment_request_state_conflict, whichever outcome, and records the expiry', async () => {
    await put('pr-expired', { externalReceivableId: 'r-main', amount: usd('1.00'), expiresAt: iso(nowMs + 300_000) })
    nowMs += 300_000
    for (const outcome of ['confirmed', 'failed']) {
      const res = await simulate('pr-expired', { outcome })
      assertProblem(res, 409, 'payment_request_state_conflict')
    }
    const read = await t.call('GET', `${base}/payment-requests/pr-expired`, { key: k.apiKey })
    assert.deepEqual([read.json.status, read.json.revision], ['expired', 2])
  })
})

describe('source_stale (runs last: it moves the clock past the freshness threshold)', () => {
  test('a Source gone quiet holds its Receivables: recovery_held with source_stale', async () => {
    const other = await t.tenant('pr-errors-stale')
    await payableReceivable(t, other, 'r-stale')
    await put(
      'pr-stale-open',
      { externalReceivableId: 'r-stale', amount: usd('5.00'), expiresAt: iso(nowMs + 30 * DAY) },
      other.clientCode,
      other.apiKey,
    )
    nowMs += 91 * DAY
    assert.ok((await t.app.services.freshness.sweep(t.store)) >= 1)
    await t.app.clientFanout.runUntilIdle()
    const res = await put('pr-stale', { externalReceivableId: 'r-stale', amount: usd('5.00') }, other.clientCode, other.apiKey)
    assertProblem(res, 409, 'recovery_held')
    assert.deepEqual(res.json.holds, ['source_stale'])
  })
})

describe('production', () => {
  test('a client without a payment provider gets no payment request (409, nothing saved); the simulate route does not exist', async () => {
    const prod = await startTestApp({ SERVICE_ENVIRONMENT: 'production' })
    try {
      const tenant = await prod.tenant('pr-prod')
      assert.match(tenant.apiKey, /^irk_production_/)
      await payableReceivable(prod, tenant, 'r-prod')
      const refused = await prod.call('PUT', '/v1/clients/pr-prod/payment-requests/pr-prod', {
        key: tenant.apiKey,
        body: { externalReceivableId: 'r-prod', amount: usd('10.00') },
      })
      assertProblem(refused, 409, 'payment_provider_not_configured')
      const read = await prod.call('GET', '/v1/clients/pr-prod/payment-requests/pr-prod', { key: tenant.apiKey })
      assertProblem(read, 404, 'payment_request_not_found')
      const res = await prod.admin('POST', '/admin/v1/clients/pr-prod/payment-requests/pr-prod/simulate', { outcome: 'confirmed' })
      assertProblem(res, 404, 'route_not_found')
      assert.equal(
        prod.app.routes.some((r) => r.path.endsWith('/simulate')),
        false,
      )
      // With a provider configured (a live key), the same request is made.
      const provider = { provider: 'stripe', secretKey: 'sk_live_prprod0123456789abcdefgh', webhookSecret: 'whsec_prprod0123456789' }
      assert.equal((await prod.admin('PUT', '/admin/v1/clients/pr-prod/payment-provider', provider)).status, 201)
      const created = await prod.call('PUT', '/v1/clients/pr-prod/payment-requests/pr-prod', {
        key: tenant.apiKey,
        body: { externalReceivableId: 'r-prod', amount: usd('10.00') },
      })
      assert.equal(created.status, 201, created.body)
    } finally {
      await prod.close()
    }
  })
})
