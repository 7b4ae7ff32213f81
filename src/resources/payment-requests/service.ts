import { randomBytes } from 'node:crypto'
import { recordAudit } from '../../admin/store.ts'
import { canonicalJson } from '../../domain/canonical.ts'
import { holdsFromRow } from '../../domain/holds.ts'
import { describeMoney, money, toMinor } from '../../domain/money.ts'
import { fieldProblem, Problem, unknownReferences } from '../../domain/problems.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import type { Grant } from '../../http/auth.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store, Tx } from '../../store/store.ts'
import { appendChange } from '../changes/store.ts'
import type { PaymentProvider } from '../payments/provider.ts'
import { paymentRequestNotFound, recordExpiryIfDue, recoveryHeld, settleInSandbox } from '../payments/service.ts'
import { deliveryAttempts, findPayment, hasHeldReconciliation, matchedMinor, type PaymentRow } from '../payments/store.ts'
import { findReceivable } from '../receivables/store.ts'
import {
  type PaymentRequestResponse,
  type PaymentRequestWrite,
  type ReceiptDelivery,
  PaymentRequestResponse as ResponseSchema,
} from './schema.ts'
import {
  creditorName,
  findPaymentRequest,
  findPaymentRequestByToken,
  insertPaymentRequest,
  lockPaymentRequest,
  type PaymentRequestRow,
} from './store.ts'

const MINUTE_MS = 60_000
const DAY_MS = 86_400_000
/** docs/decisions.md, Payments: the default lifetime of a request and the bounds of a chosen expiresAt. */
export const EXPIRY = { defaultMs: 7 * DAY_MS, minMs: 5 * MINUTE_MS, maxMs: 30 * DAY_MS } as const

/** What the hosted page (page.ts) may show: nothing about the Customer, no money beyond the amount asked. */
export interface HostedPageView {
  state: 'payable' | 'confirmed' | 'failed' | 'expired' | 'held'
  /** clients.name, or the clientCode when the client has no name */
  creditorName: string
  description: string | null
  amount: { amount: string; currency: string }
  expiresAt: string
  /** when the provider decided (confirmed/failed), else null */
  decidedAt: string | null
  /** true when state is 'payable' and the provider offers the sandbox form */
  sandboxForm: boolean
}

export interface PaymentRequestServiceDeps {
  store: Store
  clock: Clock
  provider: PaymentProvider
  /** PUBLIC_BASE_URL without a trailing slash: hostedUrl is absolute. */
  publicBaseUrl: string
}

function paymentView(p: PaymentRow) {
  return {
    status: p.status,
    amount: money(BigInt(p.amount_minor), p.currency),
    allocatedAmount: money(BigInt(p.allocated_minor), p.currency),
    unappliedAmount: money(BigInt(p.unapplied_minor), p.currency),
    provider: p.provider,
    providerPaymentId: p.provider_payment_id,
    decidedAt: p.decided_at,
  }
}

export function createPaymentRequestService({ store, clock, provider, publicBaseUrl }: PaymentRequestServiceDeps) {
  async function view(db: Queryable, clientCode: string, row: PaymentRequestRow): Promise<PaymentRequestResponse> {
    const payment = await findPayment(db, clientCode, row.external_payment_request_id)
    return {
      externalPaymentRequestId: row.external_payment_request_id,
      externalReceivableId: row.external_receivable_id,
      amount: money(BigInt(row.amount_minor), row.currency),
      ...(row.description === null ? {} : { description: row.description }),
      expiresAt: row.expires_at,
      status: row.status,
      hostedUrl: `${publicBaseUrl}/pay/${row.page_token}`,
      revision: Number(row.revision),
      createdAt: row.created_at,
      updatedAt: row.updated_at,
      payment: payment ? paymentView(payment) : null,
    }
  }

  /**
   * The answer of a write, rendered and checked against its schema as the very last work before COMMIT
   * (after the change-feed flush), so it shows exactly what commits and a misfit rolls the write back.
   */
  function answerBeforeCommit(tx: Tx, clientCode: string, id: string, status: 200 | 201) {
    const answer: { status: 200 | 201; body: unknown } = { status, body: undefined }
    tx.beforeCommit(async () => {
      const row = (await findPaymentRequest(tx, clientCode, id)) as PaymentRequestRow
      answer.body = ResponseSchema.parse(await view(tx, clientCode, row))
    }, 'final')
    return answer
  }

  /** The request as it is now, its expiry recorded first if it has passed unrecorded. */
  async function current(tx: Tx, clientCode: string, id: string): Promise<PaymentRequestRow | undefined> {
    const row = await findPaymentRequest(tx, clientCode, id)
    if (row?.status !== 'open' || Date.parse(row.expires_at) > clock.now().getTime()) return row
    const locked = await lockPaymentRequest(tx, clientCode, id)
    return locked && recordExpiryIfDue(tx, clientCode, locked, isoNow(clock))
  }

  async function create(tx: Tx, clientCode: string, id: string, body: PaymentRequestWrite) {
    // The request identity first: concurrent PUTs of one id see each other (one creates, the other retries).
    await lockIdentity(tx, clientCode, 'payment_request', id)
    const existing = await current(tx, clientCode, id)
    if (existing) {
      if (canonicalJson(existing.body) === canonicalJson(body)) return answerBeforeCommit(tx, clientCode, id, 200)
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
    const receivableId = body.externalReceivableId
    await lockIdentity(tx, clientCode, 'receivable', receivableId)
    const receivable = await findReceivable(tx, clientCode, receivableId)
    if (!receivable) throw unknownReferences([{ pointer: '/externalReceivableId', what: `Receivable ${receivableId}` }])
    if (body.amount.currency !== receivable.currency) {
      throw fieldProblem('/amount/currency', 'custom', `must be ${receivable.currency}, the Receivable's currency`)
    }
    const amountMinor = toMinor(body.amount.amount)
    const source = BigInt(receivable.source_amount_minor)
    const confirmed = BigInt(receivable.confirmed_unreconciled_minor)
    const working = source > confirmed ? source - confirmed : 0n
    if (amountMinor > working) {
      throw fieldProblem(
        '/amount/amount',
        'custom',
        `must not exceed the Receivable's working amount (${describeMoney(working, receivable.currency)})`,
      )
    }
    const holds = holdsFromRow(receivable)
    if (holds.length > 0) throw recoveryHeld(holds)
    await insertPaymentRequest(tx, clientCode, id, {
      receivableId,
      currency: receivable.currency,
      amountMinor,
      description: body.description ?? null,
      expiresAt,
      body,
      token: randomBytes(32).toString('base64url'),
      now,
    })
    appendChange(tx, clientCode, {
      type: 'payment_request.created',
      resourceType: 'payment_request',
      resourceId: id,
      revision: 1,
      occurredAt: now,
    })
    return answerBeforeCommit(tx, clientCode, id, 201)
  }

  async function pageRequest(token: string) {
    return findPaymentRequestByToken(store, token)
  }

  return {
    /** PUT: 201 created, 200 identical retry (the current state). */
    put(clientCode: string, id: string, body: PaymentRequestWrite) {
      return store.transaction((tx) => create(tx, clientCode, id, body))
    },

    /** GET: the current state; an expiry that passed unrecorded is recorded first, so `open` is never stale. */
    get(clientCode: string, id: string) {
      return store.transaction(async (tx) => {
        const row = await current(tx, clientCode, id)
        if (!row) throw paymentRequestNotFound(id)
        return view(tx, clientCode, row)
      })
    },

    /** The operator's sandbox confirmation: 201 when it made the Payment, 200 when it was already recorded. */
    simulate(clientCode: string, id: string, outcome: 'confirmed' | 'failed') {
      return store.transaction(async (tx) => {
        const now = isoNow(clock)
        const recorded = await settleInSandbox(tx, provider, clientCode, id, outcome, now)
        // An operator made money move (in the sandbox): the audit trail says who decided the outcome.
        if (recorded.created) {
          await recordAudit(tx, {
            action: 'payment_request.simulated',
            clientCode,
            targetType: 'payment_request',
            targetId: id,
            details: { outcome },
            change: { outcome },
            occurredAt: now,
          })
        }
        return answerBeforeCommit(tx, clientCode, id, recorded.created ? 201 : 200)
      })
    },

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
      const unmatched = allocated > matched ? allocated - matched : 0n
      const held = await hasHeldReconciliation(store, clientCode, id)
      const status = held ? 'held' : matched === 0n ? 'pending' : matched >= allocated ? 'acknowledged' : 'partially_acknowledged'
      const attempts = await deliveryAttempts(store, clientCode, id)
      return {
        externalPaymentRequestId: id,
        deliveryOwner: grant.receiptDeliveryOwner,
        // No delivery route is verified today, whoever owns delivery: the service makes no attempt.
        capability: {
          state: 'disabled',
          disabledReason: 'no_verified_route',
          unverifiedRoutes: [{ route: 'vendor_receipt_posting', missingProof: 'source_posting_confirmation' }],
        },
        deliveryAttempts: attempts.map((a) => ({ attempt: a.attempt, route: a.route, outcome: a.outcome, attemptedAt: a.attempted_at })),
        acknowledgement: {
          status,
          allocatedAmount: money(allocated, payment.currency),
          matchedAmount: money(matched, payment.currency),
          unmatchedAmount: money(unmatched, payment.currency),
        },
      }
    },

    /** The hosted page's view, by its token only; undefined for an unknown token. Records a passed expiry first. */
    async pageView(token: string): Promise<HostedPageView | undefined> {
      const ref = await pageRequest(token)
      if (!ref) return undefined
      return store.transaction(async (tx) => {
        const row = (await current(tx, ref.client_code, ref.id)) as PaymentRequestRow
        const payment = await findPayment(tx, ref.client_code, ref.id)
        let state: HostedPageView['state'] = row.status === 'open' ? 'payable' : row.status
        if (state === 'payable') {
          const receivable = await findReceivable(tx, ref.client_code, row.external_receivable_id)
          if (!receivable || holdsFromRow(receivable).length > 0) state = 'held'
        }
        return {
          state,
          creditorName: await creditorName(tx, ref.client_code),
          description: row.description,
          amount: money(BigInt(row.amount_minor), row.currency),
          expiresAt: row.expires_at,
          decidedAt: payment?.decided_at ?? null,
          sandboxForm: state === 'payable' && provider.offersSandboxForm,
        }
      })
    },

    /**
     * The hosted page's sandbox form. Throws a Problem: payment_request_not_found (unknown token),
     * recovery_held, payment_request_state_conflict; route_not_found when the provider offers no form.
     */
    async settleFromPage(token: string, outcome: 'confirmed' | 'failed'): Promise<void> {
      if (!provider.offersSandboxForm) throw new Problem('route_not_found', 'No payment provider form is offered by this deployment.')
      const ref = await pageRequest(token)
      if (!ref) throw new Problem('payment_request_not_found', 'No Payment request at this address.')
      await store.transaction((tx) => settleInSandbox(tx, provider, ref.client_code, ref.id, outcome, isoNow(clock)))
    },
  }
}

export type PaymentRequestService = ReturnType<typeof createPaymentRequestService>
