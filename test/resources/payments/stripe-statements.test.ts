import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { startTestApp } from '../../helpers/app.ts'
import { type CountingStore, countingStore } from '../../helpers/counting-store.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../../helpers/store.ts'
import { deliver, eventOf, pressPay, type StripeTest, stripePayable } from '../../helpers/stripe.ts'
import { startStripeStandIn } from '../../helpers/stripe-stand-in.ts'

/**
 * Statements per Stripe payment (issue 22; docs/performance.md): the page's Pay that starts a Checkout Session and
 * Stripe's event that confirms the Payment. A change in these numbers is a change of their path.
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

test('Pay: one transaction (the request, its latest attempt, the pay-time check, the attempt), one update after Stripe', async () => {
  const p = await stripePayable(s, 'ss-pay')
  counting.reset()
  const res = await pressPay(s, p)
  assert.equal(res.status, 303)
  // BEGIN, the request's lock, its latest attempt, (the Receivable's identity lock,) its catch-up, the Receivable
  // row-locked with holds and amounts, the attempt inserted, COMMIT.
  assert.equal(counting.inTransactions.length, expect(8, 7), counting.inTransactions.join('\n---\n'))
  // The token's client (page_tokens), the page's read, the client's provider configuration, the sandbox clock, the
  // attempt opened.
  assert.equal(counting.outside.length, 5, counting.outside.join('\n---\n'))
})

test("Stripe's paid event: one transaction of the event's row and the one confirmation", async () => {
  const p = await stripePayable(s, 'ss-event')
  const res = await pressPay(s, p)
  const sessionId = String(res.headers.location).split('/').pop() as string
  const completed = eventOf(s.stripe.completeSession(sessionId, { outcome: 'paid' }), 'checkout.session.completed')
  counting.reset()
  assert.equal((await deliver(s, p.client, completed)).json.effect, 'confirmed')
  // BEGIN, the event's row, the request's lock, (identity lock,) the Receivable, its allocation, the Payment, the
  // request's status, the attempt locked and completed, the feed and its Receivable's catch-up, COMMIT.
  assert.equal(counting.inTransactions.length, expect(13, 12), counting.inTransactions.join('\n---\n'))
  // The client's provider configuration, whether the event was handled, the sandbox clock.
  assert.equal(counting.outside.length, 3, counting.outside.join('\n---\n'))
})
