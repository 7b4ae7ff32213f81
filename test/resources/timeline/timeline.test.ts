import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { encodeCursor } from '../../../src/domain/cursor.ts'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'
import { engineName } from '../../helpers/store.ts'

/**
 * Issue 35 item 3: a Receivable's timeline, oldest first, read from what the service records (revisions from the
 * feed, financial events, observations, holds, instructions, payment requests, payments, refunds, reconciliations),
 * each entry with its actor; cursor paging; bad inputs refused precisely.
 */
const C = 'tl-c'
const usd = (amount: string) => ({ amount, currency: 'USD' })
let t: TestApp
let k: Tenant
let named: { apiKey: string; apiKeyId: string }

async function must(res: Promise<Response>, status: number, what: string) {
  const r = await res
  assert.equal(r.status, status, `${what}: ${r.body}`)
  return r
}
const get = (path: string, key = k.apiKey) => t.call('GET', `/v1/clients/${C}${path}`, { key })

before(async () => {
  t = await startTestApp()
  k = await t.tenant(C)
  named = (await must(t.admin('POST', `/admin/v1/integrations/${k.integrationId}/api-keys`, { name: 'Core banking sync' }), 201, 'key'))
    .json
  await payableReceivable(t, k, 'tl-r')
  const put = (path: string, body: unknown, status = 201) =>
    must(t.call('PUT', `/v1/clients/${C}${path}`, { key: named.apiKey, body }), status, path)
  await put('/adjustments/tl-adj', {
    type: 'adjustment',
    direction: 'increase',
    amount: usd('5.00'),
    externalReceivableId: 'tl-r',
    sourceRevision: 2,
    effectiveAt: '2026-03-01T00:00:00Z',
    reason: 'source_adjustment',
    sourceReference: 'tl/e/2',
  })
  await put('/payment-observations/tl-po', {
    type: 'payment',
    amount: usd('3.00'),
    allocations: [{ amount: usd('3.00'), externalReceivableId: 'tl-r' }],
    effectiveAt: '2026-03-02T00:00:00Z',
    externalCustomerId: 'pay-cust',
    method: 'bank_transfer',
    sourceReference: 'tl/p/1',
  })
  await put('/payment-requests/tl-pr', { externalReceivableId: 'tl-r', amount: usd('10.00') })
  await must(t.admin('POST', `/admin/v1/clients/${C}/payment-requests/tl-pr/simulate`, { outcome: 'confirmed' }), 201, 'simulate')
  await put('/payment-reconciliations/tl-rec', {
    externalPaymentRequestId: 'tl-pr',
    lines: [{ externalReceiptLineId: 'tl-rl', externalReceivableId: 'tl-r', amount: usd('10.00') }],
  })
  await put('/payment-requests/tl-pr/refunds/tl-refund', { amount: usd('1.00'), reason: 'requested_by_customer' })
  // Another Receivable of the client, whose entries must never show on tl-r's timeline.
  await payableReceivable(t, k, 'tl-other')
  await put('/adjustments/tl-adj-other', {
    type: 'adjustment',
    direction: 'increase',
    amount: usd('7.00'),
    externalReceivableId: 'tl-other',
    sourceRevision: 2,
    effectiveAt: '2026-03-01T00:00:00Z',
    reason: 'source_adjustment',
    sourceReference: 'tl/e/o',
  })
})
after(() => t.close())

async function all(receivable: string, limit: number) {
  const out: { at: string; kind: string; actor: { type: string; name?: string }; summary: string; ref?: unknown }[] = []
  let cursor: string | null = null
  do {
    const res = await must(get(`/receivables/${receivable}/timeline?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`), 200, 'page')
    assert.ok(res.json.data.length <= limit)
    out.push(...res.json.data)
    cursor = res.json.nextCursor
  } while (cursor)
  return out
}

describe(`a Receivable's timeline (${engineName})`, () => {
  test('everything that happened, oldest first, with its actor', async () => {
    const entries = await all('tl-r', 200)
    const key = { type: 'integration', name: 'Unnamed key' }
    const sync = { type: 'integration', name: 'Core banking sync' }
    assert.deepEqual(
      entries.map((e) => [e.kind, e.actor, e.summary]),
      [
        ['revision', key, 'Revision 1: created'],
        ['revision', key, 'Revision 2: updated'],
        ['recovery_instruction', { type: 'integration' }, 'Recovery instruction ins-tl-r revision 1: authorized (instruction_put)'],
        ['adjustment', { type: 'integration' }, 'adjustment tl-adj: 5.00 USD (source_adjustment)'],
        ['revision', sync, 'Revision 3: updated'],
        ['payment_observation', { type: 'integration' }, 'Payment observation tl-po (payment): 3.00 USD allocated'],
        ['payment_request', { type: 'integration' }, 'Payment request tl-pr for 10.00 USD'],
        ['payment', { type: 'provider', name: 'sandbox' }, 'Payment of 10.00 USD confirmed'],
        // The sandbox's simulated payment is an operator's call: the Receivable's revision it caused says so.
        ['revision', { type: 'operator' }, 'Revision 4: updated'],
        ['reconciliation', { type: 'integration' }, 'Reconciliation tl-rec of payment tl-pr: matched'],
        ['revision', sync, 'Revision 5: updated'],
        ['refund', { type: 'integration' }, 'Refund tl-refund of 1.00 USD requested (requested_by_customer)'],
      ],
    )
    const times = entries.map((e) => e.at)
    assert.deepEqual(times, [...times].sort(), 'oldest first')
    // The first revision: created by the tenant's first key (its default name), through the PUT.
    const first = entries.find((e) => e.kind === 'revision')
    assert.deepEqual(first, {
      at: first?.at,
      kind: 'revision',
      actor: { type: 'integration', name: 'Unnamed key' },
      summary: 'Revision 1: created',
      ref: { type: 'receivable', id: 'tl-r', revision: 1 },
    })
    const adjustment = entries.find((e) => e.kind === 'adjustment')
    assert.deepEqual(adjustment && { actor: adjustment.actor, summary: adjustment.summary, ref: adjustment.ref }, {
      actor: { type: 'integration' },
      summary: 'adjustment tl-adj: 5.00 USD (source_adjustment)',
      ref: { type: 'adjustment', id: 'tl-adj' },
    })
    // The adjustment's revision was made with the named key.
    const revisions = entries.filter((e) => e.kind === 'revision')
    assert.ok(
      revisions.some((e) => e.actor.name === 'Core banking sync'),
      JSON.stringify(revisions),
    )
    const payment = entries.find((e) => e.kind === 'payment')
    assert.deepEqual(payment && { actor: payment.actor, summary: payment.summary }, {
      actor: { type: 'provider', name: 'sandbox' },
      summary: 'Payment of 10.00 USD confirmed',
    })
    const refund = entries.find((e) => e.kind === 'refund')
    assert.deepEqual(refund && { actor: refund.actor, summary: refund.summary, ref: refund.ref }, {
      actor: { type: 'integration' },
      summary: 'Refund tl-refund of 1.00 USD requested (requested_by_customer)',
      ref: { type: 'refund', id: 'tl-pr/tl-refund' },
    })
    assert.ok(!entries.some((e) => JSON.stringify(e).includes('tl-adj-other')), 'another Receivable never shows')
  })

  test('paging a page at a time gives exactly the whole timeline, for every page size', async () => {
    const whole = await all('tl-r', 200)
    assert.ok(whole.length >= 10, String(whole.length))
    for (const limit of [1, 2, 3, 7]) assert.deepEqual(await all('tl-r', limit), whole, `limit ${limit}`)
  })

  test('a revision recorded before the service kept its actor says "unknown"', async () => {
    await t.store.query(
      `UPDATE change_events SET actor_type = NULL, actor_ref = NULL
        WHERE client_code = $1 AND resource_type = 'receivable' AND resource_id = 'tl-other' AND revision = 1`,
      [C],
    )
    const [first] = (await must(get('/receivables/tl-other/timeline?limit=1'), 200, 'page')).json.data
    assert.deepEqual(first.actor, { type: 'unknown' })
    assert.equal(first.summary, 'Revision 1: created')
  })

  test('a hold placed by a complete-book declaration, and released by a re-write, with its reason', async () => {
    const customer = { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: 'tl/c/b' }
    await must(
      t.call('PUT', `/v1/clients/${C}/batches/tl-b`, {
        key: k.apiKey,
        body: { records: [{ recordId: 'c', kind: 'customer', externalId: 'tl-cust-b', body: customer }] },
      }),
      202,
      'batch',
    )
    await t.app.batchRunner.drain()
    const declaration = { asOf: '2026-03-03T00:00:00Z', sourcePosition: 1, batches: ['tl-b'] }
    await must(t.call('PUT', `/v1/clients/${C}/book-completions/tl-d`, { key: k.apiKey, body: declaration }), 201, 'declare')
    const body = {
      financialType: 'loan_balance',
      sourceRevision: 3,
      recoverableAmount: usd('107.00'),
      creditUnion: { loanAccountReference: 'loan/tl-other', loanType: 'auto' },
      dueDate: '2026-01-01',
      responsibleCustomers: [{ externalCustomerId: 'pay-cust', role: 'primary' }],
      sourceReference: 'rcv/tl-other',
    }
    await must(t.call('PUT', `/v1/clients/${C}/receivables/tl-other`, { key: named.apiKey, body }), 200, 're-write')
    const holds = (await all('tl-other', 50)).filter((e) => e.kind.startsWith('hold_'))
    assert.deepEqual(
      holds.map((e) => [e.kind, e.actor, e.summary, e.ref]),
      [
        [
          'hold_placed',
          { type: 'integration' },
          'Hold placed (book_omission): omitted from complete-book declaration tl-d',
          { type: 'book_completion', id: 'tl-d' },
        ],
        [
          'hold_released',
          { type: 'integration' },
          'Hold released (book_omission): omitted from complete-book declaration tl-d',
          { type: 'book_completion', id: 'tl-d' },
        ],
      ],
    )
  })

  test('an unknown Receivable is 404; a bad cursor or limit is 422 at its pointer', async () => {
    const missing = await get('/receivables/tl-missing/timeline')
    assert.equal(missing.status, 404, missing.body)
    assert.equal(problemCode(missing), 'receivable_not_found')
    const refused = async (query: string, pointer: string) => {
      const res = await get(`/receivables/tl-r/timeline?${query}`)
      assert.equal(res.status, 422, `${query}: ${res.body}`)
      assert.equal(problemCode(res), 'validation_error')
      assert.deepEqual(
        res.json.errors.map((e: { pointer: string }) => e.pointer),
        [pointer],
        query,
      )
    }
    for (const limit of ['0', '201', '-1', 'x', '1.5']) await refused(`limit=${limit}`, '/query/limit')
    const crafted = [
      'not-base64-json',
      encodeCursor('receivable-timeline', { after: 'tl-r' }),
      encodeCursor('receivable-timeline', { after: ['2026-01-01T00:00:00.000000Z', 'revision:1'] }),
      encodeCursor('receivable-timeline', { timeline: ['2026-01-01T00:00:00.000Z', 'revision:1'] }),
      encodeCursor('receivable-timeline', { timeline: ['0000-01-01T00:00:00.000000Z', 'revision:1'] }),
      encodeCursor('receivable-timeline', { timeline: ['2026-01-01T00:00:00.000000Z', 'revision:a\u0000b'] }),
      encodeCursor('receivable-timeline', { timeline: ['2026-01-01T00:00:00.000000Z', 'revision:a\ud800b'] }),
      encodeCursor('receivable-timeline', { timeline: ['2026-01-01T00:00:00.000000Z', 'revision:1', 'x'] }),
      encodeCursor('receivable-timeline', { timeline: ['2026-01-01T00:00:00.000000Z', 'revision:1'], x: 1 }),
    ]
    for (const cursor of crafted) await refused(`cursor=${cursor}`, '/query/cursor')
    // A cursor past the end: an empty last page.
    const end = await must(
      get(`/receivables/tl-r/timeline?cursor=${encodeCursor('receivable-timeline', { timeline: ['9999-12-31T23:59:59.999999Z', 'z:z'] })}`),
      200,
      'end',
    )
    assert.deepEqual(end.json, { data: [], nextCursor: null })
  })

  test("another client's key cannot read it; a grant without receivables:read cannot either", async () => {
    const other = await t.tenant('tl-other-client')
    const res = await t.call('GET', `/v1/clients/${C}/receivables/tl-r/timeline`, { key: other.apiKey })
    assert.equal(res.status, 403, res.body)
    const own = await t.call('GET', `/v1/clients/tl-other-client/receivables/tl-r/timeline`, { key: other.apiKey })
    assert.equal(own.status, 404, own.body)
    const narrow = await t.tenant(C, { integrationId: 'int-tl-narrow', scopes: ['customers:read'] })
    const denied = await t.call('GET', `/v1/clients/${C}/receivables/tl-r/timeline`, { key: narrow.apiKey })
    assert.equal(denied.status, 403, denied.body)
    assert.equal(problemCode(denied), 'client_scope_denied')
  })
})
