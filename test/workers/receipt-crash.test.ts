import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { SCOPES } from '../../src/domain/scopes.ts'
import { ADMIN_TOKEN } from '../helpers/app.ts'
import { http, type ServiceProcess, startService } from '../helpers/service-process.ts'
import { createTestDatabase, engineName, onPostgres, type TestDatabase } from '../helpers/store.ts'
import { startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * A service process SIGKILLed while a receipt is in flight loses nothing: the real service (src/main.ts) runs as a
 * child process on this file's store; the receiver holds one receipt's request open, the process is killed, and a
 * second process on the same store sends that receipt again (the same receiptId and bytes), while the receipts
 * delivered before the kill are never sent again.
 */
let db: TestDatabase | undefined
let dataDir: string | undefined
const children: ServiceProcess[] = []
const rx = await startReceiver()
after(async () => {
  for (const c of children) await c.kill()
  await rx.close()
  await db?.drop()
  if (dataDir) rmSync(dataDir, { recursive: true, force: true })
})

async function service(): Promise<ServiceProcess> {
  const env: Record<string, string> = {
    WEBHOOK_DEV_ALLOW_LOOPBACK: '1',
    WEBHOOK_INTERVAL_MS: '200',
    RATE_LIMIT_PER_MINUTE: '100000',
    CONCURRENCY_PER_KEY: '100',
    LOG_LEVEL: 'debug',
  }
  if (onPostgres) env.DATABASE_URL = (db as TestDatabase).url as string
  else env.DATA_DIR = dataDir as string
  const s = await startService(env)
  children.push(s)
  return s
}

async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

const C = 'rcrash'
const usd = (amount: string) => ({ amount, currency: 'USD' })

test(`SIGKILL mid-delivery (${engineName}): the receipt is sent again by the next process, nothing else twice`, async () => {
  if (onPostgres) db = await createTestDatabase()
  else dataDir = mkdtempSync(join(os.tmpdir(), 'irs-receipt-crash-'))
  const one = await service()
  const admin = async (method: string, path: string, body: unknown, status: number) => {
    const res = await http(one.url, method, path, { token: ADMIN_TOKEN, body })
    assert.equal(res.status, status, `${path}: ${JSON.stringify(res.json)}`)
    return res.json
  }
  await admin('PUT', `/admin/v1/clients/${C}`, { name: C, collectionEnabled: true }, 201)
  await admin('PUT', `/admin/v1/integrations/int-${C}`, { name: C }, 201)
  await admin('PUT', `/admin/v1/integrations/int-${C}/grants/${C}`, { scopes: SCOPES, receiptDeliveryOwner: 'service' }, 201)
  const key = (await admin('POST', `/admin/v1/integrations/int-${C}/api-keys`, {}, 201)).apiKey as string
  const call = async (url: string, method: string, path: string, body: unknown, status: number) => {
    const res = await http(url, method, `/v1/clients/${C}${path}`, { token: key, body })
    assert.equal(res.status, status, `${path}: ${JSON.stringify(res.json)}`)
    return res.json
  }

  // The route, verified with the code of its test receipt.
  const route = await call(one.url, 'PUT', '/receipt-route', { url: rx.url }, 201)
  await rx.until(() => rx.received.some((r) => r.json?.kind === 'test'))
  const code = rx.received.find((r) => r.json?.kind === 'test')?.json.confirmationCode
  assert.equal((await call(one.url, 'POST', '/receipt-route/confirm', { confirmationCode: code }, 200)).state, 'verified')

  // A payable Receivable, and confirmed Payments of 10.00 each.
  await call(one.url, 'PUT', '/customers/cust', { type: 'person', name: { firstName: 'Ada', lastName: 'K' }, sourceReference: 'rc/c' }, 201)
  await call(
    one.url,
    'PUT',
    '/receivables/rcv',
    {
      financialType: 'loan_balance',
      sourceRevision: 1,
      recoverableAmount: usd('100.00'),
      creditUnion: { loanAccountReference: 'loan/rc', loanType: 'auto' },
      dueDate: '2026-01-01',
      responsibleCustomers: [{ externalCustomerId: 'cust', role: 'primary' }],
      sourceReference: 'rc/r',
    },
    201,
  )
  await call(
    one.url,
    'PUT',
    '/recovery-instructions/ins',
    { scope: { type: 'receivable', externalReceivableId: 'rcv' }, state: 'authorized', revision: 1, effectiveAt: '2026-01-01T00:00:00Z' },
    201,
  )
  const pay = async (url: string, id: string) => {
    await call(url, 'PUT', `/payment-requests/${id}`, { externalReceivableId: 'rcv', amount: usd('10.00') }, 201)
    const res = await http(url, 'POST', `/admin/v1/clients/${C}/payment-requests/${id}/simulate`, {
      token: ADMIN_TOKEN,
      body: { outcome: 'confirmed' },
    })
    assert.equal(res.status, 201, JSON.stringify(res.json))
  }
  const attempts = async (url: string, id: string) =>
    (await call(url, 'GET', `/payment-requests/${id}/receipt-delivery`, undefined, 200)).deliveryAttempts as {
      attempt: number
      outcome: string
      receiptId: string
    }[]
  for (let i = 1; i <= 3; i++) await pay(one.url, `before-${i}`)
  await waitFor('the first three receipts delivered', async () => {
    for (let i = 1; i <= 3; i++) if (!(await attempts(one.url, `before-${i}`)).some((a) => a.outcome === 'delivered')) return false
    return true
  })

  // The fourth is held open by the receiver, and the process is killed while it waits for the answer.
  const byId = (id: string) => rx.received.filter((r) => r.json?.externalPaymentRequestId === id)
  rx.behave((r) => (r.json?.externalPaymentRequestId === 'in-flight' && byId('in-flight').length === 1 ? { hang: true } : { status: 204 }))
  await pay(one.url, 'in-flight')
  await rx.until(() => byId('in-flight').length === 1)
  await one.kill('SIGKILL')

  const two = await service()
  await waitFor('the in-flight receipt delivered by the second process', async () =>
    (await attempts(two.url, 'in-flight')).some((a) => a.outcome === 'delivered'),
  )
  assert.equal(byId('in-flight').length, 2, 'sent again once (at least once), never lost')
  assert.equal(byId('in-flight')[1]?.rawBody, byId('in-flight')[0]?.rawBody, 'the same receipt, byte for byte')
  for (let i = 1; i <= 3; i++) assert.equal(byId(`before-${i}`).length, 1, `before-${i} sent once`)
  const final = await attempts(two.url, 'in-flight')
  assert.deepEqual(
    final.map((a) => [a.attempt, a.outcome, a.receiptId]),
    [[1, 'delivered', byId('in-flight')[0]?.json.receiptId]],
  )
  await two.kill('SIGTERM')
  // Neither process wrote the signing secret, a signature or the destination URL to its log.
  for (const out of [one.output(), two.output()]) {
    assert.ok(!out.includes(route.signingSecret) && !out.includes('v1=') && !out.includes(rx.url), out)
  }
})
