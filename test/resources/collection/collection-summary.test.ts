import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { startTestApp, type TestApp } from '../../helpers/app.ts'
import { onPostgres } from '../../helpers/store.ts'

/** The collection summary (`GET /collection-summary`): counts and amounts by status and currency, held counts by category, computed in the store. */
const usd = (amount: string) => ({ amount, currency: 'USD' })
const customer = (restrictions?: unknown[]) => ({
  type: 'person',
  name: { firstName: 'Ada', lastName: 'L' },
  sourceReference: 'ref/1',
  ...(restrictions ? { restrictions } : {}),
})
const receivable = (sourceRevision = 1, extra: Record<string, unknown> = {}) => ({
  financialType: 'loan_balance',
  sourceRevision,
  recoverableAmount: usd('10.00'),
  creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [
    { externalCustomerId: 'cust-1', role: 'primary' },
    { externalCustomerId: 'cust-2', role: 'co_borrower' },
  ],
  sourceReference: 'r/1',
  ...extra,
})

let t: TestApp
before(async () => {
  t = await startTestApp()
})
after(() => t.close())

describe('collection summary', () => {
  test('counts and amounts by status and currency, held counts by category', async () => {
    const x = await t.tenant('sum')
    const s = (m: 'PUT' | 'GET' | 'POST', p: string, body?: unknown) =>
      t.call(m, `/v1/clients/sum${p}`, { key: x.apiKey, ...(body ? { body } : {}) })
    for (const id of ['cust-1', 'cust-2']) await s('PUT', `/customers/${id}`, customer())
    await s('PUT', '/receivables/u1', receivable(1, { recoverableAmount: usd('10.10') }))
    await s('PUT', '/receivables/u2', receivable(1, { recoverableAmount: usd('0.20') }))
    await s('PUT', '/receivables/u3', receivable(1, { recoverableAmount: usd('5.00') }))
    await s('PUT', '/receivables/e1', receivable(1, { recoverableAmount: { amount: '7.00', currency: 'EUR' } }))
    await s('POST', '/receivables/u3/pause', { effectiveAt: '2026-01-01T00:00:00Z', reason: 'other' })
    await s('POST', '/receivables/e1/close', { effectiveAt: '2026-01-01T00:00:00Z', reason: 'settled' })
    await s('PUT', '/receivables/u2', receivable(2, { recoverableAmount: usd('0.20'), restrictions: [{ type: 'dispute' }] }))
    const res = await s('GET', '/collection-summary')
    assert.equal(res.status, 200)
    assert.deepEqual(res.json.receivables, { total: 4, active: 2, paused: 1, closed: 1 })
    assert.deepEqual(res.json.amounts, [
      {
        currency: 'EUR',
        status: 'closed',
        count: 1,
        sourceAmount: { amount: '7.00', currency: 'EUR' },
        workingAmount: { amount: '7.00', currency: 'EUR' },
      },
      {
        currency: 'USD',
        status: 'active',
        count: 2,
        sourceAmount: { amount: '10.30', currency: 'USD' },
        workingAmount: { amount: '10.30', currency: 'USD' },
      },
      {
        currency: 'USD',
        status: 'paused',
        count: 1,
        sourceAmount: { amount: '5.00', currency: 'USD' },
        workingAmount: { amount: '5.00', currency: 'USD' },
      },
    ])
    assert.deepEqual(res.json.recovery, {
      held: 4,
      notHeld: 0,
      holds: {
        recovery_not_authorized: 4,
        collection_not_enabled: 4,
        source_restriction: 0,
        dispute: 1,
        source_stale: 0,
        other_protection: 2,
        reconciliation_hold: 0,
      },
    })
  })

  test('100,000 Receivables, computed in the store', { skip: onPostgres ? false : 'needs PostgreSQL (set DATABASE_URL)' }, async () => {
    const x = await t.tenant('big')
    await t.call('PUT', '/v1/clients/big/customers/cust-1', { key: x.apiKey, body: customer() })
    await t.store.query(
      `INSERT INTO receivables (client_code, external_receivable_id, revision, status, source_revision, currency, source_amount_minor, representation, created_at, updated_at)
       SELECT 'big', 'r' || g, 1, CASE WHEN g % 10 = 0 THEN 'paused' ELSE 'active' END, 1, 'USD', 1000, '{}'::jsonb, now(), now()
         FROM generate_series(1, 100000) g`,
    )
    // Fresh statistics first: the foreign-key check of the next insert must not plan for an empty table.
    await t.store.query('ANALYZE receivables')
    await t.store.query(`INSERT INTO receivable_customers SELECT 'big', 'cust-1', 'r' || g, 'primary' FROM generate_series(1, 100000) g`)
    await t.store.query(
      `INSERT INTO restrictions SELECT 'big', 'receivable', 'r' || g, 'dispute', NULL FROM generate_series(1, 100000, 100) g`,
    )
    await t.store.query(
      `INSERT INTO recovery_instructions SELECT 'big', 'i' || g, 'r' || g, 'authorized', 1, '2026-01-01T00:00:00Z', now() FROM generate_series(1, 100000, 2) g`,
    )
    await t.store.query('ANALYZE')
    const started = performance.now()
    const res = await t.call('GET', '/v1/clients/big/collection-summary', { key: x.apiKey })
    const ms = performance.now() - started
    console.log(`# collection summary over 100,000 Receivables answered in ${ms.toFixed(0)} ms`)
    assert.deepEqual(res.json.receivables, { total: 100000, active: 90000, paused: 10000, closed: 0 })
    assert.deepEqual(res.json.amounts, [
      {
        currency: 'USD',
        status: 'active',
        count: 90000,
        sourceAmount: { amount: '900000.00', currency: 'USD' },
        workingAmount: { amount: '900000.00', currency: 'USD' },
      },
      {
        currency: 'USD',
        status: 'paused',
        count: 10000,
        sourceAmount: { amount: '100000.00', currency: 'USD' },
        workingAmount: { amount: '100000.00', currency: 'USD' },
      },
    ])
    assert.equal(res.json.recovery.holds.recovery_not_authorized, 50000)
    assert.equal(res.json.recovery.holds.dispute, 1000)
    assert.equal(res.json.recovery.holds.other_protection, 10000)
    assert.equal(res.json.recovery.held, 100000)

    // The first Source write after a stale flip records one client fact (90 s here when it bumped every
    // Receivable itself); the background fan-out then gives each Receivable its revision and event, the feed
    // buffer staying linear (appending once copied the whole array per event).
    await t.store.query(`UPDATE source_activity SET stale_recorded = true WHERE client_code = 'big'`)
    const before = (await t.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM change_events WHERE client_code = 'big'`))[0]?.n
    const putStarted = performance.now()
    const put = await t.call('PUT', '/v1/clients/big/customers/cust-1', {
      key: x.apiKey,
      body: { ...customer(), sourceReference: 'ref/2' },
    })
    console.log(`# first Customer PUT after a stale flip, 100,000 Receivables: ${(performance.now() - putStarted).toFixed(0)} ms`)
    assert.equal(put.status, 200)
    const events = () =>
      t.store.query<{ n: number; receivables: number; gaps: number }>(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE resource_type = 'receivable')::int AS receivables,
                (max(seq) - min(seq) + 1 - count(*))::int AS gaps
           FROM change_events WHERE client_code = 'big'`,
      )
    assert.deepEqual((await events())[0], { n: (before ?? 0) + 1, receivables: 0, gaps: 0 })
    await t.app.clientFanout.runUntilIdle()
    assert.deepEqual((await events())[0], { n: (before ?? 0) + 100001, receivables: 100000, gaps: 0 })
  })
})
