import type { Clock } from '../domain/time.ts'
import type { ClientClocks } from '../resources/client-clocks.ts'
import { sweepExpiredPaymentRequests } from '../resources/payment-requests/expiry.ts'
import type { Store } from '../store/store.ts'
import { createWorker, type Worker } from './worker.ts'

/** How often the expiry of open Payment requests nobody reads is recorded (the rule: payment-requests/expiry.ts). */
export const PAYMENT_EXPIRY_SWEEP_MS = 30_000

export interface PaymentExpiryWorkerOptions {
  store: Store
  clock: Clock
  /** Sandbox: each client at its own time. */
  sandbox?: ClientClocks | undefined
  intervalMs?: number
  onFeedAppended?: () => void
  onError: (err: unknown) => void
}

/** The payment expiry worker: the sweep every 30 s, the first one 30 s after start. */
export function createPaymentExpiryWorker(opts: PaymentExpiryWorkerOptions): Worker {
  const intervalMs = opts.intervalMs ?? PAYMENT_EXPIRY_SWEEP_MS
  return createWorker({
    name: 'payment-expiry',
    intervalMs,
    firstTurnAfterMs: intervalMs,
    runOnce: async () =>
      (await sweepExpiredPaymentRequests(opts.store, opts.clock, {
        ...(opts.sandbox ? { sandbox: opts.sandbox } : {}),
        ...(opts.onFeedAppended ? { onFeedAppended: opts.onFeedAppended } : {}),
      })) > 0,
    onError: opts.onError,
  })
}
