import { z } from 'zod'
import type { Grant } from '../../access/grants.ts'
import { encodeCursor, readCursor, seqCursor } from '../../domain/cursor.ts'
import { Problem } from '../../domain/problems.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store } from '../../store/store.ts'
import { defineOperation, grantOf } from '../operations.ts'
import { MANAGE } from './endpoint-service.ts'
import { answer, enabledEndpoint, existingEndpoint } from './endpoint-shared.ts'
import { NoBody, WebhookDelivery } from './schema.ts'
import { attemptsOf, type DeliveryRow, findDelivery, findPendingPing, insertPing, listDeliveries, requeueDelivery } from './store.ts'

/** The delivery log's cursor (a delivery's sequence number, from 1, and its id). */
const DeliveryCursor = seqCursor(0n).extend({ d: z.string().regex(/^dlv_[0-9a-f]{32}$/) })

/** The delivery log, for the endpoint's Integration: the list, a retry of one delivery, and a ping. */
export function createDeliveryLogService({
  store,
  clock,
  backlogLimit,
  onQueued,
}: {
  store: Store
  clock: Clock
  backlogLimit: number
  onQueued?: (() => void) | undefined
}) {
  /** The delivery log's word on a lagging endpoint. */
  const laggingView = (since: string | null) =>
    since === null
      ? null
      : {
          since,
          backlogLimit,
          detail: `The endpoint's pending backlog reached ${backlogLimit} notifications: changes committed since are queued only as it drains (nothing is dropped while the change feed keeps them). Read the change feed (GET /v1/clients/{clientCode}/changes) from your cursor to catch up now.`,
        }

  async function deliveryViews(db: Queryable, grant: Grant, rows: DeliveryRow[]): Promise<WebhookDelivery[]> {
    const attempts = await attemptsOf(
      db,
      grant.clientCode,
      grant.integrationId,
      rows.map((r) => r.delivery_id),
    )
    return rows.map((r) => ({
      deliveryId: r.delivery_id,
      eventId: r.event_id,
      type: r.type as WebhookDelivery['type'],
      resource: { type: r.resource_type as WebhookDelivery['resource']['type'], id: r.resource_id },
      revision: Number(r.revision),
      occurredAt: r.occurred_at,
      status: r.status,
      supersededBy: r.status === 'superseded' ? r.superseded_by : null,
      supersedes: r.folded_count > 0 ? { notifications: r.folded_count, fromRevision: Number(r.folded_from_revision ?? r.revision) } : null,
      attemptCount: r.attempt_count,
      nextAttemptAt: r.status === 'pending' ? r.next_attempt_at : null,
      lastError: r.last_error,
      createdAt: r.created_at,
      completedAt: r.completed_at,
      attempts: attempts
        .filter((a) => a.delivery_id === r.delivery_id)
        .map((a) => ({
          attempt: a.attempt,
          attemptedAt: a.attempted_at,
          durationMs: a.duration_ms,
          httpStatus: a.http_status,
          errorClass: a.error_class as WebhookDelivery['attempts'][number]['errorClass'],
        })),
    }))
  }

  /** Queues one delivery (the path's `deliveryId`) again now, in a new round of the retry schedule: 202. */
  const retryOperation = defineOperation({
    kind: 'webhook_delivery_retry',
    scopes: MANAGE,
    body: NoBody,
    response: WebhookDelivery,
    source: false,
    async run({ tx }, ctx) {
      const grant = grantOf(ctx)
      const deliveryId = ctx.id
      await enabledEndpoint(tx, grant)
      const row = await findDelivery(tx, grant.clientCode, grant.integrationId, deliveryId)
      if (!row) throw new Problem('webhook_delivery_not_found', `No webhook delivery ${deliveryId} for this endpoint.`)
      const now = isoNow(clock)
      await requeueDelivery(tx, grant.clientCode, grant.integrationId, deliveryId, now)
      const after = (await findDelivery(tx, grant.clientCode, grant.integrationId, deliveryId)) as DeliveryRow
      const [delivery] = await deliveryViews(tx, grant, [after])
      return answer(202, delivery, onQueued)
    },
  })

  /**
   * A signed `ping` to the endpoint, due now (docs/decisions.md, "Webhook coalescing, backlog and ping"): no feed
   * event, `type` ping, `resource` the endpoint (`webhook_endpoint`, the client code), revision 0. Attempted once
   * (a failure is not retried: the log says why; ask again), ahead of other due notifications and inside the same
   * budget. One at a time: asked again while one waits, the same ping is answered. 202 with its delivery.
   */
  const testOperation = defineOperation({
    kind: 'webhook_endpoint_test',
    scopes: MANAGE,
    body: NoBody,
    response: WebhookDelivery,
    source: false,
    async run({ tx }, ctx) {
      const grant = grantOf(ctx)
      await lockIdentity(tx, grant.clientCode, 'webhook-endpoint', grant.integrationId)
      const endpoint = await enabledEndpoint(tx, grant)
      const row =
        (await findPendingPing(tx, grant.clientCode, grant.integrationId)) ??
        (await insertPing(tx, grant.clientCode, grant.integrationId, endpoint.scanned_seq, isoNow(clock)))
      const [delivery] = await deliveryViews(tx, grant, [row])
      return answer(202, delivery, onQueued)
    },
  })

  return {
    operations: { retry: retryOperation, test: testOperation },

    async deliveries(grant: Grant, q: { cursor?: string | undefined; limit: number; eventId?: string | undefined }) {
      const cursor = readCursor('webhook-deliveries', q.cursor, DeliveryCursor, '/query/cursor', 'is not a cursor this list returned')
      const endpoint = await existingEndpoint(store, grant)
      const rows = await listDeliveries(store, grant.clientCode, grant.integrationId, {
        before: cursor ? { seq: cursor.s, deliveryId: cursor.d } : null,
        eventId: q.eventId ?? null,
        limit: q.limit + 1,
      })
      const shown = rows.slice(0, q.limit)
      const last = shown.at(-1)
      return {
        data: await deliveryViews(store, grant, shown),
        nextCursor: rows.length > q.limit && last ? encodeCursor('webhook-deliveries', { s: last.seq, d: last.delivery_id }) : null,
        lagging: laggingView(endpoint.lagging_since),
      }
    },
  }
}
