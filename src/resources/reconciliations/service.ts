import { canonicalJson } from '../../domain/canonical.ts'
import { newestFirstPage, readNewestFirstCursor } from '../../domain/cursor.ts'
import { describeMoney, money, toMinor } from '../../domain/money.ts'
import { unacknowledgedMinor } from '../../domain/money-rules.ts'
import { type FieldError, Problem, unknownReferences } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import { lockIdentities, lockIdentity } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import type { RestrictionRules } from '../holds/restrictions.ts'
import { defineOperation, type OperationContext, type RouteDeps } from '../operations.ts'
import type { PaymentStore } from '../payments/store.ts'
import type { ReceivableStore } from '../receivables/store.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { type LineState, type ReconciliationListQuery, ReconciliationResponse, ReconciliationWrite, ResolutionWrite } from './schema.ts'
import {
  acknowledgeReceipt,
  findReconciledPayment,
  findReconciliation,
  heldReceivables,
  insertHolds,
  insertReconciliation,
  listReconciliations,
  type NewReceiptLine,
  paymentRequestExists,
  type ReceiptLineRow,
  type ReconciledPaymentRow,
  type ReconciliationRow,
  receiptLines,
  receiptLinesOf,
  reconciledPaymentsOf,
  resolveReconciliation,
  usedReceiptLineIds,
} from './store.ts'

/**
 * Payment reconciliations (docs/decisions.md, "Payments", "Reconciliation"): Source receipt lines that
 * acknowledge a confirmed Payment. Lines are judged in order against the Payment's allocation and the lines
 * every earlier reconciliation of the Payment matched; matched lines move money from confirmed-unreconciled to
 * receipt-acknowledged, and a line that differs holds the reconciliation and every Receivable it touches until
 * a resolution releases this reconciliation's holds (and only them).
 *
 * Locks, always in this order so that concurrent writers cannot deadlock: the reconciliation's identity, the
 * Payment request's identity, the Payment row (FOR UPDATE: the matched total is read under it, so two
 * reconciliations of one Payment never match the same allocation twice), then the Receivables, sorted.
 */
export interface ReconciliationServiceDeps extends RouteDeps {
  receivables: Pick<ReceivableStore, 'existingReceivables'>
  restrictions: Pick<RestrictionRules, 'suspendInstructionsOf'>
  payments: Pick<PaymentStore, 'matchedMinor' | 'matchedMinorOf'>
}

const notFound = (id: string) => new Problem('payment_reconciliation_not_found', `No Payment reconciliation ${id} for this client.`)

async function view(
  { matchedMinor }: ReconciliationServiceDeps['payments'],
  db: Queryable,
  clientCode: string,
  row: ReconciliationRow,
): Promise<ReconciliationResponse> {
  // Sent together: one round trip, and a write's COMMIT may leave with them (executeWrite).
  const [payment, lines, matched] = await answersInOrder([
    findReconciledPayment(db, clientCode, row.external_payment_request_id),
    receiptLines(db, clientCode, row.external_reconciliation_id),
    matchedMinor(db, clientCode, row.external_payment_request_id),
  ])
  return viewOf(row, payment as ReconciledPaymentRow, lines, matched)
}

/** A write's answer: the reconciliation as its transaction left it, every read sent at once (its ids are known). */
async function renderWritten(
  { matchedMinor }: ReconciliationServiceDeps['payments'],
  db: Queryable,
  clientCode: string,
  id: string,
  requestId: string,
): Promise<ReconciliationResponse> {
  const [row, payment, lines, matched] = await answersInOrder([
    findReconciliation(db, clientCode, id),
    findReconciledPayment(db, clientCode, requestId),
    receiptLines(db, clientCode, id),
    matchedMinor(db, clientCode, requestId),
  ])
  return viewOf(row as ReconciliationRow, payment as ReconciledPaymentRow, lines, matched)
}

/** The reconciliation with its lines and its Payment's allocation as they are now (the GET and the list render through this). */
function viewOf(row: ReconciliationRow, payment: ReconciledPaymentRow, lines: ReceiptLineRow[], matched: bigint): ReconciliationResponse {
  const allocated = BigInt(payment.allocated_minor)
  const currency = payment.currency
  // Allocated money a refund or reversal took back is not there to acknowledge: it is not unmatched.
  const unmatched = unacknowledgedMinor({
    allocatedMinor: allocated,
    takenBackAllocatedMinor: BigInt(payment.taken_back_allocated_minor),
    matchedMinor: matched,
  })
  return {
    externalReconciliationId: row.external_reconciliation_id,
    externalPaymentRequestId: row.external_payment_request_id,
    acceptedAt: row.accepted_at,
    revision: Number(row.revision),
    status: row.status,
    paymentAmount: money(BigInt(payment.amount_minor), currency),
    allocations: [
      {
        externalReceivableId: payment.external_receivable_id,
        allocatedAmount: money(allocated, currency),
        matchedAmount: money(matched, currency),
        unmatchedAmount: money(unmatched, currency),
      },
    ],
    lines: lines.map((l) => ({
      externalReceiptLineId: l.external_receipt_line_id,
      externalReceivableId: l.external_receivable_id,
      amount: money(BigInt(l.amount_minor), l.currency),
      state: l.state,
    })),
    unappliedAmount: money(BigInt(payment.unapplied_minor), currency),
    unmatchedAmount: money(unmatched, currency),
    resolution:
      row.resolution && row.resolved_at
        ? { basis: row.resolution.basis, reference: row.resolution.reference, resolvedAt: row.resolved_at }
        : null,
  }
}
/** A reconciliation's PUT: its lines judged against the Payment's allocation, held where one differs. */
async function create(deps: ReconciliationServiceDeps, uow: UnitOfWork, clientCode: string, id: string, body: ReconciliationWrite) {
  const { tx } = uow
  const { clock } = deps
  const { existingReceivables } = deps.receivables
  const { suspendInstructionsOf } = deps.restrictions
  const { matchedMinor } = deps.payments
  const requestId = body.externalPaymentRequestId
  // Round trip one (docs/decisions.md, "A write in two round trips"): the reconciliation's identity lock and its
  // read, the request's identity lock, then every read a decision below needs, under it: receipt lines are written
  // only under that lock, so what they match is known here.
  const [, existing, , known, requestExists, payment, used, matchedBefore] = await answersInOrder([
    lockIdentity(tx, clientCode, 'payment_reconciliation', id),
    findReconciliation(tx, clientCode, id),
    lockIdentity(tx, clientCode, 'payment_request', requestId),
    existingReceivables(
      tx,
      clientCode,
      body.lines.map((l) => l.externalReceivableId),
    ),
    paymentRequestExists(tx, clientCode, requestId),
    findReconciledPayment(tx, clientCode, requestId, { forUpdate: true }),
    usedReceiptLineIds(
      tx,
      clientCode,
      requestId,
      body.lines.map((l) => l.externalReceiptLineId),
    ),
    matchedMinor(tx, clientCode, requestId),
  ])
  if (existing) {
    if (canonicalJson(existing.body) === canonicalJson(body))
      return { status: 200 as const, body: () => view(deps.payments, tx, clientCode, existing) }
    throw new Problem('payment_reconciliation_conflict', `Payment reconciliation ${id} was already accepted with a different body.`)
  }
  const unknown = [
    ...(requestExists ? [] : [{ pointer: '/externalPaymentRequestId', what: `Payment request ${requestId}` }]),
    ...body.lines.flatMap((l, i) =>
      known.has(l.externalReceivableId)
        ? []
        : [{ pointer: `/lines/${i}/externalReceivableId`, what: `Receivable ${l.externalReceivableId}` }],
    ),
  ]
  if (unknown.length > 0) throw unknownReferences(unknown)

  if (payment?.status !== 'confirmed') {
    throw new Problem(
      'payment_not_confirmed',
      payment
        ? `The Payment of Payment request ${requestId} failed; there is nothing to reconcile.`
        : `Payment request ${requestId} has no provider-confirmed Payment yet; there is nothing to reconcile.`,
    )
  }
  const wrongCurrency: FieldError[] = body.lines.flatMap((l, i) =>
    l.amount.currency === payment.currency
      ? []
      : [{ code: 'custom', detail: `must be ${payment.currency}, the Payment's currency`, pointer: `/lines/${i}/amount/currency` }],
  )
  if (wrongCurrency.length > 0) throw fieldProblems(wrongCurrency)
  const reused: FieldError[] = body.lines.flatMap((l, i) =>
    used.has(l.externalReceiptLineId)
      ? [
          {
            code: 'custom',
            detail: `receipt line ${l.externalReceiptLineId} was already reconciled for this Payment; a receipt line acknowledges money once`,
            pointer: `/lines/${i}/externalReceiptLineId`,
          },
        ]
      : [],
  )
  if (reused.length > 0) throw fieldProblems(reused)

  const target = payment.external_receivable_id
  const touched = [...new Set([target, ...body.lines.map((l) => l.externalReceivableId)])].sort()

  // Judge the lines in order against what every reconciliation of this Payment has matched so far. Allocated
  // money a refund or reversal took back (payments/take-back.ts: unacknowledged money first, under this same
  // Payment row lock) is no longer there to acknowledge.
  const allocated = BigInt(payment.allocated_minor)
  const acknowledgeable = allocated - BigInt(payment.taken_back_allocated_minor)
  let matched = matchedBefore
  const lines: NewReceiptLine[] = body.lines.map((l) => {
    const amountMinor = toMinor(l.amount.amount)
    let state: LineState = 'differs'
    if (l.externalReceivableId === target && matched + amountMinor <= acknowledgeable) {
      matched += amountMinor
      state = 'matched'
    }
    return {
      externalReceiptLineId: l.externalReceiptLineId,
      externalReceivableId: l.externalReceivableId,
      currency: l.amount.currency,
      amountMinor,
      state,
    }
  })
  const held = lines.some((l) => l.state === 'differs')
  const affected = held
    ? [...new Set([target, ...lines.filter((l) => l.state === 'differs').map((l) => l.externalReceivableId)])].sort()
    : []

  const now = isoNow(clock)
  // Round trip two: the Receivables' identity locks (sorted) and their holds before the write.
  await answersInOrder([
    lockIdentities(
      tx,
      clientCode,
      touched.map((r) => ['receivable', r] as const),
    ),
    uow.watchHolds(clientCode, affected),
  ])
  // Round trip three: every write (the acknowledgement's answer is the Receivable's new revision).
  const acknowledged = matched - matchedBefore
  const [, revision] = await answersInOrder([
    insertReconciliation(tx, clientCode, id, { requestId, status: held ? 'held' : 'matched', body, lines, now }),
    acknowledged > 0n ? acknowledgeReceipt(tx, clientCode, target, requestId, acknowledged, now) : undefined,
    // Recovery stops on every affected Receivable and never resumes by itself: a new instruction revision is needed.
    held ? insertHolds(tx, clientCode, id, affected, now) : undefined,
    held ? suspendInstructionsOf(tx, clientCode, affected, now, 'reconciliation_held') : undefined,
  ])
  if (revision !== undefined) {
    uow.appendChange(clientCode, {
      type: 'receivable.updated',
      resourceType: 'receivable',
      resourceId: target,
      revision,
      occurredAt: now,
    })
  }
  // One revision per Receivable per write: the one that already moved money carries its hold change (its event is
  // appended above, before the holds after are compared).
  if (held) await uow.recordHoldChanges(now)
  uow.appendChange(clientCode, {
    type: held ? 'payment_reconciliation.held' : 'payment_reconciliation.matched',
    resourceType: 'payment_reconciliation',
    resourceId: id,
    revision: 1,
    occurredAt: now,
  })
  return { status: 201 as const, body: () => renderWritten(deps.payments, tx, clientCode, id, requestId) }
}
/** The Source's resolution of a held reconciliation: its holds released, recovery left to a new instruction. */
async function resolve(
  { clock, payments }: Pick<ReconciliationServiceDeps, 'clock' | 'payments'>,
  uow: UnitOfWork,
  clientCode: string,
  id: string,
  resolution: ResolutionWrite,
) {
  const { tx } = uow
  const [, row] = await answersInOrder([
    lockIdentity(tx, clientCode, 'payment_reconciliation', id),
    findReconciliation(tx, clientCode, id, { forUpdate: true }),
  ])
  if (!row) throw notFound(id)
  if (row.status === 'matched') {
    throw new Problem('reconciliation_not_held', `Payment reconciliation ${id} is matched: it holds no difference to resolve.`)
  }
  if (row.status === 'resolved') {
    if (canonicalJson(row.resolution) === canonicalJson(resolution))
      return { status: 200 as const, body: () => view(payments, tx, clientCode, row) }
    throw new Problem(
      'reconciliation_not_held',
      `Payment reconciliation ${id} was already resolved with another resolution; it holds no difference now.`,
    )
  }

  const requestId = row.external_payment_request_id
  // The request's identity lock and every read under it in one round trip.
  const [, found, holding, matchedNow] = await answersInOrder([
    lockIdentity(tx, clientCode, 'payment_request', requestId),
    findReconciledPayment(tx, clientCode, requestId, { forUpdate: true }),
    heldReceivables(tx, clientCode, id),
    payments.matchedMinor(tx, clientCode, requestId),
  ])
  const payment = found as ReconciledPaymentRow
  if (resolution.basis === 'matching_evidence') {
    // Matched lines must account for the allocation net of allocated money refunds and reversals took back (read
    // under the Payment row lock that take-back holds too): that money is no longer there to acknowledge. The
    // Payment allocates to one Receivable; another Receivable a differing line named has no allocation from it,
    // so nothing can be missing there. The figures are the view's: allocatedAmount what the Payment allocated,
    // unmatchedAmount what of it is still held and unacknowledged.
    const allocated = BigInt(payment.allocated_minor)
    const takenBack = BigInt(payment.taken_back_allocated_minor)
    const matched = matchedNow
    const unmatched = unacknowledgedMinor({ allocatedMinor: allocated, takenBackAllocatedMinor: takenBack, matchedMinor: matched })
    if (holding.includes(payment.external_receivable_id) && unmatched > 0n) {
      const c = payment.currency
      const since = takenBack > 0n ? ` (${describeMoney(takenBack, c)} of it since taken back)` : ''
      throw new Problem(
        'matching_evidence_incomplete',
        `Matched receipt lines do not yet account for the full allocation: Receivable ${payment.external_receivable_id} has ${describeMoney(allocated, c)} allocated${since}, ${describeMoney(matched, c)} matched, ${describeMoney(unmatched, c)} unmatched.`,
        {
          extensions: {
            unmatched: [
              {
                externalReceivableId: payment.external_receivable_id,
                allocatedAmount: money(allocated, c),
                matchedAmount: money(matched, c),
                unmatchedAmount: money(unmatched, c),
              },
            ],
          },
        },
      )
    }
  }
  const now = isoNow(clock)
  // The Receivables' identity locks (sorted) with their holds before; then the resolution with the holds after (its
  // answer, the new revision, decides nothing the holds' comparison needs).
  await answersInOrder([
    lockIdentities(
      tx,
      clientCode,
      [...holding].sort().map((r) => ['receivable', r] as const),
    ),
    uow.watchHolds(clientCode, holding),
  ])
  // Releasing holds never resumes an instruction: recovery needs a new instruction revision.
  const [revision] = await answersInOrder([resolveReconciliation(tx, clientCode, id, resolution, now), uow.recordHoldChanges(now)])
  uow.appendChange(clientCode, {
    type: 'payment_reconciliation.resolved',
    resourceType: 'payment_reconciliation',
    resourceId: id,
    revision,
    occurredAt: now,
  })
  return {
    status: 200 as const,
    body: () => renderWritten(payments, tx, clientCode, id, requestId),
  }
}
export function createReconciliationService(deps: ReconciliationServiceDeps) {
  const { store } = deps
  /** Source receipt lines acknowledging a Payment: a Source write. */
  const putOperation = defineOperation({
    kind: 'payment_reconciliation',
    scopes: ['financial_corrections:write'],
    body: ReconciliationWrite,
    response: ReconciliationResponse,
    source: true,
    run: (uow: UnitOfWork, { clientCode, id }: OperationContext, body: ReconciliationWrite) => create(deps, uow, clientCode, id, body),
  })

  /** The Source's resolution of a held reconciliation: a Source write. */
  const resolveOperation = defineOperation({
    kind: 'payment_reconciliation_resolution',
    scopes: ['financial_corrections:write'],
    body: ResolutionWrite,
    response: ReconciliationResponse,
    source: true,
    run: (uow: UnitOfWork, { clientCode, id }: OperationContext, body: ResolutionWrite) => resolve(deps, uow, clientCode, id, body),
  })

  return {
    putOperation,
    resolveOperation,
    async get(clientCode: string, id: string) {
      const row = await findReconciliation(store, clientCode, id)
      if (!row) throw notFound(id)
      return view(deps.payments, store, clientCode, row)
    },

    /**
     * A page, newest first; each item exactly as its GET renders it, from four statements whatever the page's size
     * (the page, then the Payments, lines and matched totals of all its reconciliations).
     */
    async list(clientCode: string, q: ReconciliationListQuery) {
      const after = readNewestFirstCursor('payment-reconciliations', q.cursor)
      const rows = await listReconciliations(store, clientCode, {
        after,
        requestId: q.externalPaymentRequestId,
        status: q.status,
        limit: q.limit + 1,
      })
      const { page, nextCursor } = newestFirstPage('payment-reconciliations', rows, q.limit, (r) => r.external_reconciliation_id)
      const requestIds = [...new Set(page.map((r) => r.external_payment_request_id))]
      const ids = page.map((r) => r.external_reconciliation_id)
      const [payments, lines, matched] = [
        await reconciledPaymentsOf(store, clientCode, requestIds),
        await receiptLinesOf(store, clientCode, ids),
        await deps.payments.matchedMinorOf(store, clientCode, requestIds),
      ]
      const data = page.map((r) => {
        const payment = payments.get(r.external_payment_request_id)
        if (!payment) throw new Error(`reconciliation ${r.external_reconciliation_id} without its Payment`)
        return viewOf(r, payment, lines.get(r.external_reconciliation_id) ?? [], matched.get(r.external_payment_request_id) ?? 0n)
      })
      return { data, nextCursor }
    },
  }
}

/** A 422 listing several field errors at once (every line with the same fault). */
function fieldProblems(errors: FieldError[]): Problem {
  const first = errors[0] as FieldError
  return new Problem('validation_error', `${first.pointer}: ${first.detail}`, { errors })
}

export type ReconciliationService = ReturnType<typeof createReconciliationService>
