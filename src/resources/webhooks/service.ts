import { z } from 'zod'
import type { Grant } from '../../access/grants.ts'
import { CHANGE_FEED, encodeCursor, readCursor, seqCursor } from '../../domain/cursor.ts'
import { type KeyRing, UnreadableSecretError } from '../../domain/key-ring.ts'
import { Problem } from '../../domain/problems.ts'
import type { Scope } from '../../domain/scopes.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import { checkConfiguredDestination, type Resolver } from '../../http/destination.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store, Tx } from '../../store/store.ts'
import { NO_SLOT, type SlotRelease } from '../../store/transactions.ts'
import { FEED_READ_SCOPES } from '../changes/service.ts'
import { purgedThrough } from '../changes/store.ts'
import type { ResourceType } from '../feed/store.ts'
import { defineOperation, executeWrite, grantOf, type OperationResult } from '../operations.ts'
import {
  NoBody,
  ReplayChunk,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookEndpointPut,
  WebhookEndpointReconfigured,
  WebhookEndpointWithSecret,
} from './schema.ts'
import { newSigningSecret, secretAad } from './secrets.ts'
import {
  attemptsOf,
  auditEndpoint,
  type DeliveryRow,
  disableEndpoint,
  type EndpointRow,
  feedHead,
  findDelivery,
  findEndpoint,
  findPendingPing,
  insertEndpoint,
  insertPing,
  listDeliveries,
  reconfigureEndpoint,
  replayDeliveries,
  requeueDelivery,
  rotateEndpointSecret,
} from './store.ts'

/**
 * Feed events a replay queues per transaction. Measured on PGlite (bench/replay-probe.ts; docs/decisions.md, "Leases
 * tied to their holder; replay in chunks"): a chunk of 500 holds the store for about 30 ms, where one statement for
 * 12,000 held it 0.45 to 0.7 s.
 */
export const REPLAY_CHUNK_SIZE = 500

/** Every write of an endpoint is its Integration's, under this scope. */
const MANAGE = ['webhooks:manage'] as const

/** A write's answer, rendered already (the operations here render inside their run). */
const answer = (status: OperationResult['status'], body: unknown, afterCommit?: () => void): OperationResult => ({
  status,
  body: async () => body,
  ...(afterCommit ? { afterCommit } : {}),
})

/** A replay's progress across its chunks (one request): `throughSeq` fixed by the first, `last` set by the last. */
interface ReplayState {
  cursor: string
  afterSeq: string
  throughSeq: string | null
  types: ResourceType[]
  now: string
  last: boolean
}

/** For 24 hours after a rotation notifications carry a signature with each secret. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000

/** The resource types whose notifications a grant may receive: those whose read scope it holds. */
export function readableTypes(scopes: ReadonlySet<string>): ResourceType[] {
  return (Object.keys(FEED_READ_SCOPES) as ResourceType[]).filter((t) => scopes.has(FEED_READ_SCOPES[t] as Scope))
}

export { secretAad }

/** The endpoint's current signing secret, or null when no key of the ring opens it. */
export function openSecret(ring: KeyRing, row: Pick<EndpointRow, 'client_code' | 'integration_id' | 'secret_ciphertext'>) {
  try {
    return ring.decrypt(secretAad(row.client_code, row.integration_id), row.secret_ciphertext)
  } catch (err) {
    if (err instanceof UnreadableSecretError) return null
    throw err
  }
}

const notFound = () =>
  new Problem('webhook_endpoint_not_found', 'This Integration has no webhook endpoint for this client; configure one with PUT.')

/** The delivery log's cursor (a delivery's sequence number, from 1); replay takes a change-feed cursor (from 0). */
const DeliveryCursor = seqCursor(0n).extend({ d: z.string().regex(/^dlv_[0-9a-f]{32}$/) })
const FeedCursor = seqCursor(0n)

export interface WebhookServiceDeps {
  store: Store
  clock: Clock
  resolver: Resolver
  allowLoopback: boolean
  /** The key ring that encrypts signing secrets at rest (src/store/secret-keys.ts). */
  keyRing: () => Promise<KeyRing>
  /** Pending notifications per endpoint past which it lags (WEBHOOK_BACKLOG_LIMIT). */
  backlogLimit?: number
  /** Told after a commit that queued a delivery due now (a retry, a ping): the dispatcher takes a turn soon. */
  onQueued?: () => void
}

/** WEBHOOK_BACKLOG_LIMIT's default. */
export const DEFAULT_BACKLOG_LIMIT = 10_000

export function createWebhookService({
  store,
  clock,
  resolver,
  allowLoopback,
  keyRing,
  backlogLimit = DEFAULT_BACKLOG_LIMIT,
  onQueued,
}: WebhookServiceDeps) {
  const view = (e: Pick<EndpointRow, 'url' | 'status' | 'disabled_reason' | 'secret_version'> & { lagging_since?: string | null }) => ({
    url: e.url,
    status: e.status,
    disabledReason: e.disabled_reason,
    secretVersion: e.secret_version,
    lagging: (e.lagging_since ?? null) !== null,
    laggingSince: e.lagging_since ?? null,
  })

  /** The delivery log's word on a lagging endpoint. */
  const laggingView = (since: string | null) =>
    since === null
      ? null
      : {
          since,
          backlogLimit,
          detail: `The endpoint's pending backlog reached ${backlogLimit} notifications: changes committed since are queued only as it drains (nothing is dropped while the change feed keeps them). Read the change feed (GET /v1/clients/{clientCode}/changes) from your cursor to catch up now.`,
        }

  async function existing(db: Queryable, grant: Grant, forUpdate = false): Promise<EndpointRow> {
    const row = await findEndpoint(db, grant.clientCode, grant.integrationId, forUpdate)
    if (!row) throw notFound()
    return row
  }

  const audit = (tx: Tx, grant: Grant, action: string, after: Pick<EndpointRow, 'url' | 'status' | 'secret_version'>, now: string) =>
    auditEndpoint(tx, {
      clientCode: grant.clientCode,
      integrationId: grant.integrationId,
      actor: `integration:${grant.integrationId}`,
      action,
      details: { integrationId: grant.integrationId, status: after.status, secretVersion: after.secret_version },
      change: { url: after.url, status: after.status, secretVersion: after.secret_version },
      now,
    })

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

  /**
   * Writes a new signing secret (returned, to be shown once). The old one, when it still opens, keeps signing for
   * ROTATION_OVERLAP_MS (re-encrypted under the current key); one that no key opens is simply replaced.
   */
  async function replaceSecret(tx: Tx, ring: KeyRing, grant: Grant, now: string, old: string | null = null): Promise<string> {
    const aad = secretAad(grant.clientCode, grant.integrationId)
    const signingSecret = newSigningSecret()
    await rotateEndpointSecret(tx, {
      clientCode: grant.clientCode,
      integrationId: grant.integrationId,
      secretCiphertext: ring.encrypt(aad, signingSecret),
      previousCiphertext: old === null ? null : ring.encrypt(aad, old),
      previousExpiresAt: old === null ? null : new Date(clock.now().getTime() + ROTATION_OVERLAP_MS).toISOString(),
      now,
    })
    return signingSecret
  }

  async function enabledEndpoint(db: Queryable, grant: Grant): Promise<EndpointRow> {
    const row = await existing(db, grant)
    if (row.status !== 'enabled') {
      throw new Problem(
        'webhook_endpoint_disabled',
        'The webhook endpoint is disabled, so nothing would be sent; configure it again with PUT first.',
        { extensions: { disabledReason: row.disabled_reason } },
      )
    }
    return row
  }

  /**
   * PUT: 201 with the signing secret on the first configuration; 200 after (re-enabling a disabled endpoint). The
   * URL is checked (its name resolved) and the key ring loaded before the transaction: a slow DNS answer never
   * holds a database connection.
   */
  const putOperation = defineOperation({
    kind: 'webhook_endpoint',
    scopes: MANAGE,
    body: WebhookEndpointPut,
    response: WebhookEndpointReconfigured,
    responses: { 201: WebhookEndpointWithSecret, 200: WebhookEndpointReconfigured },
    source: false,
    async before(_ctx, body) {
      await checkConfiguredDestination(body.url, { allowLoopback, resolver })
      await keyRing()
    },
    async run({ tx }, ctx, { url }) {
      const grant = grantOf(ctx)
      // Loaded by `before`: the loader's promise, settled, runs no statement here.
      const ring = await keyRing()
      const now = isoNow(clock)
      await lockIdentity(tx, grant.clientCode, 'webhook-endpoint', grant.integrationId)
      const row = await findEndpoint(tx, grant.clientCode, grant.integrationId, true)
      const head = await feedHead(tx, grant.clientCode)
      if (!row) {
        const signingSecret = newSigningSecret()
        await insertEndpoint(tx, {
          clientCode: grant.clientCode,
          integrationId: grant.integrationId,
          url,
          secretCiphertext: ring.encrypt(secretAad(grant.clientCode, grant.integrationId), signingSecret),
          seq: head,
          now,
        })
        const created = { url, status: 'enabled' as const, disabled_reason: null, secret_version: 1 }
        await audit(tx, grant, 'webhook_endpoint.created', created, now)
        return answer(201, { ...view(created), signingSecret })
      }
      const reenable = row.status === 'disabled'
      await reconfigureEndpoint(tx, {
        clientCode: grant.clientCode,
        integrationId: grant.integrationId,
        url,
        reenableAtSeq: reenable ? head : null,
        now,
      })
      // A secret no key opens can never sign again: this PUT issues a new one (shown once), as rotate-secret would.
      const replaced = openSecret(ring, row) === null ? await replaceSecret(tx, ring, grant, now) : null
      const after = {
        url,
        status: 'enabled' as const,
        disabled_reason: null,
        secret_version: row.secret_version + (replaced ? 1 : 0),
        lagging_since: reenable ? null : row.lagging_since,
      }
      if (replaced) await audit(tx, grant, 'webhook_endpoint.secret_rotated', { ...after, status: row.status }, now)
      if (reenable || row.url !== url)
        await audit(tx, grant, reenable ? 'webhook_endpoint.enabled' : 'webhook_endpoint.updated', after, now)
      return answer(200, { ...view(after), ...(replaced ? { signingSecret: replaced } : {}) })
    },
  })

  const rotateSecretOperation = defineOperation({
    kind: 'webhook_secret_rotation',
    scopes: MANAGE,
    body: NoBody,
    response: WebhookEndpointWithSecret,
    source: false,
    async before() {
      await keyRing()
    },
    async run({ tx }, ctx) {
      const grant = grantOf(ctx)
      const ring = await keyRing()
      const now = isoNow(clock)
      const row = await existing(tx, grant, true)
      const signingSecret = await replaceSecret(tx, ring, grant, now, openSecret(ring, row))
      const after = { ...row, secret_version: row.secret_version + 1 }
      await audit(tx, grant, 'webhook_endpoint.secret_rotated', after, now)
      return answer(200, { ...view(after), signingSecret })
    },
  })

  const disableOperation = defineOperation({
    kind: 'webhook_endpoint_disable',
    scopes: MANAGE,
    body: NoBody,
    response: WebhookEndpoint,
    source: false,
    async run({ tx }, ctx) {
      const grant = grantOf(ctx)
      const now = isoNow(clock)
      const row = await existing(tx, grant, true)
      if (row.status === 'enabled') {
        await disableEndpoint(tx, grant.clientCode, grant.integrationId, null, now)
        await audit(tx, grant, 'webhook_endpoint.disabled', { ...row, status: 'disabled' }, now)
        return answer(200, view({ ...row, status: 'disabled', disabled_reason: null }))
      }
      return answer(200, view(row))
    },
  })

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

  /**
   * One chunk of a replay (REPLAY_CHUNK_SIZE feed events), an operation of its own request: the first checks the
   * endpoint and the cursor and fixes the end (what the worker has scanned); `state.last` tells the request's
   * slot release whether this chunk is the last.
   */
  function replayChunkOperation(grant: Grant, state: ReplayState) {
    return defineOperation({
      kind: 'webhook_replay_chunk',
      scopes: MANAGE,
      body: NoBody,
      response: ReplayChunk,
      source: false,
      async run({ tx }) {
        if (state.throughSeq === null) {
          const endpoint = await enabledEndpoint(tx, grant)
          if (BigInt(state.cursor) < (await purgedThrough(tx, grant.clientCode))) {
            throw new Problem(
              'cursor_expired',
              'Events after this cursor were purged (kept 30 days); replay from a newer cursor and re-read the resources.',
            )
          }
          state.throughSeq = endpoint.scanned_seq
        }
        const c = await replayDeliveries(tx, grant.clientCode, grant.integrationId, {
          afterSeq: state.afterSeq,
          throughSeq: state.throughSeq,
          types: state.types,
          now: state.now,
          limit: REPLAY_CHUNK_SIZE,
        })
        state.last = c.lastSeq === null || c.events < REPLAY_CHUNK_SIZE
        return answer(200, { queued: c.queued, lastSeq: c.lastSeq })
      },
    })
  }

  return {
    operations: {
      put: putOperation,
      rotateSecret: rotateSecretOperation,
      disable: disableOperation,
      retry: retryOperation,
      test: testOperation,
    },

    async get(grant: Grant) {
      return view(await existing(store, grant))
    },

    backlogLimit,

    async deliveries(grant: Grant, q: { cursor?: string | undefined; limit: number; eventId?: string | undefined }) {
      const cursor = readCursor('webhook-deliveries', q.cursor, DeliveryCursor, '/query/cursor', 'is not a cursor this list returned')
      const endpoint = await existing(store, grant)
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

    /**
     * Queues again every notification after a change-feed cursor (of the types the grant may read), in chunks of
     * REPLAY_CHUNK_SIZE feed events, each its own write (`executeWrite`, the request's idiom), all before
     * answering: the 202's `queued` is exact, and between chunks every other request gets the store (on PGlite
     * one transaction excludes all others; docs/decisions.md, "replay in chunks"). A replay is bounded (the feed
     * keeps 30 days) but one transaction for it would hold PGlite for the whole of it. The first chunk checks the
     * endpoint and the cursor, and fixes the end; the last frees the request's slot. A failure after a chunk
     * committed leaves those deliveries queued (a replay asks for at-least-once re-delivery; repeating it queues
     * them again), and says so.
     */
    async replay(grant: Grant, after: string, slot: SlotRelease = NO_SLOT) {
      const cursor = readCursor(CHANGE_FEED, after, FeedCursor, '/after', 'is not a cursor the change feed returned', {
        unnamed: true,
      }) as { s: string }
      const state: ReplayState = {
        cursor: cursor.s,
        afterSeq: cursor.s,
        throughSeq: null,
        types: readableTypes(grant.scopes),
        now: isoNow(clock),
        last: false,
      }
      const chunkOperation = replayChunkOperation(grant, state)
      // Read when the chunk's transaction frees the slot, after the chunk ran: only the last chunk frees it.
      const lastChunkFrees: SlotRelease = { releaseIn: (tx) => (state.last ? slot.releaseIn(tx) : NO_SLOT.releaseIn(tx)) }
      let queued = 0
      for (let first = true; ; first = false) {
        let chunk: ReplayChunk
        try {
          const ctx = { clientCode: grant.clientCode, grant, id: grant.integrationId }
          chunk = (await executeWrite({ store, clock }, chunkOperation, ctx, undefined, lastChunkFrees)).body as ReplayChunk
        } catch (err) {
          if (first || err instanceof Problem) throw err
          throw new Problem(
            'projection_unavailable',
            `The replay stopped after queueing ${queued} deliveries: the store failed before the rest was queued. Those are queued and will be sent; repeat the replay to queue the rest (what is queued already is queued again, at least once).`,
          )
        }
        queued += chunk.queued
        if (state.last || chunk.lastSeq === null) return { queued }
        state.afterSeq = chunk.lastSeq
        // A turn of the event loop: requests waiting for the store (PGlite's one backend) run before the next chunk.
        await new Promise<void>((resolve) => setImmediate(resolve))
      }
    },

    /** The admin service's hook: revoking a grant disables its endpoint in the same transaction. */
    async onGrantRevoked(tx: Tx, integrationId: string, clientCode: string) {
      const now = isoNow(clock)
      if (await disableEndpoint(tx, clientCode, integrationId, 'grant_revoked', now)) {
        const row = (await findEndpoint(tx, clientCode, integrationId)) as EndpointRow
        await auditEndpoint(tx, {
          clientCode,
          integrationId,
          actor: 'service',
          action: 'webhook_endpoint.disabled',
          details: { integrationId, status: 'disabled', disabledReason: 'grant_revoked', secretVersion: row.secret_version },
          change: { url: row.url, status: 'disabled', disabledReason: 'grant_revoked', secretVersion: row.secret_version },
          now,
        })
      }
    },

    keyRing,
  }
}

export type WebhookService = ReturnType<typeof createWebhookService>
