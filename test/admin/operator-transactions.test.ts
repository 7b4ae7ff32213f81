import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { inUnitOfWork } from '../../src/resources/unit-of-work.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { type CountingStore, countingStore } from '../helpers/counting-store.ts'
import { createTestDatabase, engineName, type TestDatabase } from '../helpers/store.ts'

/**
 * Operator writes, workers and sweepers open their transactions through `inUnitOfWork` (src/resources/unit-of-work.ts),
 * as requests do through `executeWrite`: a transaction with a unit of work, flushed before COMMIT. A write that
 * buffers nothing must pay nothing for it: an empty flush sends no statement, and tells no one.
 */
let db: TestDatabase
let counting: CountingStore
let t: TestApp

before(async () => {
  db = await createTestDatabase()
  counting = countingStore(db.store)
  t = await startTestApp({}, { db: { ...db, store: counting } })
})
after(async () => {
  await t.close()
  await db.drop()
})

const FEED_STATEMENT = /feed_heads|change_events|source_activity|client_facts/

test(`an empty unit of work flushes nothing: BEGIN and COMMIT only (${engineName})`, async () => {
  counting.reset()
  let told = 0
  const out = await inUnitOfWork(
    counting,
    async () => 'done',
    () => told++,
  )
  assert.equal(out, 'done')
  assert.deepEqual(counting.inTransactions, ['BEGIN', 'COMMIT'])
  assert.equal(told, 0)
})

test(`a unit of work that appended an event writes the feed before COMMIT and tells once after (${engineName})`, async () => {
  assert.equal((await t.admin('PUT', '/admin/v1/clients/uow-feed', { name: 'Feed' })).status, 201)
  counting.reset()
  const told: string[] = []
  await inUnitOfWork(
    counting,
    async (uow) => {
      uow.appendChange('uow-feed', {
        type: 'customer.updated',
        resourceType: 'customer',
        resourceId: 'c-1',
        revision: 1,
        occurredAt: '2026-11-01T00:00:00.000Z',
      })
      told.push(`in transaction, ${counting.inTransactions.length} statements`)
    },
    () => told.push(`after COMMIT, last ${counting.inTransactions.at(-1)}`),
  )
  assert.deepEqual(told, ['in transaction, 1 statements', 'after COMMIT, last COMMIT'])
  assert.equal(counting.inTransactions.at(0), 'BEGIN')
  assert.equal(counting.inTransactions.at(-1), 'COMMIT')
  assert.equal(counting.inTransactions.filter((sql) => FEED_STATEMENT.test(sql)).length, 1)
})

test(`an operator write appends no feed event and sends no feed statement (${engineName})`, async () => {
  counting.reset()
  const res = await t.admin('PUT', '/admin/v1/integrations/uow-int', { name: 'Integration' })
  assert.equal(res.status, 201)
  const writes = counting.inTransactions
  assert.equal(writes.filter((s) => s === 'BEGIN').length, 1)
  assert.equal(writes.at(-1), 'COMMIT')
  assert.deepEqual(
    writes.filter((sql) => FEED_STATEMENT.test(sql)),
    [],
  )
  // The integration's read, its upsert and its audit row; nothing for the (empty) unit of work.
  assert.equal(writes.length - 2, 3)
})
