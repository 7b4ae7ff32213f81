import { randomUUID } from 'node:crypto'
import type { Clock } from '../../domain/time.ts'
import type { Store } from '../../store/store.ts'
import { checkoutsToSettle, claimReadBack, markCheckoutClosed } from './checkout-store.ts'
import type { PaymentProvider } from './provider.ts'
import type { ProviderEvents } from './provider-events.ts'
import type { ProviderRegistry } from './registry.ts'
import { advanceSync, claimSync, releaseSync } from './sync-store.ts'

/**
 * Catching up with the provider (docs/decisions.md, "Money the provider moved"): what the provider did is recorded
 * even when its event never reached us.
 *
 * - `sync(client)`: the client's provider events after the last one stored (provider_sync_cursors), oldest first, a
 *   page at a time, each through the route's own handling (provider-events.ts `handle`: once per event id, so an event
 *   the route already applied is a duplicate here, and the route and the sweep at once apply it once); the cursor is
 *   stored after each page. Then the client's attempts that need a look: open sessions of a request that can no
 *   longer take money are ended at the provider (so the debtor cannot pay them), and open or processing ones past
 *   their session's expiry are read back. Claimed as a lease per client (one UPDATE-or-INSERT), so two instances
 *   never sweep one client at once; a sweep killed mid-way (kill -9) leaves its lease to expire or its holder's
 *   lock to vanish, and the next sweep reads again from the last stored page: what was applied is a duplicate.
 * - `readBackPage(client, request)`: the page's read-back of the request's latest open or processing attempt, at most
 *   once per READ_BACK_EVERY_MS per attempt (claimed by one UPDATE; no transaction is open while the provider answers).
 * - `closeCheckouts(client)`: only the attempt part of the sweep (after a cancel, after expiries).
 */
export const READ_BACK_EVERY_MS = 5_000
export const SYNC_LEASE_MS = 120_000
const SETTLE_BATCH = 50

export interface ProviderSyncDeps {
  store: Store
  /** The base clock: leases, session expiry, the read-back's pace. */
  realClock: Clock
  registry: Pick<ProviderRegistry, 'forClient'>
  events: Pick<ProviderEvents, 'handle' | 'readBack'>
}

export interface SyncResult {
  eventsRead: number
  eventsApplied: number
  /** False when another sweep of this client held the lease (nothing was read). */
  swept: boolean
}

export function createProviderSync(deps: ProviderSyncDeps) {
  const { store, realClock, registry } = deps

  async function providerOf(clientCode: string): Promise<{ provider: PaymentProvider; since: Date } | null> {
    const choice = await registry.forClient(store, clientCode, { forEvents: true })
    if (choice.kind !== 'configured') return null
    // A first sweep reads from an hour before the configuration was last set (clock differences, a slow PUT).
    return { provider: choice.config.provider, since: new Date(Date.parse(choice.config.updatedAt) - 3_600_000) }
  }

  async function settleCheckouts(clientCode: string, provider: PaymentProvider): Promise<number> {
    const now = realClock.now().toISOString()
    const due = await checkoutsToSettle(store, clientCode, { now, limit: SETTLE_BATCH })
    let applied = 0
    for (const attempt of due) {
      if (attempt.provider !== provider.name) continue
      if (attempt.close) await provider.closeCheckout(attempt.session_id)
      const handled = await deps.events.readBack(provider, clientCode, attempt.session_id)
      if ('applied' in handled && handled.applied) applied++
      // Ended at the provider and still open here (the read-back found it expired or open): the attempt is over.
      if (attempt.close) {
        await markCheckoutClosed(store, clientCode, {
          requestId: attempt.external_payment_request_id,
          sessionId: attempt.session_id,
          now: realClock.now().toISOString(),
        })
      }
    }
    return applied
  }

  return {
    async sync(clientCode: string): Promise<SyncResult> {
      const chosen = await providerOf(clientCode)
      if (!chosen) return { eventsRead: 0, eventsApplied: 0, swept: false }
      const { provider, since } = chosen
      const token = randomUUID()
      const leaseUntil = () => new Date(realClock.now().getTime() + SYNC_LEASE_MS).toISOString()
      const claimed = await claimSync(store, clientCode, {
        provider: provider.name,
        token,
        now: realClock.now().toISOString(),
        leaseUntil: leaseUntil(),
        // Read at each claim: the store's holder is set once its lock is first taken (src/store/lease-holder.ts).
        holder: store.leaseHolder,
      })
      if (!claimed) return { eventsRead: 0, eventsApplied: 0, swept: false }
      let eventsRead = 0
      let eventsApplied = 0
      try {
        const cursor =
          claimed.last_event_id === null ? null : { eventId: claimed.last_event_id, created: Number(claimed.last_event_created ?? 0) }
        for await (const page of provider.eventPages(cursor, since)) {
          for (const event of page.events) {
            eventsRead++
            const handled = await deps.events.handle(provider, clientCode, event)
            if ('applied' in handled && handled.applied) eventsApplied++
          }
          const kept = await advanceSync(store, clientCode, {
            provider: provider.name,
            token,
            eventId: page.cursor.eventId,
            created: page.cursor.created,
            leaseUntil: leaseUntil(),
          })
          // Another sweep took the lease (this one was too slow): it reads on from the last stored page.
          if (!kept) return { eventsRead, eventsApplied, swept: true }
        }
        eventsApplied += await settleCheckouts(clientCode, provider)
      } finally {
        await releaseSync(store, clientCode, { provider: provider.name, token, now: realClock.now().toISOString() })
      }
      return { eventsRead, eventsApplied, swept: true }
    },

    async closeCheckouts(clientCode: string): Promise<void> {
      const chosen = await providerOf(clientCode)
      if (chosen) await settleCheckouts(clientCode, chosen.provider)
    },

    /** The page's read-back; true when it claimed the attempt and asked the provider (the page reads its row again). */
    async readBackPage(clientCode: string, requestId: string): Promise<boolean> {
      const nowMs = realClock.now().getTime()
      const claimed = await claimReadBack(store, clientCode, {
        requestId,
        now: new Date(nowMs).toISOString(),
        notBefore: new Date(nowMs - READ_BACK_EVERY_MS).toISOString(),
      })
      if (!claimed) return false
      const chosen = await providerOf(clientCode)
      if (!chosen || chosen.provider.name !== claimed.provider) return false
      await deps.events.readBack(chosen.provider, clientCode, claimed.session_id)
      return true
    },
  }
}

export type ProviderSync = ReturnType<typeof createProviderSync>
