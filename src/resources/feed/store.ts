import type { Tx } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'

export const RESOURCE_TYPES = [
  'customer',
  'receivable',
  'payment_observation',
  'payment_request',
  'payment',
  'payment_reconciliation',
  'refund',
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
  'payment_request.canceled',
  'payment.confirmed',
  'payment.failed',
  'payment.reversed',
  'payment.reinstated',
  'refund.created',
  'refund.succeeded',
  'refund.failed',
  'payment_reconciliation.matched',
  'payment_reconciliation.held',
  'payment_reconciliation.resolved',
] as const
export type ChangeType = (typeof CHANGE_TYPES)[number]

/**
 * Who made a change (migration 0038): an Integration's request (`ref`: its API key id), an operator, a payment
 * provider (`ref`: the provider), or the service itself (a worker). Recorded on each feed row; the timeline shows it.
 */
export interface ChangeActor {
  type: 'integration' | 'operator' | 'provider' | 'service'
  ref?: string
}

export interface ChangeInput {
  type: ChangeType
  resourceType: ResourceType
  resourceId: string
  revision: number
  occurredAt: string
}

/** The feed append runs on every write with a text that never varies: prepared (`QueryOptions.prepared`). */
const PREPARED = { prepared: true } as const

/** The events, numbered under the client's feed head row lock. */
const APPEND = `WITH head AS (
       INSERT INTO feed_heads (client_code, last_seq) VALUES ($1, $2)
       ON CONFLICT (client_code) DO UPDATE SET last_seq = feed_heads.last_seq + $2
       RETURNING last_seq - $2 AS base)
     INSERT INTO change_events (client_code, seq, event_id, type, resource_type, resource_id, revision, occurred_at,
                                actor_type, actor_ref)
     SELECT $1, head.base + c.n, gen_random_uuid(), c.type, c.resource_type, c.resource_id, c.revision, c.occurred_at,
            $8, $9
       FROM head, unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::timestamptz[]) WITH ORDINALITY
            AS c(type, resource_type, resource_id, revision, occurred_at, n)`

/** The Receivables a write gave a new revision, brought up to the client's last client-wide fact. */
const CAUGHT_UP = `UPDATE receivables r SET client_fact_seq = h.last_seq
       FROM client_fact_heads h
      WHERE h.client_code = $1 AND r.client_code = $1 AND r.external_receivable_id = ANY($2::text[])
        AND r.client_fact_seq < h.last_seq`

/**
 * CAUGHT_UP for one Receivable (a Source write of one; most are), prepared: an equality on the primary key, so the
 * plan PostgreSQL keeps for it, generic or custom, is the key probe whatever the statistics were when it was made
 * (the list form, unprepared, is planned at every write: 81 µs of planning to 22 of execution).
 */
const CAUGHT_UP_ONE = `UPDATE receivables r SET client_fact_seq = h.last_seq
       FROM client_fact_heads h
      WHERE h.client_code = $1 AND r.client_code = $1 AND r.external_receivable_id = $2
        AND r.client_fact_seq < h.last_seq`

/**
 * Change-feed events are buffered by the write's unit of work (src/resources/unit-of-work.ts) and appended here
 * in one statement per client just before COMMIT (and one more when it has Receivables, below). Sequence numbers are handed out under the per-client head
 * row lock, so seq order is commit order.
 *
 * Many events in one statement: the head advances by n and the rows take the n numbers in order. The columns
 * are built in one pass over the events (no per-event copy of anything: linear in the number of events).
 *
 * The statement sent right after it brings the Receivables these events give a new revision up to the client's
 * last client-wide fact (`client_fact_seq`, migration 0013): the new revision includes every collection toggle and
 * freshness flip committed before it, so the background fan-out (src/workers/client-fanout.ts) skips them. Two
 * statements, not one: the append is prepared and runs on its generic plan (it reads no table but the head by its
 * key), while the update, whose generic plan once picked the status index on small tables (docs/decisions.md,
 * "Per-identity lookups in prepared statements"), stays unprepared for several Receivables (CAUGHT_UP_ONE, prepared,
 * for one) and runs only when there are Receivables; as one
 * unprepared statement the two were planned afresh at every write (150 µs of planning to 180 of execution).
 */
export async function insertChanges(
  tx: Tx,
  clientCode: string,
  changes: readonly ChangeInput[],
  actor: ChangeActor = { type: 'service' },
): Promise<void> {
  if (changes.length === 0) return
  const n = changes.length
  const types = new Array<string>(n)
  const resourceTypes = new Array<string>(n)
  const resourceIds = new Array<string>(n)
  const revisions = new Array<number>(n)
  const occurredAts = new Array<string>(n)
  const receivables: string[] = []
  for (let i = 0; i < n; i++) {
    const c = changes[i] as ChangeInput
    types[i] = c.type
    resourceTypes[i] = c.resourceType
    resourceIds[i] = c.resourceId
    revisions[i] = c.revision
    occurredAts[i] = c.occurredAt
    if (c.resourceType === 'receivable') receivables.push(c.resourceId)
  }
  // Sent together, the append first (it takes the client's feed head lock): one round trip, no answer awaited between.
  const appended = tx.query(
    APPEND,
    [clientCode, n, types, resourceTypes, resourceIds, revisions, occurredAts, actor.type, actor.ref ?? null],
    PREPARED,
  )
  const caughtUp =
    receivables.length === 0
      ? null
      : receivables.every((id) => id === receivables[0])
        ? tx.query(CAUGHT_UP_ONE, [clientCode, receivables[0]], PREPARED)
        : tx.query(CAUGHT_UP, [clientCode, receivables])
  await answersInOrder(caughtUp ? [appended, caughtUp] : [appended])
}
