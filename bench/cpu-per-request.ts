/**
 * `npx tsx bench/cpu-per-request.ts`: the CPU one request costs, on PostgreSQL, for a machine shared with other work
 * (issue 36): the rates of `npm run bench` move with whatever else runs, the CPU a request takes far less. Starts the
 * service (production, the spec's one request at a time per key) on a fresh database, seeds `CPU_KEYS` clients
 * (default 10), warms up, then sends `CPU_N` requests (default 2,000) of each scenario over the keys at once and prints
 * the service process's CPU and the database backends' CPU (both from /proc: the server must run on this host) per
 * request, with the latency each key saw (p50: the keys' median; p99: the worst key's). DATABASE_LAYOUT=partitioned
 * measures the partitioned layout (docs/scaling.md); CPU_SCENARIOS (get, put-customer, put-create, put-batch) picks scenarios, and
 * BENCH_CPU_PROF=<dir> writes the service's V8 CPU profile there. A measurement, not a test.
 */
import autocannon from 'autocannon'
import pg from 'pg'
import { SCOPES } from '../src/domain/scopes.ts'
import { customerBody, mixedBatch, receivableBody } from './scenarios.ts'
import { call, cpuMs, seedTenant, startService, stopAllServices } from './service.ts'

const KEYS = Number(process.env.CPU_KEYS ?? 10)
const N = Number(process.env.CPU_N ?? 2000)
const BASE = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

const admin = new pg.Client({ connectionString: BASE })
await admin.connect()
const name = `irs_cpu_${Date.now()}`
await admin.query(`CREATE DATABASE ${name}`)
const url = new URL(BASE)
url.pathname = `/${name}`
const backends = async () =>
  (await admin.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [name])).rows.map((r) => r.pid)
try {
  const svc = await startService({
    DATABASE_URL: url.toString(),
    SERVICE_ENVIRONMENT: 'production',
    WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
    RATE_LIMIT_PER_MINUTE: '1000000000',
    CONCURRENCY_PER_KEY: '1',
    BATCH_WORKER_CONCURRENCY: '0',
  })
  const tenants = await Promise.all(
    Array.from({ length: KEYS }, async (_, i) => ({ client: `cpu${i}`, key: await seedTenant(svc.url, `cpu${i}`, SCOPES) })),
  )
  for (const t of tenants) await call(svc.url, 'PUT', `/v1/clients/${t.client}/customers/c1`, t.key, customerBody(0))
  let serial = 0
  const scenarios: [string, (t: { client: string }) => { method: 'GET' | 'PUT'; path: string; body?: string }][] = [
    ['GET Customer', (t) => ({ method: 'GET', path: `/v1/clients/${t.client}/customers/c1` })],
    [
      'PUT Customer (each changes it)',
      (t) => ({ method: 'PUT', path: `/v1/clients/${t.client}/customers/c1`, body: JSON.stringify(customerBody(++serial)) }),
    ],
    [
      'PUT Receivable create',
      (t) => ({ method: 'PUT', path: `/v1/clients/${t.client}/receivables/r${++serial}`, body: JSON.stringify(receivableBody('c1', 1)) }),
    ],
    [
      // The submission alone (no batch worker runs here): 100 mixed records accepted and queued.
      'PUT batch (100 mixed records, queued)',
      (t) => {
        const id = `b${++serial}`
        return { method: 'PUT', path: `/v1/clients/${t.client}/batches/${id}`, body: JSON.stringify(mixedBatch(`${t.client}-${id}`)) }
      },
    ],
  ]
  type Make = (t: { client: string }) => { method: 'GET' | 'PUT'; path: string; body?: string }
  // Each key's autocannon result: its latency percentiles (ms), for the table's p50 (the keys' median) and p99 (their worst).
  const run = (make: Make, amount: number): Promise<autocannon.Result[]> =>
    Promise.all(
      tenants.map(
        (t) =>
          new Promise<autocannon.Result>((resolve, reject) => {
            autocannon(
              {
                url: svc.url,
                connections: 1,
                amount,
                requests: [
                  {
                    setupRequest: (req) => {
                      const { method, path, body } = make(t)
                      const headers: Record<string, string> = { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' }
                      return { ...req, method, path, headers, ...(body ? { body } : {}) }
                    },
                  },
                ],
              },
              (err, res) => (err ? reject(err) : res.non2xx ? reject(new Error(`${res.non2xx} non-2xx`)) : resolve(res)),
            )
          }),
      ),
    )
  console.log(
    `| scenario | requests | service CPU µs/request | backends CPU µs/request | wall s | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|---:|---:|`,
  )
  // CPU_SCENARIOS=get,put-customer,put-create: only those (with BENCH_CPU_PROF, a profile of one route alone).
  const only = process.env.CPU_SCENARIOS?.split(',')
  const ids = ['get', 'put-customer', 'put-create', 'put-batch']
  for (const [label, make] of scenarios.filter((_, i) => !only || only.includes(ids[i] as string))) {
    await run(make, 50)
    const pids = await backends()
    const s0 = cpuMs(svc.pid)
    const b0 = pids.reduce((a, p) => a + cpuMs(p), 0)
    const t0 = performance.now()
    const results = await run(make, Math.ceil(N / KEYS))
    const p50s = results.map((r) => r.latency.p50).sort((a, b) => a - b)
    const p50 = p50s[Math.floor(p50s.length / 2)] ?? 0
    const p99 = Math.max(...results.map((r) => r.latency.p99))
    const wall = (performance.now() - t0) / 1000
    const n = Math.ceil(N / KEYS) * KEYS
    const s = cpuMs(svc.pid) - s0
    const b = pids.reduce((a, p) => a + cpuMs(p), 0) - b0
    console.log(
      `| ${label} | ${n} | ${Math.round((s * 1000) / n)} | ${Math.round((b * 1000) / n)} | ${wall.toFixed(1)} | ${p50} | ${p99} |`,
    )
  }
  await svc.stop()
} finally {
  await stopAllServices()
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await admin.end()
}
