import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, test } from 'node:test'
import { citusScript, GATE_TABLES, LOCAL_TABLES, REFERENCE_TABLES } from '../../src/store/citus.ts'
import { clientKeyedTables, LOOKUP_TABLES } from '../../src/store/layout.ts'
import { createTestDatabase, engineName, type TestDatabase } from '../helpers/store.ts'

/**
 * Issue 37, item 5: the script an operator runs once on Citus after the migrations (scripts/citus-distribute.sql,
 * docs/scaling.md) is the migrated schema's: every table placed once, every client-keyed table distributed by
 * client_code and colocated with clients, each after the tables it references.
 */
const committed = readFileSync(new URL('../../scripts/citus-distribute.sql', import.meta.url), 'utf8')

let db: TestDatabase
before(async () => {
  db = await createTestDatabase()
})
after(() => db.drop())

test(`scripts/citus-distribute.sql is the script of a freshly migrated database (${engineName})`, async () => {
  assert.equal(await citusScript(db.store), committed, 'run `npm run citus:script` and commit the diff')
})

test('every table is placed exactly once; client-keyed ones colocated with clients, after what they reference', async () => {
  const keyed = (await clientKeyedTables(db.store)).map((t) => t.name)
  const distributed = [...committed.matchAll(/create_distributed_table\('(\w+)', 'client_code'/g)].map((m) => m[1])
  assert.deepEqual([...distributed].sort(), [...keyed].sort())
  assert.equal(distributed[0], 'clients')
  for (const t of distributed.slice(1))
    assert.ok(committed.includes(`create_distributed_table('${t}', 'client_code', colocate_with => 'clients');`), t)
  const reference = [...committed.matchAll(/create_reference_table\('(\w+)'\)/g)].map((m) => m[1])
  assert.deepEqual([...reference].sort(), [...REFERENCE_TABLES].sort())
  const lookup = [...committed.matchAll(/create_distributed_table\('(\w+)', '(\w+)', colocate_with => 'none'\)/g)].map((m) => m[1])
  assert.deepEqual(lookup, [...LOOKUP_TABLES, 'rate_limit_windows'])
  // The request gate's tables by bucket, together (docs/scaling.md, "The request gate").
  const gate = [...committed.matchAll(/create_distributed_table\('(\w+)', 'bucket'/g)].map((m) => m[1])
  assert.deepEqual(gate, [...GATE_TABLES])
  assert.ok(committed.includes("create_distributed_table('inflight_requests', 'bucket', colocate_with => 'rate_limit_windows');"))
  const all = (
    await db.store.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition`,
    )
  ).map((r) => r.name)
  assert.deepEqual([...distributed, ...reference, ...LOOKUP_TABLES, ...GATE_TABLES, ...LOCAL_TABLES].sort(), [...all].sort())
  // Each table after every table its foreign keys reference.
  const order = [...reference, ...distributed]
  const edges = await db.store.query<{ child: string; parent: string }>(
    `SELECT t.relname AS child, r.relname AS parent FROM pg_constraint k
       JOIN pg_class t ON t.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
      WHERE k.contype = 'f' AND k.conparentid = 0 AND k.conrelid <> k.confrelid`,
  )
  assert.ok(edges.length > 30)
  for (const e of edges) assert.ok(order.indexOf(e.parent) < order.indexOf(e.child), `${e.child} after ${e.parent}`)
})

test('a table no rule places is refused by name, not left out of the script', async () => {
  await db.store.exec('CREATE TABLE unplaced_example (id text PRIMARY KEY)')
  try {
    await assert.rejects(citusScript(db.store), /tables with no place on Citus \(src\/store\/citus.ts\): unplaced_example/)
  } finally {
    await db.store.exec('DROP TABLE unplaced_example')
  }
})
