import { purgeLimitRows } from '../../store/gate-store.ts'
import type { Queryable } from '../../store/store.ts'
import type { ClientClocks } from '../client-clocks.ts'
import { purgeClientReceiptDeliveries, purgeReceiptDeliveries } from '../receipts/delivery-store.ts'
import { purgeClientDeliveries, purgeDeliveries } from '../webhooks/delivery-store.ts'
import { feedClients, purgeChangeEvents, purgeClientChangeEvents } from './store.ts'

/**
 * The spec's retention: change-feed events and webhook delivery records (with their attempts) are kept 30 days;
 * so are finished receipt delivery records (delivered or abandoned, counted from their last attempt, with their
 * attempts). A pending receipt is still owed and stays.
 */
export const RETENTION_DAYS = 30

/**
 * Deletes what the service promises to keep only for a while (and the rate-limit windows that have ended).
 * Idempotent; any instance may run it. Its schedule is the retention worker's (src/workers/retention.ts).
 *
 * Per-client clocks (the sandbox): with `sandbox`, each client is purged at its own time (retainClient): its
 * stopped clock's, or the base clock's. A sandbox has few clients; production runs the one set-based statement
 * at the database's time.
 */
export async function runRetention(db: Queryable, sandbox?: ClientClocks): Promise<void> {
  await purgeLimitRows(db)
  if (sandbox) {
    // Real time is the base clock's (tests inject one); each stopped clock's client at its own time.
    const clocks = await sandbox.clocks(db)
    const realNow = sandbox.base.now().toISOString()
    for (const clientCode of await feedClients(db)) {
      await retainClient(db, clientCode, (clocks.get(clientCode) ?? new Date(realNow)).toISOString())
    }
    return
  }
  await purgeChangeEvents(db, RETENTION_DAYS)
  await purgeDeliveries(db, RETENTION_DAYS)
  await purgeReceiptDeliveries(db, RETENTION_DAYS)
}

/** One client's retention at its time `now` (a sandbox clock). Returns how many change events it purged. */
export async function retainClient(db: Queryable, clientCode: string, now: string): Promise<number> {
  const purged = await purgeClientChangeEvents(db, clientCode, now, RETENTION_DAYS)
  await purgeClientDeliveries(db, clientCode, now, RETENTION_DAYS)
  await purgeClientReceiptDeliveries(db, clientCode, now, RETENTION_DAYS)
  return purged
}
