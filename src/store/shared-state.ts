import type { Queryable } from './store.ts'

/** The database state every instance shares, as /metrics exports it (src/http/metrics.ts). */
export interface SharedStateRow {
  feed_head: string
  batches_queued: string
  batches_running: string
  records_pending: string
  deliveries: Record<string, string | number> | null
  endpoints_lagging: string
}

/**
 * The shared state, in one round trip. Each part is cheap: feed_heads has a row per client; the open batches
 * come from the partial index `batches_open`, their pending records by the primary key's prefix; the webhook
 * deliveries are those kept (30 days, src/workers/retention.ts) and are counted in full, a sequential scan of a
 * table the retention keeps bounded.
 */
const STORE_STATE_SQL = `
SELECT
  (SELECT coalesce(max(last_seq), 0) FROM feed_heads)::text AS feed_head,
  (SELECT count(*) FROM batches WHERE status = 'queued')::text AS batches_queued,
  (SELECT count(*) FROM batches WHERE status = 'running')::text AS batches_running,
  (SELECT count(*) FROM batches b JOIN batch_records r
      ON r.client_code = b.client_code AND r.external_batch_id = b.external_batch_id
    WHERE b.status IN ('queued', 'running') AND r.status = 'pending')::text AS records_pending,
  (SELECT json_object_agg(status, n) FROM (SELECT status, count(*) AS n FROM webhook_deliveries GROUP BY status) d) AS deliveries,
  (SELECT count(*) FROM webhook_endpoints WHERE lagging_since IS NOT NULL)::text AS endpoints_lagging`

export async function readSharedState(db: Pick<Queryable, 'query'>): Promise<SharedStateRow | undefined> {
  const [row] = await db.query<SharedStateRow>(STORE_STATE_SQL)
  return row
}
