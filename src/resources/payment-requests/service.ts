import { randomBytes } from 'node:crypto'
import { z } from 'zod'
import { canonicalJson } from '../../domain/canonical.ts'
import { newestFirstPage, readNewestFirstCursor } from '../../domain/cursor.ts'
import { holdsFromRow } from '../../domain/holds.ts'
import { describeMoney, money, toMinor } from '../../domain/money.ts'
import { paymentRequestExpired } from '../../domain/money-rules.ts'
import { fieldProblem, Problem, unknownReferences } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import { catchUpReceivable } from '../holds/client-facts-store.ts'
import { defineOperation, executeWrite, type OperationContext, type RouteDeps } from '../operations.ts'
import type { PaymentRow, PaymentStore } from '../payments/store.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { createHostedPage, type HostedPageDeps } from './page-service.ts'
import type { PaymentRules } from './payment-rules.ts'
import { createReceiptDeliveryRead, type ReceiptDeliveryDeps } from './receipt-delivery.ts'
import { PaymentRequestCancel, PaymentRequestList, PaymentRequestListQuery, PaymentRequestResponse, PaymentRequestWrite } from './schema.ts'
import { createSandboxSettlement } from './settlement.ts'
import {
  cancelPaymentRequest,
  findPaymentRequest,
  insertPaymentRequest,
  listPaymentRequests,
  lockPayingReceivable,
  lockPaymentRequest,
  type PaymentRequestRow,
} from './store.ts'

export type { HostedPageView } from './page-service.ts'

/** The `errors[].code` of a payment request asking more than its Receivable can still reserve (stable: branch on it). */
export const RESERVATION_EXCEEDED = 'amount_exceeds_reservable'

const MINUTE_MS = 60_000
const DAY_MS = 86_400_000
/** docs/decisions.md, Payments: the default lifetime of a request and the bounds of a chosen expiresAt. */
export const EXPIRY = { defaultMs: 7 * DAY_MS, minMs: 5 * MINUTE_MS, maxMs: 30 * DAY_MS } as const

/** `store`, `clock` and `onFeedAppended` (RouteDeps): the hosted page's confirmation runs through executeWrite. */
export interface PaymentRequestServiceDeps
  extends RouteDeps,
    Pick<HostedPageDeps, 'sandboxProvider' | 'checkout' | 'checkoutMode' | 'readBack'>,
    Pick<ReceiptDeliveryDeps, 'receiptDeliveryState'> {
  /** PUBLIC_BASE_URL without a trailing slash: hostedUrl is absolute. */
  publicBaseUrl: string
  payments: Pick<PaymentStore, 'findPayment' | 'findPayments' | 'hasHeldReconciliation' | 'matchedMinor'>
  paymentRules: Pick<
    PaymentRules,
    | 'amountFits'
    | 'confirmationOf'
    | 'payability'
    | 'paymentRequestNotFound'
    | 'recordExpiryIfDue'
    | 'recoveryHeld'
    | 'recordReversal'
    | 'settleInSandbox'
  >
  /** Told after COMMIT when a confirmation queued the refund of unapplied money: the refund worker asks soon. */
  onRefundQueued?: () => void
  /** Told after COMMIT of a cancel: the request's open sessions are ended at the provider. */
  onCanceled?: (clientCode: string) => void
  /** Production: a client without a payment provider gets no payment request (409 payment_provider_not_configured). */
  hasProvider?: (db: Queryable, clientCode: string) => Promise<boolean>
  /**
   * Sandbox clocks (src/sandbox): runs the hosted page's work at the time of the client its
   * token names. The API's routes get their client's time from the HTTP layer.
   */
  atClientTime?: <T>(clientCode: string, fn: () => Promise<T>) => Promise<T>
}

function paymentView(p: PaymentRow) {
  return {
    status: p.status,
    amount: money(BigInt(p.amount_minor), p.currency),
    allocatedAmount: money(BigInt(p.allocated_minor), p.currency),
    unappliedAmount: money(BigInt(p.unapplied_minor), p.currency),
    refundedAmount: money(BigInt(p.refunded_minor), p.currency),
    reversedAmount: money(BigInt(p.reversed_minor), p.currency),
    provider: p.provider,
    providerPaymentId: p.provider_payment_id,
    decidedAt: p.decided_at,
  }
}

type Current = (uow: UnitOfWork, clientCode: string, id: string) => Promise<PaymentRequestRow | undefined>
type View = (db: Queryable, clientCode: string, row: PaymentRequestRow, known?: PaymentRow | null) => Promise<PaymentRequestResponse>

/**
 * The PUT's creation: the request reserves what it asks of its Receivable's working amount, under the request's and
 * the Receivable's identity locks. `current` and `view` are the service's.
 */
async function createRequest(
  deps: PaymentRequestServiceDeps,
  on: { current: Current; view: View },
  uow: UnitOfWork,
  clientCode: string,
  id: string,
  body: PaymentRequestWrite,
) {
  const { clock } = deps
  const { current, view } = on
  const { amountFits, recoveryHeld } = deps.paymentRules
  const { tx } = uow
  const nowMs = clock.now().getTime()
  const now = new Date(nowMs).toISOString()
  const receivableId = body.externalReceivableId
  // Round trip one: every lock and read the decision needs, sent together (docs/decisions.md, "A write in two round
  // trips"). The request identity first: concurrent PUTs of one id see each other (one creates, the other retries).
  // Then the Receivable's identity (the lock every creation and confirmation of its requests takes, so concurrent
  // creations reserve one after the other), its catch-up to the client's last fact (a client-wide change the
  // fan-out has not brought to it yet counts already), and its row, locked, with what its other open requests reserve.
  const [, existing, configured, , caughtUp, receivable] = await answersInOrder([
    lockIdentity(tx, clientCode, 'payment_request', id),
    current(uow, clientCode, id),
    deps.hasProvider?.(tx, clientCode),
    lockIdentity(tx, clientCode, 'receivable', receivableId),
    catchUpReceivable(tx, clientCode, receivableId, now),
    lockPayingReceivable(tx, clientCode, receivableId, { id }, now),
  ])
  // Its new revision stands whatever this write answers (a retry included): its event goes with it.
  if (caughtUp) uow.appendChange(clientCode, caughtUp)
  if (existing) {
    // The current state, as `current` left it (an expiry it recorded included).
    if (canonicalJson(existing.body) === canonicalJson(body)) return { status: 200 as const, body: () => view(tx, clientCode, existing) }
    throw new Problem('payment_request_conflict', `Payment request ${id} was already created with a different body.`)
  }
  let expiresAt = new Date(nowMs + EXPIRY.defaultMs).toISOString()
  if (body.expiresAt !== undefined) {
    const at = Date.parse(body.expiresAt)
    if (at < nowMs + EXPIRY.minMs) throw fieldProblem('/expiresAt', 'custom', 'must be at least 5 minutes from now')
    if (at > nowMs + EXPIRY.maxMs) throw fieldProblem('/expiresAt', 'custom', 'must be at most 30 days from now')
    expiresAt = new Date(at).toISOString()
  }
  // Production: a request whose page could not take the money is never made.
  if (configured === false) {
    throw new Problem(
      'payment_provider_not_configured',
      'No payment provider is configured for this client, so its hosted page could not take the money. The operator configures one first.',
    )
  }
  if (!receivable) throw unknownReferences([{ pointer: '/externalReceivableId', what: `Receivable ${receivableId}` }])
  if (body.amount.currency !== receivable.currency) {
    throw fieldProblem('/amount/currency', 'custom', `must be ${receivable.currency}, the Receivable's currency`)
  }
  const amountMinor = toMinor(body.amount.amount)
  // Open requests reserve what they ask: together they never ask for more than the working amount.
  const fit = amountFits(receivable, amountMinor)
  if (!fit.fits) {
    const free = fit.workingMinor > fit.reservedMinor ? fit.workingMinor - fit.reservedMinor : 0n
    const m = (minor: bigint) => describeMoney(minor, receivable.currency)
    // Still 422 validation_error, with a marker code can branch on (docs/decisions.md, "Over-reserving requests").
    const detail = `must not exceed the Receivable's working amount (${m(fit.workingMinor)}) less what its other open requests already reserve (${m(fit.reservedMinor)}): at most ${m(free)}`
    throw new Problem('validation_error', `/amount/amount: the amount exceeds what the Receivable can still reserve: ${detail}`, {
      errors: [{ code: RESERVATION_EXCEEDED, detail, pointer: '/amount/amount' }],
    })
  }
  const holds = holdsFromRow(receivable)
  if (holds.length > 0) throw recoveryHeld(holds)
  // Round trip two: the request's rows, sent ahead with the flush, the render and COMMIT.
  const inserted = uow.send((sending) =>
    insertPaymentRequest(sending, clientCode, id, {
      receivableId,
      currency: receivable.currency,
      amountMinor,
      description: body.description ?? null,
      expiresAt,
      body,
      token: randomBytes(32).toString('base64url'),
      now,
    }),
  )
  uow.appendChange(clientCode, {
    type: 'payment_request.created',
    resourceType: 'payment_request',
    resourceId: id,
    revision: 1,
    occurredAt: now,
  })
  // Rendered from the row the INSERT returned: a request made now has no Payment yet.
  return { status: 201 as const, body: async () => view(tx, clientCode, await inserted, null) }
}

export function createPaymentRequestService(deps: PaymentRequestServiceDeps) {
  const { clock, publicBaseUrl } = deps
  const atClientTime = deps.atClientTime ?? (<T>(_clientCode: string, fn: () => Promise<T>) => fn())
  const { findPayment, findPayments } = deps.payments
  const { paymentRequestNotFound, recordExpiryIfDue } = deps.paymentRules
  /** `payment`: the request's Payment when the caller knows it (null: none yet); read when omitted. */
  async function view(
    db: Queryable,
    clientCode: string,
    row: PaymentRequestRow,
    known?: PaymentRow | null,
  ): Promise<PaymentRequestResponse> {
    const payment = known !== undefined ? known : await findPayment(db, clientCode, row.external_payment_request_id)
    return {
      externalPaymentRequestId: row.external_payment_request_id,
      externalReceivableId: row.external_receivable_id,
      amount: money(BigInt(row.amount_minor), row.currency),
      ...(row.description === null ? {} : { description: row.description }),
      expiresAt: row.expires_at,
      status: row.status,
      ...(row.cancel_reason === null ? {} : { cancelReason: row.cancel_reason }),
      ...(row.cancellation_note === null ? {} : { cancellationNote: row.cancellation_note }),
      hostedUrl: `${publicBaseUrl}/pay/${row.page_token}`,
      revision: Number(row.revision),
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      payment: payment ? paymentView(payment) : null,
    }
  }

  /** The request as it is now, its expiry recorded first if it has passed unrecorded. */
  async function current(uow: UnitOfWork, clientCode: string, id: string): Promise<PaymentRequestRow | undefined> {
    const row = await findPaymentRequest(uow.tx, clientCode, id)
    if (row?.status !== 'open' || !paymentRequestExpired(row.expires_at, clock.now().getTime())) return row
    const locked = await lockPaymentRequest(uow.tx, clientCode, id)
    return locked && recordExpiryIfDue(uow, clientCode, locked, isoNow(clock))
  }

  /** Not a Source write (docs/decisions.md, Payments): it asks the debtor for money; the Source was not heard. */
  const putOperation = defineOperation({
    kind: 'payment_request',
    scopes: ['payment_requests:write'],
    body: PaymentRequestWrite,
    response: PaymentRequestResponse,
    source: false,
    run: (uow: UnitOfWork, { clientCode, id }: OperationContext, body: PaymentRequestWrite) =>
      createRequest(deps, { current, view }, uow, clientCode, id, body),
  })

  /**
   * The GET: the current state. It writes when the request's expiry has passed unrecorded (recorded first, so
   * `open` is never stale), hence a write's transaction and answer (executeWrite); it takes no body.
   */
  const getOperation = defineOperation({
    kind: 'payment_request_read',
    scopes: ['payment_requests:read'],
    body: z.undefined(),
    response: PaymentRequestResponse,
    source: false,
    async run(uow: UnitOfWork, { clientCode, id }: OperationContext) {
      const row = await current(uow, clientCode, id)
      if (!row) throw paymentRequestNotFound(id)
      return { status: 200 as const, body: () => view(uow.tx, clientCode, row) }
    },
  })

  /**
   * The list (GET /payment-requests): a page newest first, each item exactly as its GET answers it. Like the GET it
   * records an expiry that has passed unrecorded, for the requests on the page only (a bounded write: at most
   * `limit`, locked in page order), so a listed request is never `open` past its expiresAt; the status filter
   * judges expiry at the same instant (store.ts, listPaymentRequests). The Payments of the page are read in one
   * statement. A list names no resource: `ctx.id` is unused.
   */
  const listOperation = defineOperation({
    kind: 'payment_request_list',
    scopes: ['payment_requests:read'],
    body: PaymentRequestListQuery,
    response: PaymentRequestList,
    source: false,
    async run(uow: UnitOfWork, { clientCode }: OperationContext, q: PaymentRequestListQuery) {
      const { tx } = uow
      const after = readNewestFirstCursor('payment-requests', q.cursor)
      const now = isoNow(clock)
      const nowMs = Date.parse(now)
      const rows = await listPaymentRequests(tx, clientCode, {
        after,
        receivableId: q.externalReceivableId,
        status: q.status,
        now,
        limit: q.limit + 1,
      })
      const { page, nextCursor } = newestFirstPage('payment-requests', rows, q.limit, (r) => r.external_payment_request_id)
      const current: PaymentRequestRow[] = []
      for (const row of page) {
        if (row.status !== 'open' || !paymentRequestExpired(row.expires_at, nowMs)) current.push(row)
        else {
          const locked = await lockPaymentRequest(tx, clientCode, row.external_payment_request_id)
          current.push(locked ? await recordExpiryIfDue(uow, clientCode, locked, now) : row)
        }
      }
      const payments = await findPayments(
        tx,
        clientCode,
        current.map((r) => r.external_payment_request_id),
      )
      return {
        status: 200 as const,
        body: async () => ({
          data: await Promise.all(current.map((r) => view(tx, clientCode, r, payments.get(r.external_payment_request_id) ?? null))),
          nextCursor,
        }),
      }
    },
  })

  const { confirmOperation } = createSandboxSettlement(deps, view)

  /**
   * The integrator's cancel: an open request becomes canceled (`requested`), with the reason it gave kept as its
   * cancellationNote; a canceled one answers as it stands (200, unchanged); any other status is 409. Locks the
   * request first, as every state change of a request does, so a cancel and a confirmation run one after the other.
   */
  const cancelOperation = defineOperation({
    kind: 'payment_request_cancel',
    scopes: ['payment_requests:write'],
    body: PaymentRequestCancel,
    response: PaymentRequestResponse,
    source: false,
    async run(uow: UnitOfWork, { clientCode, id }: OperationContext, body: PaymentRequestCancel) {
      const { tx } = uow
      const now = isoNow(clock)
      const locked = await lockPaymentRequest(tx, clientCode, id)
      if (!locked) throw paymentRequestNotFound(id)
      const row = await recordExpiryIfDue(uow, clientCode, locked, now)
      if (row.status === 'canceled') return { status: 200 as const, body: () => view(tx, clientCode, row) }
      if (row.status !== 'open') {
        throw new Problem('payment_request_state_conflict', `The Payment request is ${row.status}; only an open request can be canceled.`, {
          extensions: { paymentRequestStatus: row.status },
        })
      }
      // Sent ahead with the flush: the row is locked, so its next revision is known without the answer.
      const canceled = uow.send((sending) => cancelPaymentRequest(sending, clientCode, id, 'requested', body.reason ?? null, now))
      uow.appendChange(clientCode, {
        type: 'payment_request.canceled',
        resourceType: 'payment_request',
        resourceId: id,
        revision: Number(row.revision) + 1,
        occurredAt: now,
      })
      // Its open session at the provider is ended after COMMIT, so the debtor can no longer pay it.
      const onCanceled = deps.onCanceled
      return {
        status: 200 as const,
        body: async () => view(tx, clientCode, await canceled, null),
        ...(onCanceled ? { afterCommit: () => onCanceled(clientCode) } : {}),
      }
    },
  })

  return {
    /** PUT: 201 created, 200 identical retry (the current state). */
    putOperation,
    getOperation,
    listOperation,
    confirmOperation,
    cancelOperation,

    receiptDelivery: createReceiptDeliveryRead(deps),
    ...createHostedPage({
      ...deps,
      settle: (row, outcome) =>
        atClientTime(row.client_code, async () => {
          const ctx = { clientCode: row.client_code, grant: null, id: row.external_payment_request_id }
          await executeWrite(deps, confirmOperation, ctx, { outcome })
        }),
    }),
  }
}

export type PaymentRequestService = ReturnType<typeof createPaymentRequestService>
