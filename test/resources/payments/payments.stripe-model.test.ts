import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import type Stripe from 'stripe'
import type { Tenant } from '../../helpers/app.ts'
import {
  applySourceStep,
  checkInvariants,
  held,
  isOpen,
  type Model,
  newSequence,
  type PaymentModel,
  type RequestModel,
  reinstate,
  remaining,
  type SourceAction,
  smaller,
  sourceActions,
  stepTools,
  sum,
  takeBack,
  usd,
  working,
} from '../../helpers/money-model.ts'
import { configureStripe, deliver, type StripeTest, startStripeTest } from '../../helpers/stripe.ts'

/**
 * The model-based property test of the money path (payments.model.test.ts) through the Stripe stand-in (issue 32
 * item 7): the Source's steps as there, the debtor paying on Stripe's Checkout, and the money Stripe moves by paths
 * the service did not start: refunds made in the Dashboard (origin provider), disputes whose funds are withdrawn and
 * then won (reinstated) or lost, sessions paid in another amount (returned in full, the request unchanged), and
 * events lost on the way, caught up by the sweep (`POST /admin/v1/clients/{c}/payment-provider/sync`). After every
 * step the same invariants, to the cent (test/helpers/money-model.ts checkInvariants): the financial position is
 * the model's, the service never over-collects, every confirmed cent is allocated or unapplied, refunds and
 * reversals never exceed what was paid. Each sequence ends with a sweep, after which nothing is left unrecorded.
 *
 * Stripe refunds the service asks for succeed at once (the stand-in's default); a refund that Stripe fails is the
 * Stripe refund tests' (stripe-refunds.test.ts). PROPERTY_RUNS sets the number of random sequences (default below).
 */
type Action =
  | SourceAction
  /** A new request paid at Stripe; its event delivered, or lost (the sweep brings it). */
  | { kind: 'pay'; cents: number; lost: boolean }
  /** Pay pressed on an open request (the pay-time check, holds), then paid at Stripe. */
  | { kind: 'payOpen'; pick: number; lost: boolean }
  | { kind: 'sweep' }
  /** A refund through the API, made at Stripe by the refund worker. */
  | { kind: 'refund'; pick: number; cents: number }
  /** A refund made in Stripe's Dashboard, its event delivered. */
  | { kind: 'dashboard'; pick: number; cents: number }
  /** A dispute opened and its funds withdrawn, the withdrawal's event delivered. */
  | { kind: 'dispute'; pick: number; cents: number }
  /** An open dispute closed, won or lost; its news by its closed event, its funds_reinstated event, or the sweep. */
  | { kind: 'close'; pick: number; won: boolean; via: 'closed' | 'reinstated' | 'sweep' }
  /** A new request whose session is paid in another amount: returned in full, the request stays as it was. */
  | { kind: 'mismatch'; cents: number; lost: boolean }

const lost = fc.constantFrom(false, false, false, true)
const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 2, arbitrary: sourceActions.request },
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('pay' as const), cents: fc.integer({ min: 1, max: 6_000 }), lost }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('payOpen' as const), pick: fc.nat(), lost }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'sweep' as const }) },
  { weight: 1, arbitrary: sourceActions.cancel },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('refund' as const), pick: fc.nat(), cents: fc.integer({ min: 1, max: 6_000 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('dashboard' as const), pick: fc.nat(), cents: fc.integer({ min: 1, max: 6_000 }) }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ kind: fc.constant('dispute' as const), pick: fc.nat(), cents: fc.integer({ min: 1, max: 6_000 }) }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('close' as const),
      pick: fc.nat(),
      won: fc.constantFrom(true, true, false),
      via: fc.constantFrom<'closed' | 'reinstated' | 'sweep'>('closed', 'reinstated', 'sweep'),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('mismatch' as const), cents: fc.integer({ min: 1, max: 3_000 }), lost }) },
  { weight: 2, arbitrary: sourceActions.reconcile },
  { weight: 1, arbitrary: sourceActions.resolve },
  { weight: 1, arbitrary: sourceActions.credit },
  { weight: 1, arbitrary: sourceActions.redeclare },
  { weight: 1, arbitrary: sourceActions.reauthorize },
)

const numRuns = Number(process.env.PROPERTY_RUNS ?? 25)

/** Tried first: paid, disputed and won after the debtor paid again; a lost payment, a lost win, one sweep. */
const examples: [Action[]][] = [
  // CI 2026-11-29 (stop 42, Node 20 on PostgreSQL), seed 272685421.
  [
    [
      { kind: 'pay', cents: 102, lost: false },
      { kind: 'dispute', pick: 0, cents: 203 },
      { kind: 'redeclare', cents: 100, via: 'put' },
      { kind: 'dashboard', pick: 0, cents: 102 },
      { kind: 'close', pick: 0, won: true, via: 'closed' },
      { kind: 'dispute', pick: 0, cents: 1 },
    ],
  ],
  // CI 2026-11-28 (stop 39), seed 78020522.
  [
    [
      { kind: 'mismatch', cents: 1, lost: false },
      { kind: 'pay', cents: 1, lost: false },
      { kind: 'reconcile', pick: 575_099_997, lines: [{ other: false, cents: 2 }] },
      { kind: 'close', pick: 0, won: true, via: 'closed' },
      { kind: 'pay', cents: 1, lost: false },
      { kind: 'payOpen', pick: 0, lost: false },
      { kind: 'reconcile', pick: 0, lines: [{ other: false, cents: 1 }] },
    ],
  ],
  // A won dispute owes money again while a request made before it is open: that request may ask more than the working
  // amount until the pay-time check cancels it (found on the partitioned layout's run, 2026-11-28).
  [
    [
      { kind: 'pay', cents: 1_156, lost: false },
      { kind: 'pay', cents: 5_077, lost: false },
      { kind: 'dispute', pick: 0, cents: 1 },
      { kind: 'mismatch', cents: 1_282, lost: false },
      { kind: 'pay', cents: 2_486, lost: false },
      { kind: 'close', pick: 0, won: true, via: 'closed' },
      { kind: 'pay', cents: 1, lost: false },
      { kind: 'refund', pick: 0, cents: 1 },
    ],
  ],
  [
    [
      { kind: 'pay', cents: 4_000, lost: false },
      { kind: 'dispute', pick: 0, cents: 4_000 },
      { kind: 'pay', cents: 10_000, lost: false },
      { kind: 'close', pick: 0, won: true, via: 'closed' },
    ],
  ],
  [
    [
      { kind: 'pay', cents: 3_000, lost: false },
      { kind: 'reconcile', pick: 0, lines: [{ other: false, cents: 1_000 }] },
      { kind: 'dispute', pick: 0, cents: 3_000 },
      { kind: 'dashboard', pick: 0, cents: 500 },
      { kind: 'pay', cents: 2_000, lost: true },
      { kind: 'close', pick: 0, won: true, via: 'sweep' },
      { kind: 'mismatch', cents: 1_500, lost: false },
    ],
  ],
]

/** What the model keeps of Stripe's side: per request its page, its paid-but-unrecorded session, its PaymentIntent. */
interface AtStripe {
  path: string
  /** Paid at Stripe, its event not (yet) handled: the sweep brings it. `returned`: another amount, given back. */
  unrecorded?: { sessionId: string; returned: boolean }
  intent?: string
  /** Money refunded at Stripe so far (what Stripe still lets be refunded is the rest). */
  refundedAtStripe: bigint
  /**
   * Refunded in the Dashboard beyond what the Payment held (a dispute's withdrawal held the rest): recorded when a
   * won dispute gives money back.
   */
  withheld: bigint
}

interface DisputeModel {
  id: string
  request: RequestModel
  /** What its withdrawal took back from the Payment (the reversal). */
  reversed: bigint
  closed: boolean
}

interface Sequence {
  tenant: Tenant
  m: Model
  atStripe: Map<string, AtStripe>
  /** Requests paid at Stripe whose event is lost, in the order they were paid. */
  pending: RequestModel[]
  disputes: DisputeModel[]
}

let s: StripeTest
let run = 0
before(async () => {
  s = await startStripeTest()
})
after(() => s?.close())

test('random money sequences through Stripe, with refunds, disputes and sessions the service did not start and events lost', {
  timeout: 900_000,
}, async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(action, { minLength: 4, maxLength: 16 }), async (actions) => {
      await sequence(actions)
    }),
    { numRuns, examples },
  )
})

async function sequence(actions: Action[]): Promise<void> {
  run += 1
  const client = `sm${run}`
  // Two hours on: a first sweep reads Stripe's events from an hour before the configuration, so none of an earlier
  // sequence's (the stand-in is one account for every client).
  s.clock.advance(2 * 3_600_000)
  const { tenant, m } = await newSequence(s.t, client)
  await configureStripe(s, client)
  const q: Sequence = { tenant, m, atStripe: new Map(), pending: [], disputes: [] }
  let lineSeq = 0
  for (const [step, a] of actions.entries()) {
    const where = `step ${step} ${JSON.stringify(a)}`
    await apply(q, a, where, () => `line-${++lineSeq}`)
    await checkInvariants(s.t, tenant, m, where)
  }
  // The last sweep: whatever was lost is recorded now, and nothing is left.
  await apply(q, { kind: 'sweep' }, 'final sweep', () => 'unused')
  await checkInvariants(s.t, tenant, m, 'final sweep')
  assert.deepEqual((await sweep(q.tenant.clientCode)).eventsApplied, 0, 'a second sweep applies nothing')
}

async function sweep(client: string): Promise<{ eventsRead: number; eventsApplied: number }> {
  const res = await s.t.admin('POST', `/admin/v1/clients/${client}/payment-provider/sync`)
  assert.equal(res.status, 200, res.body)
  return res.json
}

/** Every refund the service queued, made at Stripe (which succeeds at once) and recorded. */
async function drainRefunds(where: string): Promise<void> {
  for (let i = 0; i < 10; i++) if (!(await s.t.app.refundWorker.runOnce())) return
  assert.fail(`${where}: the refund worker did not finish`)
}

const latest = (type: string, objectId: string): Stripe.Event => {
  const e = s.stripe
    .events()
    .reverse()
    .find((x) => x.type === type && (x.data.object as { id: string }).id === objectId)
  assert.ok(e, `no ${type} of ${objectId}`)
  return e
}

/** The model of a confirmation of `r` (its event handled): allocated what the working amount has room for, the rest refunded. */
function confirm(q: Sequence, r: RequestModel): bigint {
  const allocated = smaller(r.cents, working(q.m))
  r.status = 'confirmed'
  r.payment = {
    amount: r.cents,
    allocated,
    unapplied: r.cents - allocated,
    matched: 0n,
    takenBackUnapplied: 0n,
    takenBackAllocated: 0n,
    refunded: 0n,
    reversed: 0n,
    declared: 0n,
    undeclared: 0n,
  }
  q.m.cu += allocated
  return r.cents - allocated
}

/** Unapplied money the service refunds at once: made at Stripe and taken back from the Payment. */
function refundedUnapplied(q: Sequence, r: RequestModel, p: PaymentModel, amount: bigint) {
  if (amount <= 0n) return
  p.refunded += amount
  takeBack(q.m, p, amount)
  const at = q.atStripe.get(r.id) as AtStripe
  at.refundedAtStripe += amount
}

/**
 * The model of a won dispute `d`: its reversal undone (reinstate), then the Dashboard refunds that were waiting for the
 * money paid from it (recorded as refunds, taking the unapplied money given back first). Returns the unapplied money
 * left, which the service refunds at once.
 */
function won(q: Sequence, d: DisputeModel): bigint {
  const p = d.request.payment as PaymentModel
  const at = q.atStripe.get(d.request.id) as AtStripe
  const given = reinstate(q.m, p, d.reversed)
  const paid = smaller(at.withheld, smaller(d.reversed, remaining(p)))
  if (paid <= 0n) return given
  at.withheld -= paid
  p.refunded += paid
  takeBack(q.m, p, paid)
  return given - smaller(paid, given)
}

/**
 * Pay pressed on `r`: at Stripe when the pay-time check lets it (no hold, the amount still fits), then paid there
 * (in `amountTotal` when given: another amount). Returns the session, or null when the service did not send the
 * debtor to Stripe.
 */
async function press(q: Sequence, r: RequestModel, where: string, amountTotal?: number): Promise<string | null> {
  const at = q.atStripe.get(r.id) as AtStripe
  const res = await s.t.call('POST', at.path, { rawBody: 'action=pay', contentType: 'application/x-www-form-urlencoded' })
  // A hold refuses: the page as it stands (on hold), under the refusal, and nothing started at Stripe.
  if (held(q.m)) {
    assert.equal(res.status, 409, `${where}: ${res.body}`)
    assert.ok(res.body.includes('Your payment was not made: this payment request is on hold.'), `${where}: ${res.body}`)
    assert.ok(res.body.includes('<h1>This payment request is on hold</h1>'), `${where}: ${res.body}`)
    return null
  }
  assert.equal(res.status, 303, `${where}: ${res.body}`)
  const location = String(res.headers.location)
  const before = q.m.requests.slice(0, q.m.requests.indexOf(r)).filter(isOpen)
  if (r.cents > working(q.m) - sum(before.map((o) => o.cents))) {
    assert.equal(location, at.path, where)
    r.status = 'canceled'
    r.cancelReason = 'balance_changed'
    return null
  }
  assert.ok(location.startsWith(`${s.stripe.url}/checkout/`), `${where}: ${location}`)
  const sessionId = location.slice(`${s.stripe.url}/checkout/`.length)
  if (amountTotal !== undefined) s.stripe.editSession(sessionId, { amountTotal })
  s.stripe.completeSession(sessionId, { outcome: 'paid' })
  return sessionId
}

/** Its checkout.session.completed delivered: recorded (confirmed, or returned when the request cannot take it). */
async function completed(q: Sequence, r: RequestModel, sessionId: string, where: string) {
  const at = q.atStripe.get(r.id) as AtStripe
  const res = await deliver(s, q.tenant.clientCode, latest('checkout.session.completed', sessionId))
  assert.equal(res.status, 200, `${where}: ${res.body}`)
  if (at.unrecorded?.returned || r.status !== 'open') {
    assert.equal(res.json.effect, 'returned', where)
    at.unrecorded = undefined
    return
  }
  assert.equal(res.json.effect, 'confirmed', where)
  at.unrecorded = undefined
  at.intent = s.stripe.session(sessionId)?.payment_intent as string
  const unapplied = confirm(q, r)
  await drainRefunds(where)
  refundedUnapplied(q, r, r.payment as PaymentModel, unapplied)
}

/** A request of `cents` on R (the Source's step), with its page. */
async function request(q: Sequence, cents: number, where: string, nextLine: () => string): Promise<RequestModel | undefined> {
  const count = q.m.requests.length
  await applySourceStep(s.t, q.tenant, q.m, { kind: 'request', cents }, where, nextLine)
  const r = q.m.requests[count]
  if (!r) return undefined
  const read = await s.t.call('GET', `/v1/clients/${q.tenant.clientCode}/payment-requests/${r.id}`, { key: q.tenant.apiKey })
  q.atStripe.set(r.id, { path: new URL(read.json.hostedUrl).pathname, refundedAtStripe: 0n, withheld: 0n })
  return r
}

/** The model of what the sweep applies: the lost payments in the order they were paid, then a dispute's close. */
function sweptPayments(q: Sequence): { unapplied: [RequestModel, bigint][] } {
  const unapplied: [RequestModel, bigint][] = []
  for (const r of q.pending) {
    const at = q.atStripe.get(r.id) as AtStripe
    const sessionId = at.unrecorded?.sessionId as string
    if (!at.unrecorded?.returned && r.status === 'open') {
      at.intent = s.stripe.session(sessionId)?.payment_intent as string
      unapplied.push([r, confirm(q, r)])
    }
    at.unrecorded = undefined
  }
  q.pending = []
  return { unapplied }
}

async function apply(q: Sequence, a: Action, where: string, nextLine: () => string) {
  const { m } = q
  const { call, expect, pick } = stepTools(s.t, q.tenant, m, where)
  const paidPick = (n: number) => {
    const paid = m.requests.filter((r) => r.payment && q.atStripe.get(r.id)?.intent)
    return paid.length ? paid[n % paid.length] : undefined
  }

  switch (a.kind) {
    case 'pay':
    case 'mismatch': {
      const r = await request(q, a.cents, `${where} (request)`, nextLine)
      if (!r) return
      await checkInvariants(s.t, q.tenant, m, `${where} (requested)`)
      const sessionId = await press(q, r, where, a.kind === 'mismatch' ? a.cents + 100 : undefined)
      if (!sessionId) return
      ;(q.atStripe.get(r.id) as AtStripe).unrecorded = { sessionId, returned: a.kind === 'mismatch' }
      if (a.lost) {
        q.pending.push(r)
        return
      }
      return completed(q, r, sessionId, where)
    }
    case 'payOpen': {
      const r = pick(a.pick)
      const at = r && q.atStripe.get(r.id)
      // Only an open request with no payment at Stripe waiting for its event.
      if (!r || !at || r.status !== 'open' || at.unrecorded) return
      const sessionId = await press(q, r, where)
      if (!sessionId) return
      at.unrecorded = { sessionId, returned: false }
      if (a.lost) {
        q.pending.push(r)
        return
      }
      return completed(q, r, sessionId, where)
    }
    case 'sweep': {
      const { unapplied } = sweptPayments(q)
      await sweep(q.tenant.clientCode)
      await drainRefunds(where)
      for (const [r, amount] of unapplied) refundedUnapplied(q, r, r.payment as PaymentModel, amount)
      return
    }
    case 'refund': {
      const r = paidPick(a.pick)
      const p = r?.payment
      if (!r || !p) return
      const cents = BigInt(a.cents)
      m.refunds += 1
      const id = `rf-${m.refunds}`
      const res = await call('PUT', `/payment-requests/${r.id}/refunds/${id}`, { amount: usd(cents), reason: 'requested_by_customer' })
      if (cents > remaining(p)) return expect(res, 422, 'validation_error')
      expect(res, 201)
      await drainRefunds(where)
      const decided = await call('GET', `/payment-requests/${r.id}/refunds/${id}`)
      assert.equal(decided.json.status, 'succeeded', where)
      refundedUnapplied(q, r, p, cents)
      return
    }
    case 'dashboard': {
      const r = paidPick(a.pick)
      const p = r?.payment
      const at = r && q.atStripe.get(r.id)
      if (!r || !p || !at?.intent) return
      const atStripe = smaller(BigInt(a.cents), p.amount - at.refundedAtStripe)
      if (atStripe <= 0n) return
      const refund = s.stripe.dashboardRefund(at.intent, Number(atStripe))
      at.refundedAtStripe += atStripe
      const res = await deliver(s, q.tenant.clientCode, latest('refund.created', refund.id))
      assert.equal(res.status, 200, `${where}: ${res.body}`)
      // Never more than remains of the Payment after its refunds and reversals.
      const recorded = smaller(atStripe, remaining(p))
      at.withheld += atStripe - recorded
      if (recorded <= 0n) return assert.equal(res.json.effect, 'nothing_to_refund', where)
      assert.equal(res.json.effect, 'provider_refund_recorded', where)
      p.refunded += recorded
      takeBack(m, p, recorded)
      return
    }
    case 'dispute': {
      const r = paidPick(a.pick)
      const p = r?.payment
      const at = r && q.atStripe.get(r.id)
      // One dispute per Payment, as on a card charge.
      if (!r || !p || !at?.intent || q.disputes.some((d) => d.request === r)) return
      const cents = 1n + ((BigInt(a.cents) - 1n) % p.amount)
      const dispute = s.stripe.openDispute(at.intent, Number(cents))
      s.stripe.withdrawDisputeFunds(dispute.id)
      const res = await deliver(s, q.tenant.clientCode, latest('charge.dispute.funds_withdrawn', dispute.id))
      assert.equal(res.status, 200, `${where}: ${res.body}`)
      const reversed = smaller(cents, remaining(p))
      q.disputes.push({ id: dispute.id, request: r, reversed, closed: false })
      if (reversed <= 0n) return assert.equal(res.json.effect, 'nothing_to_reverse', where)
      assert.equal(res.json.effect, 'reversed', where)
      p.reversed += reversed
      takeBack(m, p, reversed)
      return
    }
    case 'close': {
      const open = q.disputes.filter((d) => !d.closed)
      const d = open.length ? open[a.pick % open.length] : undefined
      if (!d) return
      d.closed = true
      s.stripe.closeDispute(d.id, a.won ? 'won' : 'lost')
      const p = d.request.payment as PaymentModel
      if (a.via === 'sweep') {
        // The sweep applies what was lost before it first, in Stripe's order, then the close.
        const { unapplied } = sweptPayments(q)
        const given = a.won ? won(q, d) : 0n
        await sweep(q.tenant.clientCode)
        await drainRefunds(where)
        for (const [r, amount] of unapplied) refundedUnapplied(q, r, r.payment as PaymentModel, amount)
        refundedUnapplied(q, d.request, p, given)
        return
      }
      const type = a.won && a.via === 'reinstated' ? 'charge.dispute.funds_reinstated' : 'charge.dispute.closed'
      const res = await deliver(s, q.tenant.clientCode, latest(type, d.id))
      assert.equal(res.status, 200, `${where}: ${res.body}`)
      if (!a.won) return assert.equal(res.json.effect, 'reversal_already_recorded', where)
      if (d.reversed === 0n) return assert.equal(res.json.effect, 'nothing_to_reinstate', where)
      assert.equal(res.json.effect, 'reinstated', where)
      const given = won(q, d)
      await drainRefunds(where)
      refundedUnapplied(q, d.request, p, given)
      return
    }
    default:
      return applySourceStep(s.t, q.tenant, m, a, where, nextLine)
  }
}
