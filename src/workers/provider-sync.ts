import type { ProviderSync } from '../resources/payments/provider-sync.ts'
import { clientsWithProvider } from '../resources/payments/sync-store.ts'
import type { Store } from '../store/store.ts'
import { createWorker, type Worker } from './worker.ts'

/**
 * The catch-up sweep's schedule (PROVIDER_SYNC_INTERVAL_SECONDS, default 300; 0: no worker): every client with a
 * provider configured, one after the other, each through `ProviderSync.sync` (its lease per client keeps two
 * instances from sweeping one client at once). One client's failure (its provider not answering) is reported and the
 * others are still swept.
 */
export interface ProviderSyncWorkerOptions {
  store: Store
  sync: Pick<ProviderSync, 'sync'>
  intervalSeconds: number
  onError: (err: unknown) => void
}

export function createProviderSyncWorker(opts: ProviderSyncWorkerOptions): Worker | null {
  if (opts.intervalSeconds === 0) return null
  const intervalMs = opts.intervalSeconds * 1000
  return createWorker({
    name: 'provider-sync',
    intervalMs,
    firstTurnAfterMs: intervalMs,
    runOnce: async () => {
      for (const clientCode of await clientsWithProvider(opts.store)) {
        try {
          await opts.sync.sync(clientCode)
        } catch (err) {
          opts.onError(err)
        }
      }
      return false
    },
    onError: opts.onError,
  })
}
