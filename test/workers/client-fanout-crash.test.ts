import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { encodeCursor } from '../../src/domain/cursor.ts'
import { openStore } from '../../src/store/open.ts'
import type { Store } from '../../src/store/store.ts'
import { ADMIN_TOKEN, startTestApp } from '../helpers/app.ts'
import { waitFor as waitUntil } from '../helpers/batch-process.ts'
import { bulkReceivables, checkedFeed, customerBody, idsInOrder, lastSeq, receivableBody, revisionsOf } from '../helpers/client-fanout.ts'
import { http, type ServiceProcess, startService } from '../helpers/service-process.ts'
import { createTestDatabase, engineName, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * A service process SIGKILLed in the middle of a client fan-out (src/workers/client-fanout.ts) loses nothing and
 * does nothing twice: the real service (src/main.ts) runs as a child process on this file's store (a data
 * directory for PGlite, a database for PostgreSQL); a collection toggle records its fact, the process is killed
 * once the fan-out has committed some chunks and before it has finished, and a second process completes it.
 * Every Receivable then has exactly one new revision and one event, in id order, and the feed has no gap.
 */
const N = 30_000
let db: TestDatabase | undefined
let dataDir: string | undefined
const children: ServiceProcess[] = []
after(async () => {
  for (const c of children) await c.kill()
  await db?.drop()
  if (dataDir) rmSync(dataDir, { recursive: true, force: true })
})

/** The store of this test, opened in this process (PGlite: only while no service process holds it). */
async function openHere(): Promise<{ store: Store; close(): Promise<void> }> {
  if (onPostgres) return { store: (db as TestDatabase).store, close: async () => {} }
  const store = await openStore({ dataDir: dataDir as string })
  return { store, close: () => store.close() }
}

async function service(): Promise<ServiceProcess> {
  const env: Record<string, string> = { RATE_LIMIT_PER_MINUTE: '1000000', CONCURRENCY_PER_KEY: '1000' }
  if (onPostgres) env.DATABASE_URL = (db as TestDatabase).url as string
  else env.DATA_DIR = dataDir as string
  const s = await startService(env)
  children.push(s)
  return s
}

/** Polled every 10 ms: the first wait must see the fan-out's first chunk before its last one commits. */
const waitFor = <T>(what: string, probe: () => Promise<T | undefined>) => waitUntil(what, probe, 300_000, 10)

test(`SIGKILL mid fan-out (${engineName}): a new process completes it; every Receivable reaches its new revision once`, async () => {
  if (onPostgres) db = await createTestDatabase()
  else dataDir = mkdtempSync(join(os.tmpdir(), 'irs-fanout-crash-'))
  const code = 'fan-crash'

  // The client, its key and N + 1 Receivables, written here before any service process runs.
  const here = await openHere()
  const t = await startTestApp({}, { db: { store: here.store, open: () => here.store, drop: async () => {} } })
  const k = await t.tenant(code)
  const c = (path: string, body: unknown) => t.call('PUT', `/v1/clients/${code}${path}`, { key: k.apiKey, body })
  assert.equal((await c('/customers/c1', customerBody())).status, 201)
  assert.equal((await c('/receivables/a-tpl', receivableBody('c1'))).status, 201)
  await bulkReceivables(here.store, code, 'a-tpl', 'b', N)
  const feedStart = await lastSeq(here.store, code)
  await t.app.app.close()
  await here.close()

  const one = await service()
  const toggle = await http(one.url, 'PUT', `/admin/v1/clients/${code}`, { token: ADMIN_TOKEN, body: { collectionEnabled: true } })
  assert.equal(toggle.status, 200, JSON.stringify(toggle.json))
  // Killed as soon as the feed shows the fan-out committed a chunk.
  await waitFor('a first chunk of the fan-out', async () => {
    const res = await http(
      one.url,
      'GET',
      `/v1/clients/${code}/changes?limit=1&after=${encodeCursor('changes', { s: String(feedStart) })}`,
      {
        token: k.apiKey,
      },
    )
    assert.equal(res.status, 200, JSON.stringify(res.json))
    return res.json.data.length > 0 ? true : undefined
  })
  await one.kill('SIGKILL')

  // Killed mid fan-out: some chunks committed, not all; the open one left nothing behind.
  let mid = await openHere()
  const reached = await revisionsOf(mid.store, code)
  assert.equal(reached.length, 2, JSON.stringify(reached))
  const [[r1, notYet], [r2, done]] = reached as [[number, number], [number, number]]
  assert.deepEqual([r1, r2], [1, 2])
  assert.ok(done > 0 && notYet > 0 && done + notYet === N + 1, JSON.stringify(reached))
  assert.equal((await checkedFeed(mid.store, code, feedStart)).length, done)
  await mid.close()

  const two = await service()
  await waitFor('the fan-out finished on the new process', async () => {
    const res = await http(two.url, 'GET', `/v1/clients/${code}/collection-summary`, { token: k.apiKey })
    assert.equal(res.status, 200)
    return res.json.recovery.holds.collection_not_enabled === 0 ? true : undefined
  })
  await two.kill('SIGTERM')

  mid = await openHere()
  assert.deepEqual(await revisionsOf(mid.store, code), [[2, N + 1]])
  const ids = await idsInOrder(mid.store, code)
  assert.deepEqual(
    await checkedFeed(mid.store, code, feedStart),
    ids.map((id) => [id, 2]),
  )
  const fanout = await mid.store.query<{ done_seq: string; failed_attempts: number }>(
    'SELECT done_seq, failed_attempts FROM client_fanouts WHERE client_code = $1',
    [code],
  )
  assert.deepEqual(fanout, [{ done_seq: '1', failed_attempts: 0 }])
  assert.deepEqual(await mid.store.query('SELECT seq FROM client_facts WHERE client_code = $1', [code]), [])
  await mid.close()
})
