import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import pg from 'pg'
import { claimBatch, holdLease } from '../../src/resources/batches/store.ts'
import { claimDeliveries, dueEndpoints } from '../../src/resources/webhooks/delivery-store.ts'
import { LEASE_LOCK_CLASS } from '../../src/store/lease-holder.ts'
import type { Store } from '../../src/store/store.ts'
import { waitFor } from '../helpers/batch-process.ts'
import { spawnProcess } from '../helpers/service-process.ts'
import { createTestDatabase, engineName, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * Leases tied to their holder's lock (src/store/lease-holder.ts), at the store: a lease whose holder holds no
 * lock is taken at once, however long it has to run; one whose holder is alive is not; and the holder it was
 * taken from is fenced off by its token. On PostgreSQL the lock lives on a dedicated connection: losing it
 * forfeits the holder's leases at once, and the holder takes a new key when it reconnects.
 */
let db: TestDatabase
before(async () => {
  db = await createTestDatabase()
  await db.store.query(`INSERT INTO clients (client_code, name, created_at, updated_at) VALUES ('lh', 'lh', now(), now())`)
  await db.store.query(`INSERT INTO integrations (integration_id, name, created_at, updated_at) VALUES ('int-lh', 'lh', now(), now())`)
  await db.store.query(
    `INSERT INTO grants (client_code, integration_id, scopes, status, recovery_entry_mode, feed_mode, industry_profile,
                         receipt_delivery_owner, created_at, updated_at)
     VALUES ('lh', 'int-lh', '{customers:read}', 'active', 'explicit_instruction', 'transaction', 'credit_union', 'partner', now(), now())`,
  )
})
after(() => db.drop())

/** A key no session holds: a lease written with it was left by a dead process. */
const DEAD_KEY = 7

const live = (store: Store) => {
  const key = store.leaseHolder?.current()
  assert.equal(typeof key, 'number')
  return key as number
}

async function queueBatch(id: string) {
  await db.store.query(
    `INSERT INTO batches (client_code, external_batch_id, integration_id, body_digest, status, submitted_at)
     VALUES ('lh', $1, 'int-lh', 'd', 'queued', now())`,
    [id],
  )
}

describe(`lease holders (${engineName})`, () => {
  test('the store holds its lease lock: its key shows in pg_locks, granted, on the first key LEASE_LOCK_CLASS', async () => {
    const key = live(db.store)
    const rows = await db.store.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 2 AND granted`,
      [LEASE_LOCK_CLASS, key],
    )
    assert.deepEqual(rows, [{ n: 1 }])
  })

  test('a batch leased for 10 minutes by a holder without a lock is taken at once; a live holder keeps it; the old token is fenced', async () => {
    await queueBatch('b-dead')
    const now = new Date().toISOString()
    const first = await claimBatch(db.store, '00000000-0000-4000-8000-000000000001', 600, 'dead-runner', now, DEAD_KEY)
    assert.deepEqual(first, { client_code: 'lh', external_batch_id: 'b-dead', integration_id: 'int-lh' })

    const key = live(db.store)
    const second = await claimBatch(db.store, '00000000-0000-4000-8000-000000000002', 600, 'live-runner', now, key)
    assert.deepEqual(second, first)
    // Held by a live holder, 10 minutes to run: nobody takes it.
    assert.equal(await claimBatch(db.store, '00000000-0000-4000-8000-000000000003', 600, 'other', now, key), undefined)
    // The dead holder's token changes nothing any more.
    assert.equal(
      await db.store.transaction((tx) => holdLease(tx, first as NonNullable<typeof first>, '00000000-0000-4000-8000-000000000001', 600)),
      undefined,
    )
    const rows = await db.store.query<{ runner_id: string; attempts: number; lease_holder: string }>(
      `SELECT runner_id, attempts, lease_holder FROM batches WHERE client_code = 'lh' AND external_batch_id = 'b-dead'`,
    )
    assert.deepEqual(rows, [{ runner_id: 'live-runner', attempts: 2, lease_holder: String(key) }])
  })

  test('a batch leased without a holder (before migration 0018) only expires', async () => {
    await queueBatch('b-none')
    const now = new Date().toISOString()
    assert.ok(await claimBatch(db.store, '00000000-0000-4000-8000-000000000011', 600, 'old-runner', now, null))
    assert.equal(await claimBatch(db.store, '00000000-0000-4000-8000-000000000012', 600, 'new-runner', now, live(db.store)), undefined)
    await db.store.query(`UPDATE batches SET status = 'succeeded', lease_token = NULL WHERE external_batch_id IN ('b-dead', 'b-none')`)
  })

  test('a webhook delivery leased by a holder without a lock is due and claimed at once; a live holder keeps it', async () => {
    await db.store.query(
      `INSERT INTO webhook_endpoints (client_code, integration_id, url, status, secret_version, secret_ciphertext, configured_seq,
                                      scanned_seq, created_at, updated_at)
       VALUES ('lh', 'int-lh', 'https://example.com/hook', 'enabled', 1, 'x', 0, 0, now(), now())`,
    )
    await db.store.query(
      `INSERT INTO webhook_deliveries (client_code, integration_id, delivery_id, seq, event_id, type, resource_type, resource_id,
                                       revision, occurred_at, status, next_attempt_at, created_at, lease_token, lease_expires_at, lease_holder)
       VALUES ('lh', 'int-lh', 'dlv_1', 1, gen_random_uuid(), 'customer.created', 'customer', 'c-1', 1, now(), 'pending', now(), now(),
               gen_random_uuid(), now() + interval '10 minutes', $1)`,
      [DEAD_KEY],
    )
    const now = new Date().toISOString()
    const leaseUntil = new Date(Date.now() + 600_000).toISOString()
    assert.deepEqual(await dueEndpoints(db.store, now, 10), [{ client_code: 'lh', integration_id: 'int-lh' }])
    const key = live(db.store)
    const claim = (token: string) =>
      db.store.transaction((tx) =>
        claimDeliveries(tx, { clientCode: 'lh', integrationId: 'int-lh', token, now, leaseUntil, limit: 10, holder: key }),
      )
    assert.deepEqual(
      (await claim('00000000-0000-4000-8000-000000000021')).deliveries.map((d) => d.delivery_id),
      ['dlv_1'],
    )
    assert.deepEqual(await dueEndpoints(db.store, now, 10), [])
    assert.deepEqual((await claim('00000000-0000-4000-8000-000000000022')).deliveries, [])
  })

  test('PostgreSQL: the holder connection never keeps a process alive by itself, and closing the store waits for it', {
    skip: onPostgres ? false : 'the embedded store has no connection',
  }, async () => {
    const script = `import { openPostgres } from './src/store/postgres.ts'
      const s = openPostgres(process.env.LH_URL)
      await s.leaseHolder.ready
      await s.close()
      console.log('closed', s.leaseHolder.current())`
    const child = spawnProcess(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { LH_URL: db.url })
    const exit = await child.exited
    assert.deepEqual([exit.code, child.output().trim()], [0, 'closed null'])
  })

  test('PostgreSQL: the holder connection terminated forfeits its leases at once, and the holder reconnects under a new key', {
    skip: onPostgres ? false : 'the embedded store has no connection to lose',
  }, async () => {
    const a = db.open()
    const b = db.open()
    try {
      await waitFor('both holders', async () => (a.leaseHolder?.current() && b.leaseHolder?.current() ? true : undefined))
      const keyA = live(a)
      await queueBatch('b-lost')
      const now = new Date().toISOString()
      const claimed = await claimBatch(a, '00000000-0000-4000-8000-000000000031', 600, 'runner-a', now, keyA)
      assert.ok(claimed)
      assert.equal(await claimBatch(b, '00000000-0000-4000-8000-000000000032', 600, 'runner-b', now, live(b)), undefined)

      const admin = new pg.Client({ connectionString: db.url as string })
      await admin.connect()
      const killed = await admin.query(
        `SELECT pg_terminate_backend(pid) AS ok FROM pg_locks
            WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 2 AND granted`,
        [LEASE_LOCK_CLASS, keyA],
      )
      await admin.end()
      assert.deepEqual(killed.rows, [{ ok: true }])
      // Without its lock the holder has no key: its workers claim nothing and drop what they hold.
      await waitFor('holder A to notice', async () => (a.leaseHolder?.current() !== keyA ? true : undefined))
      const retaken = await claimBatch(b, '00000000-0000-4000-8000-000000000033', 600, 'runner-b', now, live(b))
      assert.deepEqual(retaken, claimed)
      assert.equal(
        await a.transaction((tx) => holdLease(tx, claimed as NonNullable<typeof claimed>, '00000000-0000-4000-8000-000000000031', 600)),
        undefined,
      )
      // Reconnected under a new key (the old one's leases stay free for anyone).
      const keyA2 = await waitFor('holder A to reconnect', async () => a.leaseHolder?.current() ?? undefined, 10_000)
      assert.notEqual(keyA2, keyA)
    } finally {
      await a.close()
      await b.close()
    }
  })
})
