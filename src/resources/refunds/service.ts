import { canonicalJson } from '../../domain/canonical.ts'
import { encodeCursor, IdentifierCursor, readCursor } from '../../domain/cursor.ts'
import { money, toMinor } from '../../domain/money.ts'
import { fieldProblem, Problem } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import type { Queryable } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import { defineOperation, type OperationContext, type RouteDeps } from '../operations.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { createRefund, paymentNotConfirmed, refundNotFound, refuseAboveRemaining } from './rules.ts'
import { RefundResponse, RefundWrite } from './schema.ts'
import type { RefundRow, RefundStore } from './store.ts'

export interface RefundServiceDeps extends RouteDeps {
  refunds: Pick<RefundStore, 'findRefund' | 'listRefunds' | 'lockRefundedPayment' | 'refundedRequestExists'>
  /** Told after COMMIT when a refund was created: the refund worker asks the provider soon. */
  onRefundQueued?: () => void
}

const paymentRequestNotFound = (id: string) => new Problem('payment_request_not_found', `No Payment request ${id} for this client.`)

export function toRefundResponse(row: RefundRow): RefundResponse {
  return {
    externalRefundId: row.external_refund_id,
    externalPaymentRequestId: row.external_payment_request_id,
    amount: money(BigInt(row.amount_minor), row.currency),
    reason: row.reason,
    status: row.status,
    origin: row.origin,
    createdAt: row.created_at,
    ...(row.decided_at === null ? {} : { decidedAt: row.decided_at }),
  }
}

/**
 * Refunds of a confirmed Payment (docs/design/money.md, "Refunds"). The PUT records the refund as `pending` and
 * answers; the provider is asked after COMMIT by the refund worker (src/workers/refund-worker.ts), outside any
 * transaction, and its decision moves the money (rules.ts, recordRefundOutcome). Not a Source write.
 */
export function createRefundService(deps: RefundServiceDeps) {
  const { store, clock } = deps
  const { findRefund, listRefunds, lockRefundedPayment, refundedRequestExists } = deps.refunds

  async function create(uow: UnitOfWork, ctx: OperationContext, body: RefundWrite) {
    const { tx } = uow
    const { clientCode } = ctx
    const requestId = ctx.params?.externalPaymentRequestId
    if (requestId === undefined) throw new Error('a refund is named by its Payment request and its own id')
    const refundId = ctx.id
    // The one lock: the request's row. Two refunds of one request (or a refund and a reversal) run one after the
    // other, and the second counts the first.
    // The refund's own read goes in the same round trip.
    const [payment, existing] = await answersInOrder([
      lockRefundedPayment(tx, clientCode, requestId),
      findRefund(tx, clientCode, requestId, refundId),
    ])
    if (!payment) throw paymentRequestNotFound(requestId)
    if (existing) {
      if (canonicalJson(existing.body) === canonicalJson(body))
        return { status: 200 as const, body: async () => toRefundResponse(existing) }
      throw new Problem(
        'refund_conflict',
        `Refund ${refundId} of Payment request ${requestId} was already asked for with a different body.`,
      )
    }
    if (payment.payment_status !== 'confirmed' || payment.currency === null) throw paymentNotConfirmed(requestId, payment)
    if (body.amount.currency !== payment.currency) {
      throw fieldProblem('/amount/currency', 'custom', `must be ${payment.currency}, the Payment's currency`)
    }
    const amountMinor = toMinor(body.amount.amount)
    refuseAboveRemaining(amountMinor, payment, '/amount/amount', 'a refund')
    const refund = await createRefund(uow, clientCode, {
      requestId,
      refundId,
      currency: payment.currency,
      amountMinor,
      reason: body.reason,
      body,
      now: isoNow(clock),
    })
    const queued = deps.onRefundQueued
    return { status: 201 as const, body: async () => toRefundResponse(refund), ...(queued ? { afterCommit: queued } : {}) }
  }

  const putOperation = defineOperation({
    kind: 'refund',
    scopes: ['payment_requests:write'],
    body: RefundWrite,
    response: RefundResponse,
    source: false,
    run: (uow: UnitOfWork, ctx: OperationContext, body: RefundWrite) => create(uow, ctx, body),
  })

  return {
    /** PUT: 201 created (pending), 200 identical retry (the current state). */
    putOperation,

    async get(db: Queryable, clientCode: string, requestId: string, refundId: string): Promise<RefundResponse> {
      const row = await findRefund(db, clientCode, requestId, refundId)
      if (row) return toRefundResponse(row)
      if (!(await refundedRequestExists(db, clientCode, requestId))) throw paymentRequestNotFound(requestId)
      throw refundNotFound(requestId, refundId)
    },

    async list(clientCode: string, requestId: string, cursor: string | undefined, limit: number) {
      const after = readCursor('refunds', cursor, IdentifierCursor, '/query/cursor', 'is not a cursor this list returned')
      if (!(await refundedRequestExists(store, clientCode, requestId))) throw paymentRequestNotFound(requestId)
      const rows = await listRefunds(store, clientCode, requestId, after?.after, limit + 1)
      const page = rows.slice(0, limit)
      const last = page.at(-1)
      return {
        data: page.map(toRefundResponse),
        nextCursor: rows.length > limit && last ? encodeCursor('refunds', { after: last.external_refund_id }) : null,
      }
    },
  }
}

export type RefundService = ReturnType<typeof createRefundService>
