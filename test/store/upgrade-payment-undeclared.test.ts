import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import type { Clock } from '../../src/domain/time.ts'
import { migrate } from '../../src/store/migrate.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { engineName } from '../helpers/store.ts'

/**
 * Migration 0023 (issue 21): each Receivable's acknowledged-undeclared money is shared among its Payments, the most
 * recently acknowledged first, each at most the acknowledged money it still holds, so the shares add up to the
 * Receivable's figure, which stays as it was (the working amount does not move on upgrade). A database before 0023
 * is made from one written through the API: the three new columns are dropped and 0023 is forgotten, then `migrate`
 * runs it again.
 *
 * On R (100.00): pr-a pays 20.00 and the Source acknowledges it, then declares 80.00 (pr-a's money is in it); pr-b and
 * pr-c pay 10.00 each, and the Source acknowledges pr-c's and then pr-b's; a refund of 5.00 of pr-a's declared money
 * succeeds. Under the rule before 0023 that refund took 5.00 out of the Receivable's undeclared 20.00 (another
 * Payment's money standing in for pr-a's), leaving 15.00: the test writes that figure back, as the old rule left it.
 * The backfill gives the 15.00 to the newest acknowledgements: pr-b 10.00 (acknowledged last), pr-c 5.00, pr-a none.
 */
let ms = Date.parse('2026-11-20T12:00:00.000Z')
// Every reading a second later: the reconciliations' acceptedAt order is the order they were written.
const clock: Clock = {
  now: () => {
    ms += 1000
    return new Date(ms)
  },
}

let t: TestApp
let tenant: Tenant
before(async () => {
  t = await startTestApp({}, { clock })
  tenant = await t.tenant('upgrade23')
})
after(() => t.close())

const base = () => `/v1/clients/${tenant.clientCode}`
const usd = (amount: string) => ({ amount, currency: 'USD' })
const ok = (res: { status: number; body: string }, status: number) => assert.equal(res.status, status, res.body)

async function pay(id: string, amount: string) {
  ok(
    await t.call('PUT', `${base()}/payment-requests/${id}`, {
      key: tenant.apiKey,
      body: { externalReceivableId: 'R', amount: usd(amount) },
    }),
    201,
  )
  ok(await t.admin('POST', `/admin/v1/clients/${tenant.clientCode}/payment-requests/${id}/simulate`, { outcome: 'confirmed' }), 201)
}

async function acknowledge(id: string, amount: string) {
  const body = {
    externalPaymentRequestId: id,
    lines: [{ externalReceiptLineId: `line-${id}`, externalReceivableId: 'R', amount: usd(amount) }],
  }
  const res = await t.call('PUT', `${base()}/payment-reconciliations/rec-${id}`, { key: tenant.apiKey, body })
  ok(res, 201)
  assert.equal(res.json.status, 'matched')
}

async function position() {
  const res = await t.call('GET', `${base()}/receivables/R`, { key: tenant.apiKey })
  ok(res, 200)
  const p = res.json.financialPosition
  return [p.sourceAmount, p.workingAmount, p.confirmedUnreconciledAmount, p.receiptAcknowledgedAmount].map((m) => m.amount).join('/')
}

async function shares() {
  const [r] = await t.store.query<{ undeclared: string; declarations: string }>(
    `SELECT acknowledged_undeclared_minor::text AS undeclared, declarations::text FROM receivables
      WHERE client_code = $1 AND external_receivable_id = 'R'`,
    [tenant.clientCode],
  )
  const rows = await t.store.query<{ id: string; share: string; as_of: string }>(
    `SELECT external_payment_request_id AS id, acknowledged_undeclared_minor::text AS share, undeclared_as_of::text AS as_of
       FROM payments WHERE client_code = $1 ORDER BY 1`,
    [tenant.clientCode],
  )
  return { receivable: `${r?.undeclared} as of ${r?.declarations}`, payments: rows.map((p) => `${p.id} ${p.share} as of ${p.as_of}`) }
}

test(`0023 shares a Receivable's undeclared money among its Payments, newest acknowledgement first (${engineName})`, async () => {
  await payableReceivable(t, tenant, 'R', { amount: '100.00' })
  await pay('pr-a', '20.00')
  await acknowledge('pr-a', '20.00')
  ok(
    await t.call('PUT', `${base()}/receivables/R`, {
      key: tenant.apiKey,
      body: {
        financialType: 'loan_balance',
        sourceRevision: 2,
        recoverableAmount: usd('80.00'),
        creditUnion: { loanAccountReference: 'loan/R', loanType: 'auto' },
        dueDate: '2026-01-01',
        responsibleCustomers: [{ externalCustomerId: 'pay-cust', role: 'primary' }],
        sourceReference: 'rcv/R',
      },
    }),
    200,
  )
  await pay('pr-b', '10.00')
  await pay('pr-c', '10.00')
  await acknowledge('pr-c', '10.00')
  await acknowledge('pr-b', '10.00')
  ok(
    await t.call('PUT', `${base()}/payment-requests/pr-a/refunds/rf-1`, {
      key: tenant.apiKey,
      body: { amount: usd('5.00'), reason: 'requested_by_customer' },
    }),
    201,
  )
  assert.equal(await t.app.refundWorker.runOnce(), true)
  // Under the rules of 0023: pr-a's 5.00 was declared, so it stays out; the undeclared 20.00 are pr-b's and pr-c's.
  assert.equal(await position(), '80.00/60.00/0.00/40.00')
  assert.deepEqual(await shares(), {
    receivable: '2000 as of 1',
    payments: ['pr-a 0 as of 1', 'pr-b 1000 as of 1', 'pr-c 1000 as of 1'],
  })

  // The database as the rule before 0023 left it.
  await t.store.exec(`
    UPDATE receivables SET acknowledged_undeclared_minor = 1500 WHERE client_code = 'upgrade23' AND external_receivable_id = 'R';
    ALTER TABLE payments DROP COLUMN acknowledged_undeclared_minor, DROP COLUMN undeclared_as_of;
    ALTER TABLE receivables DROP COLUMN declarations;
    DELETE FROM schema_migrations WHERE version = 23;`)
  assert.deepEqual(await migrate(t.store), [23])

  // Nothing moves on upgrade: the working amount stays as the old rule left it, and the shares add up to its 15.00.
  assert.equal(await position(), '80.00/65.00/0.00/40.00')
  assert.deepEqual(await shares(), {
    receivable: '1500 as of 0',
    payments: ['pr-a 0 as of 0', 'pr-b 1000 as of 0', 'pr-c 500 as of 0'],
  })

  // From now on money taken back leaves the working amount by its own Payment's share: pr-a's declared money stays
  // out, pr-c's 5.00 share leaves (its other 5.00 counts as declared), pr-b's leaves.
  const refund = async (id: string, refundId: string, amount: string) => {
    ok(
      await t.call('PUT', `${base()}/payment-requests/${id}/refunds/${refundId}`, {
        key: tenant.apiKey,
        body: { amount: usd(amount), reason: 'requested_by_customer' },
      }),
      201,
    )
    assert.equal(await t.app.refundWorker.runOnce(), true)
  }
  await refund('pr-a', 'rf-2', '15.00')
  assert.equal(await position(), '80.00/65.00/0.00/40.00')
  await refund('pr-c', 'rf-3', '10.00')
  assert.equal(await position(), '80.00/70.00/0.00/40.00')
  await refund('pr-b', 'rf-4', '4.00')
  assert.equal(await position(), '80.00/74.00/0.00/40.00')
  assert.deepEqual(await shares(), {
    receivable: '600 as of 0',
    payments: ['pr-a 0 as of 0', 'pr-b 600 as of 0', 'pr-c 0 as of 0'],
  })
})
