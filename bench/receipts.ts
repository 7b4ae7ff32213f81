/**
 * Issue 23, item 6: receipts delivered per second from a backlog of confirmed Payments to one loopback receiver.
 *
 *   npm run bench:receipts                                   embedded store (PGlite, a temporary DATA_DIR)
 *   DATABASE_URL=postgres://... npm run bench:receipts       PostgreSQL (a fresh database, dropped after)
 *
 * Three processes, like the bench's other servers: this load generator, the service (bench/receipts-service.ts:
 * the app of src/main.ts whose receipt dispatcher can be held and released by signal) and the Source's receiver
 * (bench/receipt-receiver.ts: verifies every receipt with the SDK's verifyReceipt, answers 204, counts each
 * receiptId once). One client, its grant `receiptDeliveryOwner: service`, its route verified through the real test
 * receipt and confirmation. Then the dispatcher is held while PAYMENTS (default 5,000) Payments are confirmed
 * (RECEIVABLES receivables of 1,000.00, Payment requests of 10.00 each, through the API and the sandbox's
 * simulate), and released: the figure is PAYMENTS / (the last new receipt's arrival - the release), with the
 * dispatcher's defaults (50 receipts claimed per client per run, over 10 connections to the Source). A figure, not a test.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { ADMIN_TOKEN, call, startService, stopAllServices } from './service.ts'

const PAYMENTS = Number(process.env.PAYMENTS ?? 5000)
const RECEIVABLES = Number(process.env.RECEIVABLES ?? 50)
const LANES = 16
const SCOPES = ['customers:write', 'receivables:write', 'recovery_instructions:write', 'payment_requests:write', 'payment_requests:read']

interface Stats {
  posts: number
  unique: number
  badSignatures: number
  payments: number
  firstAtMs: number | null
  lastAtMs: number | null
  confirmationCode: string | null
  maxInFlight: number
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function stats(receiver: string): Promise<Stats> {
  return (await fetch(`${receiver}/control/stats`)).json() as Promise<Stats>
}

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const got = await probe()
    if (got !== undefined) return got
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

async function main() {
  if (PAYMENTS % RECEIVABLES !== 0) throw new Error('PAYMENTS must be a multiple of RECEIVABLES')
  const perReceivable = PAYMENTS / RECEIVABLES
  const base = process.env.DATABASE_URL
  const dir = mkdtempSync(join(os.tmpdir(), 'irs-bench-receipts-'))
  let database: string | undefined
  let env: Record<string, string> = { DATA_DIR: dir }
  if (base) {
    database = `bench_receipts_${randomBytes(4).toString('hex')}`
    const admin = new pg.Client({ connectionString: base })
    await admin.connect()
    await admin.query(`CREATE DATABASE ${database}`)
    await admin.end()
    const u = new URL(base)
    u.pathname = `/${database}`
    env = { DATABASE_URL: u.toString() }
  }
  const store = base ? 'postgres' : 'pglite'
  const receiver = await startService({}, 'bench/receipt-receiver.ts')
  const service = await startService({ ...env, WEBHOOK_DEV_ALLOW_LOOPBACK: '1' }, 'bench/receipts-service.ts')
  try {
    const url = service.url
    const admin = (method: string, path: string, body?: unknown) => call(url, method, path, ADMIN_TOKEN, body)
    await admin('PUT', '/admin/v1/clients/rcpt', { name: 'rcpt', collectionEnabled: true })
    await admin('PUT', '/admin/v1/integrations/int-rcpt', { name: 'rcpt' })
    await admin('PUT', '/admin/v1/integrations/int-rcpt/grants/rcpt', { scopes: SCOPES, receiptDeliveryOwner: 'service' })
    const key = (await admin('POST', '/admin/v1/integrations/int-rcpt/api-keys', {})).apiKey as string
    const api = (method: string, path: string, body?: unknown) => call(url, method, `/v1/clients/rcpt${path}`, key, body)

    // The route, verified the way a Source does it: the test receipt's code sent back.
    const route = await api('PUT', '/receipt-route', { url: `${receiver.url}/receipts` })
    await fetch(`${receiver.url}/control/secret`, { method: 'POST', body: route.signingSecret })
    const code = await until('the test receipt', 60_000, async () => (await stats(receiver.url)).confirmationCode ?? undefined)
    await api('POST', '/receipt-route/confirm', { confirmationCode: code })

    // The backlog: the dispatcher held, then PAYMENTS Payments confirmed.
    service.signal('SIGHUP')
    await sleep(2000)
    await api('PUT', '/customers/c-1', { type: 'person', name: { firstName: 'Ada', lastName: 'Payer' }, sourceReference: 'c/1' })
    const buildStart = Date.now()
    let next = 0
    const lane = async () => {
      for (let r = next++; r < RECEIVABLES; r = next++) {
        await api('PUT', `/receivables/r-${r}`, {
          financialType: 'loan_balance',
          sourceRevision: 1,
          recoverableAmount: { amount: `${perReceivable * 10}.00`, currency: 'USD' },
          creditUnion: { loanAccountReference: `loan/${r}`, loanType: 'auto' },
          dueDate: '2026-01-01',
          responsibleCustomers: [{ externalCustomerId: 'c-1', role: 'primary' }],
          sourceReference: `r/${r}`,
        })
        await api('PUT', `/recovery-instructions/ins-${r}`, {
          scope: { type: 'receivable', externalReceivableId: `r-${r}` },
          state: 'authorized',
          revision: 1,
          effectiveAt: '2026-01-01T00:00:00Z',
        })
        for (let i = 0; i < perReceivable; i++) {
          await api('PUT', `/payment-requests/pr-${r}-${i}`, {
            externalReceivableId: `r-${r}`,
            amount: { amount: '10.00', currency: 'USD' },
            description: 'Instalment',
          })
          await admin('POST', `/admin/v1/clients/rcpt/payment-requests/pr-${r}-${i}/simulate`, { outcome: 'confirmed' })
        }
      }
    }
    await Promise.all(Array.from({ length: LANES }, lane))
    const buildSeconds = (Date.now() - buildStart) / 1000
    const held = await stats(receiver.url)
    if (held.unique !== 0) throw new Error(`${held.unique} receipts went out while the dispatcher was held`)

    // Released: every receipt, each once.
    const released = Date.now()
    service.signal('SIGUSR2')
    const done = await until('every receipt', 60 * 60_000, async () => {
      const s = await stats(receiver.url)
      return s.unique >= PAYMENTS ? s : undefined
    })
    const seconds = ((done.lastAtMs as number) - released) / 1000
    const row = {
      store,
      payments: PAYMENTS,
      buildSeconds: Math.round(buildSeconds * 10) / 10,
      drainSeconds: Math.round(seconds * 100) / 100,
      receiptsPerSecond: Math.round((PAYMENTS / seconds) * 10) / 10,
      firstReceiptAfterMs: (done.firstAtMs as number) - released,
      posts: done.posts - 1,
      badSignatures: done.badSignatures,
      maxInFlight: done.maxInFlight,
    }
    if (row.posts !== PAYMENTS || row.badSignatures !== 0) throw new Error(`not every receipt once: ${JSON.stringify(row)}`)
    console.log(JSON.stringify(row))
  } finally {
    await service.stop()
    await receiver.stop()
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
