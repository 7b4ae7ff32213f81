import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createTestDatabase } from '../helpers/store.ts'

/** QueryOptions.prepared: a named statement, planned once per connection, that survives a schema change. */
test('a prepared statement answers like an unnamed one, and again after its table changed', async () => {
  const db = await createTestDatabase()
  try {
    await db.store.exec('CREATE TABLE prepared_probe (id integer PRIMARY KEY, a text); INSERT INTO prepared_probe VALUES (1, $$x$$)')
    const read = () => db.store.query('SELECT * FROM prepared_probe WHERE id = $1', [1], { prepared: true })
    for (let i = 0; i < 3; i++) assert.deepEqual(await read(), [{ id: 1, a: 'x' }])
    assert.deepEqual(await db.store.query('SELECT * FROM prepared_probe WHERE id = $1', [1]), [{ id: 1, a: 'x' }])
    // Another instance's migration: the statement prepared on this connection now reads a different row type.
    await db.store.exec(`ALTER TABLE prepared_probe ADD COLUMN b text NOT NULL DEFAULT 'y'`)
    for (let i = 0; i < 3; i++) assert.deepEqual(await read(), [{ id: 1, a: 'x', b: 'y' }])
  } finally {
    await db.drop()
  }
})
