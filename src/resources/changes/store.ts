import { randomUUID } from 'node:crypto'
import type { Tx } from '../../store/store.ts'

export type ResourceType = 'customer' | 'receivable' | 'payment_observation'

export interface ChangeInput {
  type: string
  resourceType: ResourceType
  resourceId: string
  revision: number
  occurredAt: string
}

/**
 * Appends one change-feed event in the caller's transaction. The per-client head row stays locked until
 * commit, so sequence numbers are handed out in commit order: a reader paging by `seq` never sees a
 * later number before an earlier one commits. Call it as the last write of a transaction to keep that
 * lock short.
 */
export async function appendChange(tx: Tx, clientCode: string, change: ChangeInput): Promise<string> {
  const eventId = randomUUID()
  await tx.query(
    `WITH head AS (
       INSERT INTO feed_heads (client_code, last_seq) VALUES ($1, 1)
       ON CONFLICT (client_code) DO UPDATE SET last_seq = feed_heads.last_seq + 1
       RETURNING last_seq)
     INSERT INTO change_events (client_code, seq, event_id, type, resource_type, resource_id, revision, occurred_at)
     SELECT $1, last_seq, $2, $3, $4, $5, $6, $7 FROM head`,
    [clientCode, eventId, change.type, change.resourceType, change.resourceId, change.revision, change.occurredAt],
  )
  return eventId
}

/** Many events in one statement: the head advances by n and the rows take the n numbers in order. */
export async function appendChanges(tx: Tx, clientCode: string, changes: ChangeInput[]): Promise<void> {
  if (changes.length === 0) return
  await tx.query(
    `WITH head AS (
       INSERT INTO feed_heads (client_code, last_seq) VALUES ($1, $2)
       ON CONFLICT (client_code) DO UPDATE SET last_seq = feed_heads.last_seq + $2
       RETURNING last_seq - $2 AS base)
     INSERT INTO change_events (client_code, seq, event_id, type, resource_type, resource_id, revision, occurred_at)
     SELECT $1, head.base + c.n, gen_random_uuid(), c.type, c.resource_type, c.resource_id, c.revision, c.occurred_at
       FROM head, unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::timestamptz[]) WITH ORDINALITY
            AS c(type, resource_type, resource_id, revision, occurred_at, n)`,
    [
      clientCode,
      changes.length,
      changes.map((c) => c.type),
      changes.map((c) => c.resourceType),
      changes.map((c) => c.resourceId),
      changes.map((c) => c.revision),
      changes.map((c) => c.occurredAt),
    ],
  )
}
