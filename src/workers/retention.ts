import { purgeLimitRows } from '../http/limits.ts'
import { purgeDeliveries } from '../resources/webhooks/store.ts'
import type { Queryable } from '../store/store.ts'

export const RETENTION_DAYS = 30

/**
 * Deletes what the service promises to keep only for a while. Idempotent; any instance may run it.
 * Purging change events raises the client's purge watermark in the same statement, so a cursor older
 * than the watermark answers 410 cursor_expired instead of silently skipping events. Webhook delivery
 * records (and their attempts) are kept 30 days too.
 */
export async function runRetention(db: Queryable): Promise<void> {
  await purgeLimitRows(db)
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

export function startRetentionWorker(db: Queryable, onError: (err: unknown) => void, everyMs = 60_000): () => void {
  const timer = setInterval(() => {
    runRetention(db).catch(onError)
  }, everyMs)
  timer.unref()
  return () => clearInterval(timer)
}
