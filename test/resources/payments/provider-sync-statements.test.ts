import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { startTestApp } from '../../helpers/app.ts'
import { type CountingStore, countingStore } from '../../helpers/counting-store.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../../helpers/store.ts'
import { readRequest, type StripeTest, startCheckout, stripePayable } from '../../helpers/stripe.ts'
import { startStripeStandIn } from '../../helpers/stripe-stand-in.ts'

/**
 * Statements of the catch-up sweep (issue 32 item 8; docs/performance.md): a sweep with nothing new, and one that
 * applies one lost event. A change in these numbers is a change of their path.
 */
let s: StripeTest
let counting: CountingStore
let db: TestDatabase
const now = new Date('2026-11-23T12:00:00.000Z')
const clock = { now: () => now, set() {}, advance() {} }

before(async () => {
  db = await createTestDatabase()
  counting = countingStore(db.store)
  const stripe = await startStripeStandIn({ now: () => now.getTime() })
  const t = await startTestApp({ STRIPE_API_BASE: stripe.url }, { clock, db: { ...db, store: counting } })
  s = { t, stripe, clock, close: async () => {} }
})
after(async () => {
  await s.t.close()
  await s.stripe.close()
  await db.drop()
})

// PGlite runs one transaction at a time, so identity locks (one statement each on PostgreSQL) are skipped.
const expect = (pg: number, pglite: number) => (onPostgres ? pg : pglite)

test('a sweep that applies one lost event, then a sweep with nothing new', async () => {
  const p = await stripePayable(s, 'sy-count')
  const sessionId = await startCheckout(s, p)
  s.stripe.completeSession(sessionId, { outcome: 'paid' })
  counting.reset()
  const first = await s.t.app.providerSync.sync(p.client)
  assert.deepEqual([first.eventsRead, first.eventsApplied], [1, 1])
  // The paid event's one transaction, as the route's (stripe-statements.test.ts): BEGIN, the event's row, the
  // request's lock, (identity lock,) the Receivable, its allocation, the Payment, the request's status, the attempt
  // locked and completed, the feed and its Receivable's catch-up, COMMIT.
  assert.equal(counting.inTransactions.length, expect(13, 12), counting.inTransactions.join('\n---\n'))
  // The client's configuration, the lease claimed, whether the event was handled, the sandbox clock, the cursor
  // stored, the attempts to look at, the lease released (the admin read and client check are the route's, not here).
  assert.equal(counting.outside.length, 7, counting.outside.join('\n---\n'))
  assert.equal((await readRequest(s, p)).status, 'confirmed')

  counting.reset()
  const second = await s.t.app.providerSync.sync(p.client)
  assert.deepEqual([second.eventsRead, second.eventsApplied], [0, 0])
  assert.equal(counting.inTransactions.length, 0, counting.inTransactions.join('\n---\n'))
  // The client's configuration, the lease claimed, the attempts to look at, the lease released.
  assert.equal(counting.outside.length, 4, counting.outside.join('\n---\n'))
})
