import { purgeLimitRows } from '../../store/gate-store.ts'
import type { Queryable } from '../../store/store.ts'
import type { ClientClocks } from '../client-clocks.ts'
import { purgeClientReceiptDeliveries } from '../receipts/delivery-store.ts'
import { purgeClientDeliveries } from '../webhooks/delivery-store.ts'
import { databaseNow, feedClients, purgeClientChangeEvents } from './store.ts'

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
 * Client by client (retainClient), so that every statement that deletes names one client (docs/scaling.md): the
 * clients are found by one read of feed_heads, the worker's named read across clients. Each client is purged at
 * its own time: with `sandbox`, its stopped clock's or the base clock's; in production the database's time, read
 * once per run.
 */
export async function runRetention(db: Queryable, sandbox?: ClientClocks): Promise<void> {
  await purgeLimitRows(db)
  const clocks = sandbox ? await sandbox.clocks(db) : new Map<string, Date>()
  // Real time is the base clock's (tests inject one) in a sandbox, the database's in production.
  const realNow = sandbox ? sandbox.base.now().toISOString() : await databaseNow(db)
  for (const clientCode of await feedClients(db)) {
    await retainClient(db, clientCode, clocks.get(clientCode)?.toISOString() ?? realNow)
  }
}

/** One client's retention at its time `now` (a sandbox clock). Returns how many change events it purged. */
export async function retainClient(db: Queryable, clientCode: string, now: string): Promise<number> {
  const purged = await purgeClientChangeEvents(db, clientCode, now, RETENTION_DAYS)
  await purgeClientDeliveries(db, clientCode, now, RETENTION_DAYS)
  await purgeClientReceiptDeliveries(db, clientCode, now, RETENTION_DAYS)
  return purged
}
