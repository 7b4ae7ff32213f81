/**
 * `npm run bench`: measures our routes beside a bare node:http server answering the same payload, in one
 * run, on each store (embedded PGlite in a fresh data directory, and PostgreSQL, when reachable, in a fresh
 * database created on the server of BENCH_DATABASE_URL, else DATABASE_URL, else the local server, and dropped at
 * the end). Prints requests per second, p50 and p99, the ratio to the bare server and the load generator's own CPU
 * use; writes .bench/results.json. Traffic goes only to 127.0.0.1. Measurement only: nothing here asserts a time.
 *
 * Processes: this process is the load generator (autocannon) and nothing else. The service, the bare baseline
 * (bench/bare-server.ts) and the durable-write floor (bench/floor-server.ts) each run as a child process of their
 * own, started the same way (bench/service.ts: this Node, its flags, tsx), so the baseline and the service compete
 * with the generator for the machine alike. Until issue 26 the bare server ran inside this process, which then both
 * sent and answered every baseline request on one core: that baseline was about halved and every ratio to it about
 * twice too flattering (BENCH_BARE_IN_PROCESS=1 measures that old baseline again, as an extra row). `gen cpu %` is
 * this process's user + system CPU time over each measurement as a percentage of one core's wall time: near 100,
 * the generator, not the server, was the bottleneck of that row. Every child is stopped at the end, on an error, and
 * on SIGINT or SIGTERM (which also drop the run's PostgreSQL databases).
 *
 * What production sees: the service runs in production mode with the specification's concurrency limit (one
 * request at a time per key) and a raised per-minute budget, and every scenario is driven over BENCH_KEYS
 * clients at once, each with its own key and its own connection (so concurrency 1 per key, and every request
 * pays the real gate: key lookup, count, slot, release). GET Customer and PUT Receivable are then measured
 * again on the same store by the same app with its limits switched off (bench/limits-off.ts), so the price of
 * the limits is visible in every run.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type net from 'node:net'
import os from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import pg from 'pg'
import { SCOPES } from '../src/domain/scopes.ts'
import { bareHandler } from './bare-server.ts'
import { customerBody, mixedBatch, receivableBody } from './scenarios.ts'
import { call, type Service, seedTenant, startService, stopAllServices } from './service.ts'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
/** Clients (each with one key and one connection) driving every API scenario at once. */
const KEYS = Number(process.env.BENCH_KEYS ?? process.env.BENCH_CONNECTIONS ?? 10)
const PG_BASE = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
// Children inherit this environment: a DATABASE_URL left in it would put the "pglite" service and floor on PostgreSQL.
delete process.env.DATABASE_URL
/** BENCH_BARE_IN_PROCESS=1: also measure the bare server inside this process, the baseline used before issue 26. */
const BARE_IN_PROCESS = process.env.BENCH_BARE_IN_PROCESS === '1'
/**
 * BENCH_SCENARIOS=put-create,batch (comma-separated: get, put-customer, put-create, floor, put-replace, adjustment,
 * feed, batch, limits-off) measures only those scenarios (the bare server is always measured); default all.
 */
const SCENARIOS = process.env.BENCH_SCENARIOS ? new Set(process.env.BENCH_SCENARIOS.split(',')) : null
const want = (scenario: string) => SCENARIOS === null || SCENARIOS.has(scenario)
/**
 * The batch runner's settings: the service's defaults (src/config.ts, chosen per store from this bench), unless
 * BENCH_BATCH_CONCURRENCY or BENCH_BATCH_CHUNK_SIZE ask for others (to measure them).
 */
const BATCH_SETTINGS: Record<string, string> = {
  ...(process.env.BENCH_BATCH_CONCURRENCY ? { BATCH_WORKER_CONCURRENCY: process.env.BENCH_BATCH_CONCURRENCY } : {}),
  ...(process.env.BENCH_BATCH_CHUNK_SIZE ? { BATCH_CHUNK_SIZE: process.env.BENCH_BATCH_CHUNK_SIZE } : {}),
}

/** Production mode, the spec's one request at a time per key, a per-minute budget no scenario reaches. */
const PRODUCTION_LIMITS = {
  SERVICE_ENVIRONMENT: 'production',
  WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
  RATE_LIMIT_PER_MINUTE: '1000000000',
  CONCURRENCY_PER_KEY: '1',
}

interface Row {
  store: string
  scenario: string
  rps: number
  p50: number
  p99: number
  ratio: number | null
  non2xx: number
  /** The load generator's (this process's) CPU over the measurement, % of one core. */
  genCpu: number | null
  note?: string
}
const rows: Row[] = []

interface Measured {
  rps: number
  p50: number
  p99: number
  non2xx: number
  genCpu: number
}

/** This process's user + system CPU time since `start` as a percentage of one core over `wallMs`. */
function cpuPercent(start: NodeJS.CpuUsage, wallMs: number): number {
  const used = process.cpuUsage(start)
  return Math.round((used.user + used.system) / 10 / wallMs)
}

interface Tenant {
  client: string
  key: string
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number
}

/**
 * One connection per tenant, all at once for SECONDS: each connection sends its tenant's requests one after
 * another (concurrency 1 per key). Latencies of every response are pooled for p50 and p99.
 */
async function load(opts: {
  url: string
  tenants: Tenant[]
  method?: string
  path: (t: Tenant, n: number) => string
  body?: (t: Tenant, n: number) => unknown
  /** Requests per tenant instead of SECONDS of them. */
  amount?: number
}): Promise<Measured> {
  const latencies: number[] = []
  let n = 0
  const cpuStart = process.cpuUsage()
  const wallStart = performance.now()
  const results = await Promise.all(
    opts.tenants.map(
      (tenant) =>
        new Promise<autocannon.Result>((resolve, reject) => {
          const instance = autocannon(
            {
              url: opts.url,
              connections: 1,
              ...(opts.amount ? { amount: opts.amount } : { duration: SECONDS }),
              requests: [
                {
                  method: (opts.method ?? 'GET') as 'GET',
                  setupRequest(req: autocannon.Request) {
                    n++
                    const headers: Record<string, string> = { authorization: `Bearer ${tenant.key}` }
                    const out: Record<string, unknown> = { ...req, headers, path: opts.path(tenant, n) }
                    if (opts.body) {
                      headers['content-type'] = 'application/json'
                      out.body = JSON.stringify(opts.body(tenant, n))
                    }
                    return out as unknown as typeof req
                  },
                },
              ],
            },
            (err, result) => (err ? reject(err) : resolve(result)),
          )
          instance.on('response', (_client, _status, _bytes, responseTime) => {
            latencies.push(responseTime)
          })
        }),
    ),
  )
  const genCpu = cpuPercent(cpuStart, performance.now() - wallStart)
  latencies.sort((a, b) => a - b)
  return {
    rps: results.reduce((acc, r) => acc + r.requests.average, 0),
    p50: Math.round(percentile(latencies, 50) * 10) / 10,
    p99: Math.round(percentile(latencies, 99) * 10) / 10,
    non2xx: results.reduce((acc, r) => acc + r.non2xx + r.errors, 0),
    genCpu,
  }
}

function record(store: string, scenario: string, m: Measured, baseline: number | null, note?: string) {
  rows.push({
    store,
    scenario,
    rps: Math.round(m.rps),
    p50: m.p50,
    p99: m.p99,
    ratio: baseline ? Math.round((m.rps / baseline) * 1000) / 1000 : null,
    non2xx: m.non2xx,
    genCpu: m.genCpu,
    ...(note ? { note } : {}),
  })
}

/**
 * The old baseline (before issue 26), only with BENCH_BARE_IN_PROCESS=1: bench/bare-server.ts's handler inside
 * this process, so the generator sends and answers every request on one core.
 */
async function inProcessBareServer(payload: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer(bareHandler(payload))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  const { port } = server.address() as net.AddressInfo
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

/** bench/limits-off.ts as a child process on the same store (the limits-on service stopped first). */
function startLimitsOff(env: Record<string, string>): Promise<Service> {
  return startService(env, 'bench/limits-off.ts')
}

const adjustment = (receivable: string, sourceRevision: number) => ({
  type: 'adjustment',
  amount: { amount: '0.01', currency: 'USD' },
  externalReceivableId: receivable,
  sourceRevision,
  effectiveAt: '2026-03-01T00:00:00Z',
  reason: 'source_adjustment',
  sourceReference: 'ledger/e/1',
  direction: 'increase',
})

async function waitForBatches(url: string, tenants: Tenant[], ids: Map<string, string[]>) {
  for (const t of tenants) {
    for (const id of ids.get(t.client) ?? []) {
      for (let tries = 0; tries < 6000; tries++) {
        const b = await call(url, 'GET', `/v1/clients/${t.client}/batches/${id}`, t.key)
        if (b.status !== 'queued' && b.status !== 'running') break
        await new Promise((r) => setTimeout(r, 100))
      }
    }
  }
}

/** A fresh process compiles as it goes: a few hundred requests of the compared routes first, not recorded. */
async function warmUp(url: string, tenants: Tenant[]) {
  await load({ url, tenants, path: (t) => `/v1/clients/${t.client}/customers/c-read`, amount: 200 })
  await load({
    url,
    tenants,
    method: 'PUT',
    path: (t, n) => `/v1/clients/${t.client}/receivables/warm-${n}`,
    body: () => receivableBody('c-owner', 1),
    amount: 40,
  })
}

async function benchStore(store: string, env: Record<string, string>) {
  const service = await startService({ ...env, ...PRODUCTION_LIMITS })
  let off: Service | null = null
  try {
    const tenants: Tenant[] = []
    for (let i = 0; i < KEYS; i++) {
      const client = `bench-${i}`
      const key = await seedTenant(service.url, client, SCOPES)
      tenants.push({ client, key })
      await call(service.url, 'PUT', `/v1/clients/${client}/customers/c-read`, key, customerBody(0))
      await call(service.url, 'PUT', `/v1/clients/${client}/customers/c-owner`, key, customerBody(1))
      await call(service.url, 'PUT', `/v1/clients/${client}/receivables/fe`, key, receivableBody('c-owner', 1))
    }
    const first = tenants[0] as Tenant
    const payload = JSON.stringify(await call(service.url, 'GET', `/v1/clients/${first.client}/customers/c-read`, first.key))

    // The baseline: bench/bare-server.ts in its own process, warmed up like the service, measured while the
    // service (already started) is idle, as before.
    const bare = await startService({ BENCH_BARE_PAYLOAD: payload }, 'bench/bare-server.ts')
    let bareRun: Measured
    try {
      await load({ url: bare.url, tenants, path: () => '/', amount: 200 })
      bareRun = await load({ url: bare.url, tenants, path: () => '/' })
    } finally {
      await bare.stop()
    }
    const baseline = bareRun.rps
    record(store, 'bare node:http (same payload, own process)', bareRun, baseline)
    if (BARE_IN_PROCESS) {
      const inProcess = await inProcessBareServer(payload)
      try {
        await load({ url: inProcess.url, tenants, path: () => '/', amount: 200 })
        const run = await load({ url: inProcess.url, tenants, path: () => '/' })
        record(
          store,
          "bare node:http in the generator's process (the baseline before issue 26)",
          run,
          baseline,
          `ratios to it would be ${(baseline / run.rps).toFixed(2)}x those printed`,
        )
      } finally {
        await inProcess.close()
      }
    }

    const url = service.url
    await warmUp(url, tenants)
    const getCustomer = want('get') ? await load({ url, tenants, path: (t) => `/v1/clients/${t.client}/customers/c-read` }) : null
    if (getCustomer) record(store, 'GET customer', getCustomer, baseline)
    if (want('put-customer'))
      record(
        store,
        'PUT customer (each request changes it)',
        await load({
          url,
          tenants,
          method: 'PUT',
          path: (t, n) => `/v1/clients/${t.client}/customers/c-w${n % 50}`,
          body: (_t, n) => customerBody(n),
        }),
        baseline,
      )
    const putReceivable = want('put-create')
      ? await load({
          url,
          tenants,
          method: 'PUT',
          path: (t, n) => `/v1/clients/${t.client}/receivables/r-${n}`,
          body: () => receivableBody('c-owner', 1),
        })
      : null
    if (putReceivable) record(store, 'PUT receivable (create)', putReceivable, baseline)
    if (want('floor')) {
      // The durable-write floor (bench/floor-server.ts): one INSERT per request on the same store, in its own
      // database table or data directory, with the same bodies and connections as the PUT above.
      const floorDir = env.DATA_DIR ? mkdtempSync(join(os.tmpdir(), 'irs-bench-floor-')) : null
      const floor = await startService(
        floorDir ? { DATA_DIR: floorDir } : { DATABASE_URL: env.DATABASE_URL as string },
        'bench/floor-server.ts',
      )
      try {
        // Warmed up like the service (40 PUTs per key), on ids of their own.
        await load({
          url: floor.url,
          tenants,
          method: 'PUT',
          path: (t, n) => `/floor/${t.client}/warm-${n}`,
          body: () => receivableBody('c-owner', 1),
          amount: 40,
        })
        const floorRun = await load({
          url: floor.url,
          tenants,
          method: 'PUT',
          path: (t, n) => `/floor/${t.client}/${n}`,
          body: () => receivableBody('c-owner', 1),
        })
        record(
          store,
          'floor: one INSERT per request (node:http, no API, own process)',
          floorRun,
          baseline,
          putReceivable ? `PUT receivable create / floor = ${(putReceivable.rps / floorRun.rps).toFixed(2)}` : undefined,
        )
      } finally {
        await floor.stop()
        if (floorDir) rmSync(floorDir, { recursive: true, force: true })
      }
    }
    if (want('put-replace'))
      record(
        store,
        'PUT receivable (replace, new sourceRevision)',
        await load({
          url,
          tenants,
          method: 'PUT',
          path: (t) => `/v1/clients/${t.client}/receivables/rr`,
          body: (_t, n) => receivableBody('c-owner', n),
        }),
        baseline,
      )
    if (want('adjustment'))
      record(
        store,
        'PUT adjustment (financial event)',
        await load({
          url,
          tenants,
          method: 'PUT',
          path: (t, n) => `/v1/clients/${t.client}/adjustments/a-${n}`,
          body: (_t, n) => adjustment('fe', n + 1),
        }),
        baseline,
      )
    if (want('feed'))
      record(
        store,
        'GET change feed page (limit=200)',
        await load({ url, tenants, path: (t) => `/v1/clients/${t.client}/changes?limit=200` }),
        baseline,
      )

    // Batches: 5 submissions per tenant of 100 mixed records (accepted 202 and queued), then the time until
    // the workers have run every one of them.
    if (want('batch')) {
      const submitted = new Map<string, string[]>()
      const batchStart = performance.now()
      const batchRun = await load({
        url,
        tenants,
        method: 'PUT',
        path: (t, n) => {
          const id = `b-${n}`
          submitted.set(t.client, [...(submitted.get(t.client) ?? []), id])
          return `/v1/clients/${t.client}/batches/${id}`
        },
        body: (t, n) => mixedBatch(`${t.client}-b${n}`),
        amount: Number(process.env.BENCH_BATCHES ?? 5),
      })
      await waitForBatches(url, tenants, submitted)
      const batchSeconds = (performance.now() - batchStart) / 1000
      const batches = [...submitted.values()].reduce((acc, ids) => acc + ids.length, 0)
      record(
        store,
        'PUT batch (100 mixed records, queued)',
        batchRun,
        baseline,
        `${batches} batches = ${batches * 100} records all run ${batchSeconds.toFixed(1)} s after the first submission: ${Math.round((batches * 100) / batchSeconds)} records/s`,
      )
    }
    if (!want('limits-off') || !getCustomer || !putReceivable) return

    // The same app on the same store with its limits off: what the limits cost.
    await service.stop()
    off = await startLimitsOff({ ...env, ...PRODUCTION_LIMITS })
    await warmUp(off.url, tenants)
    const getOff = await load({ url: off.url, tenants, path: (t) => `/v1/clients/${t.client}/customers/c-read` })
    record(store, 'GET customer, limits off', getOff, baseline, `limits on / off = ${(getCustomer.rps / getOff.rps).toFixed(2)}`)
    const putOff = await load({
      url: off.url,
      tenants,
      method: 'PUT',
      path: (t, n) => `/v1/clients/${t.client}/receivables/r-off-${n}`,
      body: () => receivableBody('c-owner', 1),
    })
    record(
      store,
      'PUT receivable (create), limits off',
      putOff,
      baseline,
      `limits on / off = ${(putReceivable.rps / putOff.rps).toFixed(2)}`,
    )
  } finally {
    await off?.stop()
    await service.stop()
  }
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
  const cpuStart = process.cpuUsage()
  const dispatcher = await startService({ ...env, WEBHOOK_INTERVAL_MS: '100' })
  const timeout = setTimeout(() => done(), 600_000)
  await finished
  clearTimeout(timeout)
  // Here this process is the receiver: its CPU from the dispatcher's spawn to the last notification.
  const receiverCpu = cpuPercent(cpuStart, performance.now() - started)
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
    genCpu: receiverCpu,
    note: `notifications/s, first to last; ${received} requests for ${seen.size} events; ${fromStart.toFixed(1)} s from process start; gen cpu = the receiver's`,
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
/** BENCH_STORES=postgres (comma-separated: pglite, postgres) measures only those; default both. */
const STORES = new Set((process.env.BENCH_STORES ?? 'pglite,postgres').split(','))

/** PostgreSQL databases this run created and has not dropped yet: dropped on SIGINT or SIGTERM too. */
const createdDatabases = new Set<string>()

async function dropDatabase(admin: pg.Client, name: string) {
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  createdDatabases.delete(name)
}

// An interrupted run (Ctrl-C, or a SIGTERM to this process alone) stops its child processes and drops its
// databases before it exits; bench/service.ts kills any child left when this process exits some other way.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`bench: ${signal}: stopping the child processes and dropping the run's databases`)
    const cleanup = async () => {
      await stopAllServices()
      if (createdDatabases.size === 0) return
      const admin = new pg.Client({ connectionString: PG_BASE })
      await admin.connect()
      for (const name of [...createdDatabases]) await dropDatabase(admin, name)
      await admin.end()
    }
    cleanup()
      .catch((err) => console.error(`bench: cleanup after ${signal} failed: ${(err as Error).message}`))
      .finally(() => process.exit(signal === 'SIGINT' ? 130 : 143))
  })
}

async function main() {
  console.log(`bench: ${SECONDS}s per measurement, ${KEYS} keys (one connection each), ${os.cpus().length} cores, node ${process.version}`)
  const dataDir = mkdtempSync(join(os.tmpdir(), 'irs-bench-'))
  if (SECTIONS.has('requests') && STORES.has('pglite')) {
    try {
      await benchStore('pglite', { DATA_DIR: dataDir, ...BATCH_SETTINGS })
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  }
  if (SECTIONS.has('dispatch') && STORES.has('pglite')) {
    const dispatchDir = mkdtempSync(join(os.tmpdir(), 'irs-bench-dispatch-'))
    try {
      await benchDispatch('pglite', { DATA_DIR: dispatchDir })
    } finally {
      rmSync(dispatchDir, { recursive: true, force: true })
    }
  }
  if (!STORES.has('postgres')) {
    // measured the embedded store only, as asked
  } else if (await postgresAvailable()) {
    const name = `irs_bench_${Date.now()}`
    const admin = new pg.Client({ connectionString: PG_BASE })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${name}`)
    createdDatabases.add(name)
    const u = new URL(PG_BASE)
    u.pathname = `/${name}`
    try {
      if (SECTIONS.has('requests')) await benchStore('postgres', { DATABASE_URL: u.toString(), ...BATCH_SETTINGS })
      if (SECTIONS.has('dispatch')) {
        await admin.query(`CREATE DATABASE ${name}_dispatch`)
        createdDatabases.add(`${name}_dispatch`)
        u.pathname = `/${name}_dispatch`
        try {
          await benchDispatch('postgres', { DATABASE_URL: u.toString() })
        } finally {
          await dropDatabase(admin, `${name}_dispatch`)
        }
      }
    } finally {
      await dropDatabase(admin, name)
      await admin.end()
    }
  } else {
    console.log('PostgreSQL not reachable: measured the embedded store only')
  }
  console.table(rows.map(({ genCpu, note, ...r }) => ({ ...r, ratio: r.ratio ?? '', 'gen cpu %': genCpu ?? '', note: note ?? '' })))
  mkdirSync('.bench', { recursive: true })
  writeFileSync(
    // A partial run (BENCH_SECTIONS) writes beside the full results instead of over them.
    `.bench/results${SECTIONS.size === 2 && STORES.size === 2 && !SCENARIOS ? '' : `-${[...SECTIONS, ...STORES, ...(SCENARIOS ?? [])].join('-')}`}.json`,
    `${JSON.stringify({ at: new Date().toISOString(), seconds: SECONDS, keys: KEYS, rows }, null, 2)}\n`,
  )
}

await main()
