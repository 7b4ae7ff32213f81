/**
 * `npm run bench:ingest`: ingests INGEST_RECEIVABLES (default 1,000,000) Receivables, each with its Customer,
 * through batches into the real service (src/main.ts as a child process) on PostgreSQL, in a fresh database
 * created for the run and dropped after it. Production-shaped: INGEST_KEYS clients (default 20), one key each,
 * one request at a time per key (CONCURRENCY_PER_KEY=1, the default), each key keeping at most two batches of
 * 100 records (50 Customers, 50 Receivables depending on them) outstanding and polling them as an integrator
 * would. Only the per-minute rate limit is raised (a key at 60 a minute cannot send 1,000,000 records in a
 * run). Samples the service's RSS every second; prints records/s for the first and the last 100,000
 * Receivables, and the peak RSS. The issue's bars: RSS under 300 MB, last 100,000 within 20% of the first.
 * Traffic goes only to 127.0.0.1. A measurement, not a test: nothing here asserts a time.
 *
 * The service runs as production runs it, `node dist/main.js` (the npm script builds first); INGEST_ENTRY=src/main.ts
 * runs the sources through tsx instead (which adds tsx's own memory to the RSS).
 *
 * Environment: INGEST_RECEIVABLES, INGEST_KEYS, INGEST_WORKERS (BATCH_WORKER_CONCURRENCY, default 4),
 * INGEST_DATABASE_URL (a server to create the database on; default the local server), INGEST_KEEP_DB=1 keeps it,
 * INGEST_ANALYZE_FIRST=1 analyzes the fresh (empty) tables before the load, as autovacuum's first pass or an
 * operator would: the foreign-key checks' plans then start as sequential scans (the case the batch runner's
 * ANALYZE of grown tables is for: src/store/statistics.ts).
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import pg from 'pg'
import { customerBody, receivableBody } from './scenarios.ts'
import { ADMIN_TOKEN, call, freePort, seedTenant } from './service.ts'

const TOTAL = Number(process.env.INGEST_RECEIVABLES ?? 1_000_000)
const KEYS = Number(process.env.INGEST_KEYS ?? 20)
const WORKERS = process.env.INGEST_WORKERS ?? '4'
const BASE = process.env.INGEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const PER_BATCH = 50 // Receivables per batch, each with its Customer: 100 records
const WINDOW = Math.min(100_000, TOTAL / 2)
const OUTSTANDING = 2
const ENTRY = process.env.INGEST_ENTRY ?? 'dist/main.js'

const scopes = ['customers:write', 'customers:read', 'receivables:write', 'receivables:read']

function batchBody(client: number, b: number) {
  const records: unknown[] = []
  for (let i = 0; i < PER_BATCH; i++) {
    const n = b * PER_BATCH + i
    records.push({ recordId: `c${i}`, kind: 'customer', externalId: `k${client}-c${n}`, body: customerBody(n) })
  }
  for (let i = 0; i < PER_BATCH; i++) {
    const n = b * PER_BATCH + i
    records.push({
      recordId: `r${i}`,
      kind: 'receivable',
      externalId: `k${client}-r${n}`,
      dependsOn: [`c${i}`],
      body: receivableBody(`k${client}-c${n}`, 1),
    })
  }
  return { records }
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m ? Number(m[1]) / 1024 : 0
}

async function main() {
  const dbName = `irs_ingest_${randomBytes(4).toString('hex')}`
  const admin = new pg.Client({ connectionString: BASE })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${dbName}`)
  const u = new URL(BASE)
  u.pathname = `/${dbName}`
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const child: ChildProcess = spawn(process.execPath, ENTRY.endsWith('.ts') ? ['--import', 'tsx', ENTRY] : [ENTRY], {
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: u.toString(),
      ADMIN_TOKEN,
      SEED_DEMO: '0',
      LOG_LEVEL: 'warn',
      RATE_LIMIT_PER_MINUTE: '1000000000',
      BATCH_WORKER_CONCURRENCY: WORKERS,
      BATCH_POLL_MS: '100',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  let finished = false
  const cleanup = async () => {
    if (child.exitCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
      child.kill('SIGTERM')
      await exited
    }
    if (process.env.INGEST_KEEP_DB !== '1') await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
    else console.log(`kept database ${dbName}`)
    await admin.end()
  }
  process.once('SIGINT', () => {
    if (!finished) void cleanup().finally(() => process.exit(130))
  })
  try {
    for (let i = 0; ; i++) {
      if (child.exitCode !== null) throw new Error('service exited during start')
      try {
        if ((await fetch(`${url}/readyz`)).ok) break
      } catch {}
      if (i > 600) throw new Error('service did not become ready')
      await new Promise((r) => setTimeout(r, 50))
    }
    const pid = child.pid as number
    const keys = await Promise.all(Array.from({ length: KEYS }, (_, c) => seedTenant(url, `ingest-${c}`, scopes)))
    if (process.env.INGEST_ANALYZE_FIRST === '1') {
      const c = new pg.Client({ connectionString: u.toString() })
      await c.connect()
      await c.query('ANALYZE')
      await c.end()
    }
    const batchesPerKey = Math.ceil(TOTAL / PER_BATCH / KEYS)
    const totalBatches = batchesPerKey * KEYS
    const receivables = totalBatches * PER_BATCH
    console.log(
      `ingest: ${receivables} Receivables + ${receivables} Customers in ${totalBatches} batches of 100 from ${KEYS} keys, ${WORKERS} batch workers, database ${dbName}`,
    )

    let peakRss = rssMb(pid)
    const rssAt: number[] = []
    const sampler = setInterval(() => {
      try {
        peakRss = Math.max(peakRss, rssMb(pid))
      } catch {}
    }, 1000)

    const start = performance.now()
    let done = 0
    let failedRecords = 0
    // Seconds at which the cumulative count of ingested Receivables crossed each multiple of WINDOW.
    const marks: number[] = [0]
    const onDone = (batch: { counts: { succeeded: number; total: number } }) => {
      done += PER_BATCH
      failedRecords += batch.counts.total - batch.counts.succeeded
      while (done >= marks.length * WINDOW) {
        const s = (performance.now() - start) / 1000
        marks.push(s)
        const rss = rssMb(pid)
        rssAt.push(rss)
        const prev = marks[marks.length - 2] as number
        console.log(
          `${String(marks.length - 1).padStart(3)} × ${WINDOW}: ${s.toFixed(1)} s, window ${((2 * WINDOW) / (s - prev)).toFixed(0)} records/s, RSS ${rss.toFixed(0)} MB (peak ${peakRss.toFixed(0)})`,
        )
      }
    }

    await Promise.all(
      keys.map(async (key, c) => {
        const outstanding: number[] = []
        let next = 0
        while (next < batchesPerKey || outstanding.length > 0) {
          if (next < batchesPerKey && outstanding.length < OUTSTANDING) {
            await call(url, 'PUT', `/v1/clients/ingest-${c}/batches/b-${next}`, key, batchBody(c, next))
            outstanding.push(next++)
            continue
          }
          const oldest = outstanding[0] as number
          const state = await call(url, 'GET', `/v1/clients/ingest-${c}/batches/b-${oldest}`, key)
          if (state.status === 'queued' || state.status === 'running') {
            await new Promise((r) => setTimeout(r, 250))
            continue
          }
          outstanding.shift()
          onDone(state)
        }
      }),
    )
    clearInterval(sampler)
    const seconds = (performance.now() - start) / 1000
    const first = marks[1] as number
    const last = seconds - (marks[Math.floor(receivables / WINDOW) - 1] as number)
    const firstRps = (2 * WINDOW) / first
    const lastRps = (2 * WINDOW) / last
    console.log('')
    console.log(
      `total: ${2 * receivables} records in ${seconds.toFixed(0)} s = ${((2 * receivables) / seconds).toFixed(0)} records/s; records not succeeded: ${failedRecords}`,
    )
    console.log(`first ${WINDOW} Receivables: ${firstRps.toFixed(0)} records/s (${first.toFixed(1)} s)`)
    console.log(
      `last ${WINDOW} Receivables: ${lastRps.toFixed(0)} records/s (${last.toFixed(1)} s); last/first = ${(lastRps / firstRps).toFixed(2)}`,
    )
    console.log(`service RSS: peak ${peakRss.toFixed(0)} MB, at the end ${rssMb(pid).toFixed(0)} MB`)
    const c = new pg.Client({ connectionString: u.toString() })
    await c.connect()
    const sizes = await c.query(
      `SELECT (SELECT count(*) FROM receivables)::int AS receivables, (SELECT count(*) FROM customers)::int AS customers,
              pg_size_pretty(pg_database_size(current_database())) AS size`,
    )
    console.log(`database: ${JSON.stringify(sizes.rows[0])}`)
    await c.end()
  } finally {
    finished = true
    await cleanup()
  }
}

await main()
