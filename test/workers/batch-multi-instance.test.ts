import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import { assertAllCreated, assertEachCustomerWrittenOnce, customerRecords, getBatch, harness, waitFor } from '../helpers/batch-process.ts'
import { http, seedTenant } from '../helpers/service-process.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * Two service instances (child processes, two batch workers each) on one PostgreSQL database share the
 * queue: every accepted batch runs to completion on some instance and every record runs exactly once.
 */
const skip = onPostgres ? false : 'needs PostgreSQL: set DATABASE_URL (two processes cannot share the in-memory PGlite store)'

let db: TestDatabase | undefined
const h = harness(() => db as TestDatabase)
after(async () => {
  await h.cleanup()
  await db?.drop()
})

const BATCHES = 20
const RECORDS = 50

describe('several instances', { skip }, () => {
  test('two instances run 20 batches of 50 Customers: all succeed, 1000 Customers at revision 1, 1000 change events', async (t) => {
    db = await createTestDatabase()
    const env = { BATCH_WORKER_CONCURRENCY: '2', BATCH_LEASE_SECONDS: '5' }
    const a = await h.service(env)
    const b = await h.service(env)
    const key = await seedTenant(a.url, 'multi', ['customers:write', 'customers:read'])
    const idsOf = (i: number) => Array.from({ length: RECORDS }, (_, j) => `m${i}-${j + 1}`)

    for (let i = 0; i < BATCHES; i++) {
      const via = i % 2 === 0 ? a : b
      const res = await http(via.url, 'PUT', `/v1/clients/multi/batches/m-${i}`, {
        token: key,
        body: { records: customerRecords(`m${i}`, RECORDS) },
      })
      assert.equal(res.status, 202, JSON.stringify(res.json))
    }
    await waitFor(
      'every batch finished',
      async () => {
        const open = await (db as TestDatabase).store.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM batches WHERE client_code = 'multi' AND status IN ('queued', 'running')`,
        )
        return Number(open[0]?.n) === 0 ? true : undefined
      },
      120_000,
    )

    // Every batch, read through either instance, succeeded with every record created once.
    for (let i = 0; i < BATCHES; i++) {
      const via = i % 2 === 0 ? b : a
      assertAllCreated(await getBatch(via.url, key, 'multi', `m-${i}`), idsOf(i))
    }
    const all = Array.from({ length: BATCHES }, (_, i) => idsOf(i)).flat()
    assert.equal(all.length, 1000)
    await assertEachCustomerWrittenOnce(db, 'multi', all)
    assert.deepEqual(
      await db.store.query(`SELECT status, count(*)::int AS n FROM batch_records WHERE client_code = 'multi' GROUP BY status`),
      [{ status: 'succeeded', n: 1000 }],
    )

    // Which instance ran which batch: reported, not asserted (scheduling decides).
    const rows = await db.store.query<{ external_batch_id: string; runner_id: string | null; attempts: number }>(
      `SELECT external_batch_id, runner_id, attempts FROM batches WHERE client_code = 'multi' ORDER BY submitted_at`,
    )
    assert.equal(rows.length, BATCHES)
    assert.ok(
      rows.every((r) => typeof r.runner_id === 'string' && r.runner_id.length > 0),
      'every batch records the runner that ran it',
    )
    const byRunner = new Map<string, number>()
    for (const r of rows) byRunner.set(r.runner_id as string, (byRunner.get(r.runner_id as string) ?? 0) + 1)
    t.diagnostic(`batches per runner: ${[...byRunner].map(([id, n]) => `${id.slice(0, 8)}=${n}`).join(', ')}`)
    t.diagnostic(`runners: ${byRunner.size}; claims: ${rows.reduce((s, r) => s + Number(r.attempts), 0)} for ${BATCHES} batches`)
  })
})
