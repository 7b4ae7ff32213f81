import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import type { Store, Tx } from '../../src/store/store.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * A turn's statements in one write (docs/decisions.md): on PostgreSQL the statements a transaction sends in one turn
 * of the event loop leave its connection in one system call, not one each. Counted at the socket: every `_write` or
 * `_writev` a socket makes is one write to the kernel.
 */
let db: TestDatabase
let store: Store

before(async () => {
  db = await createTestDatabase()
  store = db.store
  await store.exec('CREATE TABLE one_write_probe (id text PRIMARY KEY)')
})
after(async () => {
  await db.drop()
})

type WriteMethod = (this: net.Socket, ...args: unknown[]) => unknown

/** The database server's port: only sockets to it are counted (the test runner writes its reports too). */
const databasePort = onPostgres ? Number(new URL(process.env.DATABASE_URL as string).port || 5432) : 0

/** The writes each socket to the database made while `work` ran, in the order the sockets first wrote. */
async function writesDuring(work: () => Promise<unknown>): Promise<number[]> {
  const proto = net.Socket.prototype as unknown as { _write: WriteMethod; _writev: WriteMethod }
  const { _write, _writev } = proto
  const counts = new Map<net.Socket, number>()
  const counted = (original: WriteMethod): WriteMethod =>
    function (this: net.Socket, ...args) {
      if (this.remotePort === databasePort) counts.set(this, (counts.get(this) ?? 0) + 1)
      return original.apply(this, args)
    }
  proto._write = counted(_write)
  proto._writev = counted(_writev)
  try {
    await work()
  } finally {
    proto._write = _write
    proto._writev = _writev
  }
  return [...counts.values()]
}

const insert = (tx: Tx, id: string) => tx.query('INSERT INTO one_write_probe (id) VALUES ($1)', [id])
const ids = async () => (await store.query<{ id: string }>('SELECT id FROM one_write_probe ORDER BY id')).map((r) => r.id)

describe('statements sent in one turn leave in one write', { skip: !onPostgres && 'PGlite has no socket' }, () => {
  before(async () => {
    // The pool's connection exists before anything is counted (a new one writes its start-up and settings).
    await store.transaction(async (tx) => insert(tx, 'warm'))
    await store.query('DELETE FROM one_write_probe')
  })

  test('BEGIN and three statements sent together: one write; COMMIT after their answers: one more', async () => {
    const writes = await writesDuring(() =>
      store.transaction(async (tx) => {
        await Promise.all([insert(tx, 'a'), insert(tx, 'b'), insert(tx, 'c')])
      }),
    )
    // Without the gathering: BEGIN, each INSERT and COMMIT one write each, 5.
    assert.deepEqual(writes, [2])
    assert.deepEqual(await ids(), ['a', 'b', 'c'])
    await store.query('DELETE FROM one_write_probe')
  })

  test('the statement ahead of BEGIN, BEGIN, the first statements and an early COMMIT: one write', async () => {
    let aheadAnswered = false
    const writes = await writesDuring(() =>
      store.transaction(
        async (tx) => {
          const sent = [insert(tx, 'd'), insert(tx, 'e')]
          tx.commit?.()
          await Promise.all(sent)
        },
        async (connection) => {
          await connection.query('SELECT 1')
          aheadAnswered = true
        },
      ),
    )
    // COMMIT leaves early only once the statement ahead has succeeded (runTransaction): before its answer the
    // transaction sends COMMIT after the function, in a write of its own.
    assert.equal(aheadAnswered, true)
    assert.deepEqual(writes, [2])
    assert.deepEqual(await ids(), ['d', 'e'])
    await store.query('DELETE FROM one_write_probe')
  })

  test('statements sent in separate turns (each after the answer of the one before) each leave in a write of their own', async () => {
    const writes = await writesDuring(() =>
      store.transaction(async (tx) => {
        await insert(tx, 'f')
        await insert(tx, 'g')
      }),
    )
    // BEGIN with the first INSERT, the second INSERT, COMMIT.
    assert.deepEqual(writes, [3])
    assert.deepEqual(await ids(), ['f', 'g'])
  })
})
