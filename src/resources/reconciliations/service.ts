import { canonicalJson } from '../../domain/canonical.ts'
import { newestFirstPage, readNewestFirstCursor } from '../../domain/cursor.ts'
import { describeMoney, money, toMinor } from '../../domain/money.ts'
import { unacknowledgedMinor } from '../../domain/money-rules.ts'
import { type FieldError, Problem, unknownReferences } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
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
  const payment = (await findReconciledPayment(db, clientCode, row.external_payment_request_id)) as ReconciledPaymentRow
  const lines = await receiptLines(db, clientCode, row.external_reconciliation_id)
  const matched = await matchedMinor(db, clientCode, row.external_payment_request_id)
  return viewOf(row, payment, lines, matched)
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
  await lockIdentity(tx, clientCode, 'payment_reconciliation', id)
  const existing = await findReconciliation(tx, clientCode, id)
  if (existing) {
    if (canonicalJson(existing.body) === canonicalJson(body))
      return { status: 200 as const, body: () => view(deps.payments, tx, clientCode, existing) }
    throw new Problem('payment_reconciliation_conflict', `Payment reconciliation ${id} was already accepted with a different body.`)
  }

  const requestId = body.externalPaymentRequestId
  await lockIdentity(tx, clientCode, 'payment_request', requestId)
  const known = await existingReceivables(
    tx,
    clientCode,
    body.lines.map((l) => l.externalReceivableId),
  )
  const unknown = [
    ...((await paymentRequestExists(tx, clientCode, requestId))
      ? []
      : [{ pointer: '/externalPaymentRequestId', what: `Payment request ${requestId}` }]),
    ...body.lines.flatMap((l, i) =>
      known.has(l.externalReceivableId)
        ? []
        : [{ pointer: `/lines/${i}/externalReceivableId`, what: `Receivable ${l.externalReceivableId}` }],
    ),
  ]
  if (unknown.length > 0) throw unknownReferences(unknown)

  const payment = await findReconciledPayment(tx, clientCode, requestId, { forUpdate: true })
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
  const used = await usedReceiptLineIds(
    tx,
    clientCode,
    requestId,
    body.lines.map((l) => l.externalReceiptLineId),
  )
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
  for (const receivableId of touched) await lockIdentity(tx, clientCode, 'receivable', receivableId)

  // Judge the lines in order against what every reconciliation of this Payment has matched so far. Allocated
  // money a refund or reversal took back (payments/take-back.ts: unacknowledged money first, under this same
  // Payment row lock) is no longer there to acknowledge.
  const allocated = BigInt(payment.allocated_minor)
  const acknowledgeable = allocated - BigInt(payment.taken_back_allocated_minor)
  const matchedBefore = await matchedMinor(tx, clientCode, requestId)
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
  await uow.watchHolds(clientCode, affected)
  await insertReconciliation(tx, clientCode, id, { requestId, status: held ? 'held' : 'matched', body, lines, now })
  const acknowledged = matched - matchedBefore
  if (acknowledged > 0n) {
    const revision = await acknowledgeReceipt(tx, clientCode, target, requestId, acknowledged, now)
    uow.appendChange(clientCode, {
      type: 'receivable.updated',
      resourceType: 'receivable',
      resourceId: target,
      revision,
      occurredAt: now,
    })
  }
  if (held) {
    await insertHolds(tx, clientCode, id, affected, now)
    // Recovery stops on every affected Receivable and never resumes by itself: a new instruction revision is needed.
    await suspendInstructionsOf(tx, clientCode, affected, now, 'reconciliation_held')
    // One revision per Receivable per write: the one that already moved money carries its hold change.
    await uow.recordHoldChanges(now)
  }
  uow.appendChange(clientCode, {
    type: held ? 'payment_reconciliation.held' : 'payment_reconciliation.matched',
    resourceType: 'payment_reconciliation',
    resourceId: id,
    revision: 1,
    occurredAt: now,
  })
  return {
    status: 201 as const,
    body: async () => view(deps.payments, tx, clientCode, (await findReconciliation(tx, clientCode, id)) as ReconciliationRow),
  }
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
  await lockIdentity(tx, clientCode, 'payment_reconciliation', id)
  const row = await findReconciliation(tx, clientCode, id, { forUpdate: true })
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
  await lockIdentity(tx, clientCode, 'payment_request', requestId)
  const payment = (await findReconciledPayment(tx, clientCode, requestId, { forUpdate: true })) as ReconciledPaymentRow
  const holding = await heldReceivables(tx, clientCode, id)
  if (resolution.basis === 'matching_evidence') {
    // Matched lines must account for the allocation net of allocated money refunds and reversals took back (read
    // under the Payment row lock that take-back holds too): that money is no longer there to acknowledge. The
    // Payment allocates to one Receivable; another Receivable a differing line named has no allocation from it,
    // so nothing can be missing there. The figures are the view's: allocatedAmount what the Payment allocated,
    // unmatchedAmount what of it is still held and unacknowledged.
    const allocated = BigInt(payment.allocated_minor)
    const takenBack = BigInt(payment.taken_back_allocated_minor)
    const matched = await payments.matchedMinor(tx, clientCode, requestId)
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
  for (const receivableId of holding) await lockIdentity(tx, clientCode, 'receivable', receivableId)
  const now = isoNow(clock)
  await uow.watchHolds(clientCode, holding)
  const revision = await resolveReconciliation(tx, clientCode, id, resolution, now)
  // Releasing holds never resumes an instruction: recovery needs a new instruction revision.
  await uow.recordHoldChanges(now)
  uow.appendChange(clientCode, {
    type: 'payment_reconciliation.resolved',
    resourceType: 'payment_reconciliation',
    resourceId: id,
    revision,
    occurredAt: now,
  })
  return {
    status: 200 as const,
    body: async () => view(payments, tx, clientCode, (await findReconciliation(tx, clientCode, id)) as ReconciliationRow),
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
    // Its answer reads the reconciliation again, then its Payment, its lines and the matched amount.
    answerInSteps: true,
    run: (uow: UnitOfWork, { clientCode, id }: OperationContext, body: ReconciliationWrite) => create(deps, uow, clientCode, id, body),
  })

  /** The Source's resolution of a held reconciliation: a Source write. */
  const resolveOperation = defineOperation({
    kind: 'payment_reconciliation_resolution',
    scopes: ['financial_corrections:write'],
    body: ResolutionWrite,
    response: ReconciliationResponse,
    source: true,
    // Its answer reads the reconciliation again, then its Payment, its lines and the matched amount.
    answerInSteps: true,
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
