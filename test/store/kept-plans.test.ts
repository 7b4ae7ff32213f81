import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { insertCustomersIfNew } from '../../src/resources/customers/store.ts'
import { findEventsAndReceivables } from '../../src/resources/financial-events/store.ts'
import { holdSnapshot } from '../../src/resources/holds/store.ts'
import { ReceivableWrite } from '../../src/resources/receivables/schema.ts'
import { insertReceivablesIfNew } from '../../src/resources/receivables/store.ts'
import type { Tx } from '../../src/store/store.ts'
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
 *   was estimated at its length in a custom plan and at ten rows in the generic one, so it was planned at every call);
 * - a set-based read of rows by identifier, prepared, probes the primary key once per identifier in its generic
 *   plan made while the tables are small: `= ANY($n)` there was a filter over every row of the client (estimated at
 *   a few), kept while a bulk load grew the client to thousands of rows (docs/decisions.md, "Reads by many
 *   identifiers probe the key per identifier").
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

/** The client as a bulk load leaves it a few chunks in, before any ANALYZE: 400 more rows in each table read here. */
async function growClient(tx: Tx) {
  await tx.query(
    `INSERT INTO customers (client_code, external_customer_id, revision, representation, created_at, updated_at)
     SELECT 'plans', 'bulk-' || n, 1, '{}', now(), now() FROM generate_series(1, 400) AS n`,
  )
  await tx.query(
    `INSERT INTO receivables (client_code, external_receivable_id, revision, status, source_revision, currency, source_amount_minor,
                              representation, created_at, updated_at)
     SELECT 'plans', 'bulk-' || n, 1, 'active', 1, 'USD', 100, '{}', now(), now() FROM generate_series(1, 400) AS n`,
  )
  await tx.query(
    `INSERT INTO financial_events (client_code, family, external_event_id, external_receivable_id, body, signed_amount_minor, accepted_at)
     SELECT 'plans', 'adjustment', 'bulk-' || n, 'bulk-' || n, '{}', 1, now() FROM generate_series(1, 400) AS n`,
  )
}

/**
 * The plan a prepared statement of this connection runs when its plan is generic (`force_generic_plan`, made now, as
 * `auto` makes it after five custom plans, and kept until the tables are next analyzed): its scans of `table`
 * (partitions named as their table), each as [node type, index, index condition, filter].
 */
async function genericScans(tx: Tx, statementLike: string, args: string, table: string) {
  const named = await tx.query<{ name: string }>('SELECT name FROM pg_prepared_statements WHERE statement LIKE $1', [statementLike])
  assert.equal(named.length, 1, `one prepared statement like ${statementLike}`)
  await tx.query('SET LOCAL plan_cache_mode = force_generic_plan')
  const plan = await tx.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) EXECUTE ${named[0]?.name}(${args})`)
  const raw = plan[0]?.['QUERY PLAN']
  const root = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { Plan: PlanNode }[]
  return planNodes(root[0]?.Plan as PlanNode)
    .filter((n) => n['Relation Name'] === table && n['Node Type'] !== 'ModifyTable')
    .map((n) => [n['Node Type'], n['Index Name'], (n as { 'Index Cond'?: string })['Index Cond'], (n as { Filter?: string }).Filter])
}

test(`the Customers' insert-or-read reads existing ones by a key probe per identifier in its generic plan (${engineName})`, async () => {
  await t.store
    .transaction(async (tx) => {
      const found = await insertCustomersIfNew(
        tx,
        k.clientCode,
        [
          { id: 'c1', representation: { type: 'person', name: { firstName: 'Ada', lastName: 'Plan' }, sourceReference: 'x' } as never },
          { id: 'c2', representation: { type: 'person', name: { firstName: 'Bo', lastName: 'Plan' }, sourceReference: 'y' } as never },
        ],
        '2026-11-29T00:00:00Z',
      )
      assert.deepEqual(
        [...found.entries()].map(([id, f]) => [id, 'created' in f]),
        [
          ['c2', true],
          ['c1', false],
        ],
      )
      await growClient(tx)
      const scans = await genericScans(
        tx,
        '%INSERT INTO customers (client_code, external_customer_id, revision, representation%',
        `'plans', '{c1,c3}', '{"{}","{}"}', '2026-11-29T00:00:00Z'`,
        'customers',
      )
      assert.deepEqual(scans, [['Index Scan', 'customers_pkey', '((client_code = $1) AND (external_customer_id = k.id))', undefined]])
      throw new Rollback()
    })
    .catch(ignoreRollback)
})

test(`a financial event's lookup of events and Receivables probes each key in its generic plan (${engineName})`, async () => {
  await t.store
    .transaction(async (tx) => {
      const found = await findEventsAndReceivables(tx, k.clientCode, 'adjustment', ['e1'], ['kept-1', 'none'])
      assert.deepEqual([found.accepted.size, [...found.receivables.keys()]], [0, ['kept-1']])
      await growClient(tx)
      const like = '%SELECT e.external_event_id, e.body, e.accepted_at%'
      const args = `'plans', 'adjustment', '{e1,e2}', '{r1,r2}'`
      // Every key column an index condition, no filter. On a table never analyzed the planner prices the primary key and
      // financial_events_accepted (client, family, accepted_at, event) alike and may take either; the latter then checks
      // the identifier in the index entries of the client's events of that family, not in their rows, until the first
      // ANALYZE (the batch runner's, src/store/statistics.ts) shows it is no probe.
      const events = await genericScans(tx, like, args, 'financial_events')
      assert.deepEqual(
        events.map(([type, , cond, filter]) => [type, cond, filter]),
        [['Index Scan', '((client_code = $1) AND (family = $2) AND (external_event_id = k.id))', undefined]],
      )
      assert.deepEqual(await genericScans(tx, like, args, 'receivables'), [
        ['Index Scan', 'receivables_pkey', '((client_code = $1) AND (external_receivable_id = rk.id))', undefined],
      ])
      throw new Rollback()
    })
    .catch(ignoreRollback)
})

test(`the holds' snapshot reads each Receivable's holds by its key in every table of the view, in its generic plan (${engineName})`, async () => {
  await t.store
    .transaction(async (tx) => {
      assert.deepEqual([...(await holdSnapshot(tx, k.clientCode, ['kept-1', 'none'])).keys()], ['kept-1'])
      await growClient(tx)
      const like = '%FROM receivable_hold_facts h%'
      const args = `'plans', '{bulk-1,bulk-2}'`
      // The view's tables keyed by Receivable: each read by client and this identifier, none scanned for the client.
      const tables = [
        'receivables',
        'recovery_instructions',
        'restrictions',
        'receivable_customers',
        'book_omissions',
        'reconciliation_holds',
      ]
      const conds: string[][] = []
      for (const table of tables) conds.push((await genericScans(tx, like, args, table)).map(([, , cond]) => String(cond)))
      assert.deepEqual(
        conds.map((c, i) => [tables[i], c.filter((cond) => cond.includes('k.id')).length, c.length]),
        [
          ['receivables', 1, 1],
          ['recovery_instructions', 1, 1],
          // The Receivable's own restrictions by key; the Customers' ones are read through its links (below).
          ['restrictions', 1, 2],
          ['receivable_customers', 1, 1],
          ['book_omissions', 1, 1],
          ['reconciliation_holds', 1, 1],
        ],
      )
      throw new Rollback()
    })
    .catch(ignoreRollback)
})

/** Ends a test's transaction without keeping what it wrote. */
class Rollback extends Error {}
function ignoreRollback(err: unknown) {
  if (!(err instanceof Rollback)) throw err
}
