/**
 * Issue 27, item 3: webhook delivery under steady writes, black-box.
 *
 *   npm run bench:webhook-soak                                  embedded store (PGlite, a temporary DATA_DIR)
 *   DATABASE_URL=postgres://... npm run bench:webhook-soak       PostgreSQL (a fresh database, dropped after)
 *
 * The service runs in its own process (bench/service.ts) with WEBHOOK_DEV_ALLOW_LOOPBACK=1 and its webhook settings
 * from this environment (WEBHOOK_INTERVAL_MS: the spec's 60000 by default; 1000 for the "1 s" shape;
 * WEBHOOK_BACKLOG_LIMIT). CLIENTS clients (10), each with an endpoint on one loopback receiver, each written at
 * RATE change events per second (30) by a few writers for SOAK_MINUTES (20): Customer PUTs, a share NEW_RATIO
 * (0.1) of them creating a new Customer, the rest changing one of POOL (300) existing ones. Every SAMPLE_SECONDS
 * (30) it prints a sample: the pending backlog and the delivery records kept (GET /metrics,
 * irs_webhook_deliveries by status), the lagging endpoints, the table's size on PostgreSQL (pg_total_relation_size)
 * or the data directory's on PGlite, and the lag (arrival minus the notification's occurredAt) p50/p99 of the
 * notifications that arrived in the sample. After the writes, DRAIN_SECONDS (120) of delivery, then the check: per
 * client the change feed's newest revision of every changed resource, against what arrived and what the delivery
 * log still holds pending (queued, so not lost) or, for a lagging endpoint, not yet queued. Output: one JSON line
 * per sample and a summary (BENCH_OUT=<file> also writes them there). A figure, not a test.
 */
import { execSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type net from 'node:net'
import os from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { ADMIN_TOKEN, seedTenant, startService, stopAllServices } from './service.ts'

const MINUTES = Number(process.env.SOAK_MINUTES ?? 20)
const CLIENTS = Number(process.env.CLIENTS ?? 10)
const RATE = Number(process.env.RATE ?? 30)
const POOL = Number(process.env.POOL ?? 300)
const NEW_RATIO = Number(process.env.NEW_RATIO ?? 0.1)
const SAMPLE_SECONDS = Number(process.env.SAMPLE_SECONDS ?? 30)
const DRAIN_SECONDS = Number(process.env.DRAIN_SECONDS ?? 120)
const WRITERS_PER_CLIENT = Number(process.env.WRITERS_PER_CLIENT ?? 3)
const INTERVAL = process.env.WEBHOOK_INTERVAL_MS ?? '60000'
const out: string[] = []
const emit = (o: unknown) => {
  const line = JSON.stringify(o)
  out.push(line)
  console.log(line)
  if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, `${out.join('\n')}\n`)
}

interface Arrival {
  client: string
  id: string
  revision: number
  lagMs: number
  at: number
}

/** The loopback receiver: 204 to everything, each notification recorded with its lag. */
async function startReceiver() {
  const arrivals: Arrival[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const at = Date.now()
      try {
        const n = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        if (n.type !== 'ping')
          arrivals.push({ client: n.clientCode, id: n.resource.id, revision: n.revision, lagMs: at - Date.parse(n.occurredAt), at })
      } catch {}
      res.writeHead(204)
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, arrivals, close: () => server.close() }
}

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return null
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number
}

async function api(url: string, method: string, path: string, key: string, body?: unknown) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  const text = await res.text()
  return { status: res.status, json: text ? JSON.parse(text) : undefined }
}

async function main() {
  const base = process.env.DATABASE_URL
  const dir = mkdtempSync(join(os.tmpdir(), 'irs-webhook-soak-'))
  let env: Record<string, string> = { DATA_DIR: dir }
  let dbName: string | null = null
  let sizeOf: () => Promise<number | null> = async () => {
    try {
      return Number(execSync(`du -sb ${dir}`).toString().split('\t')[0])
    } catch {
      return null
    }
  }
  let admin: pg.Client | null = null
  if (base) {
    dbName = `irs_soak_${Date.now()}`
    admin = new pg.Client({ connectionString: base })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${dbName}`)
    const u = new URL(base)
    u.pathname = `/${dbName}`
    env = { DATABASE_URL: u.toString() }
    const probe = new pg.Client({ connectionString: u.toString() })
    probe.on('error', () => {})
    await probe.connect()
    sizeOf = async () => {
      try {
        const r = await probe.query(`SELECT pg_total_relation_size('webhook_deliveries') + pg_total_relation_size('webhook_attempts') AS n`)
        return Number(r.rows[0].n)
      } catch {
        return null
      }
    }
  }
  const rx = await startReceiver()
  const service = await startService({ ...env, WEBHOOK_DEV_ALLOW_LOOPBACK: '1', WEBHOOK_INTERVAL_MS: INTERVAL })
  const store = base ? 'postgres' : 'pglite'
  emit({
    kind: 'config',
    store,
    minutes: MINUTES,
    clients: CLIENTS,
    ratePerClient: RATE,
    pool: POOL,
    newRatio: NEW_RATIO,
    intervalMs: Number(INTERVAL),
    backlogLimit: Number(process.env.WEBHOOK_BACKLOG_LIMIT ?? 10_000),
  })
  const clients = Array.from({ length: CLIENTS }, (_, i) => `soak-${i}`)
  const keys = new Map<string, string>()
  for (const c of clients) {
    const key = await seedTenant(service.url, c, ['customers:write', 'customers:read', 'webhooks:manage'])
    keys.set(c, key)
    const put = await api(service.url, 'PUT', `/v1/clients/${c}/webhook-endpoint`, key, { url: `${rx.url}/${c}` })
    if (put.status !== 201) throw new Error(`endpoint: ${put.status}`)
  }
  const counts = { writes: 0, errors: 0, created: 0 }
  const customerBody = (id: string, n: number) => ({
    type: 'person',
    name: { firstName: 'Soak', lastName: `L${n}` },
    sourceReference: `soak/${id}`,
  })
  const stopAt = Date.now() + MINUTES * 60_000
  const started = Date.now()
  let next = 0
  /** One writer of a client: RATE / WRITERS_PER_CLIENT writes per second, paced by schedule (not by latency). */
  async function writer(client: string, w: number) {
    const key = keys.get(client) as string
    const period = (1000 * WRITERS_PER_CLIENT) / RATE
    let due = Date.now() + Math.random() * period
    let created = 0
    while (Date.now() < stopAt) {
      const wait = due - Date.now()
      if (wait > 0) await new Promise((r) => setTimeout(r, wait))
      due += period
      const fresh = Math.random() < NEW_RATIO
      const id = fresh ? `n-${w}-${created++}` : `p-${Math.floor(Math.random() * POOL)}`
      try {
        const res = await api(service.url, 'PUT', `/v1/clients/${client}/customers/${id}`, key, customerBody(id, next++))
        if (res.status >= 300) counts.errors++
        else {
          counts.writes++
          if (fresh) counts.created++
        }
      } catch {
        counts.errors++
      }
      // Behind schedule (the service is slower than the rate asked): no burst to catch up.
      if (due < Date.now() - 1000) due = Date.now()
    }
  }
  async function metrics() {
    const res = await fetch(`${service.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    const text = await res.text()
    const byStatus: Record<string, number> = {}
    for (const m of text.matchAll(/^irs_webhook_deliveries\{status="(\w+)"\} (\d+)/gm)) byStatus[m[1] as string] = Number(m[2])
    const lagging = Number(/^irs_webhook_endpoints_lagging (\d+)/m.exec(text)?.[1] ?? Number.NaN)
    const head = Number(/^irs_change_feed_head_sequence (\d+)/m.exec(text)?.[1] ?? Number.NaN)
    return { byStatus, lagging, head }
  }
  let lastSample = 0
  let lastWrites = 0
  async function sample(phase: string) {
    const now = Date.now()
    const window = rx.arrivals.filter((a) => a.at > lastSample && a.at <= now).map((a) => a.lagMs)
    lastSample = now
    const m = await metrics().catch(() => null)
    emit({
      kind: 'sample',
      phase,
      minute: Number(((now - started) / 60_000).toFixed(2)),
      writesPerSecond: Number(((counts.writes - lastWrites) / SAMPLE_SECONDS).toFixed(1)),
      pending: m?.byStatus.pending ?? null,
      deliveries: m ? Object.values(m.byStatus).reduce((a, b) => a + b, 0) : null,
      byStatus: m?.byStatus ?? null,
      laggingEndpoints: m?.lagging ?? null,
      tableBytes: await sizeOf(),
      arrived: window.length,
      lagP50ms: pct(window, 50),
      lagP99ms: pct(window, 99),
    })
    lastWrites = counts.writes
  }
  lastSample = Date.now()
  const sampler = setInterval(() => void sample('writing'), SAMPLE_SECONDS * 1000)
  await Promise.all(clients.flatMap((c) => Array.from({ length: WRITERS_PER_CLIENT }, (_, w) => writer(c, w))))
  clearInterval(sampler)
  await sample('writing')
  const drainUntil = Date.now() + DRAIN_SECONDS * 1000
  while (Date.now() < drainUntil) {
    await new Promise((r) => setTimeout(r, Math.min(SAMPLE_SECONDS * 1000, drainUntil - Date.now())))
    await sample('drain')
  }
  // The check: per client, the feed's newest revision of every changed resource against arrivals and the log.
  const check = { resources: 0, arrived: 0, pending: 0, notQueuedLagging: 0, lost: 0, duplicates: 0 }
  for (const c of clients) {
    const key = keys.get(c) as string
    const newest = new Map<string, number>()
    let cursor: string | null = null
    for (;;) {
      const res = await api(service.url, 'GET', `/v1/clients/${c}/changes?limit=200${cursor ? `&after=${cursor}` : ''}`, key)
      if (res.status !== 200) throw new Error(`changes: ${res.status}`)
      for (const e of res.json.data) newest.set(e.resource.id, Math.max(newest.get(e.resource.id) ?? 0, e.revision))
      if (res.json.data.length === 0 || !res.json.nextCursor) break
      cursor = res.json.nextCursor
    }
    const pending = new Map<string, number>()
    let lagging = false
    cursor = null
    for (;;) {
      const res = await api(
        service.url,
        'GET',
        `/v1/clients/${c}/webhook-endpoint/deliveries?limit=200${cursor ? `&cursor=${cursor}` : ''}`,
        key,
      )
      if (res.status !== 200) throw new Error(`deliveries: ${res.status}`)
      lagging ||= res.json.lagging !== null
      for (const d of res.json.data)
        if (d.status === 'pending') pending.set(d.resource.id, Math.max(pending.get(d.resource.id) ?? 0, d.revision))
      if (!res.json.nextCursor) break
      cursor = res.json.nextCursor
    }
    const got = new Map<string, Set<number>>()
    for (const a of rx.arrivals.filter((x) => x.client === c)) {
      const s = got.get(a.id) ?? new Set<number>()
      if (s.has(a.revision)) check.duplicates++
      s.add(a.revision)
      got.set(a.id, s)
    }
    for (const [id, revision] of newest) {
      check.resources++
      if (got.get(id)?.has(revision)) check.arrived++
      else if (pending.get(id) === revision) check.pending++
      else if (lagging) check.notQueuedLagging++
      else check.lost++
    }
  }
  const all = rx.arrivals.map((a) => a.lagMs)
  emit({
    kind: 'summary',
    store,
    intervalMs: Number(INTERVAL),
    minutes: MINUTES,
    writes: counts.writes,
    created: counts.created,
    writeErrors: counts.errors,
    writesPerSecond: Number((counts.writes / (MINUTES * 60)).toFixed(1)),
    notifications: rx.arrivals.length,
    lagP50ms: pct(all, 50),
    lagP99ms: pct(all, 99),
    check,
  })
  await service.stop()
  rx.close()
  if (admin && dbName) {
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
    await admin.end()
  }
  rmSync(dir, { recursive: true, force: true })
  process.exit(0)
}

main().catch(async (err) => {
  console.error(err)
  await stopAllServices()
  process.exit(1)
})
