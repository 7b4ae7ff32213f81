import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { ReceivableWrite } from '../../src/resources/receivables/schema.ts'
import { insertReceivablesIfNew } from '../../src/resources/receivables/store.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { type PlanNode, planNodes } from '../helpers/plans.ts'
import { engineName } from '../helpers/store.ts'

/**
 * Two plans of a Receivable write that must not depend on what the tables held when they were made (issue 36;
 * docs/decisions.md, "The status index led by status" and "The Receivable insert's input as JSON records"):
 * - a lookup by client and identifier (a foreign-key check of `receivables` is one; `ONLY` left out so that the
 *   partitioned layout plans its partition) is the primary key's probe, on a fresh database before any ANALYZE too;
 *   the status index led by the client once won it and then read every index entry of the client;
 * - the set-based insert-or-read keeps its generic plan once it has made its five custom ones, as PostgreSQL's
 *   `auto` plan cache mode does for a statement whose generic estimate is no worse (its input as `unnest` of arrays
 *   was estimated at its length in a custom plan and at ten rows in the generic one, so it was planned at every call).
 */
let t: TestApp
let k: Tenant

before(async () => {
  t = await startTestApp()
  k = await t.tenant('plans')
  const res = await t.call('PUT', `/v1/clients/${k.clientCode}/customers/c1`, {
    key: k.apiKey,
    body: { type: 'person', name: { firstName: 'Ada', lastName: 'Plan' }, sourceReference: 'ledger/customers/1' },
  })
  assert.equal(res.status, 201, res.body)
})
after(async () => {
  await t?.close()
})

test(`a lookup of a Receivable by client and identifier probes the primary key on a fresh database (${engineName})`, async () => {
  const plan = await t.store.query<{ 'QUERY PLAN': unknown }>(
    `EXPLAIN (FORMAT JSON) SELECT 1 FROM receivables x WHERE client_code = 'plans' AND external_receivable_id = 'r1' FOR KEY SHARE OF x`,
  )
  const raw = plan[0]?.['QUERY PLAN']
  const root = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { Plan: PlanNode }[]
  const scans = planNodes(root[0]?.Plan as PlanNode).filter((n) => n['Relation Name'] === 'receivables')
  assert.deepEqual(
    scans.map((n) => [n['Node Type'], n['Index Name']]),
    [['Index Scan', 'receivables_pkey']],
  )
})

test(`the Receivable insert-or-read keeps its generic plan after five custom ones (${engineName})`, async () => {
  const body = (i: number) =>
    ReceivableWrite.parse({
      financialType: 'loan_instalment',
      sourceRevision: 1,
      recoverableAmount: { amount: `${i}.00`, currency: 'USD' },
      responsibleCustomers: [{ externalCustomerId: 'c1', role: 'primary' }],
      dueDate: '2026-02-28',
      sourceReference: `ledger/r/${i}`,
    })
  const counts = await t.store.transaction(async (tx) => {
    for (let i = 1; i <= 8; i++) {
      const found = await insertReceivablesIfNew(
        tx,
        k.clientCode,
        [{ id: `kept-${i}`, body: body(i), amountMinor: BigInt(i * 100) }],
        '2026-11-29T00:00:00Z',
      )
      assert.equal(found.get(`kept-${i}`)?.created, true)
    }
    // The statement as this connection prepared it (a named protocol statement on both stores).
    return tx.query<{ custom_plans: string; generic_plans: string }>(
      `SELECT custom_plans::text, generic_plans::text FROM pg_prepared_statements
        WHERE statement LIKE '%INSERT INTO receivables (client_code, external_receivable_id, revision, status%'`,
    )
  })
  assert.deepEqual(counts, [{ custom_plans: '5', generic_plans: '3' }])
})
