import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { capturingStore, type SentStatement } from '../helpers/capturing-store.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { type PlanNode, planNodes } from '../helpers/plans.ts'
import { createTestDatabase, engineName } from '../helpers/store.ts'

/**
 * Every list and every filter is an index range scan in list order (migration 0026, docs/performance.md "Lists"):
 * with 3,000 rows a table for the client (and the same for another client), each list statement the app sends is
 * EXPLAINed with its own parameters, first page and a cursor page, and its plan holds no sequential scan and no sort
 * of the table's rows: the page is read from the index in order and the scan stops at `limit + 1`. Sorting is allowed
 * only where it is bounded: `?status=expired` of the Payment requests (the at most 2 × (limit + 1) rows of its two
 * index scans), two filters at once (the rows of one Receivable's or one Payment's index entries), and the
 * instruction governing one Receivable (a unique probe: one row).
 */
const C = 'plan'
const OTHER = 'plan-other'
const N = 3000
let t: TestApp
let k: Tenant
let other: Tenant
/** The list statements the app sent (the ones selecting `list_at`), with their parameters. */
const sent: SentStatement[] = []

const usd = (amount: string) => ({ amount, currency: 'USD' })
async function must(res: Promise<Response>, status: number, what: string) {
  const r = await res
  assert.equal(r.status, status, `${what}: ${r.body}`)
}

/** `n` copies of one row of `table` (every column as it is), with the columns `overrides` gives (SQL over `g`, 1..n). */
async function clone(clientCode: string, table: string, idColumn: string, id: string, overrides: string) {
  await t.store.query(
    `INSERT INTO ${table}
     SELECT (jsonb_populate_record(NULL::${table}, to_jsonb(x) || jsonb_build_object(${overrides}))).*
       FROM ${table} x, generate_series(1, ${N}) g WHERE x.client_code = $1 AND x.${idColumn} = $2`,
    [clientCode, id],
  )
}
const at = (column: string) => `'${column}', '2026-01-01T00:00:00Z'::timestamptz + g * interval '1 second'`

async function seed(tenant: Tenant) {
  const c = tenant.clientCode
  const put = (path: string, body: unknown, status = 201) =>
    must(t.call('PUT', `/v1/clients/${c}${path}`, { key: tenant.apiKey, body }), status, path)
  await payableReceivable(t, tenant, 'r1')
  await payableReceivable(t, tenant, 'r2')
  await put('/payment-requests/pr-t', { externalReceivableId: 'r1', amount: usd('10.00') })
  await must(t.admin('POST', `/admin/v1/clients/${c}/payment-requests/pr-t/simulate`, { outcome: 'confirmed' }), 201, 'confirm')
  await put('/payment-reconciliations/rec-t', {
    externalPaymentRequestId: 'pr-t',
    lines: [{ externalReceiptLineId: 'l-1', externalReceivableId: 'r1', amount: usd('1.00') }],
  })
  const event = (type: string, reason: string, sourceRevision: number) => ({
    type,
    amount: usd('1.00'),
    externalReceivableId: 'r1',
    sourceRevision,
    effectiveAt: '2026-03-01T00:00:00Z',
    reason,
    sourceReference: 'plan/e',
    ...(type === 'adjustment' ? { direction: 'increase' } : {}),
  })
  await put('/adjustments/adj-t', event('adjustment', 'source_adjustment', 2))
  await put('/credit-notes/cn-t', event('credit_note', 'contractual_credit', 3))
  await put('/write-offs/wo-t', event('write_off', 'approved_write_off', 4))
  await put('/payment-observations/po-t', {
    type: 'payment',
    amount: usd('1.00'),
    allocations: [{ amount: usd('1.00'), externalReceivableId: 'r1' }],
    effectiveAt: '2026-03-01T00:00:00Z',
    externalCustomerId: 'pay-cust',
    method: 'cash',
    sourceReference: 'plan/po',
  })
  await put(
    '/batches/bt-t',
    {
      records: [
        {
          recordId: 'c',
          kind: 'customer',
          externalId: 'bc',
          body: { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: 's' },
        },
      ],
    },
    202,
  )
  await t.app.batchRunner.drain()

  const split = (column: string, common: string, rare: string) => `'${column}', CASE WHEN g % 10 = 0 THEN '${rare}' ELSE '${common}' END`
  await clone(
    c,
    'payment_requests',
    'external_payment_request_id',
    'pr-t',
    `'external_payment_request_id', 'prc-' || g, 'page_token', '${c}-tok-' || g, ${at('created_at')}, ${split('external_receivable_id', 'r1', 'r2')},
     'status', (ARRAY['open', 'expired', 'failed', 'confirmed'])[g % 4 + 1], 'expires_at', '2099-01-01T00:00:00Z'`,
  )
  await clone(
    c,
    'recovery_instructions',
    'external_instruction_id',
    'ins-r1',
    `'external_instruction_id', 'insc-' || g, 'external_receivable_id', 'rx-' || g, ${at('created_at')}`,
  )
  await clone(
    c,
    'payment_reconciliations',
    'external_reconciliation_id',
    'rec-t',
    `'external_reconciliation_id', 'recc-' || g, ${at('accepted_at')}, 'status', (ARRAY['matched', 'held', 'resolved'])[g % 3 + 1]`,
  )
  for (const id of ['adj-t', 'cn-t', 'wo-t']) {
    await clone(
      c,
      'financial_events',
      'external_event_id',
      id,
      `'external_event_id', '${id}-' || g, ${at('accepted_at')}, ${split('external_receivable_id', 'r1', 'r2')}`,
    )
  }
  await clone(
    c,
    'payment_observations',
    'external_event_id',
    'po-t',
    `'external_event_id', 'poc-' || g, ${at('accepted_at')}, ${split('external_customer_id', 'pay-cust', 'cust-x')}`,
  )
  await clone(
    c,
    'batches',
    'external_batch_id',
    'bt-t',
    `'external_batch_id', 'btc-' || g, ${at('submitted_at')}, 'status', (ARRAY['succeeded', 'failed', 'partially_succeeded'])[g % 3 + 1]`,
  )
  // Each cloned batch holds one record: a customer's, or (one in ten) a receivable's.
  await clone(
    c,
    'batch_records',
    'external_batch_id',
    'bt-t',
    `'external_batch_id', 'btc-' || g, ${split('kind', 'customer', 'receivable')}`,
  )
}

before(async () => {
  const db = await createTestDatabase()
  t = await startTestApp({}, { db: { ...db, store: capturingStore(db.store, (sql) => sql.includes(' AS list_at'), sent) } })
  k = await t.tenant(C)
  other = await t.tenant(OTHER)
  await seed(k)
  await seed(other)
  await t.store.query('ANALYZE')
})
after(async () => {
  await t.close()
  await t.db.drop()
})

const nodes = planNodes

const CALLS: { segment: string; query: string; table: string; sorts?: true }[] = [
  ...['', '?externalReceivableId=r2', '?status=failed', '?status=open'].map((query) => ({
    segment: 'payment-requests',
    query,
    table: 'payment_requests',
  })),
  { segment: 'payment-requests', query: '?status=expired', table: 'payment_requests', sorts: true },
  // Both filters at once: the rows of the more selective one's index (one Receivable's requests), then sorted.
  { segment: 'payment-requests', query: '?externalReceivableId=r2&status=failed', table: 'payment_requests', sorts: true },
  { segment: 'recovery-instructions', query: '', table: 'recovery_instructions' },
  // The one instruction governing a Receivable: a probe of the unique (client_code, external_receivable_id), at most one row.
  { segment: 'recovery-instructions', query: '?externalReceivableId=rx-7', table: 'recovery_instructions', sorts: true },
  ...['', '?externalPaymentRequestId=pr-t', '?status=held'].map((query) => ({
    segment: 'payment-reconciliations',
    query,
    table: 'payment_reconciliations',
  })),
  {
    segment: 'payment-reconciliations',
    query: '?status=held&externalPaymentRequestId=pr-t',
    table: 'payment_reconciliations',
    sorts: true,
  },
  ...['adjustments', 'credit-notes', 'write-offs'].flatMap((segment) =>
    ['', '?externalReceivableId=r2'].map((query) => ({ segment, query, table: 'financial_events' })),
  ),
  ...['', '?externalCustomerId=cust-x'].map((query) => ({ segment: 'payment-observations', query, table: 'payment_observations' })),
  ...['', '?status=failed'].map((query) => ({ segment: 'batches', query, table: 'batches' })),
]

test(`every list and filter reads its page from an index in list order (${engineName}, ${N} rows a table a client)`, async () => {
  const report: string[] = []
  for (const call of CALLS) {
    const first = `/v1/clients/${C}/${call.segment}${call.query}${call.query ? '&' : '?'}limit=50`
    const page = await t.call('GET', first, { key: k.apiKey })
    assert.equal(page.status, 200, page.body)
    // A full page and a cursor page; the one instruction governing a Receivable is a page of one.
    assert.equal(page.json.data.length, call.query.includes('rx-') ? 1 : 50, first)
    const statements = [sent.at(-1)]
    if (page.json.nextCursor !== null) {
      const next = await t.call('GET', `${first}&cursor=${page.json.nextCursor}`, { key: k.apiKey })
      assert.equal(next.status, 200, next.body)
      statements.push(sent.at(-1))
    }
    for (const [i, s] of statements.entries()) {
      assert.ok(s, `${first}: no list statement captured`)
      const [row] = await t.store.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${s.sql}`, s.params)
      const raw = row?.['QUERY PLAN']
      const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as [{ Plan: PlanNode }]
      const all = nodes(plan[0].Plan)
      const what = `${call.segment}${call.query} (${i === 0 ? 'first page' : 'cursor page'})`
      assert.deepEqual(
        all.filter((n) => n['Node Type'].includes('Seq Scan')).map((n) => n['Relation Name']),
        [],
        `${what}: a sequential scan\n${JSON.stringify(plan)}`,
      )
      const scans = all.filter((n) => n['Relation Name'] === call.table)
      assert.ok(scans.length > 0, what)
      for (const scan of scans) {
        const indexed = call.sorts ? /^(Index (Only )?Scan|Bitmap Heap Scan)$/ : /^Index (Only )?Scan$/
        assert.match(scan['Node Type'], indexed, `${what}: ${JSON.stringify(plan)}`)
      }
      const sorts = all.filter((n) => n['Node Type'] === 'Sort' || n['Node Type'] === 'Incremental Sort')
      if (!call.sorts) assert.deepEqual(sorts, [], `${what}: a sort\n${JSON.stringify(plan)}`)
      const indexes = all.filter((n) => n['Index Name'] && (n['Relation Name'] === call.table || n['Node Type'] === 'Bitmap Index Scan'))
      if (i === 0) {
        // Measured, never asserted: the rows the scans read and the statement's execution time.
        const [analyzed] = await t.store.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${s.sql}`, s.params)
        const a = analyzed?.['QUERY PLAN']
        const [{ Plan, 'Execution Time': ms }] = (typeof a === 'string' ? JSON.parse(a) : a) as [
          { Plan: PlanNode; 'Execution Time': number },
        ]
        const read = nodes(Plan)
          .filter((n) => n['Relation Name'] === call.table)
          .reduce((sum, n) => sum + ((n as { 'Actual Rows'?: number })['Actual Rows'] ?? 0), 0)
        const names = [...new Set(indexes.map((n) => n['Index Name']))].join(' + ')
        report.push(`${call.segment}${call.query}: ${names}; ${read} rows read; ${ms.toFixed(2)} ms`)
      }
    }
  }
  // The indexes each list uses, for docs/performance.md.
  process.stdout.write(`# ${engineName}\n${report.map((r) => `#   ${r}`).join('\n')}\n`)
})

test('the batch list of a grant that may not write every kind probes batch_records by its key', async () => {
  const partial = await t.tenant(C, { integrationId: 'int-plan-partial', scopes: ['customers:write'] })
  const res = await t.call('GET', `/v1/clients/${C}/batches?limit=50`, { key: partial.apiKey })
  assert.equal(res.status, 200, res.body)
  // Nine in ten batches hold only a customer record; the others a receivable's, which this grant may not read.
  assert.equal(res.json.data.length, 50)
  assert.ok(res.json.data.every((b: { records: { kind: string }[] }) => b.records.every((r) => r.kind === 'customer')))
  const s = sent.at(-1)
  assert.ok(s?.sql.includes('batch_records'))
  if (!s) return
  const [row] = await t.store.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${s.sql}`, s.params)
  const raw = row?.['QUERY PLAN']
  const all = nodes(((typeof raw === 'string' ? JSON.parse(raw) : raw) as [{ Plan: PlanNode }])[0].Plan)
  assert.deepEqual(
    all.filter((n) => n['Node Type'].includes('Seq Scan')).map((n) => n['Relation Name']),
    [],
    JSON.stringify(all),
  )
  const probes = all.filter((n) => n['Relation Name'] === 'batch_records')
  assert.ok(probes.length > 0)
  for (const p of probes) assert.deepEqual([/^Index (Only )?Scan$/.test(p['Node Type']), p['Index Name']], [true, 'batch_records_pkey'])
})
