import type { Queryable } from '../../store/store.ts'

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

/**
 * Every client with a feed: the retention's search, read only and across clients (docs/scaling.md, "Exceptions").
 * One row per client, read by its primary key's order.
 */
export async function feedClients(db: Queryable): Promise<string[]> {
  const rows = await db.query<{ client_code: string }>('SELECT client_code FROM feed_heads ORDER BY client_code')
  return rows.map((r) => r.client_code)
}

/** The database's time now: retention's time in production, one clock for every instance. */
export async function databaseNow(db: Queryable): Promise<string> {
  const rows = await db.query<{ now: string }>('SELECT now() AS now')
  return (rows[0] as { now: string }).now
}
