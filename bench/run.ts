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

/**
 * Dispatch: notifications delivered per second to a loopback receiver from a backlog of 10,000 feed events
 * (100 clients with an endpoint each, 100 Customers per client). A first service builds the backlog with its
 * webhook worker idle (WEBHOOK_INTERVAL_MS one hour), then stops; a second service on the same store runs the
 * worker every 100 ms (at most 10 notifications per endpoint per run, as the spec says) and drains it. The
 * rate is measured from the first notification received to the 10,000th.
 */
async function benchDispatch(store: string, storeEnv: Record<string, string>) {
  const clients = 100
  const perClient = 100
  const total = clients * perClient
  const seen = new Set<string>()
  let received = 0
  let first = 0
  let last = 0
  let done: () => void = () => {}
  const finished = new Promise<void>((resolve) => {
    done = resolve
  })
  const receiver = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      received++
      seen.add(String(req.headers['service-event-id']))
      if (received === 1) first = performance.now()
      if (seen.size === total) {
        last = performance.now()
        done()
      }
      res.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()))
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as net.AddressInfo).port}/hooks`
  const env = { ...storeEnv, WEBHOOK_DEV_ALLOW_LOOPBACK: '1' }
  const builder = await startService({ ...env, WEBHOOK_INTERVAL_MS: '3600000', BATCH_WORKER_CONCURRENCY: '2' })
  try {
    const keys = await Promise.all(
      Array.from({ length: clients }, async (_, c) => {
        const key = await seedTenant(builder.url, `dispatch-${c}`, SCOPES)
        await call(builder.url, 'PUT', `/v1/clients/dispatch-${c}/webhook-endpoint`, key, { url: receiverUrl })
        await call(builder.url, 'PUT', `/v1/clients/dispatch-${c}/batches/d`, key, {
          records: Array.from({ length: perClient }, (_, i) => ({
            recordId: `c${i}`,
            kind: 'customer',
            externalId: `d${i}`,
            body: customerBody(i),
          })),
        })
        return key
      }),
    )
    for (const [c, key] of keys.entries()) {
      for (let tries = 0; tries < 6000; tries++) {
        const b = await call(builder.url, 'GET', `/v1/clients/dispatch-${c}/batches/d`, key)
        if (b.status !== 'queued' && b.status !== 'running') break
        await new Promise((r) => setTimeout(r, 100))
      }
    }
  } finally {
    await builder.stop()
  }
  const started = performance.now()
  const dispatcher = await startService({ ...env, WEBHOOK_INTERVAL_MS: '100' })
  const timeout = setTimeout(() => done(), 600_000)
  await finished
  clearTimeout(timeout)
  const fromStart = (performance.now() - started) / 1000
  await dispatcher.stop()
  await new Promise<void>((resolve) => receiver.close(() => resolve()))
  const seconds = ((last || performance.now()) - first) / 1000
  rows.push({
    store,
    scenario: `webhook dispatch: ${total.toLocaleString('en')} backlog events, ${clients} endpoints, loopback receiver`,
    rps: Math.round(seen.size / seconds),
    p50: 0,
    p99: 0,
    ratio: null,
    non2xx: total - seen.size,
    note: `notifications/s, first to last; ${received} requests for ${seen.size} events; ${fromStart.toFixed(1)} s from process start`,
  })
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

/** BENCH_SECTIONS=dispatch (comma-separated: requests, dispatch) measures only those; default all. */
const SECTIONS = new Set((process.env.BENCH_SECTIONS ?? 'requests,dispatch').split(','))

async function main() {
  console.log(`bench: ${SECONDS}s per measurement, ${CONNECTIONS} connections, ${os.cpus().length} cores, node ${process.version}`)
  const dataDir = mkdtempSync(join(os.tmpdir(), 'irs-bench-'))
  if (SECTIONS.has('requests')) {
    const pglite = await startService({ DATA_DIR: dataDir, BATCH_WORKER_CONCURRENCY: '1' })
    try {
      await benchStore('pglite', pglite)
    } finally {
      await pglite.stop()
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
  if (SECTIONS.has('dispatch')) {
    const dispatchDir = mkdtempSync(join(os.tmpdir(), 'irs-bench-dispatch-'))
    try {
      await benchDispatch('pglite', { DATA_DIR: dispatchDir })
    } finally {
      rmSync(dispatchDir, { recursive: true, force: true })
    }
  }
  if (await postgresAvailable()) {
    const name = `irs_bench_${Date.now()}`
    const admin = new pg.Client({ connectionString: PG_BASE })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${name}`)
    const u = new URL(PG_BASE)
    u.pathname = `/${name}`
    // Batch workers wait on database round trips, so four share two cores well (BATCH_WORKER_CONCURRENCY).
    try {
      if (SECTIONS.has('requests')) {
        const service = await startService({ DATABASE_URL: u.toString(), BATCH_WORKER_CONCURRENCY: '4' })
        try {
          await benchStore('postgres', service)
        } finally {
          await service.stop()
        }
      }
      if (SECTIONS.has('dispatch')) {
        await admin.query(`CREATE DATABASE ${name}_dispatch`)
        u.pathname = `/${name}_dispatch`
        try {
          await benchDispatch('postgres', { DATABASE_URL: u.toString() })
        } finally {
          await admin.query(`DROP DATABASE IF EXISTS ${name}_dispatch WITH (FORCE)`)
        }
      }
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.end()
    }
  } else {
    console.log('PostgreSQL not reachable: measured the embedded store only')
  }
  console.table(rows.map((r) => ({ ...r, ratio: r.ratio ?? '', note: r.note ?? '' })))
  mkdirSync('.bench', { recursive: true })
  writeFileSync(
    // A partial run (BENCH_SECTIONS) writes beside the full results instead of over them.
    `.bench/results${SECTIONS.size === 2 ? '' : `-${[...SECTIONS].join('-')}`}.json`,
    `${JSON.stringify({ at: new Date().toISOString(), seconds: SECONDS, connections: CONNECTIONS, rows }, null, 2)}\n`,
  )
}

await main()
