import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, test } from 'node:test'
import type { Clock } from '../../src/domain/time.ts'
import { migrate } from '../../src/store/migrate.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { engineName, loadDumpDatabase, type TestDatabase } from '../helpers/store.ts'

/**
 * Issue 21, item 1: a database written through the API by main at 20eeacf (test/fixtures/upgrade-from-20eeacf.sql,
 * made by /tmp/old-main/gen/upgrade-fixture.ts: nine Receivables, each a situation the new working amount must
 * migrate) is upgraded by `migrate` (0019_money_rules_v2.sql backfills receivables.acknowledged_undeclared_minor,
 * 0023_payment_undeclared.sql shares it among the Receivable's Payments), and every Receivable then shows the
 * working amount docs/design/money.md defines, to the cent.
 */
const dump = readFileSync(new URL('../fixtures/upgrade-from-20eeacf.sql', import.meta.url), 'utf8')
// Just after the fixture was written (its open requests expire on 2026-12-15), so nothing expires or goes stale.
const clock: Clock = { now: () => new Date('2026-11-20T13:00:00.000Z') }
const CLIENT = 'upgrade'

/** An empty database of the engine under test, loaded with the dump (not migrated). */
const loadDump = () => loadDumpDatabase(dump)

let db: TestDatabase
let t: TestApp
let apiKey: string
let before0019: Record<string, string>
let applied: number[]

before(async () => {
  db = await loadDump()
  // What main showed (its two-argument working_amount_minor, still in the dump): source/working/confirmedUnreconciled/acknowledged.
  const rows = await db.store.query<{ id: string; position: string }>(
    `SELECT external_receivable_id AS id,
            concat_ws('/', source_amount_minor, working_amount_minor(source_amount_minor, confirmed_unreconciled_minor),
                      confirmed_unreconciled_minor, receipt_acknowledged_minor) AS position
       FROM receivables WHERE client_code = $1`,
    [CLIENT],
  )
  before0019 = Object.fromEntries(rows.map((r) => [r.id, r.position]))
  applied = await migrate(db.store)
  t = await startTestApp({}, { clock, db })
  const key = await t.admin('POST', '/admin/v1/integrations/int-upgrade/api-keys', {})
  assert.equal(key.status, 201, key.body)
  apiKey = key.json.apiKey
})
after(async () => {
  await t?.close()
  await db?.drop()
})

const position = async (id: string) => {
  const res = await t.call('GET', `/v1/clients/${CLIENT}/receivables/${id}`, { key: apiKey })
  assert.equal(res.status, 200, res.body)
  const p = res.json.financialPosition
  for (const m of Object.values(p) as { currency: string }[]) assert.equal(m.currency, 'USD')
  const a = (m: { amount: string }) => m.amount
  return [a(p.sourceAmount), a(p.workingAmount), a(p.confirmedUnreconciledAmount), a(p.receiptAcknowledgedAmount)].join('/')
}

test(`the dump is main's at 20eeacf, and main showed the figures issue 21 names (${engineName})`, () => {
  assert.deepEqual(before0019, {
    'r-unpaid': '10000/10000/0/0',
    'r-paid': '10000/4000/6000/0',
    'r-recon': '10000/10000/0/6000',
    'r-partial': '10000/6500/3500/2500',
    'r-redeclared': '4000/4000/0/6000',
    'r-declared-before': '10000/10000/0/6000',
    'r-snapshot': '4000/4000/0/6000',
    'r-credit': '9000/9000/0/6000',
    'r-open': '10000/10000/0/0',
  })
  // 0019 first (later migrations of other work may follow it).
  assert.equal(applied[0], 19)
})

test('after the upgrade every Receivable shows the working amount of docs/design/money.md, to the cent', async () => {
  const ids = ['r-unpaid', 'r-paid', 'r-recon', 'r-partial', 'r-redeclared', 'r-declared-before', 'r-snapshot', 'r-credit', 'r-open']
  const after: Record<string, string> = {}
  for (const id of ids) after[id] = await position(id)
  assert.deepEqual(after, {
    'r-unpaid': '100.00/100.00/0.00/0.00',
    'r-paid': '100.00/40.00/60.00/0.00',
    // Reconciled, never declared since: the 60.00 stays out of the working amount.
    'r-recon': '100.00/40.00/0.00/60.00',
    'r-partial': '100.00/40.00/35.00/25.00',
    // Reconciled, then the Source declared 40.00 (revision 2): that declaration includes the receipt.
    'r-redeclared': '40.00/40.00/0.00/60.00',
    // The Source declared 100.00 before the 60.00 was reconciled: the receipt is not in it.
    'r-declared-before': '100.00/40.00/0.00/60.00',
    // Reconciled, then an applied snapshot entry of 40.00.
    'r-snapshot': '40.00/40.00/0.00/60.00',
    // Reconciled, then a 10.00 credit note: a financial event is no declaration.
    'r-credit': '90.00/30.00/0.00/60.00',
    'r-open': '100.00/100.00/0.00/0.00',
  })
  const stored = await db.store.query<{ id: string; undeclared: string }>(
    `SELECT external_receivable_id AS id, acknowledged_undeclared_minor::text AS undeclared
       FROM receivables WHERE client_code = $1 AND acknowledged_undeclared_minor <> 0 ORDER BY 1`,
    [CLIENT],
  )
  assert.deepEqual(
    stored.map((r) => `${r.id} ${r.undeclared}`),
    ['r-credit 6000', 'r-declared-before 6000', 'r-partial 2500', 'r-recon 6000'],
  )
  // Migration 0023 shares each Receivable's figure among its Payments (here one each), and the shares add up to it.
  const shares = await db.store.query<{ id: string; share: string }>(
    `SELECT p.external_payment_request_id AS id, p.acknowledged_undeclared_minor::text AS share
       FROM payments p JOIN receivables r ON r.client_code = p.client_code AND r.external_receivable_id = p.external_receivable_id
      WHERE p.client_code = $1 AND p.undeclared_as_of = r.declarations AND p.acknowledged_undeclared_minor <> 0 ORDER BY 1`,
    [CLIENT],
  )
  assert.deepEqual(
    shares.map((r) => `${r.id} ${r.share}`),
    ['pr-credit 6000', 'pr-declared-before 6000', 'pr-partial 2500', 'pr-recon 6000'],
  )
  const unbalanced = await db.store.query<{ id: string }>(
    `SELECT r.external_receivable_id AS id FROM receivables r
      WHERE r.client_code = $1 AND r.acknowledged_undeclared_minor <> (
        SELECT COALESCE(sum(p.acknowledged_undeclared_minor), 0) FROM payments p
         WHERE p.client_code = r.client_code AND p.external_receivable_id = r.external_receivable_id
           AND p.undeclared_as_of = r.declarations)`,
    [CLIENT],
  )
  assert.deepEqual(unbalanced, [])
})

test('on r-open (two open requests of 70.00 from before the upgrade), paying one cancels the other when the debtor comes to pay it', async () => {
  const paid = await t.admin('POST', `/admin/v1/clients/${CLIENT}/payment-requests/pr-open-1/simulate`, { outcome: 'confirmed' })
  assert.equal(paid.status, 201, paid.body)
  assert.equal(await position('r-open'), '100.00/30.00/70.00/0.00')
  const [token] = await db.store.query<{ page_token: string }>(
    `SELECT page_token FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = 'pr-open-2'`,
    [CLIENT],
  )
  const path = `/pay/${token?.page_token}`
  const posted = await t.call('POST', path, { rawBody: 'outcome=confirmed', contentType: 'application/x-www-form-urlencoded' })
  assert.equal(posted.status, 303, posted.body)
  const request = await t.call('GET', `/v1/clients/${CLIENT}/payment-requests/pr-open-2`, { key: apiKey })
  assert.equal(request.status, 200, request.body)
  assert.equal(request.json.status, 'canceled')
  assert.equal(request.json.cancelReason, 'balance_changed')
  assert.equal(request.json.payment, null)
  assert.equal(request.json.revision, 2)
  // Nothing taken: no Payment, the Receivable as the first payment left it.
  const payments = await db.store.query<{ id: string }>(
    `SELECT external_payment_request_id AS id FROM payments WHERE client_code = $1 AND external_receivable_id = 'r-open'`,
    [CLIENT],
  )
  assert.deepEqual(
    payments.map((p) => p.id),
    ['pr-open-1'],
  )
  assert.equal(await position('r-open'), '100.00/30.00/70.00/0.00')
  const page = await t.call('GET', path)
  assert.equal(page.status, 200)
  assert.match(page.body, /The balance has changed/)
  assert.doesNotMatch(page.body, /<form/)
  const events = await db.store.query<{ type: string; revision: string }>(
    `SELECT type, revision::text FROM change_events WHERE client_code = $1 AND resource_id = 'pr-open-2' ORDER BY seq`,
    [CLIENT],
  )
  assert.deepEqual(
    events.map((e) => `${e.type} ${e.revision}`),
    ['payment_request.created 1', 'payment_request.canceled 2'],
  )
})
