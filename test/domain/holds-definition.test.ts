import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { HOLD_CATEGORIES, HOLD_FACTS, HOLD_VIEW_COLUMNS, holdPredicates } from '../../src/domain/holds.ts'
import { createTestDatabase, type TestDatabase } from '../helpers/store.ts'

/**
 * Holds are defined once, in src/domain/holds.ts; the view receivable_hold_facts only gathers the facts they read.
 * These tests keep the two in step: a fact the predicates need and the view lacks (or a view column nothing
 * declares) fails here, on the migrated schema of each engine.
 */
let db: TestDatabase
before(async () => {
  db = await createTestDatabase()
})
after(() => db.drop())

test('the view has exactly the columns holds.ts declares', async () => {
  const rows = await db.store.query<{ column_name: string }>(
    `SELECT column_name FROM information_schema.columns WHERE table_name = 'receivable_hold_facts' ORDER BY ordinal_position`,
  )
  assert.deepEqual(rows.map((r) => r.column_name).sort(), [...HOLD_VIEW_COLUMNS].sort())
})

test('every hold has a predicate, each predicate reads only declared facts, and every fact is read', () => {
  const predicates = holdPredicates()
  assert.deepEqual(Object.keys(predicates), [...HOLD_CATEGORIES])
  const read = new Set<string>()
  for (const [hold, sql] of Object.entries(predicates)) {
    const columns = [...sql.matchAll(/\bh\.([a-z_]+)/g)].map((m) => m[1] as string)
    assert.ok(columns.length > 0, `${hold} reads a fact`)
    for (const c of columns) {
      assert.ok((HOLD_FACTS as readonly string[]).includes(c), `${hold} reads h.${c}, which HOLD_FACTS does not declare`)
      read.add(c)
    }
  }
  assert.deepEqual([...read].sort(), [...HOLD_FACTS].sort())
})

test('each predicate is valid SQL over the view', async () => {
  for (const [hold, sql] of Object.entries(holdPredicates())) {
    const rows = await db.store.query(`SELECT count(*)::int AS n FROM receivable_hold_facts h WHERE ${sql}`)
    assert.equal(rows.length, 1, hold)
  }
})
