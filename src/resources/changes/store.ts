import type { Queryable } from '../../store/store.ts'
import type { ResourceType } from '../feed/store.ts'

/** The change feed's read side; its write side (sequence numbers under the feed-head lock) is src/resources/feed/store.ts. */

export interface EventRow {
  seq: string
  event_id: string
  type: string
  resource_type: string
  resource_id: string
  revision: string
  occurred_at: string
}

/** The last sequence number the retention purged for the client (0 when none was). */
export async function purgedThrough(db: Queryable, clientCode: string): Promise<bigint> {
  const rows = await db.query<{ purged_through_seq: string }>('SELECT purged_through_seq FROM feed_heads WHERE client_code = $1', [
    clientCode,
  ])
  return BigInt(rows[0]?.purged_through_seq ?? '0')
}

/** Up to `limit` events after `after`, of these resource types, in sequence order. */
export async function eventsAfter(
  db: Queryable,
  clientCode: string,
  after: string,
  types: readonly ResourceType[],
  limit: number,
): Promise<EventRow[]> {
  return db.query<EventRow>(
    `SELECT seq, event_id, type, resource_type, resource_id, revision, occurred_at FROM change_events
      WHERE client_code = $1 AND seq > $2 AND resource_type = ANY($3::text[]) ORDER BY seq LIMIT $4`,
    [clientCode, after, types, limit],
  )
}
