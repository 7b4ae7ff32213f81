import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import { startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import {
  applySourceStep,
  checkInvariants,
  held,
  isOpen,
  type Model,
  newSequence,
  type Outcome,
  remaining,
  type SourceAction,
  smaller,
  sourceActions,
  stepTools,
  sum,
  takeBack,
  undeclaredShares,
  usd,
  working,
} from '../../helpers/money-model.ts'

/**
 * Model-based property test of the money path (issue 9 item 9, extended by issue 21 item 8): random sequences of
 * Payment requests, provider confirmations and failures, cancels, refunds (succeeding, and failing through the
 * sandbox's `.13` trigger), reversals, reconciliations and their resolutions, Source credit notes, Source
 * redeclarations (a Receivable PUT with a higher sourceRevision, an applied balance-snapshot entry) and
 * re-authorizations run against the service and against a small model of docs/decisions.md ("Payments",
 * "Working amount and open requests", "Refunds and reversals"). After every step, to the cent:
 *
 * - the Receivable's four financialPosition amounts equal the model's;
 * - `workingAmount` never exceeds what the debtor still owes by the Source's last declaration (`sourceAmount`)
 *   less the money the service holds that this declaration does not yet count (allocated, not taken back, and
 *   not acknowledged before the Source last declared): the service never over-collects. This is docs/design/money.md's
 *   strict bound: declared money taken back stays out of the working amount until the Source declares again,
 *   so the debtor is not asked for it even though it is owed again;
 * - the Receivable's acknowledged-undeclared money (internal, read from the store) equals the model's and is the
 *   sum of its Payments' undeclared shares (migration 0023), each equal to the model's;
 * - every Payment has confirmed = allocated + unapplied, and refunded + reversed never exceed what was confirmed;
 * - the open requests together never ask for more than the working amount (those made since the Source last lowered
 *   the balance: older ones may ask more until the pay-time check cancels each that no longer fits, as `settle`
 *   checks).
 *
 * The refund worker is drained after every refund, so a refund is decided before the next step. PROPERTY_RUNS
 * sets the number of random sequences (default below).
 */
type Action =
  | SourceAction
  /** A request, then its confirmation: sequences reach several Payments, each with its own receipts, more often. */
  | { kind: 'pay'; cents: number }
  | { kind: 'settle'; pick: number; outcome: Outcome }
  | { kind: 'refund'; pick: number; cents: number; fail: boolean }
  | { kind: 'reverse'; pick: number; cents: number | null }

const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 5, arbitrary: sourceActions.request },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('pay' as const), cents: fc.integer({ min: 1, max: 6_000 }) }) },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('settle' as const),
      pick: fc.nat(),
      outcome: fc.constantFrom<Outcome>('confirmed', 'confirmed', 'confirmed', 'failed'),
    }),
  },
  { weight: 1, arbitrary: sourceActions.cancel },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('refund' as const),
      pick: fc.nat(),
      cents: fc.integer({ min: 1, max: 6_000 }),
      fail: fc.constantFrom(false, false, true),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('reverse' as const),
      pick: fc.nat(),
      cents: fc.option(fc.integer({ min: 1, max: 6_000 }), { freq: 3 }),
    }),
  },
  { weight: 3, arbitrary: sourceActions.reconcile },
  { weight: 2, arbitrary: sourceActions.resolve },
  { weight: 1, arbitrary: sourceActions.credit },
  { weight: 2, arbitrary: sourceActions.redeclare },
  { weight: 1, arbitrary: sourceActions.reauthorize },
)

const numRuns = Number(process.env.PROPERTY_RUNS ?? 40)

/**
 * Shrunk by fast-check from random sequences on the rule before migration 0023, when take-back knew only the
 * Receivable's acknowledged-undeclared total: pay 50.00, acknowledge 0.01, the Source declares 50.00, pay 0.01,
 * acknowledge 0.01, refund the first 50.00. The second Payment's newer 0.01 stood in for the first one's declared
 * money: workingAmount 50.00, above 50.00 - 0.01 held undeclared.
 */
const declaredThenTakenBack: Action[] = [
  { kind: 'request', cents: 5_000 },
  { kind: 'settle', pick: 0, outcome: 'confirmed' },
  { kind: 'reconcile', pick: 0, lines: [{ other: false, cents: 1 }] },
  { kind: 'redeclare', cents: 5_000, via: 'put' },
  { kind: 'request', cents: 1 },
  { kind: 'settle', pick: 1, outcome: 'confirmed' },
  { kind: 'reconcile', pick: 1, lines: [{ other: false, cents: 1 }] },
  { kind: 'refund', pick: 0, cents: 5_000, fail: false },
]

/** Tried first: the overpayment, and the case above. */
const examples: [Action[]][] = [
  // Two requests for the whole 100.00 debt, both paid (the second must be refused or canceled, never charged).
  [
    [
      { kind: 'request', cents: 10_000 },
      { kind: 'request', cents: 10_000 },
      { kind: 'settle', pick: 0, outcome: 'confirmed' },
      { kind: 'settle', pick: 1, outcome: 'confirmed' },
    ],
  ],
  [declaredThenTakenBack],
]

let t: TestApp
let run = 0
before(async () => {
  t = await startTestApp()
})
after(() => t.close())

test('random money sequences keep the financial position exact, never over-collect and conserve every cent', {
  timeout: 900_000,
}, async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 16 }), async (actions) => {
      await sequence(actions)
    }),
    { numRuns, examples },
  )
})

/** One sequence against a new client: the Receivable R of 100.00 (and O of 50.00 for lines naming another). */
async function sequence(actions: Action[]): Promise<{ tenant: Tenant; m: Model }> {
  run += 1
  const client = `pm${run}`
  const { tenant, m } = await newSequence(t, client)
  let lineSeq = 0
  for (const [step, a] of actions.entries()) {
    const where = `step ${step} ${JSON.stringify(a)}`
    await apply(t, tenant, m, a, where, () => `line-${++lineSeq}`)
    await checkInvariants(t, tenant, m, where)
  }
  return { tenant, m }
}

/**
 * What docs/design/money.md promises beyond never over-collecting: money the Source acknowledged and has since
 * declared, taken back, "stays out of workingAmount until the Source posts the reversal and declares again". The
 * shrunk case above, step by step: each Payment's acknowledged money is its own (payments/take-back.ts), so the first
 * one's declared 50.00 leaves nothing of the second one's undeclared 0.01.
 */
test('money declared by the Source and taken back stays out of the working amount until the Source declares again', async () => {
  const { tenant, m } = await sequence(declaredThenTakenBack)
  const r = await t.call('GET', `/v1/clients/${tenant.clientCode}/receivables/R`, { key: tenant.apiKey })
  assert.deepEqual(r.json.financialPosition, {
    sourceAmount: usd(5_000n),
    // 50.00 declared, less the second Payment's 0.01 acknowledged since (its share, still undeclared).
    workingAmount: usd(4_999n),
    confirmedUnreconciledAmount: usd(0n),
    receiptAcknowledgedAmount: usd(2n),
  })
  assert.deepEqual(await undeclaredShares(t.store, tenant.clientCode), { receivable: 1n, shares: { 'pr-002': 1n } })
  // The Source posts the refund and declares again: the working amount is what it declares, less nothing held.
  await apply(t, tenant, m, { kind: 'redeclare', cents: 10_000, via: 'snapshot' }, 'redeclare', () => 'unused')
  await checkInvariants(t, tenant, m, 'redeclare')
  const again = await t.call('GET', `/v1/clients/${tenant.clientCode}/receivables/R`, { key: tenant.apiKey })
  assert.deepEqual(again.json.financialPosition.workingAmount, usd(10_000n))
  assert.deepEqual(await undeclaredShares(t.store, tenant.clientCode), { receivable: 0n, shares: {} })
})

async function apply(t: TestApp, tenant: Tenant, m: Model, a: Action, where: string, nextLine: () => string) {
  const { call, expect, pick } = stepTools(t, tenant, m, where)
  const simulate = (id: string, body: unknown) =>
    t.admin('POST', `/admin/v1/clients/${tenant.clientCode}/payment-requests/${id}/simulate`, body)

  switch (a.kind) {
    case 'pay': {
      const count = m.requests.length
      await apply(t, tenant, m, { kind: 'request', cents: a.cents }, `${where} (request)`, nextLine)
      if (m.requests.length === count) return
      await checkInvariants(t, tenant, m, `${where} (requested)`)
      return apply(t, tenant, m, { kind: 'settle', pick: count, outcome: 'confirmed' }, `${where} (settle)`, nextLine)
    }
    case 'settle': {
      const r = pick(a.pick)
      if (!r) return
      const res = await simulate(r.id, { outcome: a.outcome })
      if (r.status === 'open') {
        if (held(m)) return expect(res, 409, 'recovery_held')
        // The pay-time check: the amount must still fit the working amount less what earlier open requests reserve.
        const before = m.requests.slice(0, m.requests.indexOf(r)).filter(isOpen)
        if (r.cents > working(m) - sum(before.map((o) => o.cents))) {
          expect(res, 409, 'payment_request_state_conflict')
          assert.equal(res.json.cancelReason, 'balance_changed', where)
          r.status = 'canceled'
          r.cancelReason = 'balance_changed'
          return
        }
        expect(res, 201)
        r.status = a.outcome
        if (a.outcome === 'confirmed') {
          const allocated = smaller(r.cents, working(m))
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
          m.cu += allocated
          // Unapplied money is refunded at once (refund `unapplied-funds`), by the worker.
          if (r.payment.unapplied > 0n) {
            assert.equal(await t.app.refundWorker.runOnce(), true, where)
            r.payment.refunded += r.payment.unapplied
            takeBack(m, r.payment, r.payment.unapplied)
          }
        }
        return
      }
      if (r.status === a.outcome) return expect(res, 200)
      return expect(res, 409, 'payment_request_state_conflict')
    }
    case 'refund': {
      const r = pick(a.pick)
      if (!r) return
      // The sandbox fails a refund whose amount ends in .13, and refunds any other at once.
      let cents = BigInt(a.cents)
      if (a.fail) cents = (cents / 100n) * 100n + 13n
      else if (cents % 100n === 13n) cents += 1n
      m.refunds += 1
      const id = `rf-${m.refunds}`
      const res = await call('PUT', `/payment-requests/${r.id}/refunds/${id}`, { amount: usd(cents), reason: 'requested_by_customer' })
      const p = r.payment
      if (r.status !== 'confirmed' || !p) return expect(res, 409, 'payment_not_confirmed')
      if (cents > remaining(p)) return expect(res, 422, 'validation_error')
      expect(res, 201)
      assert.equal(res.json.status, 'pending', where)
      // Pending moves nothing: drain the worker, then the refund is decided.
      await checkInvariants(t, tenant, m, `${where} (pending)`)
      assert.equal(await t.app.refundWorker.runOnce(), true, where)
      assert.equal(await t.app.refundWorker.runOnce(), false, where)
      const decided = await call('GET', `/payment-requests/${r.id}/refunds/${id}`)
      expect(decided, 200)
      assert.equal(decided.json.status, a.fail ? 'failed' : 'succeeded', where)
      if (a.fail) return
      p.refunded += cents
      takeBack(m, p, cents)
      return
    }
    case 'reverse': {
      const r = pick(a.pick)
      if (!r) return
      const res = await simulate(r.id, { outcome: 'reversed', ...(a.cents === null ? {} : { amount: usd(BigInt(a.cents)) }) })
      const p = r.payment
      if (r.status !== 'confirmed' || !p) return expect(res, 409, 'payment_not_confirmed')
      const cents = a.cents === null ? remaining(p) : BigInt(a.cents)
      if (a.cents === null && cents === 0n) return expect(res, 409, 'payment_request_state_conflict')
      if (cents > remaining(p)) return expect(res, 422, 'validation_error')
      expect(res, 200)
      p.reversed += cents
      takeBack(m, p, cents)
      assert.deepEqual(res.json.payment.reversedAmount, usd(p.reversed), where)
      return
    }
    default:
      return applySourceStep(t, tenant, m, a, where, nextLine)
  }
}
