import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { claimBatch } from '../../src/resources/batches/store.ts'
import { createTestDatabase, engineName, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * Issue 37: a worker finds the clients with work in one read-only statement, then claims per client, every claim
 * naming its client (docs/scaling.md). The batch claim at the store: the order across clients is still the
 * oldest claimable batch first, and a client whose claimable batch another transaction holds gives way to the next
 * client (SKIP LOCKED within one client), so nothing is claimed twice and nobody waits.
 */
let db: TestDatabase
const CLIENTS = ['cpc-a', 'cpc-b', 'cpc-c']
before(async () => {
  db = await createTestDatabase()
  await db.store.query(`INSERT INTO integrations (integration_id, name, created_at, updated_at) VALUES ('int-cpc', 'cpc', now(), now())`)
  for (const c of CLIENTS) {
    await db.store.query(`INSERT INTO clients (client_code, name, created_at, updated_at) VALUES ($1, $1, now(), now())`, [c])
    await db.store.query(
      `INSERT INTO grants (client_code, integration_id, scopes, status, recovery_entry_mode, feed_mode, industry_profile,
                           receipt_delivery_owner, created_at, updated_at)
       VALUES ($1, 'int-cpc', '{customers:read}', 'active', 'explicit_instruction', 'transaction', 'credit_union', 'partner', now(), now())`,
      [c],
    )
  }
})
after(() => db.drop())

async function queueBatch(client: string, id: string, submittedAt: string) {
  await db.store.query(
    `INSERT INTO batches (client_code, external_batch_id, integration_id, body_digest, status, submitted_at)
     VALUES ($1, $2, 'int-cpc', 'd', 'queued', $3)`,
    [client, id, submittedAt],
  )
}

const token = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`
const now = '2026-05-01T12:00:00.000Z'

describe(`batch claims per client (${engineName})`, () => {
  test('batches of three clients are claimed oldest first, each once, whichever client holds it; then none is left', async () => {
    await queueBatch('cpc-b', 'b-1', '2026-05-01T10:00:00Z')
    await queueBatch('cpc-a', 'a-1', '2026-05-01T10:01:00Z')
    await queueBatch('cpc-c', 'c-1', '2026-05-01T10:02:00Z')
    await queueBatch('cpc-b', 'b-2', '2026-05-01T10:03:00Z')
    const claimed: string[] = []
    for (let i = 1; i <= 5; i++) {
      const c = await claimBatch(db.store, token(i), 600, 'runner', now)
      claimed.push(c ? `${c.client_code}/${c.external_batch_id}` : 'none')
    }
    assert.deepEqual(claimed, ['cpc-b/b-1', 'cpc-a/a-1', 'cpc-c/c-1', 'cpc-b/b-2', 'none'])
    await db.store.query(`UPDATE batches SET status = 'succeeded', lease_token = NULL WHERE client_code = ANY($1::text[])`, [CLIENTS])
  })

  test("a client whose claimable batch another transaction holds gives way to the next client's (PostgreSQL)", {
    skip: !onPostgres && 'PGlite runs one transaction at a time',
  }, async () => {
    await queueBatch('cpc-a', 'a-held', '2026-05-01T11:00:00Z')
    await queueBatch('cpc-c', 'c-next', '2026-05-01T11:01:00Z')
    let release = () => {}
    const released = new Promise<void>((resolve) => {
      release = resolve
    })
    let locked = () => {}
    const isLocked = new Promise<void>((resolve) => {
      locked = resolve
    })
    // Another worker's chunk transaction holds cpc-a's batch row.
    const holder = db.store.transaction(async (tx) => {
      await tx.query(`SELECT 1 FROM batches WHERE client_code = 'cpc-a' AND external_batch_id = 'a-held' FOR UPDATE`)
      locked()
      await released
    })
    await isLocked
    try {
      const c = await claimBatch(db.store, token(11), 600, 'runner', now)
      assert.deepEqual(c, { client_code: 'cpc-c', external_batch_id: 'c-next', integration_id: 'int-cpc' })
      assert.equal(await claimBatch(db.store, token(12), 600, 'runner', now), undefined)
    } finally {
      release()
      await holder
    }
    const c = await claimBatch(db.store, token(13), 600, 'runner', now)
    assert.deepEqual(c, { client_code: 'cpc-a', external_batch_id: 'a-held', integration_id: 'int-cpc' })
  })
})
