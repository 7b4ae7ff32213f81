/**
 * `npm run bench`: measures our routes beside a bare node:http server answering the same payload, in one
 * run, on each store (embedded PGlite, and PostgreSQL when reachable at BENCH_DATABASE_URL or the local
 * server). Prints requests per second, p50 and p99 and the ratio to the bare server; writes
 * .bench/results.json. Traffic goes only to 127.0.0.1. Measurement only: nothing here asserts a time.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type net from 'node:net'
import os from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import pg from 'pg'
import { SCOPES } from '../src/domain/scopes.ts'
import { customerBody, mixedBatch, receivableBody } from './scenarios.ts'
import { call, type Service, seedTenant, startService } from './service.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10)
const PG_BASE = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

interface Row {
  store: string
  scenario: string
  rps: number
  p50: number
  p99: number
  ratio: number | null
  non2xx: number
  note?: string
}
const rows: Row[] = []

async function load(opts: {
  url: string
  method?: string
  token?: string
  body?: (n: number) => unknown
  path?: (n: number) => string
}): Promise<autocannon.Result> {
  let n = 0
  return autocannon({
    url: opts.url,
    connections: CONNECTIONS,
    duration: SECONDS,
    requests: [
      {
        method: (opts.method ?? 'GET') as 'GET',
        setupRequest(req: autocannon.Request) {
          n++
          const headers: Record<string, string> = { ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}) }
          const out: Record<string, unknown> = { ...req, headers }
          if (opts.path) out.path = opts.path(n)
          if (opts.body) {
            headers['content-type'] = 'application/json'
            out.body = JSON.stringify(opts.body(n))
          }
          return out as unknown as typeof req
        },
      },
    ],
  })
}

function record(store: string, scenario: string, r: autocannon.Result, baseline: number | null, note?: string) {
  rows.push({
    store,
    scenario,
    rps: Math.round(r.requests.average),
    p50: r.latency.p50,
    p99: r.latency.p99,
    ratio: baseline ? Math.round((r.requests.average / baseline) * 1000) / 1000 : null,
    non2xx: r.non2xx + r.errors,
    ...(note ? { note } : {}),
  })
}

/** The bare server: node:http answering the Customer JSON with the same headers, no framework, no store. */
async function bareServer(payload: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-store',
      'service-api-version': 'v1',
      'x-request-id': '00000000-0000-4000-8000-000000000000',
    })
    res.end(payload)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as net.AddressInfo
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

async function benchStore(store: string, service: Service) {
  const key = await seedTenant(service.url, 'bench', SCOPES)
  const base = `${service.url}/v1/clients/bench`
  const payload = JSON.stringify(await call(service.url, 'PUT', '/v1/clients/bench/customers/c-read', key, customerBody(0)))
  await call(service.url, 'PUT', '/v1/clients/bench/customers/c-owner', key, customerBody(1))

  const bare = await bareServer(payload)
  const bareRun = await load({ url: bare.url })
  await bare.close()
  const baseline = bareRun.requests.average
  record(store, 'bare node:http (same payload)', bareRun, baseline)

  record(store, 'GET customer', await load({ url: `${base}/customers/c-read`, token: key }), baseline)
  record(
    store,
    'PUT customer (each request changes it)',
    await load({
      url: base,
      method: 'PUT',
      token: key,
      path: (n) => `/v1/clients/bench/customers/c-w${n % 50}`,
      body: (n) => customerBody(n),
    }),
    baseline,
  )
  record(
    store,
    'PUT receivable (create)',
    await load({
      url: base,
      method: 'PUT',
      token: key,
      path: (n) => `/v1/clients/bench/receivables/r-${n}`,
      body: () => receivableBody('c-owner', 1),
    }),
    baseline,
  )

  // Batch throughput, beside 100 sequential single-record PUTs measured now.
  const seqStart = performance.now()
  for (let i = 0; i < 100; i++) await call(service.url, 'PUT', `/v1/clients/bench/customers/seq-${i}`, key, customerBody(i))
  const seqRps = 100 / ((performance.now() - seqStart) / 1000)
  const submitters = 10
  const perSubmitter = 5
  const keys = await Promise.all(Array.from({ length: submitters }, (_, i) => seedTenant(service.url, `bench-b${i}`, SCOPES)))
  const batchStart = performance.now()
  await Promise.all(
    keys.map(async (k, i) => {
      for (let b = 0; b < perSubmitter; b++)
        await call(service.url, 'PUT', `/v1/clients/bench-b${i}/batches/b-${b}`, k, mixedBatch(`s${i}b${b}`))
    }),
  )
  // Poll lightly (the pollers must not compete with the workers being measured): batches run oldest
  // first, so each submitter's last batch finishing means all of its batches have.
  for (let tries = 0; tries < 3000; tries++) {
    const last = await Promise.all(keys.map((k, i) => call(service.url, 'GET', `/v1/clients/bench-b${i}/batches/b-${perSubmitter - 1}`, k)))
    if (last.every((s) => s.status !== 'queued' && s.status !== 'running')) break
    await new Promise((r) => setTimeout(r, 250))
  }
  const batchSeconds = (performance.now() - batchStart) / 1000
  const states = await Promise.all(
    keys.flatMap((k, i) =>
      Array.from({ length: perSubmitter }, (_, b) => call(service.url, 'GET', `/v1/clients/bench-b${i}/batches/b-${b}`, k)),
    ),
  )
  const succeeded = states.reduce((acc, s) => acc + s.counts.succeeded, 0)
  const records = submitters * perSubmitter * 100
  const batchRps = records / batchSeconds
  rows.push({
    store,
    scenario: `batch records (${submitters} keys x ${perSubmitter} batches x 100 mixed)`,
    rps: Math.round(batchRps),
    p50: 0,
    p99: 0,
    ratio: null,
    non2xx: records - succeeded,
    note: `records/s; sequential single PUTs ${Math.round(seqRps)}/s; batch/sequential = ${(batchRps / seqRps).toFixed(1)}x`,
  })

  // A change feed of 10,000 events: the batches above wrote 14,000; read 10,000 of one client's sequence.
  const feedKey = keys[0] as string
  const feedClient = await seedTenant(service.url, 'bench-feed', SCOPES)
  const feedBatches = Array.from({ length: 100 }, (_, b) =>
    call(service.url, 'PUT', `/v1/clients/bench-feed/batches/f-${b}`, feedClient, {
      records: Array.from({ length: 100 }, (_, i) => ({
        recordId: `c${i}`,
        kind: 'customer',
        externalId: `f${b}-${i}`,
        body: customerBody(i),
      })),
    }),
  )
  await Promise.all(feedBatches)
  for (let b = 0; b < 100; b++) {
    for (let tries = 0; tries < 3000; tries++) {
      const state = await call(service.url, 'GET', `/v1/clients/bench-feed/batches/f-${b}`, feedClient)
      if (state.status === 'succeeded') break
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  const readStart = performance.now()
  let read = 0
  let after = ''
  while (read < 10_000) {
    const page = await call(service.url, 'GET', `/v1/clients/bench-feed/changes?limit=200${after ? `&after=${after}` : ''}`, feedClient)
    read += page.data.length
    after = page.nextCursor
    if (!page.hasMore) break
  }
  const readSeconds = (performance.now() - readStart) / 1000
  rows.push({
    store,
    scenario: 'change feed: read 10,000 events (pages of 200, the limit)',
    rps: Math.round(read / readSeconds),
    p50: 0,
    p99: 0,
    ratio: null,
    non2xx: 10_000 - read,
    note: `events/s; ${read} events in ${readSeconds.toFixed(2)} s`,
  })
  record(
    store,
    'GET change feed page (limit=200)',
    await load({ url: `${service.url}/v1/clients/bench-feed/changes?limit=200`, token: feedClient }),
    baseline,
  )
  void feedKey
}

async function postgresAvailable(): Promise<boolean> {
  const c = new pg.Client({ connectionString: PG_BASE })
  try {
    await c.connect()
    await c.end()
    return true
  } catch {
    return false
  }
}

async function main() {
  console.log(`bench: ${SECONDS}s per measurement, ${CONNECTIONS} connections, ${os.cpus().length} cores, node ${process.version}`)
  const dataDir = mkdtempSync(join(os.tmpdir(), 'irs-bench-'))
  const pglite = await startService({ DATA_DIR: dataDir, BATCH_WORKER_CONCURRENCY: '1' })
  try {
    await benchStore('pglite', pglite)
  } finally {
    await pglite.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
  if (await postgresAvailable()) {
    const name = `irs_bench_${Date.now()}`
    const admin = new pg.Client({ connectionString: PG_BASE })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${name}`)
    const u = new URL(PG_BASE)
    u.pathname = `/${name}`
    // Batch workers wait on database round trips, so four share two cores well (BATCH_WORKER_CONCURRENCY).
    const service = await startService({ DATABASE_URL: u.toString(), BATCH_WORKER_CONCURRENCY: '4' })
    try {
      await benchStore('postgres', service)
    } finally {
      await service.stop()
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.end()
    }
  } else {
    console.log('PostgreSQL not reachable: measured the embedded store only')
  }
  console.table(rows.map((r) => ({ ...r, ratio: r.ratio ?? '', note: r.note ?? '' })))
  mkdirSync('.bench', { recursive: true })
  writeFileSync(
    '.bench/results.json',
    `${JSON.stringify({ at: new Date().toISOString(), seconds: SECONDS, connections: CONNECTIONS, rows }, null, 2)}\n`,
  )
}

await main()
