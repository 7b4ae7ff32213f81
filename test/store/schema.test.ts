import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, test } from 'node:test'
import { clientKeyedTables, PARTITIONS } from '../../src/store/layout.ts'
import { migrate } from '../../src/store/migrate.ts'
import { dumpSchema } from '../../src/store/schema-dump.ts'
import { createTestDatabase, engineName, type TestDatabase, testLayout } from '../helpers/store.ts'

/**
 * The committed src/store/schema.sql is the migrated schema, read in one place: a freshly migrated database of each
 * engine dumps exactly to it. Views and functions live in definition files re-applied after the migrations, so a
 * database migrated before a definition changed, or before the definition files existed, ends the same.
 */
const committed = readFileSync(new URL('../../src/store/schema.sql', import.meta.url), 'utf8')
const HOW = 'src/store/schema.sql is not the migrated schema: run `npm run schema:dump` and commit the diff with the change'

let db: TestDatabase
before(async () => {
  // Migrated from empty, not copied from the suite's template (test/helpers/store.ts).
  db = await createTestDatabase({ fresh: true })
})
after(() => db.drop())

test(`a freshly migrated database (${engineName}) dumps exactly to src/store/schema.sql`, async () => {
  assert.equal(await dumpSchema(db.store), committed, HOW)
})

test('migrating again applies nothing and changes nothing', async () => {
  assert.deepEqual(await migrate(db.store), [])
  assert.equal(await dumpSchema(db.store), committed)
})

test('a definition recorded with another digest is re-applied, with every other', async () => {
  await db.store.exec(`UPDATE schema_definitions SET digest = 'an older file' WHERE name = '03_request_gate';
    DROP VIEW receivable_hold_facts;`)
  assert.deepEqual(await migrate(db.store), [])
  assert.equal(await dumpSchema(db.store), committed)
})

test('a database migrated before the definition files existed gets them', async () => {
  await db.store.exec(`DROP TABLE schema_definitions;
    DROP FUNCTION working_amount_minor(bigint, bigint, bigint);
    DROP FUNCTION payment_request_expired(timestamptz, timestamptz);`)
  assert.deepEqual(await migrate(db.store), [])
  assert.equal(await dumpSchema(db.store), committed)
})

test('the partitioned layout (src/store/layout.ts): every client-keyed table hash-partitioned in 8, dumping to the same schema', async () => {
  const other = await createTestDatabase({ layout: testLayout === 'partitioned' ? 'plain' : 'partitioned', fresh: true })
  try {
    const partitioned = testLayout === 'partitioned' ? db : other
    assert.equal(await dumpSchema(other.store), committed, 'the other layout dumps to the same text')
    const tables = await clientKeyedTables(partitioned.store)
    assert.ok(tables.length >= 40, `${tables.length} client-keyed tables`)
    assert.deepEqual(
      tables.filter((t) => !t.partitioned),
      [],
    )
    const parts = await partitioned.store.query<{ parent: string; n: number; strategy: string; key: string }>(
      `SELECT p.relname AS parent, count(*)::int AS n, pt.partstrat AS strategy, pg_get_partkeydef(p.oid) AS key
         FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent JOIN pg_partitioned_table pt ON pt.partrelid = p.oid
        GROUP BY p.relname, pt.partstrat, p.oid ORDER BY 1`,
    )
    assert.deepEqual(
      parts,
      tables.map((t) => ({ parent: t.name, n: PARTITIONS, strategy: 'h', key: 'HASH (client_code)' })),
    )
    // Tables keyed by something else stay whole: integrations, keys, settings, the limiter's, the operator's audit.
    const whole = await partitioned.store.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relkind = 'r' AND NOT c.relispartition ORDER BY 1`,
    )
    assert.ok(whole.some((r) => r.name === 'integrations') && whole.some((r) => r.name === 'page_tokens'))
    assert.equal(PARTITIONS, 8)
    // A unique key without client_code is refused on it, as Citus refuses one without its distribution column.
    await assert.rejects(
      partitioned.store.exec('CREATE UNIQUE INDEX no_client ON receivables (external_receivable_id)'),
      /partitioning columns|partition key/,
    )
    // Migrating again converts nothing and changes nothing.
    assert.deepEqual(await migrate(partitioned.store, { layout: 'partitioned' }), [])
    assert.equal(await dumpSchema(partitioned.store), committed)
  } finally {
    await other.drop()
  }
})
