import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import { inUnitOfWork } from '../../src/resources/unit-of-work.ts'
import { rollbackToSavepoint, setSavepoint } from '../../src/store/savepoints.ts'
import { FailedAfterCommitError, type Store, type Tx } from '../../src/store/store.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * COMMIT sent early (`Tx.commit`, docs/decisions.md, "A write in two round trips"): it travels with the statements
 * before it, so what it commits is decided by what reached the database, never by what the caller's code did after.
 * Each case states which of the three answers it gives: committed, nothing saved (the statement's own error), or
 * saved though the function failed (FailedAfterCommitError).
 */
let db: TestDatabase
let store: Store

before(async () => {
  db = await createTestDatabase()
  store = db.store
  await store.exec('CREATE TABLE early_commit_probe (id text PRIMARY KEY, note text)')
})
after(async () => {
  await db.drop()
})

const insert = (tx: Tx, id: string, note: unknown = null) =>
  tx.query('INSERT INTO early_commit_probe (id, note) VALUES ($1, $2)', [id, note])
const ids = async () => (await store.query<{ id: string }>('SELECT id FROM early_commit_probe ORDER BY id')).map((r) => r.id)
const clear = () => store.query('DELETE FROM early_commit_probe')
/** What the transaction threw, or null when it committed. */
const failureOf = (work: Promise<unknown>): Promise<unknown> =>
  work.then(
    () => null,
    (err: unknown) => err,
  )

describe('COMMIT sent with the last statements', { skip: !onPostgres && 'PGlite sends COMMIT after the function' }, () => {
  test('what was sent before it commits, once its statements are answered', async () => {
    await clear()
    const result = await store.transaction(async (tx) => {
      await insert(tx, 'a')
      const second = insert(tx, 'b')
      tx.commit?.()
      await second
      return 'done'
    })
    assert.equal(result, 'done')
    assert.deepEqual(await ids(), ['a', 'b'])
  })

  test("a statement that fails before it: the server rolls back, the statement's error, nothing saved", async () => {
    await clear()
    const failed = await failureOf(
      store.transaction(async (tx) => {
        await insert(tx, 'a')
        const sent = [insert(tx, 'b'), insert(tx, 'b'), insert(tx, 'c')]
        tx.commit?.()
        await Promise.all(sent)
      }),
    )
    assert.equal((failed as { code?: string }).code, '23505')
    assert.equal(failed instanceof FailedAfterCommitError, false)
    assert.deepEqual(await ids(), [])
  })

  test('the function failing after it (an answer that does not fit): saved, and said so', async () => {
    await clear()
    const misfit = new Error('the answer does not fit')
    const failed = await failureOf(
      store.transaction(async (tx) => {
        await insert(tx, 'a')
        const last = insert(tx, 'b')
        tx.commit?.()
        await last
        throw misfit
      }),
    )
    assert.ok(failed instanceof FailedAfterCommitError)
    assert.equal(failed.cause, misfit)
    assert.deepEqual(await ids(), ['a', 'b'])
  })

  test('no statement after it: refused, and what was sent before it stands (saved, and said so)', async () => {
    await clear()
    const failed = await failureOf(
      store.transaction(async (tx) => {
        await insert(tx, 'a')
        tx.commit?.()
        await insert(tx, 'late')
      }),
    )
    assert.ok(failed instanceof FailedAfterCommitError)
    assert.match(String((failed.cause as Error).message), /COMMIT was sent/)
    assert.deepEqual(await ids(), ['a'])
  })

  test('a statement whose parameters cannot be sent: COMMIT waits, nothing saved', async () => {
    await clear()
    const circular: Record<string, unknown> = {}
    circular.self = circular
    const failed = await failureOf(
      store.transaction(async (tx) => {
        await insert(tx, 'a')
        const sent = [insert(tx, 'b'), insert(tx, 'c', circular), insert(tx, 'd')]
        tx.commit?.()
        await Promise.all(sent)
      }),
    )
    assert.ok(failed instanceof TypeError, String(failed))
    assert.deepEqual(await ids(), [])
  })

  test('before BEGIN is answered it is not sent early: the transaction still commits, once', async () => {
    await clear()
    let runs = 0
    await store.transaction(async (tx) => {
      runs++
      const first = insert(tx, 'a')
      tx.commit?.()
      await first
    })
    assert.equal(runs, 1)
    assert.deepEqual(await ids(), ['a'])
  })

  test('property: whatever statements fail and wherever the function fails, the answer says what was saved', async () => {
    // Each case: n inserts after a first answered one, one of them perhaps a duplicate (fails in the database), and
    // the function perhaps throwing after COMMIT left. Expected: a failing statement saves nothing; otherwise all are
    // saved, and a throw is FailedAfterCommitError.
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 5 }),
        fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined }),
        fc.boolean(),
        async (n, duplicateAt, throwAfter) => {
          await clear()
          const rows = Array.from({ length: n }, (_, i) => `r${i}`)
          const dup = duplicateAt !== undefined && duplicateAt < n ? duplicateAt : undefined
          const outcome = await store
            .transaction(async (tx) => {
              await insert(tx, 'first')
              const sent = rows.map((id, i) => insert(tx, i === dup ? 'first' : id))
              tx.commit?.()
              await Promise.all(sent)
              if (throwAfter) throw new Error('after')
            })
            .then(
              () => 'committed',
              (err: unknown) => (err instanceof FailedAfterCommitError ? 'saved-failed' : (err as { code?: string }).code),
            )
          const saved = await ids()
          if (dup !== undefined) {
            assert.equal(outcome, '23505')
            assert.deepEqual(saved, [])
          } else {
            assert.equal(outcome, throwAfter ? 'saved-failed' : 'committed')
            assert.deepEqual(saved, ['first', ...rows].sort())
          }
        },
      ),
      { numRuns: 40 },
    )
  })
})

describe('PGlite: no COMMIT sent early', { skip: onPostgres && 'PostgreSQL sends it early' }, () => {
  test('the transaction has no early COMMIT: a failing function rolls back', async () => {
    await clear()
    const failed = await failureOf(
      store.transaction(async (tx) => {
        assert.equal(tx.commit, undefined)
        await insert(tx, 'a')
        throw new Error('misfit')
      }),
    )
    assert.equal((failed as Error).message, 'misfit')
    assert.deepEqual(await ids(), [])
  })
})

describe('writes sent ahead (UnitOfWork.send): with the flush and COMMIT, on both stores', () => {
  test('committed with the flush; the promise it returns gives the answer', async () => {
    await clear()
    let answered: unknown
    await inUnitOfWork(store, async (uow) => {
      const sent = uow.send((tx) => tx.query<{ id: string }>("INSERT INTO early_commit_probe (id) VALUES ('a') RETURNING id"))
      uow.send((tx) => insert(tx, 'b'))
      answered = sent.then((rows) => rows[0]?.id)
    })
    assert.equal(await answered, 'a')
    assert.deepEqual(await ids(), ['a', 'b'])
  })

  test("one that fails: the transaction fails with its own error (not the aborted transaction's of those after it), nothing saved", async () => {
    await clear()
    await insert(store as unknown as Tx, 'taken')
    const failed = await failureOf(
      inUnitOfWork(store, async (uow) => {
        uow.send((tx) => insert(tx, 'a'))
        uow.send((tx) => insert(tx, 'taken'))
        uow.send((tx) => insert(tx, 'c'))
      }),
    )
    assert.equal((failed as { code?: string }).code, '23505')
    assert.deepEqual(await ids(), ['taken'])
  })

  test('one that sends a statement after it awaited: refused, on both stores (never a silent part of a write)', async () => {
    await clear()
    const failed = await failureOf(
      inUnitOfWork(store, async (uow) => {
        // A write's first round trip (its reads) is answered before it sends its writes ahead.
        await uow.tx.query('SELECT 1')
        uow.send(async (tx) => {
          await insert(tx, 'a')
          await insert(tx, 'b')
        })
      }),
    )
    // PostgreSQL: COMMIT had left with the first statement, which stands, and the store says so; PGlite: rolled back.
    const cause = failed instanceof FailedAfterCommitError ? failed.cause : failed
    assert.match((cause as Error).message, /sends every statement at once/)
    assert.deepEqual(await ids(), onPostgres ? ['a'] : [])
    assert.equal(failed instanceof FailedAfterCommitError, onPostgres)
  })

  test('one that fails inside a savepoint: settled, the savepoint rolled back, the next mark and write go on', async () => {
    await clear()
    await insert(store as unknown as Tx, 'taken')
    await inUnitOfWork(store, async (uow) => {
      await setSavepoint(uow.tx, 'batch_record')
      const mark = uow.mark()
      uow.send((tx) => insert(tx, 'taken'))
      // As a batch record run alone does when it fails (src/workers/batch-chunk.ts, runRecord).
      await assert.rejects(uow.settleSent(), (err: { code?: string }) => err.code === '23505')
      await rollbackToSavepoint(uow.tx, 'batch_record')
      uow.rollbackTo(mark)
      uow.mark()
      uow.send((tx) => insert(tx, 'next'))
    })
    assert.deepEqual(await ids(), ['next', 'taken'])
  })

  test('no savepoint mark while one is unanswered', async () => {
    await clear()
    const failed = await failureOf(
      inUnitOfWork(store, async (uow) => {
        uow.send((tx) => insert(tx, 'a'))
        uow.mark()
      }),
    )
    assert.match((failed as Error).message, /no savepoint can take it back/)
    assert.deepEqual(await ids(), [])
  })
})
