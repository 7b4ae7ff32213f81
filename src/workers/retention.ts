import { purgeLimitRows } from '../http/limits.ts'
import type { SandboxClock } from '../resources/sandbox-clock/clock.ts'
import { purgeClientDeliveries, purgeDeliveries } from '../resources/webhooks/store.ts'
import type { Queryable } from '../store/store.ts'

export const RETENTION_DAYS = 30

/**
 * Deletes what the service promises to keep only for a while. Idempotent; any instance may run it.
 * Purging change events raises the client's purge watermark in the same statement, so a cursor older
 * than the watermark answers 410 cursor_expired instead of silently skipping events. Webhook delivery
 * records (and their attempts) are kept 30 days too.
 *
 * Sandbox clocks (src/resources/sandbox-clock): with `sandbox`, each client is purged at its own time
 * (retainClient): its stopped clock's, or the base clock's. A sandbox has few clients; production runs the
 * one set-based statement at the database's time.
 */
export async function runRetention(db: Queryable, sandbox?: SandboxClock): Promise<void> {
  await purgeLimitRows(db)
  if (sandbox) {
    // Real time is the base clock's (tests inject one); each stopped clock's client at its own time.
    const clocks = await sandbox.clocks(db)
    const realNow = sandbox.base.now().toISOString()
    for (const { client_code } of await db.query<{ client_code: string }>('SELECT client_code FROM feed_heads')) {
      await retainClient(db, client_code, (clocks.get(client_code) ?? new Date(realNow)).toISOString())
    }
    return
  }
  await db.query(
    `WITH purged AS (
       DELETE FROM change_events WHERE occurred_at < now() - make_interval(days => $1) RETURNING client_code, seq),
     marks AS (SELECT client_code, max(seq) AS max_seq FROM purged GROUP BY client_code)
     UPDATE feed_heads h SET purged_through_seq = GREATEST(h.purged_through_seq, m.max_seq)
       FROM marks m WHERE h.client_code = m.client_code`,
    [RETENTION_DAYS],
  )
  await purgeDeliveries(db, RETENTION_DAYS)
}

/** One client's retention at its time `now` (a sandbox clock). Returns how many change events it purged. */
export async function retainClient(db: Queryable, clientCode: string, now: string): Promise<number> {
  const rows = await db.query<{ purged: string }>(
    `WITH purged AS (
       DELETE FROM change_events WHERE client_code = $1 AND occurred_at < $2::timestamptz - make_interval(days => $3)
       RETURNING seq),
     mark AS (UPDATE feed_heads h SET purged_through_seq = GREATEST(h.purged_through_seq, (SELECT max(seq) FROM purged))
               WHERE h.client_code = $1 AND EXISTS (SELECT 1 FROM purged))
     SELECT count(*) AS purged FROM purged`,
    [clientCode, now, RETENTION_DAYS],
  )
  await purgeClientDeliveries(db, clientCode, now, RETENTION_DAYS)
  return Number(rows[0]?.purged ?? 0)
}

export function startRetentionWorker(db: Queryable, onError: (err: unknown) => void, everyMs = 60_000, sandbox?: SandboxClock): () => void {
  const timer = setInterval(() => {
    runRetention(db, sandbox).catch(onError)
  }, everyMs)
  timer.unref()
  return () => clearInterval(timer)
}
