import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { engineName } from '../helpers/store.ts'

/**
 * Migration 0025's backfill of `payment_take_backs`: Payments refunded and reversed through the API, then the
 * database put back as it was before 0025 (the table gone, the receipts' running figures back) and the migration run
 * again. Refunds and a Payment's only reversal come back exactly as recorded; two reversals of one Payment come back
 * as one at the latest one's revision (all the old schema knew), less what a reversal receipt already reported.
 */
const migration = readFileSync(new URL('../../src/store/migrations/0025_payment_take_backs.sql', import.meta.url), 'utf8')
const usd = (amount: string) => ({ amount, currency: 'USD' })
let t: TestApp
let tn: Tenant
before(async () => {
  t = await startTestApp()
  tn = await t.tenant('upg-tb')
})
after(() => t.close())

async function confirmed(requestId: string, amount: string) {
  const receivable = await payableReceivable(t, tn, `rcv-${requestId}`)
  const pr = await t.call('PUT', `/v1/clients/upg-tb/payment-requests/${requestId}`, {
    key: tn.apiKey,
    body: { externalReceivableId: receivable, amount: usd(amount) },
  })
  assert.equal(pr.status, 201, pr.body)
  assert.equal(
    (await t.admin('POST', `/admin/v1/clients/upg-tb/payment-requests/${requestId}/simulate`, { outcome: 'confirmed' })).status,
    201,
  )
}
async function reverse(requestId: string, amount: string) {
  const r = await t.admin('POST', `/admin/v1/clients/upg-tb/payment-requests/${requestId}/simulate`, {
    outcome: 'reversed',
    amount: usd(amount),
  })
  assert.equal(r.status, 200, r.body)
}
const rows = () =>
  t.store.query<{ request: string; key: string; kind: string; amount: string; unapplied: string; allocated: string; at: string }>(
    `SELECT external_payment_request_id AS request, take_back_key AS key, kind, amount_minor::text AS amount,
            unapplied_minor::text AS unapplied, allocated_minor::text AS allocated, occurred_at::text AS at
       FROM payment_take_backs WHERE client_code = 'upg-tb' ORDER BY 1, 2`,
  )

describe(`migration 0025 backfills take-backs (${engineName})`, () => {
  test('refunds and single reversals exactly; two reversals as one, less what was reported', async () => {
    await confirmed('pr-1', '40.00')
    const refund = await t.call('PUT', '/v1/clients/upg-tb/payment-requests/pr-1/refunds/rf-1', {
      key: tn.apiKey,
      body: { amount: usd('15.00'), reason: 'requested_by_customer' },
    })
    assert.equal(refund.status, 201, refund.body)
    await t.app.refundWorker.runOnce()
    await reverse('pr-1', '10.00')
    await confirmed('pr-2', '30.00')
    await reverse('pr-2', '5.00')
    await reverse('pr-2', '7.00')
    await confirmed('pr-3', '20.00')
    await reverse('pr-3', '5.00')
    await reverse('pr-3', '3.00')
    await confirmed('pr-4', '10.00')
    const recorded = await rows()
    assert.deepEqual(
      recorded.map((r) => [r.request, r.key.replace(/^reversal\/\d+$/, 'reversal/N'), r.kind, r.amount, r.unapplied, r.allocated]),
      [
        ['pr-1', 'refund/rf-1', 'refund', '1500', '0', '1500'],
        ['pr-1', 'reversal/N', 'reversal', '1000', '0', '1000'],
        ['pr-2', 'reversal/N', 'reversal', '500', '0', '500'],
        ['pr-2', 'reversal/N', 'reversal', '700', '0', '700'],
        ['pr-3', 'reversal/N', 'reversal', '500', '0', '500'],
        ['pr-3', 'reversal/N', 'reversal', '300', '0', '300'],
      ],
    )
    const byRequest = (request: string) => recorded.filter((r) => r.request === request)
    const latest = (request: string) =>
      byRequest(request).reduce((a, b) => (Number(a.key.split('/')[1]) > Number(b.key.split('/')[1]) ? a : b))

    // Back to the schema before 0025; pr-3's first reversal (5.00) had been reported by a receipt.
    await t.store.exec(`DROP TABLE payment_take_backs;
      DROP INDEX receipt_deliveries_finished; DROP INDEX receipt_delivery_attempts_recent;
      ALTER TABLE receipt_deliveries ADD COLUMN taken_back_minor bigint, ADD COLUMN reversed_through_minor bigint;`)
    await t.store.query(
      `INSERT INTO receipt_deliveries (client_code, receipt_id, kind, source_key, external_payment_request_id, payload,
                                       taken_back_minor, reversed_through_minor, status, created_at)
       VALUES ('upg-tb', 'rcpt_old', 'reversal', 'pr-3/reversal/x', 'pr-3', '{}', 500, 500, 'delivered', now())`,
    )
    await t.store.exec(migration)

    const pr3 = latest('pr-3')
    assert.deepEqual(await rows(), [
      ...byRequest('pr-1'),
      { ...latest('pr-2'), amount: '1200', allocated: '1200' },
      { ...pr3, amount: '300', allocated: '300' },
    ])
    // The running figures are gone again.
    const columns = await t.store.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_name = 'receipt_deliveries' AND column_name LIKE '%_minor'`,
    )
    assert.deepEqual(columns, [])
  })
})
