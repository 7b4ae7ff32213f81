import type { Clock } from '../../domain/time.ts'
import type { Store } from '../../store/store.ts'
import type { ClientClocks } from '../client-clocks.ts'
import { inUnitOfWork } from '../unit-of-work.ts'
import { expireDue } from './store.ts'

/**
 * The expiry rule's sweep: flips open Payment requests past `expiresAt` to `expired`, each with revision + 1 and
 * a `payment_request.expired` event in the same transaction. Work is claimed in bounded chunks with
 * FOR UPDATE SKIP LOCKED (store.ts, expireDue), one transaction per chunk, so several instances can sweep at once
 * without waiting on each other or expiring a request twice, and no transaction grows with the size of the
 * backlog. A read or confirmation that meets an expiry first records it itself (payment-requests/payment-rules.ts,
 * recordExpiryIfDue): the sweep only makes sure the feed hears of requests nobody looks at. Its schedule is the
 * payment expiry worker's (src/workers/payment-expiry.ts).
 *
 * Per-client clocks (the sandbox): with `sandbox`, the clients on real time are swept first, then each client whose
 * clock is stopped, at its own time. With `clientCode`, only that client is swept, at `clock`'s time (the caller
 * entered the client's scope).
 */
export const PAYMENT_EXPIRY_CHUNK = 500

export interface ExpirySweepOptions {
  chunk?: number
  maxChunks?: number
  clientCode?: string
  sandbox?: ClientClocks
  /** Told once a chunk that expired requests (and so appended feed events) committed. */
  onFeedAppended?: () => void
}

/** Sweeps until no due request is left (or `maxChunks` chunks ran per pass); returns how many it expired. */
export async function sweepExpiredPaymentRequests(store: Store, clock: Clock, opts: ExpirySweepOptions = {}): Promise<number> {
  const { sandbox } = opts
  if (!sandbox || opts.clientCode !== undefined) return sweepPass(store, clock, opts, { clientCode: opts.clientCode })
  let total = await sweepPass(store, clock, opts, { realTimeOnly: true })
  for (const [clientCode, at] of await sandbox.clocks(store)) {
    total += await sandbox.atInstant(at, () => sweepPass(store, sandbox.clock, opts, { clientCode }))
  }
  return total
}

async function sweepPass(
  store: Store,
  clock: Clock,
  opts: ExpirySweepOptions,
  only: { clientCode?: string | undefined; realTimeOnly?: boolean },
): Promise<number> {
  const chunk = opts.chunk ?? PAYMENT_EXPIRY_CHUNK
  const maxChunks = opts.maxChunks ?? 100
  const filter = only.clientCode !== undefined ? { clientCode: only.clientCode } : only.realTimeOnly ? { realTimeOnly: true } : {}
  let total = 0
  for (let i = 0; i < maxChunks; i++) {
    const expired = await inUnitOfWork(
      store,
      async (uow) => {
        const now = clock.now().toISOString()
        const rows = await expireDue(uow.tx, now, chunk, filter)
        for (const r of rows) {
          uow.appendChange(r.client_code, {
            type: 'payment_request.expired',
            resourceType: 'payment_request',
            resourceId: r.id,
            revision: r.revision,
            occurredAt: now,
          })
        }
        return rows.length
        // Told after a chunk that expired requests (and so appended feed events) committed.
      },
      opts.onFeedAppended,
    )
    total += expired
    if (expired < chunk) break
  }
  return total
}
