import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { capturingStore, type SentStatement } from '../../helpers/capturing-store.ts'
import { payableReceivable } from '../../helpers/payments.ts'
import { type PlanNode, planNodes } from '../../helpers/plans.ts'
import { createTestDatabase, engineName } from '../../helpers/store.ts'

/**
 * Issue 35 item 3: a timeline page reads one Receivable's index range of each source table, never a sequential
 * scan of a big one. With 3,000 other Receivables of the client (each with its feed rows, financial events, Payment
 * requests and payment observations) and the same again for another client, the page statement the app sends is
 * EXPLAINed with its own parameters, first page and a cursor page.
 */
const C = 'tlp'
const OTHER = 'tlp-other'
const N = 3000
const BIG = [
  'change_events',
  'financial_events',
  'payment_requests',
  'payment_observations',
  'payment_observation_allocations',
  'receivables',
]
let t: TestApp
const sent: SentStatement[] = []

const usd = (amount: string) => ({ amount, currency: 'USD' })
async function must(res: Promise<Response>, status: number, what: string) {
  const r = await res
  assert.equal(r.status, status, `${what}: ${r.body}`)
}

/** `N` copies of one row of `table` with the columns `overrides` gives (SQL over `g`, 1..N). */
async function clone(clientCode: string, table: string, where: string, overrides: string) {
  await t.store.query(
    `INSERT INTO ${table}
     SELECT (jsonb_populate_record(NULL::${table}, to_jsonb(x) || jsonb_build_object(${overrides}))).*
       FROM ${table} x, generate_series(1, ${N}) g WHERE x.client_code = $1 AND ${where}`,
    [clientCode],
  )
}

async function seed(tenant: Tenant) {
  const c = tenant.clientCode
  const put = (path: string, body: unknown, status = 201) =>
    must(t.call('PUT', `/v1/clients/${c}${path}`, { key: tenant.apiKey, body }), status, path)
  await payableReceivable(t, tenant, 'r1')
  await put('/adjustments/adj-t', {
    type: 'adjustment',
    direction: 'increase',
    amount: usd('1.00'),
    externalReceivableId: 'r1',
    sourceRevision: 2,
    effectiveAt: '2026-03-01T00:00:00Z',
    reason: 'source_adjustment',
    sourceReference: 'plan/e',
  })
  await put('/payment-observations/po-t', {
    type: 'payment',
    amount: usd('1.00'),
    allocations: [{ amount: usd('1.00'), externalReceivableId: 'r1' }],
    effectiveAt: '2026-03-01T00:00:00Z',
    externalCustomerId: 'pay-cust',
    method: 'cash',
    sourceReference: 'plan/po',
  })
  await put('/payment-requests/pr-t', { externalReceivableId: 'r1', amount: usd('10.00') })
  await must(t.admin('POST', `/admin/v1/clients/${c}/payment-requests/pr-t/simulate`, { outcome: 'confirmed' }), 201, 'confirm')
  await put('/payment-reconciliations/rec-t', {
    externalPaymentRequestId: 'pr-t',
    lines: [{ externalReceiptLineId: 'l-1', externalReceivableId: 'r1', amount: usd('1.00') }],
  })
  await put('/payment-requests/pr-t/refunds/rf-t', { amount: usd('1.00'), reason: 'requested_by_customer' })

  const rz = `'rz-' || g`
  await clone(c, 'receivables', `x.external_receivable_id = 'r1'`, `'external_receivable_id', ${rz}`)
  await clone(
    c,
    'change_events',
    `x.resource_type = 'receivable' AND x.resource_id = 'r1' AND x.revision = 1`,
    `'resource_id', ${rz}, 'seq', 1000000 + g, 'event_id', gen_random_uuid()`,
  )
  await clone(c, 'financial_events', `x.external_event_id = 'adj-t'`, `'external_event_id', 'adj-' || g, 'external_receivable_id', ${rz}`)
  await clone(
    c,
    'payment_requests',
    `x.external_payment_request_id = 'pr-t'`,
    `'external_payment_request_id', 'prc-' || g, 'page_token', '${c}-tok-' || g, 'external_receivable_id', ${rz}`,
  )
  await clone(c, 'payment_observations', `x.external_event_id = 'po-t'`, `'external_event_id', 'poc-' || g`)
  await clone(
    c,
    'payment_observation_allocations',
    `x.external_event_id = 'po-t'`,
    `'external_event_id', 'poc-' || g, 'external_receivable_id', ${rz}`,
  )
}

before(async () => {
  const db = await createTestDatabase()
  t = await startTestApp({}, { db: { ...db, store: capturingStore(db.store, (sql) => sql.includes("'revision:' ||"), sent) } })
  await seed(await t.tenant(C))
  await seed(await t.tenant(OTHER))
  await t.store.query('ANALYZE')
})
after(async () => {
  await t.close()
  await t.db.drop()
})

const nodes = planNodes

test(`a timeline page reads each big table through an index, never a sequential scan (${engineName}, ${N} rows a table a client)`, async () => {
  const report: string[] = []
  const first = await t.call('GET', `/v1/clients/${C}/receivables/r1/timeline?limit=4`, { key: (await keyOf(C)).apiKey })
  assert.equal(first.status, 200, first.body)
  assert.equal(first.json.data.length, 4)
  const statements = [sent.at(-1)]
  const next = await t.call('GET', `/v1/clients/${C}/receivables/r1/timeline?limit=4&cursor=${first.json.nextCursor}`, {
    key: (await keyOf(C)).apiKey,
  })
  assert.equal(next.status, 200, next.body)
  statements.push(sent.at(-1))
  for (const [i, s] of statements.entries()) {
    assert.ok(s, 'no timeline statement captured')
    const [row] = await t.store.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${s.sql}`, s.params)
    const raw = row?.['QUERY PLAN']
    const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as [{ Plan: PlanNode }]
    const all = nodes(plan[0].Plan)
    const what = i === 0 ? 'first page' : 'cursor page'
    assert.deepEqual(
      all.filter((n) => n['Node Type'].includes('Seq Scan') && BIG.includes(n['Relation Name'] ?? '')).map((n) => n['Relation Name']),
      [],
      `${what}: a sequential scan of a big table\n${JSON.stringify(plan)}`,
    )
    for (const table of BIG.filter((b) => b !== 'receivables' || all.some((n) => n['Relation Name'] === b))) {
      const scans = all.filter((n) => n['Relation Name'] === table)
      assert.ok(scans.length > 0, `${what}: ${table} is read`)
      for (const scan of scans) assert.match(scan['Node Type'], /^(Index (Only )?Scan|Bitmap Heap Scan)$/, `${what}: ${table}`)
    }
    if (i === 0) {
      const [analyzed] = await t.store.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${s.sql}`, s.params)
      const a = analyzed?.['QUERY PLAN']
      const [{ 'Execution Time': ms }] = (typeof a === 'string' ? JSON.parse(a) : a) as [{ 'Execution Time': number }]
      const names = [...new Set(all.filter((n) => BIG.includes(n['Relation Name'] ?? '') && n['Index Name']).map((n) => n['Index Name']))]
      report.push(`timeline page: ${names.join(' + ')}; ${ms.toFixed(2)} ms`)
    }
  }
  process.stdout.write(`# ${engineName}\n${report.map((r) => `#   ${r}`).join('\n')}\n`)
})

const keys = new Map<string, Tenant>()
async function keyOf(clientCode: string): Promise<Tenant> {
  const known = keys.get(clientCode)
  if (known) return known
  const tenant = await t.tenant(clientCode, { integrationId: `int-${clientCode}-reader` })
  keys.set(clientCode, tenant)
  return tenant
}
