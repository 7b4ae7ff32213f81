import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../../helpers/app.ts'
import { http, type ServiceProcess, startService } from '../../helpers/service-process.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../../helpers/store.ts'
import { countRows, readRequest, type StripeTest, startCheckout, stripePayable } from '../../helpers/stripe.ts'
import { type StripeStandIn, startStripeStandIn } from '../../helpers/stripe-stand-in.ts'

/**
 * The catch-up sweep across kill -9 (issue 32 item 3), with real service processes on one PostgreSQL database: a
 * process killed while its sweep holds the client's lease and waits on Stripe's event list; a second process sweeps
 * the client at once (the dead holder's lock is gone) and applies the lost event once; a third sweep finds nothing.
 * Two processes sweeping at once apply each event once. PostgreSQL only: the embedded store is one process's.
 */
const children: ServiceProcess[] = []
let db: TestDatabase | undefined
let stripe: StripeStandIn | undefined
let t: TestApp | undefined
after(async () => {
  for (const c of children) await c.kill()
  await t?.close()
  await stripe?.close()
  await db?.drop()
})

async function service(): Promise<ServiceProcess> {
  const s = await startService({
    DATABASE_URL: (db as TestDatabase).url as string,
    STRIPE_API_BASE: (stripe as StripeStandIn).url,
    PROVIDER_SYNC_INTERVAL_SECONDS: '0',
    WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
  })
  children.push(s)
  return s
}

const sync = (s: ServiceProcess, client: string) =>
  http(s.url, 'POST', `/admin/v1/clients/${client}/payment-provider/sync`, { token: ADMIN_TOKEN })

test('kill -9 mid-sweep: the next process sweeps at once and applies the lost event once; two at once apply it once', {
  skip: !onPostgres && 'real processes share one PostgreSQL database',
  timeout: 300_000,
}, async () => {
  db = await createTestDatabase()
  stripe = await startStripeStandIn()
  // The setup through an app in this process on the same database (the processes read what it wrote).
  t = await startTestApp({ STRIPE_API_BASE: stripe.url, WEBHOOK_SECRET_KEY: 'ab'.repeat(32) }, { db })
  const s: StripeTest = { t, stripe, clock: { now: () => new Date(), set() {}, advance() {} }, close: async () => {} }
  const expiresAt = new Date(Date.now() + 2 * 86_400_000).toISOString()
  const p = await stripePayable(s, 'cu-crash', { expiresAt })
  stripe.completeSession(await startCheckout(s, p), { outcome: 'paid' })

  const one = await service()
  const held = stripe.holdNext('GET', '/v1/events')
  // Never answered: the process is killed while it holds the lease.
  sync(one, p.client).catch(() => {})
  await held
  // Held by that process: its lease names its holder's lock, which dies with it.
  assert.equal(
    await countRows(s, 'SELECT count(*) AS n FROM provider_sync_cursors WHERE client_code = $1 AND lease_holder IS NOT NULL', [p.client]),
    1,
  )
  await one.kill('SIGKILL')

  const two = await service()
  const swept = await sync(two, p.client)
  assert.equal(swept.status, 200, JSON.stringify(swept.json))
  assert.equal(swept.json.eventsApplied, 1, JSON.stringify(swept.json))
  assert.equal((await readRequest(s, p)).status, 'confirmed')
  assert.deepEqual((await sync(two, p.client)).json, { eventsRead: 0, eventsApplied: 0 })

  // Two processes at once, sixteen sweeps of a client with a new lost event: applied once.
  const q = await stripePayable(s, 'cu-crash-two', { expiresAt })
  stripe.completeSession(await startCheckout(s, q), { outcome: 'paid' })
  const three = await service()
  const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => sync(i % 2 === 0 ? two : three, q.client)))
  assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([200]))
  assert.equal(
    answers.reduce((n, a) => n + a.json.eventsApplied, 0),
    1,
  )
  assert.equal(await countRows(s, 'SELECT count(*) AS n FROM payments WHERE client_code = $1', [q.client]), 1)
  assert.equal(await countRows(s, 'SELECT count(*) AS n FROM payments WHERE client_code = $1', [p.client]), 1)
})
