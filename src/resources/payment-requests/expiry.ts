import type { Clock } from '../../domain/time.ts'
import type { Store } from '../../store/store.ts'
import type { ClientClocks } from '../client-clocks.ts'
import { inUnitOfWork } from '../unit-of-work.ts'
import { clientsWithExpiredRequests, expireDue } from './store.ts'

/**
 * The expiry rule's sweep: flips open Payment requests past `expiresAt` to `expired`, each with revision + 1 and
 * a `payment_request.expired` event in the same transaction. Work is claimed in bounded chunks with
 * FOR UPDATE SKIP LOCKED (store.ts, expireDue), one transaction per chunk, so several instances can sweep at once
 * without waiting on each other or expiring a request twice, and no transaction grows with the size of the
 * backlog. A read or confirmation that meets an expiry first records it itself (payment-requests/payment-rules.ts,
 * recordExpiryIfDue): the sweep only makes sure the feed hears of requests nobody looks at. Its schedule is the
 * payment expiry worker's (src/workers/payment-expiry.ts).
 *
 * Per client (docs/scaling.md): a read-only search finds the clients with requests past their expiry, then each
 * client is swept on its own, every statement naming it. Per-client clocks (the sandbox): with `sandbox`, the
 * clients on real time are swept first, then each client whose clock is stopped, at its own time. With
 * `clientCode`, only that client is swept, at `clock`'s time (the caller entered the client's scope).
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

/** Sweeps until no due request is left (or `maxChunks` chunks ran per client); returns how many it expired. */
export async function sweepExpiredPaymentRequests(store: Store, clock: Clock, opts: ExpirySweepOptions = {}): Promise<number> {
  const { sandbox } = opts
  if (opts.clientCode !== undefined) return sweepClient(store, clock, opts, opts.clientCode)
  let total = await sweepClients(store, clock, opts, sandbox !== undefined)
  if (!sandbox) return total
  for (const [clientCode, at] of await sandbox.clocks(store)) {
    total += await sandbox.atInstant(at, () => sweepClient(store, sandbox.clock, opts, clientCode))
  }
  return total
}

/** How many clients one search finds (docs/scaling.md: the search across clients, then a pass per client). */
const CLIENTS_PER_SEARCH = 100

/**
 * The clients with requests past their expiry (on real time only, with `realTimeOnly`), each swept on its own;
 * searched again while a search came back full, since the clients found first are swept by then.
 */
async function sweepClients(store: Store, clock: Clock, opts: ExpirySweepOptions, realTimeOnly: boolean): Promise<number> {
  let total = 0
  for (let round = 0; round < (opts.maxChunks ?? 100); round++) {
    const clients = await clientsWithExpiredRequests(store, clock.now().toISOString(), CLIENTS_PER_SEARCH, realTimeOnly)
    for (const clientCode of clients) total += await sweepClient(store, clock, opts, clientCode)
    if (clients.length < CLIENTS_PER_SEARCH) break
  }
  return total
}

/** One client's requests past their expiry, in chunks of one transaction each. */
async function sweepClient(store: Store, clock: Clock, opts: ExpirySweepOptions, clientCode: string): Promise<number> {
  const chunk = opts.chunk ?? PAYMENT_EXPIRY_CHUNK
  const maxChunks = opts.maxChunks ?? 100
  let total = 0
  for (let i = 0; i < maxChunks; i++) {
    const expired = await inUnitOfWork(
      store,
      async (uow) => {
        const now = clock.now().toISOString()
        const rows = await expireDue(uow.tx, clientCode, now, chunk)
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
