import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Tx } from '../../src/store/store.ts'
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

test('a prepared statement takes and returns every type the write path uses, exactly as an unnamed one', async () => {
  const db = await createTestDatabase()
  try {
    const sql = `SELECT $1::text AS t, $2::bigint[] AS big, $3::int AS i, $4::jsonb AS doc, $5::timestamptz AS at,
                        $6::text AS missing, $7::text[] AS texts, $8::numeric AS amount, $9::boolean AS yes`
    const params = [
      'it\'s "quoted"',
      ['9007199254740993', '-1'],
      7,
      JSON.stringify({ a: [1, 'x'], b: null }),
      '2026-11-24T06:00:00.123Z',
      null,
      ['a,b', '{c}', ''],
      '12345678901234567890.01',
      true,
    ]
    const unnamed = await db.store.query(sql, params)
    const named = await db.store.query(sql, params, { prepared: true })
    assert.deepEqual(named, unnamed)
    assert.deepEqual(named, [
      {
        t: 'it\'s "quoted"',
        big: ['9007199254740993', '-1'],
        i: 7,
        doc: { a: [1, 'x'], b: null },
        at: '2026-11-24T06:00:00.123Z',
        missing: null,
        texts: ['a,b', '{c}', ''],
        amount: '12345678901234567890.01',
        yes: true,
      },
    ])
    // No rows: an empty list, not an error.
    assert.deepEqual(await db.store.query('SELECT 1 AS one WHERE $1::int = 2', [1], { prepared: true }), [])
  } finally {
    await db.drop()
  }
})

test('a prepared statement that fails rolls its transaction back with its SQLSTATE, and runs again afterwards', async () => {
  const db = await createTestDatabase()
  try {
    await db.store.exec('CREATE TABLE prepared_unique (id integer PRIMARY KEY)')
    const insert = 'INSERT INTO prepared_unique (id) VALUES ($1) RETURNING id'
    // First prepared inside a transaction that rolls back: the statement outlives it.
    await assert.rejects(
      db.store.transaction(async (tx) => {
        assert.deepEqual(await tx.query(insert, [1], { prepared: true }), [{ id: 1 }])
        throw new Error('roll back')
      }),
      /roll back/,
    )
    assert.deepEqual(await db.store.query('SELECT count(*)::int AS n FROM prepared_unique'), [{ n: 0 }])
    await db.store.transaction((tx) => tx.query(insert, [1], { prepared: true }))
    // A unique violation inside a transaction: the error is the database's, and nothing of the transaction stays.
    await assert.rejects(
      db.store.transaction(async (tx) => {
        await tx.query(insert, [2], { prepared: true })
        await tx.query(insert, [1], { prepared: true })
      }),
      (err: { code?: string }) => err.code === '23505',
    )
    assert.deepEqual(await db.store.query('SELECT id FROM prepared_unique ORDER BY id'), [{ id: 1 }])
    // Outside a transaction, a bad parameter is the database's error too, and the statement still works after it.
    await assert.rejects(db.store.query(insert, ['x'], { prepared: true }), (err: { code?: string }) => err.code === '22P02')
    assert.deepEqual(await db.store.query(insert, [3], { prepared: true }), [{ id: 3 }])
  } finally {
    await db.drop()
  }
})

test('a statement sent through a transaction after it ended is refused, prepared or not, and writes nothing', async () => {
  const db = await createTestDatabase()
  try {
    await db.store.exec('CREATE TABLE after_end (id integer PRIMARY KEY)')
    let escaped: Tx | undefined
    await db.store.transaction(async (tx) => {
      escaped = tx
      await tx.query('INSERT INTO after_end (id) VALUES ($1)', [1], { prepared: true })
    })
    const tx = escaped as Tx
    await assert.rejects(tx.query('INSERT INTO after_end (id) VALUES ($1)', [2], { prepared: true }), /Transaction is closed/)
    await assert.rejects(tx.query('INSERT INTO after_end (id) VALUES ($1)', [3]), /Transaction is closed/)
    assert.deepEqual(await db.store.query('SELECT id FROM after_end ORDER BY id'), [{ id: 1 }])
  } finally {
    await db.drop()
  }
})
