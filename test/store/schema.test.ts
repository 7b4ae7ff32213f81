import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, test } from 'node:test'
import { migrate } from '../../src/store/migrate.ts'
import { dumpSchema } from '../../src/store/schema-dump.ts'
import { createTestDatabase, engineName, type TestDatabase } from '../helpers/store.ts'

/**
 * The committed src/store/schema.sql is the migrated schema, read in one place: a freshly migrated database of each
 * engine dumps exactly to it. Views and functions live in definition files re-applied after the migrations, so a
 * database migrated before a definition changed, or before the definition files existed, ends the same.
 */
const committed = readFileSync(new URL('../../src/store/schema.sql', import.meta.url), 'utf8')
const HOW = 'src/store/schema.sql is not the migrated schema: run `npm run schema:dump` and commit the diff with the change'

let db: TestDatabase
before(async () => {
  db = await createTestDatabase()
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
