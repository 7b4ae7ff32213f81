import assert from 'node:assert/strict'
import pg from 'pg'
import { http, type ServiceProcess, startService } from './service-process.ts'
import type { TestDatabase } from './store.ts'

/**
 * Helpers of the batch worker tests: the real service as child processes on one test database, a
 * session that holds the advisory lock a worker needs (src/store/locks.ts), and the exactly-once checks.
 * Everything started here is registered so that the file's after() hook can end it.
 */
export interface Harness {
  service(env?: Record<string, string>): Promise<ServiceProcess>
  blockCustomer(clientCode: string, id: string): Promise<{ release(): Promise<void> }>
  /** The same, for the identity lock of any resource kind (`receivable`, ...). */
  blockIdentity(clientCode: string, kind: string, id: string): Promise<{ release(): Promise<void> }>
  cleanup(): Promise<void>
}

export function harness(db: () => TestDatabase): Harness {
  const children: ServiceProcess[] = []
  const sessions: pg.Client[] = []
  return {
    async service(env = {}) {
      const s = await startService({
        DATABASE_URL: db().url as string,
        BATCH_CHUNK_SIZE: '10',
        BATCH_LEASE_SECONDS: '2',
        BATCH_POLL_MS: '50',
        // The tests poll; the per-key limits are not what they are about.
        RATE_LIMIT_PER_MINUTE: '1000000',
        CONCURRENCY_PER_KEY: '1000',
        ...env,
      })
      children.push(s)
      return s
    },
    blockCustomer(clientCode, id) {
      return this.blockIdentity(clientCode, 'customer', id)
    },
    async blockIdentity(clientCode, kind, id) {
      const c = new pg.Client({ connectionString: db().url as string })
      await c.connect()
      sessions.push(c)
      await c.query('BEGIN')
      await c.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`${clientCode}/${kind}/${id}`])
      let released = false
      return {
        async release() {
          if (released) return
          released = true
          await c.query('ROLLBACK')
          await c.end()
        },
      }
    },
    async cleanup() {
      for (const c of children) await c.kill('SIGKILL')
      for (const s of sessions) await s.end().catch(() => {})
    },
  }
}

export const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `ref/${n}` })

/** n Customer records with externalIds `${prefix}-1` .. `${prefix}-n`. */
export const customerRecords = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({
    recordId: `c${i + 1}`,
    kind: 'customer',
    externalId: `${prefix}-${i + 1}`,
    body: customer(i + 1),
  }))

/** Polls `probe` every `everyMs` until it returns a value, for at most `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await probe()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, everyMs))
  }
}

// biome-ignore lint/suspicious/noExplicitAny: batch responses are inspected field by field
export async function getBatch(url: string, key: string, clientCode: string, id: string): Promise<any> {
  const res = await http(url, 'GET', `/v1/clients/${clientCode}/batches/${id}`, { token: key })
  assert.equal(res.status, 200, JSON.stringify(res.json))
  return res.json
}

/** Sessions of this database waiting for an advisory lock (a worker blocked by blockCustomer). */
export async function waitingOnAdvisoryLock(db: TestDatabase): Promise<number> {
  const rows = await db.store.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database
      WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = current_database()`,
  )
  return Number(rows[0]?.n)
}

/**
 * Each Customer exists once at revision 1, the change feed holds exactly one customer.created per id and
 * nothing else, and its sequence has no gap (a rolled-back chunk left no trace).
 */
export async function assertEachCustomerWrittenOnce(db: TestDatabase, clientCode: string, ids: string[]) {
  const customers = await db.store.query<{ id: string; revision: number }>(
    'SELECT external_customer_id AS id, revision::int AS revision FROM customers WHERE client_code = $1 ORDER BY 1',
    [clientCode],
  )
  assert.deepEqual(
    customers.map((c) => [c.id, Number(c.revision)]),
    [...ids].sort().map((id) => [id, 1]),
  )
  const perResource = await db.store.query<{ resource_id: string; n: number }>(
    `SELECT resource_id, count(*)::int AS n FROM change_events WHERE client_code = $1 GROUP BY resource_id ORDER BY resource_id`,
    [clientCode],
  )
  assert.deepEqual(
    perResource.map((e) => [e.resource_id, Number(e.n)]),
    [...ids].sort().map((id) => [id, 1]),
  )
  const summary = await db.store.query<{ n: number; types: string[]; min_seq: number; max_seq: number; revs: number[] }>(
    `SELECT count(*)::int AS n, array_agg(DISTINCT type) AS types, min(seq)::int AS min_seq, max(seq)::int AS max_seq,
            array_agg(DISTINCT revision::int) AS revs
       FROM change_events WHERE client_code = $1`,
    [clientCode],
  )
  assert.deepEqual(
    summary.map((s) => ({ ...s, n: Number(s.n), min_seq: Number(s.min_seq), max_seq: Number(s.max_seq), revs: s.revs.map(Number) })),
    [{ n: ids.length, types: ['customer.created'], min_seq: 1, max_seq: ids.length, revs: [1] }],
  )
}

/** Every record of the batch succeeded with 201, in position order, and the counts say so. */
// biome-ignore lint/suspicious/noExplicitAny: batch responses are inspected field by field
export function assertAllCreated(batch: any, externalIds: string[]) {
  assert.equal(batch.status, 'succeeded')
  assert.equal(typeof batch.completedAt, 'string')
  assert.deepEqual(batch.counts, { total: externalIds.length, pending: 0, succeeded: externalIds.length, failed: 0, dependencyFailed: 0 })
  assert.deepEqual(
    batch.records,
    externalIds.map((externalId, i) => ({
      position: i + 1,
      recordId: `c${i + 1}`,
      kind: 'customer',
      externalId,
      status: 'succeeded',
      httpStatus: 201,
    })),
  )
}
