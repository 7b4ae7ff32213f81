/**
 * `npx tsx bench/create-probe.ts` (PGlite on a data directory, as `npm start`), or with `DATABASE_URL=postgres://…`:
 * where a synchronous PUT Receivable create spends its time, in process (Fastify inject, no sockets). `PROBE_N`
 * creates (default 600) one at a time after 200 warm-up ones; every store call is timed by a wrapping store. Prints
 * the mean per create of each statement text (first 70 characters) with its mean in each fifth of the run (a plan
 * that grows with the tables shows as rising fifths), the transaction's own BEGIN/COMMIT and the rest (JavaScript:
 * routing, validation, rendering), and the process's CPU per create. A measurement, not a test.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { migrate } from '../src/store/migrate.ts'
import { openPglite } from '../src/store/pglite.ts'
import type { Queryable, Store, Tx } from '../src/store/store.ts'
import { startTestApp } from '../test/helpers/app.ts'
import { createTestDatabase, type TestDatabase } from '../test/helpers/store.ts'
import { customerBody, receivableBody } from './scenarios.ts'

const N = Number(process.env.PROBE_N ?? 600)
const times = new Map<string, number>()
let timing = false
const series = new Map<string, number[]>()
const add = (k: string, ms: number) => {
  if (!timing) return
  times.set(k, (times.get(k) ?? 0) + ms)
  const s = series.get(k) ?? []
  s.push(ms)
  series.set(k, s)
}
const label = (sql: string) => sql.replace(/\s+/g, ' ').trim().slice(0, 70)
function timed<Q extends Queryable>(q: Q): Q {
  return {
    ...q,
    async query(sql: string, params?: readonly unknown[], options?: object) {
      const t = performance.now()
      try {
        return await q.query(sql, params, options)
      } finally {
        add(label(sql), performance.now() - t)
      }
    },
  } as Q
}
function timedStore(s: Store): Store {
  return {
    ...timed(s),
    kind: s.kind,
    close: () => s.close(),
    async transaction(fn) {
      const t = performance.now()
      let inside = 0
      try {
        return await s.transaction(async (tx: Tx) => {
          const t1 = performance.now()
          try {
            return await fn({ ...timed(tx), serialized: tx.serialized })
          } finally {
            inside = performance.now() - t1
          }
        })
      } finally {
        add('(transaction: BEGIN, COMMIT, queueing)', performance.now() - t - inside)
      }
    },
  } as Store
}

let db: TestDatabase
let dir: string | undefined
if (process.env.DATABASE_URL) db = await createTestDatabase()
else {
  dir = mkdtempSync(join(tmpdir(), 'irs-probe-'))
  const store = await openPglite(dir)
  await migrate(store)
  db = { store, open: () => store, drop: () => store.close() }
}
const store = timedStore(db.store)
const c = await startTestApp({ SERVICE_ENVIRONMENT: 'production', WEBHOOK_SECRET_KEY: 'ab'.repeat(32) }, { db: { ...db, store } })
const k = await c.tenant('probe')
await c.call('PUT', '/v1/clients/probe/customers/c-owner', { key: k.apiKey, body: customerBody(1) })
let n = 0
const create = async () => {
  const r = await c.call('PUT', `/v1/clients/probe/receivables/r-${n++}`, { key: k.apiKey, body: receivableBody('c-owner', 1) })
  if (r.status !== 201) throw new Error(`${r.status} ${r.body}`)
}
for (let i = 0; i < 200; i++) await create()
timing = true
const cpu0 = process.cpuUsage()
const t0 = performance.now()
for (let i = 0; i < N; i++) await create()
const wall = performance.now() - t0
const cpu = process.cpuUsage(cpu0)
timing = false
let sql = 0
console.log(
  `${db.store.kind}: ${N} creates one at a time, ${(wall / N).toFixed(3)} ms per create, ${((cpu.user + cpu.system) / 1000 / N).toFixed(3)} ms of this process's CPU (user ${(cpu.user / 1000 / N).toFixed(3)}, system ${(cpu.system / 1000 / N).toFixed(3)})`,
)
for (const [k2, ms] of [...times].sort((a, b) => b[1] - a[1])) {
  sql += ms
  const s = series.get(k2) ?? []
  const fifths = [0, 1, 2, 3, 4]
    .map((f) => s.slice((f * s.length) / 5, ((f + 1) * s.length) / 5))
    .map((xs) => (xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3))
  console.log(`${(ms / N).toFixed(3).padStart(7)} ms  ${k2}  (by fifths: ${fifths.join(' ')})`)
}
console.log(`${((wall - sql) / N).toFixed(3).padStart(7)} ms  (the rest: JavaScript outside the store)`)
await c.close()
if (dir) rmSync(dir, { recursive: true, force: true })
process.exit(0)
