import { randomBytes } from 'node:crypto'
import { z } from 'zod'
import type { Grant } from '../../access/grants.ts'
import { type BrandingFields, brandingFields } from '../../domain/branding.ts'
import { canonicalJson } from '../../domain/canonical.ts'
import { newestFirstPage, readNewestFirstCursor } from '../../domain/cursor.ts'
import { holdsFromRow } from '../../domain/holds.ts'
import { describeMoney, money, toMinor } from '../../domain/money.ts'
import { paymentRequestExpired, unacknowledgedMinor } from '../../domain/money-rules.ts'
import { fieldProblem, Problem, unknownReferences } from '../../domain/problems.ts'
import { isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable } from '../../store/store.ts'
import { recordAudit } from '../audit/store.ts'
import { catchUpReceivable } from '../holds/client-facts-store.ts'
import { defineOperation, executeWrite, type OperationContext, type RouteDeps } from '../operations.ts'
import type { PaymentProvider } from '../payments/provider.ts'
import type { PaymentRow, PaymentStore } from '../payments/store.ts'
import { receiptDeliveryState } from '../receipts/service.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { type Checkout, type CheckoutAnswer, MIN_TIME_LEFT_MS } from './checkout.ts'
import type { PaymentRules } from './payment-rules.ts'
import {
  PaymentRequestCancel,
  PaymentRequestList,
  PaymentRequestListQuery,
  PaymentRequestResponse,
  PaymentRequestWrite,
  type ReceiptDelivery,
  SimulateOutcome,
} from './schema.ts'
import {
  cancelPaymentRequest,
  findPageRow,
  findPaymentRequest,
  insertPaymentRequest,
  listPaymentRequests,
  lockPayingReceivable,
  lockPaymentRequest,
  type PageRow,
  type PaymentRequestRow,
} from './store.ts'

/** The `errors[].code` of a payment request asking more than its Receivable can still reserve (stable: branch on it). */
export const RESERVATION_EXCEEDED = 'amount_exceeds_reservable'

const MINUTE_MS = 60_000
const DAY_MS = 86_400_000
/** docs/decisions.md, Payments: the default lifetime of a request and the bounds of a chosen expiresAt. */
export const EXPIRY = { defaultMs: 7 * DAY_MS, minMs: 5 * MINUTE_MS, maxMs: 30 * DAY_MS } as const

/** What the hosted page (page.ts) may show: nothing about the Customer, no money beyond the amount asked. */
export interface HostedPageView {
  state: 'payable' | 'confirmed' | 'failed' | 'expired' | 'held' | 'canceled'
  /** Why, when state is 'canceled'; null otherwise. */
  cancelReason: 'requested' | 'balance_changed' | null
  /** clients.name, or the clientCode when the client has no name */
  creditorName: string
  description: string | null
  amount: { amount: string; currency: string }
  expiresAt: string
  /** when the provider decided (confirmed/failed), else null */
  decidedAt: string | null
  /** true when state is 'payable' and the provider offers the sandbox form */
  sandboxForm: boolean
  /** The client's branding (display name, accent colour, support contact, locale), each field null when not set. */
  branding: BrandingFields
  /** The provider's id of the confirmed Payment, shown to the debtor as the confirmation number; else null. */
  confirmationNumber: string | null
  /**
   * Present only when state is 'payable' and the client pays through a real provider (checkout.ts): `pay` (the Pay
   * button sends the debtor to the provider), `pay_again` (the same, after a bank debit that failed), `processing`
   * (a payment is under way: the debtor came back from the
   * provider's page, or a bank debit is being collected; no button), `too_late` (it expires too soon to start a
   * payment online).
   */
  providerCheckout?: 'pay' | 'pay_again' | 'processing' | 'too_late'
  /** When state is 'confirmed' and refunds gave all of it back: the page says it was refunded, not received. */
  refundedInFull: boolean
}

/** `store`, `clock` and `onFeedAppended` (RouteDeps): the hosted page's confirmation runs through executeWrite. */
export interface PaymentRequestServiceDeps extends RouteDeps {
  provider: PaymentProvider
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
  /** Paying through a client's real provider (checkout.ts); absent, every client pays as `provider` says. */
  checkout?: Checkout
  /** The key mode a real provider must have here (test in sandbox, live in production); another is not offered. */
  checkoutMode?: 'test' | 'live'
  /** Told after COMMIT when a confirmation queued the refund of unapplied money: the refund worker asks soon. */
  onRefundQueued?: () => void
  /**
   * The page's read-back (payment-requests/provider-sync.ts readBackPage): asks the provider about the request's open
   * or processing attempt, at most once per 5 s per attempt; true when it asked (the page reads its row again).
   */
  readBack?: (clientCode: string, requestId: string) => Promise<boolean>
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

export function createPaymentRequestService(deps: PaymentRequestServiceDeps) {
  const { store, clock, provider, publicBaseUrl } = deps
  const atClientTime = deps.atClientTime ?? (<T>(_clientCode: string, fn: () => Promise<T>) => fn())
  const { findPayment, findPayments, hasHeldReconciliation, matchedMinor } = deps.payments
  const { amountFits, confirmationOf, payability, paymentRequestNotFound, recordExpiryIfDue, recoveryHeld, settleInSandbox } =
    deps.paymentRules
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

  async function create(uow: UnitOfWork, clientCode: string, id: string, body: PaymentRequestWrite) {
    const { tx } = uow
    // The request identity first: concurrent PUTs of one id see each other (one creates, the other retries).
    await lockIdentity(tx, clientCode, 'payment_request', id)
    const existing = await current(uow, clientCode, id)
    if (existing) {
      // The current state, as `current` left it (an expiry it recorded included).
      if (canonicalJson(existing.body) === canonicalJson(body)) return { status: 200 as const, body: () => view(tx, clientCode, existing) }
      throw new Problem('payment_request_conflict', `Payment request ${id} was already created with a different body.`)
    }
    const nowMs = clock.now().getTime()
    const now = new Date(nowMs).toISOString()
    let expiresAt = new Date(nowMs + EXPIRY.defaultMs).toISOString()
    if (body.expiresAt !== undefined) {
      const at = Date.parse(body.expiresAt)
      if (at < nowMs + EXPIRY.minMs) throw fieldProblem('/expiresAt', 'custom', 'must be at least 5 minutes from now')
      if (at > nowMs + EXPIRY.maxMs) throw fieldProblem('/expiresAt', 'custom', 'must be at most 30 days from now')
      expiresAt = new Date(at).toISOString()
    }
    // Production: a request whose page could not take the money is never made.
    if (deps.hasProvider && !(await deps.hasProvider(tx, clientCode))) {
      throw new Problem(
        'payment_provider_not_configured',
        'No payment provider is configured for this client, so its hosted page could not take the money. The operator configures one first.',
      )
    }
    const receivableId = body.externalReceivableId
    await lockIdentity(tx, clientCode, 'receivable', receivableId)
    // Its holds as they are now: a client-wide change the fan-out has not brought to it yet counts already.
    const caughtUp = await catchUpReceivable(tx, clientCode, receivableId, now)
    if (caughtUp) uow.appendChange(clientCode, caughtUp)
    // Row-locked with what its other open requests reserve: under the identity lock every creation and
    // confirmation of its requests takes, so concurrent creations reserve one after the other.
    const receivable = await lockPayingReceivable(tx, clientCode, receivableId, { id }, now)
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
    const row = await insertPaymentRequest(tx, clientCode, id, {
      receivableId,
      currency: receivable.currency,
      amountMinor,
      description: body.description ?? null,
      expiresAt,
      body,
      token: randomBytes(32).toString('base64url'),
      now,
    })
    uow.appendChange(clientCode, {
      type: 'payment_request.created',
      resourceType: 'payment_request',
      resourceId: id,
      revision: 1,
      occurredAt: now,
    })
    // Rendered from the row the INSERT returned: a request made now has no Payment yet.
    return { status: 201 as const, body: async () => view(tx, clientCode, row, null) }
  }

  /** Not a Source write (docs/decisions.md, Payments): it asks the debtor for money; the Source was not heard. */
  const putOperation = defineOperation({
    kind: 'payment_request',
    scopes: ['payment_requests:write'],
    body: PaymentRequestWrite,
    response: PaymentRequestResponse,
    source: false,
    run: (uow: UnitOfWork, { clientCode, id }: OperationContext, body: PaymentRequestWrite) => create(uow, clientCode, id, body),
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

  /**
   * The payment confirmation through the sandbox provider: the hosted page's form (settleFromPage) and the
   * operator's `simulate` run this one operation. It locks the request once (settleInSandbox) and answers from
   * the rows it holds: 201 when it recorded the Payment, 200 when that outcome was already recorded. When an
   * operator acts, the audit trail says who decided the outcome. Not a Source write.
   */
  /**
   * The sandbox provider's reversal (simulate with outcome `reversed`): payment-rules.ts recordReversal takes the
   * money back at once, under the request's lock; 200 with the request and its Payment as they now are, the audit
   * trail saying which operator reversed how much.
   */
  async function reverse(uow: UnitOfWork, ctx: OperationContext, amount: SimulateOutcome['amount'], now: string) {
    const { clientCode, id } = ctx
    const reversed = await deps.paymentRules.recordReversal(
      uow,
      clientCode,
      id,
      amount && { amountMinor: toMinor(amount.amount), currency: amount.currency },
      now,
    )
    const amountReversed = money(BigInt(reversed.payment.reversed_minor), reversed.payment.currency)
    if (ctx.operator) {
      await recordAudit(uow.tx, {
        action: 'payment_request.simulated',
        clientCode,
        targetType: 'payment_request',
        targetId: id,
        details: { outcome: 'reversed', reversedAmount: amountReversed },
        change: { outcome: 'reversed', reversedAmount: amountReversed },
        occurredAt: now,
      })
    }
    return { status: 200 as const, body: () => view(uow.tx, clientCode, reversed.request, reversed.payment) }
  }

  const confirmOperation = defineOperation({
    kind: 'payment_confirmation',
    scopes: [],
    body: SimulateOutcome,
    response: PaymentRequestResponse,
    source: false,
    async run(uow: UnitOfWork, ctx: OperationContext, { outcome, amount }: SimulateOutcome) {
      const { clientCode, id } = ctx
      const now = isoNow(clock)
      if (outcome === 'reversed') return reverse(uow, ctx, amount, now)
      const recorded = await settleInSandbox(uow, provider, clientCode, id, outcome, now)
      // The pay-time check canceled it: the cancel commits, and the answer shows the request canceled (the
      // simulate route answers 409 from it, the hosted page shows the page).
      if (recorded.canceled) return { status: 200, body: () => view(uow.tx, clientCode, recorded.request, null) }
      // An operator made money move (in the sandbox): the audit trail says who decided the outcome.
      if (recorded.created && ctx.operator) {
        await recordAudit(uow.tx, {
          action: 'payment_request.simulated',
          clientCode,
          targetType: 'payment_request',
          targetId: id,
          details: { outcome },
          change: { outcome },
          occurredAt: now,
        })
      }
      // A Payment with unapplied money has its refund queued (payment-rules.ts): the refund worker asks soon.
      const refundQueued = recorded.created && BigInt(recorded.payment.unapplied_minor) > 0n ? deps.onRefundQueued : undefined
      return {
        status: recorded.created ? 201 : 200,
        body: () => view(uow.tx, clientCode, recorded.request, recorded.payment),
        ...(refundQueued ? { afterCommit: refundQueued } : {}),
      }
    },
  })

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
      const canceled = await cancelPaymentRequest(tx, clientCode, id, 'requested', body.reason ?? null, now)
      uow.appendChange(clientCode, {
        type: 'payment_request.canceled',
        resourceType: 'payment_request',
        resourceId: id,
        revision: Number(canceled.revision),
        occurredAt: now,
      })
      // Its open session at the provider is ended after COMMIT, so the debtor can no longer pay it.
      const onCanceled = deps.onCanceled
      return {
        status: 200 as const,
        body: () => view(tx, clientCode, canceled, null),
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

    async receiptDelivery(clientCode: string, grant: Grant, id: string): Promise<ReceiptDelivery> {
      const row = await findPaymentRequest(store, clientCode, id)
      if (!row) throw paymentRequestNotFound(id)
      const payment = await findPayment(store, clientCode, id)
      if (payment?.status !== 'confirmed') {
        throw new Problem(
          'payment_not_confirmed',
          payment
            ? 'The Payment of this request failed; there is no receipt to deliver.'
            : 'No Payment of this request has been confirmed yet.',
        )
      }
      const allocated = BigInt(payment.allocated_minor)
      const matched = await matchedMinor(store, clientCode, id)
      // Allocated money a refund or reversal took back is not there to acknowledge (payments/take-back.ts).
      const unmatched = unacknowledgedMinor({
        allocatedMinor: allocated,
        takenBackAllocatedMinor: BigInt(payment.taken_back_allocated_minor),
        matchedMinor: matched,
      })
      const held = await hasHeldReconciliation(store, clientCode, id)
      const status = held ? 'held' : matched === 0n ? 'pending' : unmatched === 0n ? 'acknowledged' : 'partially_acknowledged'
      return {
        externalPaymentRequestId: id,
        deliveryOwner: grant.receiptDeliveryOwner,
        // The receipt route's capability as it stands and every delivery attempt (src/resources/receipts/service.ts).
        ...(await receiptDeliveryState(store, grant, id, payment.decided_at)),
        acknowledgement: {
          status,
          allocatedAmount: money(allocated, payment.currency),
          matchedAmount: money(matched, payment.currency),
          unmatchedAmount: money(unmatched, payment.currency),
        },
      }
    },

    /**
     * The hosted page's view, by its token only; undefined for an unknown token. One statement, no transaction
     * (findPageRow): a flood of page reads costs the store one indexed read each, and holds no lock. Whether the
     * request may be paid now is payability(), the decision the page's POST and the operator's simulate make.
     */
    async pageView(token: string, opts: { returnedFrom?: string } = {}): Promise<HostedPageView | undefined> {
      let row = await findPageRow(store, token)
      // An attempt open or processing at the provider: what it says now, settled as its event would (read-back).
      if (
        row?.status === 'open' &&
        row.provider_mode !== null &&
        deps.readBack &&
        (row.checkout_status === 'open' || row.checkout_status === 'processing')
      ) {
        const asked = await deps.readBack(row.client_code, row.external_payment_request_id).catch(() => false)
        if (asked) row = await findPageRow(store, token)
      }
      return row && pageViewOf(row, opts.returnedFrom)
    },

    /**
     * The hosted page's sandbox form. Throws a Problem: payment_request_not_found (unknown token),
     * recovery_held, payment_request_state_conflict; route_not_found when the provider offers no form.
     * A request the page read finds not payable now is refused from that read alone, with no transaction; a
     * payable one is confirmed by confirmOperation, which judges it again under its lock. Both judge with one rule:
     * confirmationOf(payability(...)).
     */
    async settleFromPage(token: string, outcome: 'confirmed' | 'failed'): Promise<CheckoutAnswer | undefined> {
      const row = await findPageRow(store, token)
      // A client with a real provider pays at the provider (checkout.ts); its page offers no "failed" button.
      if (row && row.provider_mode !== null && deps.checkout) {
        return outcome === 'confirmed' ? deps.checkout.pay(token, row) : { redirect: `/pay/${token}` }
      }
      if (!provider.offersSandboxForm) throw new Problem('route_not_found', 'No payment provider form is offered by this deployment.')
      if (!row) throw new Problem('payment_request_not_found', 'No Payment request at this address.')
      // The same outcome again is no refusal: the Payment it asks for exists (post/redirect/get shows it).
      if (confirmationOf(payability(row, holdsFromRow(row), nowOf(row)), outcome) === 'already') return undefined
      const ctx = { clientCode: row.client_code, grant: null, id: row.external_payment_request_id }
      // A request the pay-time check cancels (balance_changed) is no refusal either: the cancel commits, and the
      // page (post/redirect/get) says the balance changed and nothing was charged.
      await atClientTime(row.client_code, () => executeWrite(deps, confirmOperation, ctx, { outcome }))
      return undefined
    },
  }

  /** The client's time for the page: its sandbox clock's instant when stopped, else now (always in production). */
  function nowOf(row: PageRow): number {
    return row.frozen_at !== null ? Date.parse(row.frozen_at) : clock.now().getTime()
  }

  function pageViewOf(row: PageRow, returnedFrom?: string): HostedPageView {
    const state = payability(row, holdsFromRow(row), nowOf(row)).state
    const checkout = state === 'payable' && row.provider_mode !== null && deps.checkout ? providerCheckoutOf(row, returnedFrom) : undefined
    return {
      state,
      cancelReason: state === 'canceled' ? row.cancel_reason : null,
      creditorName: row.creditor_name,
      description: row.description,
      amount: money(BigInt(row.amount_minor), row.currency),
      expiresAt: row.expires_at,
      decidedAt: row.decided_at,
      sandboxForm: state === 'payable' && provider.offersSandboxForm && row.provider_mode === null,
      branding: brandingFields(row.branding),
      confirmationNumber: state === 'confirmed' ? row.provider_payment_id : null,
      refundedInFull: state === 'confirmed' && row.refunded_minor !== null && BigInt(row.refunded_minor) >= BigInt(row.amount_minor),
      ...(checkout ? { providerCheckout: checkout } : {}),
    }
  }

  /**
   * What the page offers a payable request of a client with a real provider: processing while a bank debit is being
   * collected, or when the debtor came back from the provider's page of the latest attempt (`?checkout=<session>`)
   * before its event arrived; too late within MIN_TIME_LEFT_MS of the request's expiry; else the Pay button.
   */
  function providerCheckoutOf(row: PageRow, returnedFrom: string | undefined): NonNullable<HostedPageView['providerCheckout']> {
    if (row.checkout_status === 'processing' || row.checkout_status === 'complete') return 'processing'
    if (returnedFrom !== undefined && returnedFrom === row.checkout_session_id && row.checkout_status === 'open') return 'processing'
    // Not this deployment's mode (a database copied between environments): the Pay button, whose POST refuses.
    if (deps.checkoutMode !== undefined && row.provider_mode !== deps.checkoutMode) return 'pay'
    if (Date.parse(row.expires_at) - nowOf(row) < MIN_TIME_LEFT_MS) return 'too_late'
    return row.checkout_status === 'failed' ? 'pay_again' : 'pay'
  }
}

export type PaymentRequestService = ReturnType<typeof createPaymentRequestService>
