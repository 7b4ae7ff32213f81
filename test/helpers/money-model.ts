import assert from 'node:assert/strict'
import fc from 'fast-check'
import { formatMinor } from '../../src/domain/money.ts'
import type { Queryable } from '../../src/store/store.ts'
import { problemCode, type Response, type Tenant, type TestApp } from './app.ts'
import { payableReceivable } from './payments.ts'

/**
 * The model of the money path shared by the model-based property tests (test/resources/payments/payments.model.test.ts
 * with the sandbox provider, payments.stripe-model.test.ts through the Stripe stand-in): the model's state, the
 * take-back and reinstatement rules, the Source's steps (requests, cancels, reconciliations and their resolutions,
 * credit notes, redeclarations, re-authorizations), and the invariants checked after every step, to the cent.
 */
export type Outcome = 'confirmed' | 'failed'
export type Basis = 'matching_evidence' | 'authorized_correction'

/** The steps that do not depend on the provider. */
export type SourceAction =
  | { kind: 'request'; cents: number }
  | { kind: 'cancel'; pick: number }
  | { kind: 'reconcile'; pick: number; lines: { other: boolean; cents: number }[] }
  | { kind: 'resolve'; pick: number; basis: Basis }
  | { kind: 'credit'; cents: number }
  | { kind: 'redeclare'; cents: number; via: 'put' | 'snapshot' }
  | { kind: 'reauthorize' }

export interface PaymentModel {
  amount: bigint
  allocated: bigint
  unapplied: bigint
  /** Matched receipt lines, cumulative. */
  matched: bigint
  takenBackUnapplied: bigint
  takenBackAllocated: bigint
  refunded: bigint
  reversed: bigint
  /** Acknowledged money of this Payment the Source's last declaration counts (and not taken back since). */
  declared: bigint
  /** Acknowledged money of this Payment the Source has not declared yet (and not taken back since): its share. */
  undeclared: bigint
}

export interface RequestModel {
  id: string
  cents: bigint
  status: 'open' | 'canceled' | Outcome
  cancelReason?: 'requested' | 'balance_changed'
  /** `Model.falls` when it was created. */
  epoch: number
  payment?: PaymentModel
}

export interface ReconciliationModel {
  id: string
  request: RequestModel
  status: 'matched' | 'held' | 'resolved'
  basis?: Basis
}

export interface Model {
  source: bigint
  /** confirmedUnreconciledAmount */
  cu: bigint
  /** acknowledgedUndeclared (internal to the service) */
  au: bigint
  /** receiptAcknowledgedAmount (cumulative) */
  ra: bigint
  sourceRevision: number
  snapshots: number
  refunds: number
  /** How many times the Source lowered the working amount (a credit note, a lower declaration). */
  falls: number
  authorized: boolean
  heldBy: Set<string>
  requests: RequestModel[]
  reconciliations: ReconciliationModel[]
}

/** The Source's steps, with their weights (each test adds its provider's). */
export const sourceActions = {
  request: fc.record({ kind: fc.constant('request' as const), cents: fc.integer({ min: 1, max: 12_000 }) }),
  cancel: fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }),
  reconcile: fc.record({
    kind: fc.constant('reconcile' as const),
    pick: fc.nat(),
    lines: fc.array(fc.record({ other: fc.constantFrom(false, false, false, true), cents: fc.integer({ min: 1, max: 6_000 }) }), {
      minLength: 1,
      maxLength: 3,
    }),
  }),
  resolve: fc.record({
    kind: fc.constant('resolve' as const),
    pick: fc.nat(),
    basis: fc.constantFrom<Basis>('matching_evidence', 'authorized_correction'),
  }),
  credit: fc.record({ kind: fc.constant('credit' as const), cents: fc.integer({ min: 1, max: 8_000 }) }),
  redeclare: fc.record({
    kind: fc.constant('redeclare' as const),
    cents: fc.integer({ min: 100, max: 15_000 }),
    via: fc.constantFrom<'put' | 'snapshot'>('put', 'snapshot'),
  }),
  reauthorize: fc.constant({ kind: 'reauthorize' as const }),
}

/** A new client's model: the Receivable R of 100.00 (and O of 50.00 for lines naming another), made payable. */
export async function newSequence(t: TestApp, client: string): Promise<{ tenant: Tenant; m: Model }> {
  const tenant = await t.tenant(client)
  await payableReceivable(t, tenant, 'R', { amount: '100.00' })
  await payableReceivable(t, tenant, 'O', { amount: '50.00' })
  const m: Model = {
    source: 10_000n,
    cu: 0n,
    au: 0n,
    ra: 0n,
    sourceRevision: 1,
    snapshots: 0,
    refunds: 0,
    falls: 0,
    authorized: true,
    heldBy: new Set(),
    requests: [],
    reconciliations: [],
  }
  return { tenant, m }
}

export const usd = (minor: bigint) => ({ amount: formatMinor(minor), currency: 'USD' })
export const minor = (x: { amount: string }) => BigInt(x.amount.replace('.', ''))
export const atLeastZero = (a: bigint) => (a > 0n ? a : 0n)
export const smaller = (a: bigint, b: bigint) => (a < b ? a : b)
export const working = (m: Model) => atLeastZero(m.source - m.cu - m.au)
export const held = (m: Model) => !m.authorized || m.heldBy.size > 0
export const isOpen = (r: RequestModel) => r.status === 'open'
export const sum = (xs: bigint[]) => xs.reduce((a, b) => a + b, 0n)
/** What the Payment may still give back: its amount less refunds (pending or succeeded) and reversals. */
export const remaining = (p: PaymentModel) => p.amount - p.refunded - p.reversed

/**
 * Money taken back from a Payment (a refund's success, a reversal): unapplied first, then allocated money no
 * receipt line acknowledged (it leaves confirmedUnreconciled), then acknowledged money this Payment holds
 * undeclared (it leaves acknowledgedUndeclared), then its declared money, which stays out of the working amount
 * (docs/decisions.md, "Refunds and reversals", "Money taken back per Payment").
 */
export function takeBack(m: Model, p: PaymentModel, amount: bigint) {
  const fromUnapplied = smaller(amount, atLeastZero(p.unapplied - p.takenBackUnapplied))
  const fromAllocated = amount - fromUnapplied
  const unacknowledged = smaller(fromAllocated, atLeastZero(p.allocated - p.matched - p.takenBackAllocated))
  const acknowledged = fromAllocated - unacknowledged
  // This Payment's own acknowledged money still held: its undeclared part goes first, then what the Source declared
  // (which stays out of the working amount).
  const undeclared = smaller(acknowledged, p.undeclared)
  p.undeclared -= undeclared
  p.declared -= acknowledged - undeclared
  assert.ok(p.declared >= 0n, 'the model takes back no more acknowledged money than the Payment holds')
  p.takenBackUnapplied += fromUnapplied
  p.takenBackAllocated += fromAllocated
  m.cu -= unacknowledged
  m.au -= undeclared
}

/** Allocated money of a Payment not taken back and not counted by the Source's last declaration. */
export function heldUndeclared(p: PaymentModel): bigint {
  return atLeastZero(p.allocated - p.takenBackAllocated - p.declared)
}

/**
 * Money a won dispute gives back to a Payment (payments/reinstatement.ts): to the allocation first (what was taken
 * back from it), then to unapplied money; of the allocation, unacknowledged money is owed again as far as the working
 * amount has room (the rest moves to unapplied money), acknowledged money goes back to the Payment's undeclared share.
 * Returns the unapplied money given back, which the service refunds at once.
 */
export function reinstate(m: Model, p: PaymentModel, amount: bigint): bigint {
  const allocated = smaller(amount, p.takenBackAllocated)
  const unapplied = smaller(amount - allocated, p.takenBackUnapplied)
  const unack = (takenBack: bigint) => atLeastZero(p.allocated - p.matched - takenBack)
  const unacknowledged = unack(p.takenBackAllocated - allocated) - unack(p.takenBackAllocated)
  const fits = smaller(unacknowledged, working(m))
  const overflow = unacknowledged - fits
  const acknowledged = allocated - unacknowledged
  p.takenBackAllocated -= allocated
  p.takenBackUnapplied -= unapplied
  p.allocated -= overflow
  p.unapplied += overflow
  p.reversed -= allocated + unapplied
  p.undeclared += acknowledged
  m.cu += fits
  m.au += acknowledged
  // Money owed again lowers the working amount: a fall, like the Source's. Requests made before it may ask more until
  // the pay-time check cancels each that no longer fits (checkInvariants).
  if (fits > 0n) m.falls += 1
  return unapplied + overflow
}

/** A Source step (one not depending on the provider) against the service and the model. */
/** What a step uses: the client's API, its operator, an expectation of the answer, a pick among the requests. */
export function stepTools(t: TestApp, tenant: Tenant, m: Model, where: string) {
  const base = `/v1/clients/${tenant.clientCode}`
  const call = (method: 'PUT' | 'GET' | 'POST', path: string, body?: unknown) =>
    t.call(method, `${base}${path}`, { key: tenant.apiKey, ...(body ? { body } : {}) })
  const expect = (res: Response, status: number, code?: string) => {
    assert.equal(res.status, status, `${where}: ${res.body}`)
    if (code) assert.equal(problemCode(res), code, `${where}: ${res.body}`)
  }
  const pick = (n: number) => (m.requests.length ? m.requests[n % m.requests.length] : undefined)
  return { call, expect, pick }
}

/** A Source step (one not depending on the provider) against the service and the model. */
export async function applySourceStep(t: TestApp, tenant: Tenant, m: Model, a: SourceAction, where: string, nextLine: () => string) {
  const { call, expect, pick } = stepTools(t, tenant, m, where)
  switch (a.kind) {
    case 'request': {
      // Zero-padded: the pay-time check orders open requests by (createdAt, id).
      const id = `pr-${String(m.requests.length + 1).padStart(3, '0')}`
      const cents = BigInt(a.cents)
      const res = await call('PUT', `/payment-requests/${id}`, { externalReceivableId: 'R', amount: usd(cents) })
      // A bad request is refused as such before the Receivable's holds are looked at (docs/decisions.md). Open
      // requests reserve what they ask: together never more than the working amount.
      const reserved = sum(m.requests.filter(isOpen).map((r) => r.cents))
      if (cents > working(m) - reserved) return expect(res, 422, 'validation_error')
      if (held(m)) return expect(res, 409, 'recovery_held')
      expect(res, 201)
      assert.equal(res.json.status, 'open', where)
      m.requests.push({ id, cents, status: 'open', epoch: m.falls })
      return
    }
    case 'cancel': {
      const r = pick(a.pick)
      if (!r) return
      const res = await call('POST', `/payment-requests/${r.id}/cancel`, { reason: 'the debtor asked' })
      if (r.status === 'open') {
        expect(res, 200)
        r.status = 'canceled'
        r.cancelReason = 'requested'
      } else if (r.status === 'canceled') {
        expect(res, 200)
      } else {
        return expect(res, 409, 'payment_request_state_conflict')
      }
      assert.equal(res.json.status, 'canceled', where)
      assert.equal(res.json.cancelReason, r.cancelReason, where)
      return
    }
    case 'reconcile': {
      const r = pick(a.pick)
      if (!r) return
      const id = `rec-${m.reconciliations.length + 1}`
      const lines = a.lines.map((l) => ({
        externalReceiptLineId: nextLine(),
        externalReceivableId: l.other ? 'O' : 'R',
        amount: usd(BigInt(l.cents)),
      }))
      const res = await call('PUT', `/payment-reconciliations/${id}`, { externalPaymentRequestId: r.id, lines })
      const p = r.payment
      if (r.status !== 'confirmed' || !p) return expect(res, 409, 'payment_not_confirmed')
      expect(res, 201)
      let differs = false
      const states: string[] = []
      for (const l of a.lines) {
        const cents = BigInt(l.cents)
        // Acknowledgeable: what the Payment allocated and still holds (money taken back is not there to acknowledge).
        if (!l.other && p.matched + cents <= p.allocated - p.takenBackAllocated) {
          p.matched += cents
          p.undeclared += cents
          m.cu -= cents
          m.au += cents
          m.ra += cents
          states.push('matched')
        } else {
          differs = true
          states.push('differs')
        }
      }
      assert.deepEqual(
        res.json.lines.map((l: { state: string }) => l.state),
        states,
        where,
      )
      const status = differs ? 'held' : 'matched'
      assert.equal(res.json.status, status, where)
      assert.equal(res.json.revision, 1, where)
      m.reconciliations.push({ id, request: r, status })
      if (differs) {
        m.heldBy.add(id)
        // A reconciliation hold suspends the authorized instruction: recovery never resumes by itself.
        m.authorized = false
      }
      return
    }
    case 'resolve': {
      const rec = m.reconciliations.length ? m.reconciliations[a.pick % m.reconciliations.length] : undefined
      if (!rec) return
      const res = await call('PUT', `/payment-reconciliations/${rec.id}/resolution`, { basis: a.basis, reference: `fix/${a.basis}` })
      if (rec.status === 'matched') return expect(res, 409, 'reconciliation_not_held')
      if (rec.status === 'resolved') return rec.basis === a.basis ? expect(res, 200) : expect(res, 409, 'reconciliation_not_held')
      if (a.basis === 'matching_evidence') {
        // Every Receivable it holds must be fully acknowledged: the Payment's own one by its matched lines, as far as
        // the allocation is still held (money taken back is not there to acknowledge; another Receivable a differing
        // line named has no allocation from this Payment, so nothing is missing there).
        const p = rec.request.payment as PaymentModel
        if (p.matched < p.allocated - p.takenBackAllocated) return expect(res, 409, 'matching_evidence_incomplete')
      }
      expect(res, 200)
      assert.equal(res.json.status, 'resolved', where)
      assert.equal(res.json.revision, 2, where)
      rec.status = 'resolved'
      rec.basis = a.basis
      m.heldBy.delete(rec.id)
      return
    }
    case 'credit': {
      const cents = BigInt(a.cents)
      const res = await call('PUT', `/credit-notes/cn-${m.sourceRevision + 1}`, {
        type: 'credit_note',
        amount: usd(cents),
        externalReceivableId: 'R',
        sourceRevision: m.sourceRevision + 1,
        effectiveAt: '2026-03-01T10:00:00Z',
        reason: 'contractual_credit',
        sourceReference: 'ledger/credit',
      })
      if (cents > m.source) return expect(res, 422, 'validation_error')
      expect(res, 201)
      // A financial event moves sourceAmount and leaves acknowledged-undeclared money as it is.
      m.source -= cents
      m.sourceRevision += 1
      m.falls += 1
      return
    }
    case 'redeclare': {
      // The Source declares the balance again: its books count every acknowledged receipt so far.
      const cents = BigInt(a.cents)
      const sourceRevision = m.sourceRevision + 1
      if (a.via === 'put') {
        const res = await call('PUT', '/receivables/R', {
          financialType: 'loan_balance',
          sourceRevision,
          recoverableAmount: usd(cents),
          creditUnion: { loanAccountReference: 'loan/R', loanType: 'auto' },
          dueDate: '2026-01-01',
          responsibleCustomers: [{ externalCustomerId: 'pay-cust', role: 'primary' }],
          sourceReference: 'rcv/R',
        })
        expect(res, 200)
      } else {
        m.snapshots += 1
        const res = await call('PUT', `/balance-snapshots/snap-${m.snapshots}`, {
          asOf: '2026-03-02T09:00:00Z',
          feedMode: 'transaction',
          sourcePosition: 10 * m.snapshots,
          balances: [{ externalReceivableId: 'R', recoverableAmount: usd(cents), sourceRevision }],
        })
        expect(res, 201)
        assert.equal(res.json.balances[0].outcome, 'applied', where)
      }
      const before = working(m)
      m.source = cents
      m.sourceRevision = sourceRevision
      m.au = 0n
      if (working(m) < before) m.falls += 1
      for (const r of m.requests) {
        // The acknowledged money this Payment still holds is now in the Source's declaration.
        if (r.payment) {
          r.payment.declared = smaller(r.payment.matched, atLeastZero(r.payment.allocated - r.payment.takenBackAllocated))
          r.payment.undeclared = 0n
        }
      }
      return
    }
    case 'reauthorize': {
      if (m.authorized) return
      const current = await call('GET', '/recovery-instructions/ins-R')
      const res = await call('PUT', '/recovery-instructions/ins-R', {
        scope: { type: 'receivable', externalReceivableId: 'R' },
        state: 'authorized',
        revision: current.json.revision + 1,
        effectiveAt: '2026-04-01T00:00:00Z',
      })
      expect(res, 200)
      m.authorized = true
      return
    }
  }
}

export async function checkInvariants(t: TestApp, tenant: Tenant, m: Model, where: string) {
  const res = await t.call('GET', `/v1/clients/${tenant.clientCode}/receivables/R`, { key: tenant.apiKey })
  assert.equal(res.status, 200, where)
  const p = res.json.financialPosition
  // The four amounts, to the cent.
  assert.deepEqual(
    p,
    {
      sourceAmount: usd(m.source),
      workingAmount: usd(working(m)),
      confirmedUnreconciledAmount: usd(m.cu),
      receiptAcknowledgedAmount: usd(m.ra),
    },
    where,
  )
  const holds: string[] = res.json.recovery.holds
  assert.equal(holds.includes('reconciliation_hold'), m.heldBy.size > 0, `${where}: ${holds}`)

  // Never over-collect, by docs/design/money.md's strict bound: the working amount is at most what the Source's last declaration
  // says is owed, less the money the service holds that this declaration does not count. Declared money taken back
  // since is owed again, but stays out until the Source declares again: it is not added here.
  const holding = sum(m.requests.flatMap((r) => (r.payment ? [heldUndeclared(r.payment)] : [])))
  const owed = atLeastZero(minor(p.sourceAmount) - holding)
  assert.ok(minor(p.workingAmount) <= owed, `${where}: workingAmount ${p.workingAmount.amount} above ${formatMinor(owed)} still owed`)

  // Acknowledged-undeclared money: the Receivable's is the model's and the sum of its Payments' shares, each the model's.
  const stored = await undeclaredShares(t.store, tenant.clientCode)
  const shares = Object.fromEntries(
    m.requests.flatMap((r) => (r.payment && r.payment.undeclared > 0n ? [[r.id, r.payment.undeclared] as const] : [])),
  )
  assert.deepEqual(stored, { receivable: m.au, shares }, where)
  assert.equal(sum(Object.values(stored.shares)), stored.receivable, where)

  // Every request as the service reads it: its status, and its Payment's amounts.
  let open = 0n
  for (const r of m.requests) {
    const read = await t.call('GET', `/v1/clients/${tenant.clientCode}/payment-requests/${r.id}`, { key: tenant.apiKey })
    assert.equal(read.status, 200, `${where} ${r.id}`)
    const q = read.json
    assert.equal(q.status, r.status, `${where} ${r.id}`)
    if (q.status === 'open' && r.epoch === m.falls) open += minor(q.amount)
    if (r.status === 'canceled') assert.equal(q.cancelReason, r.cancelReason, `${where} ${r.id}`)
    if (!r.payment) {
      if (r.status !== 'failed') assert.equal(q.payment, null, `${where} ${r.id}`)
      continue
    }
    const pay = q.payment
    const amount = minor(pay.amount)
    const allocated = minor(pay.allocatedAmount)
    const unapplied = minor(pay.unappliedAmount)
    const refunded = minor(pay.refundedAmount)
    const reversed = minor(pay.reversedAmount)
    assert.deepEqual(
      [amount, allocated, unapplied, refunded, reversed],
      [r.payment.amount, r.payment.allocated, r.payment.unapplied, r.payment.refunded, r.payment.reversed],
      `${where} ${r.id}`,
    )
    // Every confirmed cent is allocated or unapplied; nothing is given back twice.
    assert.equal(amount, allocated + unapplied, `${where} ${r.id}`)
    assert.ok(refunded + reversed <= amount, `${where} ${r.id}: refunded ${refunded} + reversed ${reversed} above ${amount}`)
  }
  // Open requests together never ask for more than the working amount. When the Source lowered the balance after
  // some were made, those may ask more until the pay-time check cancels each that no longer fits (checked at
  // `settle`); the ones made since reserve within what is left.
  assert.ok(open <= minor(p.workingAmount), `${where}: open requests ask ${formatMinor(open)}, working amount ${p.workingAmount.amount}`)
}

/**
 * The Receivable R's acknowledged-undeclared money as stored, and its Payments' undeclared shares that count (those
 * written at the Receivable's current count of declarations; migration 0023), the non-zero ones by request id.
 */
export async function undeclaredShares(db: Queryable, clientCode: string): Promise<{ receivable: bigint; shares: Record<string, bigint> }> {
  const [r] = await db.query<{ undeclared: string }>(
    `SELECT acknowledged_undeclared_minor::text AS undeclared FROM receivables WHERE client_code = $1 AND external_receivable_id = 'R'`,
    [clientCode],
  )
  const rows = await db.query<{ id: string; share: string }>(
    `SELECT p.external_payment_request_id AS id, p.acknowledged_undeclared_minor::text AS share
       FROM payments p
       JOIN receivables r ON r.client_code = p.client_code AND r.external_receivable_id = p.external_receivable_id
      WHERE p.client_code = $1 AND p.external_receivable_id = 'R' AND p.undeclared_as_of = r.declarations
        AND p.acknowledged_undeclared_minor <> 0
      ORDER BY 1`,
    [clientCode],
  )
  return { receivable: BigInt(r?.undeclared ?? '0'), shares: Object.fromEntries(rows.map((x) => [x.id, BigInt(x.share)])) }
}
