import { purgeLimitRows } from '../http/limits.ts'
import type { Queryable } from '../store/store.ts'

export const RETENTION_DAYS = 30

/** Deletes what the service promises to keep only for a while. Idempotent; any instance may run it. */
export async function runRetention(db: Queryable): Promise<void> {
  await purgeLimitRows(db)
  await db.query(`DELETE FROM change_events WHERE occurred_at < now() - make_interval(days => $1)`, [RETENTION_DAYS])
}

export function startRetentionWorker(db: Queryable, onError: (err: unknown) => void, everyMs = 60_000): () => void {
  const timer = setInterval(() => {
    runRetention(db).catch(onError)
  }, everyMs)
  timer.unref()
  return () => clearInterval(timer)
}
