import type { Queryable } from '../../store/store.ts'

/**
 * Deletes change events older than `days` at the database's time, and raises each client's purge watermark in the
 * same statement, so a cursor older than the watermark answers 410 cursor_expired instead of silently skipping
 * events.
 */
export async function purgeChangeEvents(db: Queryable, days: number): Promise<void> {
  await db.query(
    `WITH purged AS (
       DELETE FROM change_events WHERE occurred_at < now() - make_interval(days => $1) RETURNING client_code, seq),
     marks AS (SELECT client_code, max(seq) AS max_seq FROM purged GROUP BY client_code)
     UPDATE feed_heads h SET purged_through_seq = GREATEST(h.purged_through_seq, m.max_seq)
       FROM marks m WHERE h.client_code = m.client_code`,
    [days],
  )
}

/** One client's change events older than `days` at its time `now` (a sandbox clock); returns how many it purged. */
export async function purgeClientChangeEvents(db: Queryable, clientCode: string, now: string, days: number): Promise<number> {
  const rows = await db.query<{ purged: string }>(
    `WITH purged AS (
       DELETE FROM change_events WHERE client_code = $1 AND occurred_at < $2::timestamptz - make_interval(days => $3)
       RETURNING seq),
     mark AS (UPDATE feed_heads h SET purged_through_seq = GREATEST(h.purged_through_seq, (SELECT max(seq) FROM purged))
               WHERE h.client_code = $1 AND EXISTS (SELECT 1 FROM purged))
     SELECT count(*) AS purged FROM purged`,
    [clientCode, now, days],
  )
  return Number(rows[0]?.purged ?? 0)
}

/** Every client with a feed. */
export async function feedClients(db: Queryable): Promise<string[]> {
  const rows = await db.query<{ client_code: string }>('SELECT client_code FROM feed_heads')
  return rows.map((r) => r.client_code)
}
