/**
 * How long one webhook replay chunk holds the store (issue 20, item 8): PROBE_N (12,000) feed events of one
 * client, replayed once as one statement and then in chunks of PROBE_CHUNKS (100,200,250,500,1000), each chunk its
 * own transaction, and once more as one statement.
 * Run: node --no-wasm-code-gc --import tsx bench/replay-probe.ts  (PGlite in memory; with DATABASE_URL=..., a new
 * database on that server, dropped at the end)
 */
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { replayDeliveries } from '../src/resources/webhooks/store.ts'
import { migrate } from '../src/store/migrate.ts'
import { openPglite } from '../src/store/pglite.ts'
import { openPostgres } from '../src/store/postgres.ts'
import type { Store } from '../src/store/store.ts'

const N = Number(process.env.PROBE_N ?? 12_000)
// On PostgreSQL a database of its own, dropped at the end: never the schema of the server's database itself.
const base = process.env.DATABASE_URL
const probeDb = `irs_probe_${randomBytes(6).toString('hex')}`
async function admin(sql: string) {
  const c = new pg.Client({ connectionString: base })
  await c.connect()
  try {
    await c.query(sql)
  } finally {
    await c.end()
  }
}
let store: Store
if (base) {
  await admin(`CREATE DATABASE ${probeDb}`)
  const url = new URL(base)
  url.pathname = `/${probeDb}`
  store = openPostgres(url.toString())
} else store = await openPglite()
await migrate(store)
const run = `rp${Date.now()}`
await store.query(`INSERT INTO clients (client_code, name, created_at, updated_at) VALUES ($1, $1, now(), now())`, [run])
await store.query(`INSERT INTO integrations (integration_id, name, created_at, updated_at) VALUES ($1, $1, now(), now())`, [run])
await store.query(
  `INSERT INTO grants (client_code, integration_id, scopes, status, recovery_entry_mode, feed_mode, industry_profile,
                       receipt_delivery_owner, created_at, updated_at)
   VALUES ($1, $1, '{customers:read}', 'active', 'explicit_instruction', 'transaction', 'credit_union', 'partner', now(), now())`,
  [run],
)
await store.query(
  `INSERT INTO webhook_endpoints (client_code, integration_id, url, status, secret_version, secret_ciphertext, configured_seq,
                                  scanned_seq, created_at, updated_at)
   VALUES ($1, $1, 'https://example.com/hook', 'enabled', 1, 'x', 0, $2, now(), now())`,
  [run, N],
)
await store.query(
  `INSERT INTO change_events (client_code, seq, event_id, type, resource_type, resource_id, revision, occurred_at)
   SELECT $1, g, gen_random_uuid(), 'customer.created', 'customer', 'c-' || g, 1, now() FROM generate_series(1, $2::int) g`,
  [run, N],
)
await store.query('ANALYZE change_events')

async function replay(limit: number) {
  const times: number[] = []
  let after = '0'
  let queued = 0
  for (;;) {
    const t0 = performance.now()
    const c = await store.transaction((tx) =>
      replayDeliveries(tx, run, run, { afterSeq: after, throughSeq: String(N), types: ['customer'], now: new Date().toISOString(), limit }),
    )
    times.push(performance.now() - t0)
    queued += c.queued
    if (c.lastSeq === null || c.queued < limit) break
    after = c.lastSeq
  }
  times.sort((a, b) => a - b)
  const q = (p: number) => (times[Math.min(times.length - 1, Math.floor(p * times.length))] as number).toFixed(1)
  console.log(
    `${store.kind} chunk ${String(limit).padStart(5)}: ${queued} queued in ${times.length} transactions; per transaction median ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${q(1)} ms; total ${times.reduce((a, b) => a + b, 0).toFixed(0)} ms`,
  )
}

// The first replay creates the deliveries; the later ones re-queue them (the usual case for a repeated replay).
await replay(N)
for (const limit of (process.env.PROBE_CHUNKS ?? '100,200,250,500,1000').split(',').map(Number)) await replay(limit)
await store.close()
if (base) await admin(`DROP DATABASE IF EXISTS ${probeDb} WITH (FORCE)`)
