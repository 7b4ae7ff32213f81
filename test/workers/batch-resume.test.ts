import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { openStore } from '../../src/store/open.ts'
import type { Store } from '../../src/store/store.ts'
import {
  assertAllCreated,
  assertEachCustomerWrittenOnce,
  customerRecords,
  getBatch,
  harness,
  waitFor,
  waitingOnAdvisoryLock,
} from '../helpers/batch-process.ts'
import { http, type ServiceProcess, seedTenant, startService } from '../helpers/service-process.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * A killed instance's batch resumes without waiting out its lease (issue 20, item 9; src/store/lease-holder.ts).
 * Every instance here runs with a 10-minute lease (BATCH_LEASE_SECONDS=600) and waits at most 60 s for the
 * batch: only a takeover that does not wait for the lease can pass. How soon it resumed is reported (diagnostic),
 * not asserted. Every record still runs exactly once.
 */
const LONG_LEASE = { BATCH_LEASE_SECONDS: '600' }
const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i + 1}`)

const finished = (url: string, key: string, clientCode: string, id: string) =>
  waitFor('the batch finished', async () => {
    const b = await getBatch(url, key, clientCode, id)
    return b.status === 'queued' || b.status === 'running' ? undefined : b
  })

describe('PostgreSQL: a killed instance (10-minute leases)', { skip: onPostgres ? false : 'needs PostgreSQL: set DATABASE_URL' }, () => {
  let db: TestDatabase | undefined
  const h = harness(() => db as TestDatabase)
  after(async () => {
    await h.cleanup()
    await db?.drop()
  })

  /** Records of the batch committed so far (read from the database, every 20 ms). */
  const succeeded = async (clientCode: string, id: string) =>
    Number(
      (
        await (db as TestDatabase).store.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM batch_records WHERE client_code = $1 AND external_batch_id = $2 AND status = 'succeeded'`,
          [clientCode, id],
        )
      )[0]?.n,
    )

  /** Starts a batch of 100 Customers on `one` and leaves its worker waiting inside the chunk of record 50. */
  async function blockedMidBatch(one: ServiceProcess, clientCode: string) {
    const key = await seedTenant(one.url, clientCode, ['customers:write', 'customers:read'])
    const lock = await h.blockCustomer(clientCode, `${clientCode}-50`)
    const put = await http(one.url, 'PUT', `/v1/clients/${clientCode}/batches/b-1`, {
      token: key,
      body: { records: customerRecords(clientCode, 100) },
    })
    assert.equal(put.status, 202)
    await waitFor('40 records committed', async () => ((await succeeded(clientCode, 'b-1')) >= 40 ? true : undefined))
    await waitFor('the worker waiting on record 50', async () =>
      (await waitingOnAdvisoryLock(db as TestDatabase)) === 1 ? true : undefined,
    )
    return { key, lock }
  }

  test('SIGKILL mid-batch, then a restart: the new process takes the batch at once', async (t) => {
    db = await createTestDatabase()
    const one = await h.service(LONG_LEASE)
    const { key, lock } = await blockedMidBatch(one, 'rst')
    await one.kill('SIGKILL')
    const killedAt = performance.now()
    await lock.release()
    assert.equal(await succeeded('rst', 'b-1'), 40)

    const two = await h.service(LONG_LEASE)
    const readyAt = performance.now()
    await waitFor('the batch progressing again', async () => ((await succeeded('rst', 'b-1')) > 40 ? true : undefined), 60_000, 20)
    const progressAt = performance.now()
    t.diagnostic(
      `restart: progress ${Math.round(progressAt - readyAt)} ms after the new process was ready (${Math.round(progressAt - killedAt)} ms after the kill)`,
    )
    assertAllCreated(await finished(two.url, key, 'rst', 'b-1'), ids('rst', 100))
    await assertEachCustomerWrittenOnce(db, 'rst', ids('rst', 100))
    assert.deepEqual(await db.store.query(`SELECT status, attempts FROM batches WHERE client_code = 'rst' AND external_batch_id = 'b-1'`), [
      { status: 'succeeded', attempts: 2 },
    ])
    // Only the instances of the next test may claim its batch.
    await two.kill('SIGKILL')
  })

  test('two instances: one is SIGKILLed mid-batch, the other takes its batch at once', async (t) => {
    db ??= await createTestDatabase()
    const one = await h.service(LONG_LEASE)
    const { key, lock } = await blockedMidBatch(one, 'two')
    // Claimed once, by the only instance running: the one about to be killed.
    assert.deepEqual(await db.store.query(`SELECT attempts FROM batches WHERE client_code = 'two' AND external_batch_id = 'b-1'`), [
      { attempts: 1 },
    ])
    const other = await h.service(LONG_LEASE)
    await one.kill('SIGKILL')
    const killedAt = performance.now()
    await lock.release()
    await waitFor('the batch progressing again', async () => ((await succeeded('two', 'b-1')) > 40 ? true : undefined), 60_000, 20)
    t.diagnostic(`second instance: progress ${Math.round(performance.now() - killedAt)} ms after the kill`)
    assertAllCreated(await finished(other.url, key, 'two', 'b-1'), ids('two', 100))
    await assertEachCustomerWrittenOnce(db, 'two', ids('two', 100))
    assert.deepEqual(await db.store.query(`SELECT status, attempts FROM batches WHERE client_code = 'two' AND external_batch_id = 'b-1'`), [
      { status: 'succeeded', attempts: 2 },
    ])
  })
})

describe('PGlite: a killed process (10-minute leases)', { skip: onPostgres ? 'the embedded store only' : false }, () => {
  const dataDir = mkdtempSync(join(os.tmpdir(), 'irs-batch-resume-'))
  const children: ServiceProcess[] = []
  after(async () => {
    for (const c of children) await c.kill('SIGKILL')
    rmSync(dataDir, { recursive: true, force: true })
  })
  const service = async () => {
    const s = await startService({
      DATA_DIR: dataDir,
      BATCH_CHUNK_SIZE: '1',
      BATCH_POLL_MS: '50',
      RATE_LIMIT_PER_MINUTE: '1000000',
      CONCURRENCY_PER_KEY: '1000',
      ...LONG_LEASE,
    })
    children.push(s)
    return s
  }
  /** The data directory opened by this test process (the service must be stopped): state between the runs. */
  async function inStore<T>(fn: (store: Store) => Promise<T>): Promise<T> {
    const store = await openStore({ dataDir })
    try {
      return await fn(store)
    } finally {
      await store.close()
    }
  }

  test('SIGKILL mid-batch, then a restart on the same DATA_DIR: the interrupted batch is taken at once', async (t) => {
    const one = await service()
    const key = await seedTenant(one.url, 'emb', ['customers:write', 'customers:read'])
    for (const b of ['b-1', 'b-2']) {
      const put = await http(one.url, 'PUT', `/v1/clients/emb/batches/${b}`, { token: key, body: { records: customerRecords(b, 100) } })
      assert.equal(put.status, 202)
    }
    // One record per chunk: killed while the first batch is under way.
    await waitFor(
      'the first batch under way',
      async () => ((await getBatch(one.url, key, 'emb', 'b-1')).counts.succeeded > 0 ? true : undefined),
      60_000,
      10,
    )
    await one.kill('SIGKILL')

    const left = await inStore((store) =>
      store.query<{ external_batch_id: string; status: string; lease_live: boolean }>(
        `SELECT external_batch_id, status, lease_expires_at > now() AS lease_live FROM batches WHERE client_code = 'emb' ORDER BY 1`,
      ),
    )
    // The killed process's lease on b-1 has 10 minutes to run.
    assert.deepEqual(left[0], { external_batch_id: 'b-1', status: 'running', lease_live: true })
    const before = await inStore(async (store) =>
      Number(
        (
          await store.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM batch_records WHERE client_code = 'emb' AND external_batch_id = 'b-1' AND status = 'succeeded'`,
          )
        )[0]?.n,
      ),
    )
    assert.ok(before > 0 && before < 100, String(before))

    const two = await service()
    const readyAt = performance.now()
    await waitFor(
      'the interrupted batch progressing again',
      async () => ((await getBatch(two.url, key, 'emb', 'b-1')).counts.succeeded > before ? true : undefined),
      60_000,
      20,
    )
    t.diagnostic(`restart: progress ${Math.round(performance.now() - readyAt)} ms after the new process was ready`)
    assertAllCreated(await finished(two.url, key, 'emb', 'b-1'), ids('b-1', 100))
    assertAllCreated(await finished(two.url, key, 'emb', 'b-2'), ids('b-2', 100))
    await two.kill('SIGKILL')
    await inStore(async (store) => {
      await assertEachCustomerWrittenOnce({ store } as TestDatabase, 'emb', [...ids('b-1', 100), ...ids('b-2', 100)])
      assert.deepEqual(await store.query(`SELECT external_batch_id, status, attempts FROM batches WHERE client_code = 'emb' ORDER BY 1`), [
        { external_batch_id: 'b-1', status: 'succeeded', attempts: 2 },
        { external_batch_id: 'b-2', status: 'succeeded', attempts: 1 },
      ])
    })
  })
})
