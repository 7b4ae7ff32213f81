import { randomUUID } from 'node:crypto'
import type { Clock } from '../domain/time.ts'
import type { PaymentProvider, ProviderRefund } from '../resources/payments/provider.ts'
import { recordRefundOutcome } from '../resources/refunds/rules.ts'
import { type ClaimedRefund, claimRefunds, markRefundAccepted, retryRefundLater } from '../resources/refunds/store.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import type { Store } from '../store/store.ts'
import { createWorker, type Worker } from './worker.ts'

/**
 * The refund worker (docs/decisions.md, "Refunds and reversals"): asks the payment provider for the refunds the API
 * and the confirmations recorded as `pending`, and records each decision.
 *
 * - A turn claims up to `batch` due refunds as a lease (refunds/store.ts, claimRefunds: FOR UPDATE SKIP LOCKED, a
 *   token, an expiry and this instance's holder key), so instances never ask for one refund at once, and a killed
 *   process's claim is taken again once its holder's lock is gone or its lease expires.
 * - The provider is called with no transaction open (a network call holds no connection and no lock), with an
 *   idempotency key derived from the refund's identity: a claim retaken after a crash asks again under the same
 *   key, and the provider answers with the refund it already made, never a second one.
 * - The decision is recorded in one transaction fenced by the claim's token (rules.ts, recordRefundOutcome):
 *   succeeded takes the money back, failed moves nothing; a stale worker's decision changes nothing.
 * - `pending` from the provider (a real provider deciding later) records its refund id; its event decides it.
 * - A provider that does not answer (a throw) is asked again later, backing off from 5 s to 1 h.
 *
 * Leases and attempt times are on the base clock (they coordinate processes); the decision is recorded at the
 * client's time (`atClientTime`, the sandbox clock).
 */
export const REFUND_WORKER_INTERVAL_MS = 5_000
export const REFUND_LEASE_MS = 60_000
const REFUND_BATCH = 20
const BACKOFF_MIN_MS = 5_000
const BACKOFF_MAX_MS = 3_600_000

export interface RefundWorkerOptions {
  store: Store
  /** The base clock: leases and attempt times. */
  clock: Clock
  /** The clock decisions are recorded at (the sandbox's per-client clock); `clock` when absent. */
  clientClock?: Clock
  provider: Pick<PaymentProvider, 'refund'>
  intervalMs?: number
  leaseMs?: number
  batch?: number
  atClientTime?: <T>(clientCode: string, fn: () => Promise<T>) => Promise<T>
  onFeedAppended?: () => void
  onError: (err: unknown) => void
}

/** The provider's idempotency key of a refund: its identity, the same on every attempt. */
export function refundIdempotencyKey(r: Pick<ClaimedRefund, 'client_code' | 'external_payment_request_id' | 'external_refund_id'>): string {
  return `refund/${r.client_code}/${r.external_payment_request_id}/${r.external_refund_id}`
}

export function createRefundWorker(opts: RefundWorkerOptions): Worker {
  const { store, clock, provider } = opts
  const clientClock = opts.clientClock ?? clock
  const leaseMs = opts.leaseMs ?? REFUND_LEASE_MS
  const atClientTime = opts.atClientTime ?? (<T>(_clientCode: string, fn: () => Promise<T>) => fn())

  async function settle(claimed: ClaimedRefund, token: string): Promise<void> {
    const key = {
      clientCode: claimed.client_code,
      requestId: claimed.external_payment_request_id,
      refundId: claimed.external_refund_id,
      token,
    }
    let answer: ProviderRefund
    try {
      answer = await provider.refund({
        clientCode: claimed.client_code,
        externalPaymentRequestId: claimed.external_payment_request_id,
        externalRefundId: claimed.external_refund_id,
        reason: claimed.reason,
        provider: claimed.provider,
        providerPaymentId: claimed.provider_payment_id,
        amountMinor: BigInt(claimed.amount_minor),
        currency: claimed.currency,
        idempotencyKey: refundIdempotencyKey(claimed),
      })
    } catch (err) {
      const backoff = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** Math.min(20, claimed.attempts - 1))
      const next = new Date(clock.now().getTime() + backoff).toISOString()
      await retryRefundLater(store, key, next, (err as Error).message ?? String(err))
      throw err
    }
    if (answer.status === 'pending') {
      await markRefundAccepted(store, key, answer.providerRefundId)
      return
    }
    const decided = { ...answer, status: answer.status }
    await atClientTime(claimed.client_code, () =>
      inUnitOfWork(store, (uow) => recordRefundOutcome(uow, key, decided, clientClock.now().toISOString()), opts.onFeedAppended),
    )
  }

  async function runOnce(): Promise<boolean> {
    const token = randomUUID()
    const now = clock.now()
    const claimed = await claimRefunds(store, {
      token,
      now: now.toISOString(),
      leaseUntil: new Date(now.getTime() + leaseMs).toISOString(),
      limit: opts.batch ?? REFUND_BATCH,
      holder: store.leaseHolder,
    })
    const failures: unknown[] = []
    for (const refund of claimed) {
      try {
        await settle(refund, token)
      } catch (err) {
        failures.push(err)
      }
    }
    // One refund's failure does not stop the others of the turn; each is reported.
    for (const err of failures) opts.onError(err)
    return claimed.length > 0
  }

  return createWorker({
    name: 'refunds',
    intervalMs: opts.intervalMs ?? REFUND_WORKER_INTERVAL_MS,
    repeatWhileWorking: true,
    runOnce,
    onError: opts.onError,
  })
}
