/**
 * Issue 24, item 2: how soon a quiet endpoint hears of a change, black-box.
 *
 *   npm run bench:webhook-arrival                                 embedded store (PGlite, a temporary DATA_DIR)
 *   DATABASE_URL=postgres://... npm run bench:webhook-arrival      PostgreSQL (a fresh database, dropped after)
 *
 * The service in its own process (bench/service.ts) with the spec's schedule (WEBHOOK_INTERVAL_MS 60000, unless set)
 * and WEBHOOK_DEV_ALLOW_LOOPBACK=1; ENDPOINTS (5) clients each with an endpoint on one loopback receiver. WRITES
 * (50) Customer PUTs, one every SPACING_MS (1500), round robin over the clients, so each endpoint stays well inside
 * its budget of 10 a minute: write-to-arrival is the time from sending the PUT to the notification of that revision
 * reaching the receiver. Then PINGS (10) POST .../test and as many delivery-log retries, spaced alike: the time from
 * the request to the arrival. Prints p50 and p99 of each (one JSON line). A figure, not a test.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import type net from 'node:net'
import os from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { seedTenant, startService, stopAllServices } from './service.ts'

const ENDPOINTS = Number(process.env.ENDPOINTS ?? 5)
const WRITES = Number(process.env.WRITES ?? 50)
const PINGS = Number(process.env.PINGS ?? 10)
const SPACING_MS = Number(process.env.SPACING_MS ?? 1500)

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return null
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number
}

async function main() {
  const base = process.env.DATABASE_URL
  const dir = mkdtempSync(join(os.tmpdir(), 'irs-webhook-arrival-'))
  let env: Record<string, string> = { DATA_DIR: dir }
  let dbName: string | null = null
  let admin: pg.Client | null = null
  if (base) {
    dbName = `irs_arrival_${Date.now()}`
    admin = new pg.Client({ connectionString: base })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${dbName}`)
    const u = new URL(base)
    u.pathname = `/${dbName}`
    env = { DATABASE_URL: u.toString() }
  }
  /** Arrival waiters by key: `<client>/<resource>@<revision>` or an eventId. */
  const waiters = new Map<string, (at: number) => void>()
  const arrived = new Map<string, number>()
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const at = performance.now()
      try {
        const n = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        for (const key of [`${n.clientCode}/${n.resource.id}@${n.revision}`, n.eventId]) {
          arrived.set(key, at)
          waiters.get(key)?.(at)
        }
      } catch {}
      res.writeHead(204)
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const rxUrl = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`
  const arrival = (key: string, timeoutMs = 120_000) =>
    new Promise<number>((resolve, reject) => {
      const seen = arrived.get(key)
      if (seen !== undefined) return resolve(seen)
      const timer = setTimeout(() => reject(new Error(`${key} did not arrive within ${timeoutMs} ms`)), timeoutMs)
      waiters.set(key, (at) => {
        clearTimeout(timer)
        resolve(at)
      })
    })
  const interval = process.env.WEBHOOK_INTERVAL_MS ?? '60000'
  const service = await startService({ ...env, WEBHOOK_DEV_ALLOW_LOOPBACK: '1', WEBHOOK_INTERVAL_MS: interval })
  const api = async (method: string, path: string, key: string, body?: unknown) => {
    const res = await fetch(`${service.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    })
    const json = await res.json()
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`)
    return json
  }
  const clients = Array.from({ length: ENDPOINTS }, (_, i) => `arr-${i}`)
  const keys = new Map<string, string>()
  for (const c of clients) {
    const key = await seedTenant(service.url, c, ['customers:write', 'customers:read', 'webhooks:manage'])
    keys.set(c, key)
    await api('PUT', `/v1/clients/${c}/webhook-endpoint`, key, { url: `${rxUrl}/${c}` })
  }
  // Let the start-up run pass.
  await new Promise((r) => setTimeout(r, 2000))
  const writeLatency: number[] = []
  const waits: Promise<void>[] = []
  for (let i = 0; i < WRITES; i++) {
    const c = clients[i % clients.length] as string
    const id = `c-${i}`
    const sent = performance.now()
    const customer = await api('PUT', `/v1/clients/${c}/customers/${id}`, keys.get(c) as string, {
      type: 'person',
      name: { firstName: 'Arr', lastName: `L${i}` },
      sourceReference: `arr/${id}`,
    })
    waits.push(arrival(`${c}/${id}@${customer.revision}`).then((at) => void writeLatency.push(at - sent)))
    await new Promise((r) => setTimeout(r, SPACING_MS))
  }
  await Promise.all(waits)
  const pingLatency: number[] = []
  const retryLatency: number[] = []
  for (let i = 0; i < PINGS; i++) {
    const c = clients[i % clients.length] as string
    const key = keys.get(c) as string
    const sent = performance.now()
    const ping = await api('POST', `/v1/clients/${c}/webhook-endpoint/test`, key)
    pingLatency.push((await arrival(ping.eventId)) - sent)
    arrived.delete(ping.eventId)
    await new Promise((r) => setTimeout(r, SPACING_MS))
    const again = performance.now()
    await api('POST', `/v1/clients/${c}/webhook-endpoint/deliveries/${ping.deliveryId}/retry`, key)
    retryLatency.push((await arrival(ping.eventId)) - again)
    await new Promise((r) => setTimeout(r, SPACING_MS))
  }
  const round = (x: number | null) => (x === null ? null : Math.round(x))
  console.log(
    JSON.stringify({
      kind: 'arrival',
      store: base ? 'postgres' : 'pglite',
      intervalMs: Number(interval),
      endpoints: ENDPOINTS,
      writes: WRITES,
      spacingMs: SPACING_MS,
      writeToArrival: { p50ms: round(pct(writeLatency, 50)), p99ms: round(pct(writeLatency, 99)), maxms: round(Math.max(...writeLatency)) },
      ping: { n: pingLatency.length, p50ms: round(pct(pingLatency, 50)), p99ms: round(pct(pingLatency, 99)) },
      retry: { n: retryLatency.length, p50ms: round(pct(retryLatency, 50)), p99ms: round(pct(retryLatency, 99)) },
    }),
  )
  await service.stop()
  server.close()
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
