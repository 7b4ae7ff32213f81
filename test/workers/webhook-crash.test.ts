import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { http, type ServiceProcess, seedTenant, startService } from '../helpers/service-process.ts'
import { createTestDatabase, engineName, onPostgres, type TestDatabase } from '../helpers/store.ts'
import { startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * A service process SIGKILLed while a notification is in flight neither loses it nor sends anything twice
 * beyond at least once: the real service (src/main.ts) runs as a child process on this file's store (a data
 * directory for PGlite, a database for PostgreSQL); the receiver holds one request open, the process is
 * killed, and a second process on the same store sends that notification again once the dead worker's lease
 * expires, while the notifications delivered before the kill are never sent again.
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

const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `K${n}` }, sourceReference: `crash/${n}` })

async function waitFor(what: string, probe: () => Promise<boolean>, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

test(`SIGKILL mid-delivery (${engineName}): the notification is sent again by the next process, nothing else twice`, async () => {
  if (onPostgres) db = await createTestDatabase()
  else dataDir = mkdtempSync(join(os.tmpdir(), 'irs-webhook-crash-'))
  const one = await service()
  const key = await seedTenant(one.url, 'crash', ['customers:write', 'customers:read', 'webhooks:manage'])
  const put = await http(one.url, 'PUT', '/v1/clients/crash/webhook-endpoint', { token: key, body: { url: rx.url } })
  assert.equal(put.status, 201)
  const log = async (url: string) => {
    const res = await http(url, 'GET', '/v1/clients/crash/webhook-endpoint/deliveries?limit=200', { token: key })
    assert.equal(res.status, 200)
    return res.json.data as { resource: { id: string }; status: string; attemptCount: number; eventId: string }[]
  }
  // Three notifications delivered and recorded before the kill.
  for (let i = 1; i <= 3; i++) {
    assert.equal((await http(one.url, 'PUT', `/v1/clients/crash/customers/before-${i}`, { token: key, body: customer(i) })).status, 201)
  }
  await waitFor('the first three delivered', async () => (await log(one.url)).filter((d) => d.status === 'delivered').length === 3)
  // The fourth is held open by the receiver, and the process is killed while it waits for the answer.
  rx.behave((r) =>
    r.json?.resource?.id === 'in-flight' && rx.received.filter((x) => x.json?.resource?.id === 'in-flight').length === 1
      ? { hang: true }
      : { status: 204 },
  )
  assert.equal((await http(one.url, 'PUT', '/v1/clients/crash/customers/in-flight', { token: key, body: customer(4) })).status, 201)
  await rx.until(() => rx.received.some((r) => r.json?.resource?.id === 'in-flight'))
  await one.kill('SIGKILL')

  const two = await service()
  await waitFor('the in-flight notification delivered by the second process', async () =>
    (await log(two.url)).some((d) => d.resource.id === 'in-flight' && d.status === 'delivered'),
  )
  const byId = (id: string) => rx.received.filter((r) => r.json?.resource?.id === id)
  assert.equal(byId('in-flight').length, 2, 'sent again once (at least once), never lost')
  assert.equal(byId('in-flight')[0]?.json.eventId, byId('in-flight')[1]?.json.eventId)
  for (let i = 1; i <= 3; i++) assert.equal(byId(`before-${i}`).length, 1, `before-${i} sent once`)
  const final = await log(two.url)
  assert.deepEqual(
    final.map((d) => [d.resource.id, d.status, d.attemptCount]),
    [
      ['in-flight', 'delivered', 1],
      ['before-3', 'delivered', 1],
      ['before-2', 'delivered', 1],
      ['before-1', 'delivered', 1],
    ],
  )
  await two.kill('SIGTERM')
  // Neither process wrote a signing secret, a signature or the destination URL to its log.
  for (const out of [one.output(), two.output()]) {
    assert.ok(!out.includes('whsec_') && !out.includes('v1=') && !out.includes(rx.url), out)
  }
})
