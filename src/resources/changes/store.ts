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
 * Change-feed events are buffered per transaction and appended in one statement just before COMMIT.
 * The per-client head row then stays locked only for that last statement, and no transaction ever takes
 * a resource lock after the feed lock (a batch chunk writing many records cannot deadlock with a request).
 * Sequence numbers are handed out under that row lock, so seq order is commit order.
 */
const buffers = new WeakMap<Tx, { clientCode: string; change: ChangeInput }[]>()

export function appendChange(tx: Tx, clientCode: string, change: ChangeInput): void {
  let buffer = buffers.get(tx)
  if (!buffer) {
    const created: { clientCode: string; change: ChangeInput }[] = []
    buffers.set(tx, created)
    buffer = created
    tx.beforeCommit(async () => {
      const byClient = new Map<string, ChangeInput[]>()
      // Appended in place: a write that emits 100,000 events must stay linear (a copy per event was quadratic).
      for (const b of created) {
        const list = byClient.get(b.clientCode)
        if (list) list.push(b.change)
        else byClient.set(b.clientCode, [b.change])
      }
      for (const [client, changes] of [...byClient].sort(([a], [b]) => (a < b ? -1 : 1))) await insertChanges(tx, client, changes)
    }, 'final')
  }
  buffer.push({ clientCode, change })
}

export function appendChanges(tx: Tx, clientCode: string, changes: ChangeInput[]): void {
  for (const c of changes) appendChange(tx, clientCode, c)
}

/** Where the buffer stands (before a savepoint), and dropping what was buffered after it (on rollback to it). */
export function changeMark(tx: Tx): number {
  return buffers.get(tx)?.length ?? 0
}

export function discardChangesAfter(tx: Tx, mark: number): void {
  buffers.get(tx)?.splice(mark)
}

/** Receivables this transaction has already given a new revision (their events are buffered). */
export function receivablesChangedIn(tx: Tx, clientCode: string): Set<string> {
  return new Set(
    (buffers.get(tx) ?? [])
      .filter((b) => b.clientCode === clientCode && b.change.resourceType === 'receivable')
      .map((b) => b.change.resourceId),
  )
}

/** Many events in one statement: the head advances by n and the rows take the n numbers in order. */
async function insertChanges(tx: Tx, clientCode: string, changes: ChangeInput[]): Promise<void> {
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
