import type { Tx } from '../../store/store.ts'

export const RESOURCE_TYPES = [
  'customer',
  'receivable',
  'payment_observation',
  'payment_request',
  'payment',
  'payment_reconciliation',
] as const
export type ResourceType = (typeof RESOURCE_TYPES)[number]

/** Every change-feed event type, by the resource it concerns. Published as an enum in OpenAPI. */
export const CHANGE_TYPES = [
  'customer.created',
  'customer.updated',
  'receivable.created',
  'receivable.updated',
  'payment_observation.created',
  'payment_request.created',
  'payment_request.confirmed',
  'payment_request.failed',
  'payment_request.expired',
  'payment.confirmed',
  'payment.failed',
  'payment_reconciliation.matched',
  'payment_reconciliation.held',
  'payment_reconciliation.resolved',
] as const
export type ChangeType = (typeof CHANGE_TYPES)[number]

export interface ChangeInput {
  type: ChangeType
  resourceType: ResourceType
  resourceId: string
  revision: number
  occurredAt: string
}

/**
 * Change-feed events are buffered by the write's unit of work (src/resources/unit-of-work.ts) and appended here
 * in one statement per client just before COMMIT. Sequence numbers are handed out under the per-client head
 * row lock, so seq order is commit order.
 */
/** Many events in one statement: the head advances by n and the rows take the n numbers in order. */
export async function insertChanges(tx: Tx, clientCode: string, changes: ChangeInput[]): Promise<void> {
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
