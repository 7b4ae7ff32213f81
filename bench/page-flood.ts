/**
 * Issue 20, item 5: does a flood of the unauthenticated hosted page (/pay/<token>) slow another tenant's API?
 *
 *   npm run bench:page-flood                                   embedded store (PGlite, a temporary DATA_DIR)
 *   DATABASE_URL=postgres://... npm run bench:page-flood        PostgreSQL (a fresh database, dropped after)
 *
 * The service runs in its own process (bench/service.ts), with its default page limit (PAY_RATE_LIMIT_PER_MINUTE
 * 30; set it in the environment to try another) and the API limits raised. Per scenario: a quiet phase, in which
 * another tenant reads one Customer over one connection, then a flood phase, the same reads while 50 connections
 * flood the page. It prints that tenant's quiet p50, its flood p50, their ratio (the goal: at most 2), and how the
 * page answered the flood. Scenarios: GET of one valid token; GET of random well-formed tokens; POSTs of the
 * form to a request already paid. Every load generator is bounded in time (PHASE_SECONDS, default 8).
 * A figure, not a test: it depends on the machine.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import pg from 'pg'
import { ADMIN_TOKEN, call, seedTenant, startService, stopAllServices } from './service.ts'

const SECONDS = Number(process.env.PHASE_SECONDS ?? 8)
const FLOOD_CONNECTIONS = 50
const SCOPES = [
  'customers:write',
  'customers:read',
  'receivables:write',
  'receivables:read',
  'recovery_instructions:write',
  'payment_requests:write',
  'payment_requests:read',
]

interface Phase {
  p50: number
  requests: number
}

/** The other tenant's reads over one connection for SECONDS: its p50 latency (ms). */
function victimReads(url: string, key: string): Promise<Phase> {
  const latencies: number[] = []
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections: 1,
        duration: SECONDS,
        requests: [{ method: 'GET', path: '/v1/clients/victim/customers/c-1', headers: { authorization: `Bearer ${key}` } }],
      },
      (err) => {
        if (err) return reject(err)
        latencies.sort((a, b) => a - b)
        resolve({ p50: latencies[Math.floor(latencies.length / 2)] ?? Number.NaN, requests: latencies.length })
      },
    )
    instance.on('response', (_client, status, _bytes, responseTime) => {
      if (status !== 200) return reject(new Error(`the victim's read answered ${status}`))
      latencies.push(responseTime)
    })
  })
}

/** FLOOD_CONNECTIONS connections on the page for SECONDS; the count of each status answered. */
function flood(url: string, request: () => { method: 'GET' | 'POST'; path: string; body?: string }): Promise<Record<string, number>> {
  const statuses: Record<string, number> = {}
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections: FLOOD_CONNECTIONS,
        duration: SECONDS,
        requests: [
          {
            setupRequest(req: autocannon.Request) {
              const r = request()
              const out: autocannon.Request = { ...req, method: r.method, path: r.path, headers: {} }
              if (r.body !== undefined) {
                out.body = r.body
                out.headers = { 'content-type': 'application/x-www-form-urlencoded' }
              }
              return out
            },
          },
        ],
      },
      (err) => (err ? reject(err) : resolve(statuses)),
    )
    instance.on('response', (_client, status) => {
      statuses[status] = (statuses[status] ?? 0) + 1
    })
  })
}

async function payableRequest(url: string, key: string, id: string): Promise<string> {
  const api = (method: string, path: string, body: unknown) => call(url, method, `/v1/clients/payer${path}`, key, body)
  await api('PUT', `/receivables/r-${id}`, {
    financialType: 'loan_balance',
    sourceRevision: 1,
    recoverableAmount: { amount: '100.00', currency: 'USD' },
    creditUnion: { loanAccountReference: `loan/${id}`, loanType: 'auto' },
    dueDate: '2026-01-01',
    responsibleCustomers: [{ externalCustomerId: 'c-1', role: 'primary' }],
    sourceReference: `r/${id}`,
  })
  await api('PUT', `/recovery-instructions/ins-${id}`, {
    scope: { type: 'receivable', externalReceivableId: `r-${id}` },
    state: 'authorized',
    revision: 1,
    effectiveAt: '2026-01-01T00:00:00Z',
  })
  const created = await api('PUT', `/payment-requests/pr-${id}`, {
    externalReceivableId: `r-${id}`,
    amount: { amount: '10.00', currency: 'USD' },
    description: 'Instalment',
  })
  return String(created.hostedUrl).split('/pay/')[1] as string
}

async function main() {
  const base = process.env.DATABASE_URL
  const dir = mkdtempSync(join(os.tmpdir(), 'irs-page-flood-'))
  let database: string | undefined
  let env: Record<string, string> = { DATA_DIR: dir }
  if (base) {
    database = `bench_page_flood_${randomBytes(4).toString('hex')}`
    const admin = new pg.Client({ connectionString: base })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${database}`)
    await admin.end()
    const u = new URL(base)
    u.pathname = `/${database}`
    env = { DATABASE_URL: u.toString() }
  }
  const store = base ? 'postgres' : 'pglite'
  const service = await startService(env)
  try {
    const url = service.url
    const victimKey = await seedTenant(url, 'victim', SCOPES)
    await call(url, 'PUT', '/v1/clients/victim/customers/c-1', victimKey, {
      type: 'person',
      name: { firstName: 'Vic', lastName: 'Tim' },
      sourceReference: 'c/1',
    })
    const payerKey = await seedTenant(url, 'payer', SCOPES)
    await call(url, 'PUT', '/admin/v1/clients/payer', ADMIN_TOKEN, { collectionEnabled: true })
    await call(url, 'PUT', '/v1/clients/payer/customers/c-1', payerKey, {
      type: 'person',
      name: { firstName: 'Pat', lastName: 'Payer' },
      sourceReference: 'c/1',
    })
    const open = await payableRequest(url, payerKey, 'open')
    const paid = await payableRequest(url, payerKey, 'paid')
    await call(url, 'POST', '/admin/v1/clients/payer/payment-requests/pr-paid/simulate', ADMIN_TOKEN, { outcome: 'confirmed' })

    const scenarios: [string, () => { method: 'GET' | 'POST'; path: string; body?: string }][] = [
      ['GET flood, one valid token', () => ({ method: 'GET', path: `/pay/${open}` })],
      ['GET flood, random tokens', () => ({ method: 'GET', path: `/pay/${randomBytes(32).toString('base64url')}` })],
      ['POST flood, a paid request', () => ({ method: 'POST', path: `/pay/${paid}`, body: 'outcome=confirmed' })],
    ]
    console.log(
      `store ${store}, PAY_RATE_LIMIT_PER_MINUTE ${process.env.PAY_RATE_LIMIT_PER_MINUTE ?? '30 (default)'}, ${FLOOD_CONNECTIONS} flood connections, phases of ${SECONDS} s`,
    )
    const rows = []
    for (const [name, request] of scenarios) {
      const quiet = await victimReads(url, victimKey)
      const [loaded, statuses] = await Promise.all([victimReads(url, victimKey), flood(url, request)])
      const row = {
        store,
        scenario: name,
        quietP50: quiet.p50,
        floodP50: loaded.p50,
        ratio: Math.round((loaded.p50 / quiet.p50) * 100) / 100,
        pageAnswers: statuses,
      }
      rows.push(row)
      console.log(JSON.stringify(row))
    }
    console.table(rows.map((r) => ({ ...r, pageAnswers: JSON.stringify(r.pageAnswers) })))
  } finally {
    await service.stop()
    await stopAllServices()
    rmSync(dir, { recursive: true, force: true })
    if (base && database) {
      const admin = new pg.Client({ connectionString: base })
      await admin.connect()
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
      await admin.end()
    }
  }
}

await main()
