import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { Clock } from '../../../src/domain/time.ts'
import { startTestApp, type TestApp } from '../../helpers/app.ts'
import { type CountingStore, countingStore } from '../../helpers/counting-store.ts'
import { pageRequest } from '../../helpers/payments.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../../helpers/store.ts'

/**
 * Statements per payment confirmation (issue 25, item 1): the hosted page's POST and the operator's `simulate` run
 * one operation (confirmOperation), which locks the Payment request once and answers from the rows it holds.
 * A change in these numbers is a change of the confirmation's path.
 *
 * Before (PostgreSQL / PGlite), in the transaction, BEGIN and COMMIT included: the page's POST 13/12, simulate
 * 16/15, the same outcome again 7/7. The request was locked twice (settleInSandbox, then recordOutcome), its Payment
 * read although an open request has none, the Receivable read twice (its holds, then its amounts under the row
 * lock), and simulate's answer read the request and its Payment again after the flush. Outside the transaction,
 * then as now: the page's read by token and the sandbox clock's read (atClientTime) for the page, the sandbox clock's
 * read for simulate.
 *
 * Now: BEGIN, the request's lock, (on PostgreSQL the Receivable's identity lock,) its catch-up to the client's facts,
 * the Receivable row-locked with its holds and amounts in one statement, its allocation, the Payment, the request's
 * new status, (simulate: the audit record,) the feed, COMMIT; the answer is rendered from the rows these returned.
 */

const clock: Clock = { now: () => new Date('2026-11-23T12:00:00.000Z') }
let t: TestApp
let counting: CountingStore
let db: TestDatabase

before(async () => {
  db = await createTestDatabase()
  counting = countingStore(db.store)
  t = await startTestApp({}, { clock, db: { ...db, store: counting } })
})
after(async () => {
  await t.close()
  // Closes the store and, on PostgreSQL, drops this file's database.
  await db.drop()
})

// PGlite runs one transaction at a time, so identity locks (one statement each on PostgreSQL) are skipped.
const expect = (pg: number, pglite: number) => (onPostgres ? pg : pglite)

/** What one call runs: its statements in transactions (BEGIN and COMMIT included) and, by kind, those outside. */
async function statements(call: () => Promise<{ status: number; body: string }>, status: number) {
  counting.reset()
  const res = await call()
  assert.equal(res.status, status, res.body)
  const outside = counting.outside.map((sql) =>
    /FROM page_tokens/.test(sql)
      ? 'page token'
      : /FROM payment_requests p/.test(sql)
        ? 'page read'
        : /FROM sandbox_clocks/.test(sql)
          ? 'sandbox clock'
          : sql,
  )
  const requestLocks = counting.inTransactions.filter((sql) => /FROM payment_requests WHERE .* FOR UPDATE/s.test(sql)).length
  return { inTransaction: counting.inTransactions.length, requestLocks, outside }
}

const form = (outcome: string) => ({ rawBody: `outcome=${outcome}`, contentType: 'application/x-www-form-urlencoded' })

async function paymentOf(client: string, requestId: string): Promise<string[]> {
  const rows = await t.store.query<{ status: string; amount_minor: string }>(
    'SELECT status, amount_minor FROM payments WHERE client_code = $1 AND external_payment_request_id = $2',
    [client, requestId],
  )
  return rows.map((r) => `${r.status} ${r.amount_minor}`)
}

test("the hosted page's POST: one lock of the request, 11/10 statements in its transaction", async () => {
  const p = await pageRequest(t, 'cs-page')
  const confirmed = await statements(() => t.call('POST', p.hostedUrl.pathname, form('confirmed')), 303)
  assert.deepEqual(confirmed, { inTransaction: expect(11, 10), requestLocks: 1, outside: ['page token', 'page read', 'sandbox clock'] })
  assert.deepEqual(await paymentOf(p.client, p.requestId), ['confirmed 3000'])
  // The same outcome again: the page's read finds it decided, and answers from that read with no transaction.
  const again = await statements(() => t.call('POST', p.hostedUrl.pathname, form('confirmed')), 303)
  assert.deepEqual(again, { inTransaction: 0, requestLocks: 0, outside: ['page token', 'page read'] })
})

test('simulate: one lock of the request, 12/11 statements in its transaction; the same outcome again 4', async () => {
  const p = await pageRequest(t, 'cs-sim')
  const simulate = () => t.admin('POST', `/admin/v1/clients/${p.client}/payment-requests/${p.requestId}/simulate`, { outcome: 'confirmed' })
  const confirmed = await statements(simulate, 201)
  // One more than the page: the audit record of the operator's action.
  assert.deepEqual(confirmed, { inTransaction: expect(12, 11), requestLocks: 1, outside: ['sandbox clock'] })
  assert.deepEqual(await paymentOf(p.client, p.requestId), ['confirmed 3000'])
  // BEGIN, the lock (the request is decided), its Payment, COMMIT.
  const again = await statements(simulate, 200)
  assert.deepEqual(again, { inTransaction: 4, requestLocks: 1, outside: ['sandbox clock'] })
  assert.deepEqual(await paymentOf(p.client, p.requestId), ['confirmed 3000'])
})

test('20 concurrent confirmations, 10 through the page and 10 through simulate, make one Payment and one allocation', async () => {
  const p = await pageRequest(t, 'cs-race')
  const simulate = () => t.admin('POST', `/admin/v1/clients/${p.client}/payment-requests/${p.requestId}/simulate`, { outcome: 'confirmed' })
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? t.call('POST', p.hostedUrl.pathname, form('confirmed')) : simulate())),
  )
  const pages = results.filter((_, i) => i % 2 === 0).map((r) => r.status)
  const simulated = results.filter((_, i) => i % 2 === 1).map((r) => r.status)
  assert.deepEqual(pages, Array(10).fill(303))
  // At most one simulate made the Payment (201); the others found it made (200).
  const made = simulated.filter((s) => s === 201).length
  assert.ok(made <= 1, `${made} simulate calls made a Payment`)
  assert.deepEqual(
    simulated.filter((s) => s !== 201),
    Array(10 - made).fill(200),
  )
  assert.deepEqual(await paymentOf(p.client, p.requestId), ['confirmed 3000'])
  const feed = await t.store.query<{ type: string; resource_id: string }>(
    `SELECT type, resource_id FROM change_events WHERE client_code = $1 AND type LIKE 'payment%' ORDER BY seq`,
    [p.client],
  )
  assert.deepEqual(
    feed.map((e) => `${e.type} ${e.resource_id}`),
    [`payment_request.created ${p.requestId}`, `payment.confirmed ${p.requestId}`, `payment_request.confirmed ${p.requestId}`],
  )
  const position = await t.call('GET', `/v1/clients/${p.client}/receivables/${p.receivableId}`, { key: p.tenant.apiKey })
  assert.deepEqual(position.json.financialPosition.confirmedUnreconciledAmount, { amount: '30.00', currency: 'USD' })
  // The operator's action is audited when it made the Payment, the debtor's never.
  const audit = await t.store.query<{ action: string }>(
    `SELECT action FROM audit_events WHERE client_code = $1 AND target_type = 'payment_request'`,
    [p.client],
  )
  assert.deepEqual(
    audit.map((a) => a.action),
    Array(made).fill('payment_request.simulated'),
  )
})
