/**
 * `npx tsx bench/batch-drain.ts`: the batch runner alone, in process, on each store (PGlite in memory, and
 * PostgreSQL in a database of its own when DATABASE_URL is set): DRAIN_BATCHES batches of 100 mixed records
 * (bench/scenarios.ts) are queued first, then one runner (concurrency 1) drains them; prints records/s and the
 * statements run. What `npm run bench` measures on top of this is the submission (PUT batch) and the polling.
 *
 * DRAIN_CHUNKS (comma-separated, default BATCH_CHUNK_SIZE or 50) compares chunk sizes in one process, and
 * DRAIN_ROUNDS (default 1) repeats the comparison, interleaved (each round drains each chunk size once, on a
 * tenant of its own), so that figures of one run on a shared machine can be compared.
 * A measurement, not a test: nothing here asserts a time.
 */
import { systemClock } from '../src/domain/time.ts'
import type { Store } from '../src/store/store.ts'
import { createBatchRunner } from '../src/workers/batch-runner.ts'
import { startTestApp } from '../test/helpers/app.ts'
import { createTestDatabase } from '../test/helpers/store.ts'
import { mixedBatch } from './scenarios.ts'
import { cpuMs } from './service.ts'

const BATCHES = Number(process.env.DRAIN_BATCHES ?? 50)
const CHUNKS = (process.env.DRAIN_CHUNKS ?? process.env.BATCH_CHUNK_SIZE ?? '50').split(',').map(Number)
const ROUNDS = Number(process.env.DRAIN_ROUNDS ?? 1)

/** The store, counting every statement it runs (options such as `prepared` passed on). */
function counted(inner: Store): Store & { statements: number } {
  const s: Store & { statements: number } = {
    statements: 0,
    kind: inner.kind,
    query(sql, params, options) {
      s.statements++
      return inner.query(sql, params, options)
    },
    exec: (sql) => inner.exec(sql),
    transaction(fn, ahead) {
      return inner.transaction((tx) => {
        s.statements += 2 // BEGIN, COMMIT
        return fn({
          serialized: tx.serialized,
          commit: tx.commit?.bind(tx),
          exec: (sql) => tx.exec(sql),
          query(sql, params, options) {
            s.statements++
            return tx.query(sql, params, options)
          },
        })
      }, ahead)
    },
    close: () => inner.close(),
  }
  return s
}

/** This process's CPU and, on PostgreSQL (a server on this host), its backends' CPU, ms. */
async function cpuNow(): Promise<{ own: number; backends: number }> {
  const u = process.cpuUsage()
  const own = (u.user + u.system) / 1000
  if (!db.url) return { own, backends: 0 }
  const rows = await db.store.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database()')
  return { own, backends: rows.reduce((a, r) => a + cpuMs(r.pid), 0) }
}

const db = await createTestDatabase()
const store = counted(db.store)
const t = await startTestApp({}, { db: { ...db, store } })
try {
  const figures = new Map<number, number[]>(CHUNKS.map((c) => [c, []]))
  for (let round = 0; round < ROUNDS; round++) {
    for (const chunkSize of CHUNKS) {
      const k = await t.tenant(`drain-${round}-${chunkSize}`)
      const queuing = await cpuNow()
      const queuingStart = performance.now()
      for (let i = 0; i < BATCHES; i++) {
        const res = await t.call('PUT', `/v1/clients/${k.clientCode}/batches/b${i}`, { key: k.apiKey, body: mixedBatch(`b${i}`) })
        if (res.status !== 202) throw new Error(res.body)
      }
      const queued = await cpuNow()
      console.log(
        `submitted ${BATCHES} batches in ${((performance.now() - queuingStart) / 1000).toFixed(2)} s; CPU µs a record: this process ${Math.round(((queued.own - queuing.own) * 1000) / (BATCHES * 100))}, backends ${Math.round(((queued.backends - queuing.backends) * 1000) / (BATCHES * 100))}`,
      )
      const runner = createBatchRunner({ store, clock: systemClock, operations: t.app.operations, chunkSize })
      store.statements = 0
      const cpu0 = await cpuNow()
      const start = performance.now()
      await runner.drain()
      const seconds = (performance.now() - start) / 1000
      const statements = store.statements
      const cpu1 = await cpuNow()
      const rows = await t.store.query<{ n: string }>(
        "SELECT count(*) AS n FROM batch_records WHERE client_code = $1 AND status = 'succeeded'",
        [k.clientCode],
      )
      const rate = Math.round((BATCHES * 100) / seconds)
      figures.get(chunkSize)?.push(rate)
      console.log(
        `${db.url ? 'postgres' : 'pglite'} chunk ${chunkSize}: ${BATCHES * 100} records (${rows[0]?.n} succeeded) in ${seconds.toFixed(2)} s: ${rate} records/s, ${statements} statements; CPU µs a record: this process ${Math.round(((cpu1.own - cpu0.own) * 1000) / (BATCHES * 100))}, backends ${Math.round(((cpu1.backends - cpu0.backends) * 1000) / (BATCHES * 100))}`,
      )
    }
  }
  if (ROUNDS > 1) for (const [chunkSize, rates] of figures) console.log(`chunk ${chunkSize}: ${rates.join(', ')} records/s`)
} finally {
  await t.close()
  // Closes the store and, on PostgreSQL, drops the tool's database (it was left behind before).
  await db.drop()
}
