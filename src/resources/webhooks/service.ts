import type { Grant } from '../../access/grants.ts'
import { encodeCursor, readCursor, seqCursor } from '../../domain/cursor.ts'
import { type KeyRing, UnreadableSecretError } from '../../domain/key-ring.ts'
import { Problem } from '../../domain/problems.ts'
import type { Scope } from '../../domain/scopes.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import { checkDestination, type Resolver, UnsafeDestinationError } from '../../http/destination.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store, Tx } from '../../store/store.ts'
import { inRequestTransaction, NO_SLOT, type SlotRelease } from '../../store/transactions.ts'
import { FEED_READ_SCOPES } from '../changes/service.ts'
import { purgedThrough } from '../changes/store.ts'
import type { ResourceType } from '../feed/store.ts'
import type { WebhookDelivery } from './schema.ts'
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
  insertEndpoint,
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
const DeliveryCursor = seqCursor(1n)
const FeedCursor = seqCursor(0n)

export interface WebhookServiceDeps {
  store: Store
  clock: Clock
  resolver: Resolver
  allowLoopback: boolean
  /** The key ring that encrypts signing secrets at rest (src/store/secret-keys.ts). */
  keyRing: () => Promise<KeyRing>
}

export function createWebhookService({ store, clock, resolver, allowLoopback, keyRing }: WebhookServiceDeps) {
  const view = (e: Pick<EndpointRow, 'url' | 'status' | 'disabled_reason' | 'secret_version'>) => ({
    url: e.url,
    status: e.status,
    disabledReason: e.disabled_reason,
    secretVersion: e.secret_version,
  })

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

  return {
    /** 201 with the signing secret on the first configuration; 200 after (re-enabling a disabled endpoint). */
    async put(grant: Grant, url: string, slot: SlotRelease = NO_SLOT) {
      // Resolved before the transaction: a slow DNS answer never holds a database connection.
      try {
        await checkDestination(url, { allowLoopback, resolver })
      } catch (err) {
        if (err instanceof UnsafeDestinationError) {
          throw new Problem('webhook_destination_unsafe', `The url ${err.reason}.`, {
            errors: [{ code: 'webhook_destination_unsafe', detail: err.reason, pointer: '/url' }],
          })
        }
        throw err
      }
      const ring = await keyRing()
      return inRequestTransaction(store, slot, async (tx) => {
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
          return { status: 201 as const, body: { ...view(created), signingSecret } }
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
        }
        if (replaced) await audit(tx, grant, 'webhook_endpoint.secret_rotated', { ...after, status: row.status }, now)
        if (reenable || row.url !== url)
          await audit(tx, grant, reenable ? 'webhook_endpoint.enabled' : 'webhook_endpoint.updated', after, now)
        return { status: 200 as const, body: { ...view(after), ...(replaced ? { signingSecret: replaced } : {}) } }
      })
    },

    async get(grant: Grant) {
      return view(await existing(store, grant))
    },

    async rotateSecret(grant: Grant, slot: SlotRelease = NO_SLOT) {
      const ring = await keyRing()
      return inRequestTransaction(store, slot, async (tx) => {
        const now = isoNow(clock)
        const row = await existing(tx, grant, true)
        const signingSecret = await replaceSecret(tx, ring, grant, now, openSecret(ring, row))
        const after = { ...row, secret_version: row.secret_version + 1 }
        await audit(tx, grant, 'webhook_endpoint.secret_rotated', after, now)
        return { ...view(after), signingSecret }
      })
    },

    async disable(grant: Grant, slot: SlotRelease = NO_SLOT) {
      return inRequestTransaction(store, slot, async (tx) => {
        const now = isoNow(clock)
        const row = await existing(tx, grant, true)
        if (row.status === 'enabled') {
          await disableEndpoint(tx, grant.clientCode, grant.integrationId, null, now)
          await audit(tx, grant, 'webhook_endpoint.disabled', { ...row, status: 'disabled' }, now)
          return view({ ...row, status: 'disabled', disabled_reason: null })
        }
        return view(row)
      })
    },

    async deliveries(grant: Grant, q: { cursor?: string | undefined; limit: number; eventId?: string | undefined }) {
      await existing(store, grant)
      const cursor = readCursor(q.cursor, DeliveryCursor, '/query/cursor', 'is not a cursor this list returned')
      const rows = await listDeliveries(store, grant.clientCode, grant.integrationId, {
        beforeSeq: cursor?.s ?? null,
        eventId: q.eventId ?? null,
        limit: q.limit + 1,
      })
      const shown = rows.slice(0, q.limit)
      const last = shown.at(-1)
      return {
        data: await deliveryViews(store, grant, shown),
        nextCursor: rows.length > q.limit && last ? encodeCursor({ s: last.seq }) : null,
      }
    },

    /** Queues one delivery again now, in a new round of the retry schedule. */
    async retry(grant: Grant, deliveryId: string, slot: SlotRelease = NO_SLOT) {
      return inRequestTransaction(store, slot, async (tx) => {
        await enabledEndpoint(tx, grant)
        const row = await findDelivery(tx, grant.clientCode, grant.integrationId, deliveryId)
        if (!row) throw new Problem('webhook_delivery_not_found', `No webhook delivery ${deliveryId} for this endpoint.`)
        const now = isoNow(clock)
        await requeueDelivery(tx, grant.clientCode, grant.integrationId, deliveryId, now)
        const after = (await findDelivery(tx, grant.clientCode, grant.integrationId, deliveryId)) as DeliveryRow
        return (await deliveryViews(tx, grant, [after]))[0] as WebhookDelivery
      })
    },

    /**
     * Queues again every notification after a change-feed cursor (of the types the grant may read), in chunks of
     * REPLAY_CHUNK_SIZE feed events, each its own transaction, all before answering: the 202's `queued` is exact,
     * and between chunks every other request gets the store (on PGlite one transaction excludes all others).
     * The first chunk checks the endpoint and the cursor, and fixes the end (what the worker has scanned); the
     * last frees the request's slot. A failure after a chunk committed leaves those deliveries queued (a replay
     * asks for at-least-once re-delivery; repeating it queues them again), and says so.
     */
    async replay(grant: Grant, after: string, slot: SlotRelease = NO_SLOT) {
      const cursor = readCursor(after, FeedCursor, '/after', 'is not a cursor the change feed returned') as { s: string }
      const types = readableTypes(grant.scopes)
      const now = isoNow(clock)
      let afterSeq = cursor.s
      let throughSeq = '0'
      let queued = 0
      for (let first = true; ; first = false) {
        let released = () => {}
        let chunk: { queued: number; lastSeq: string | null; last: boolean }
        try {
          chunk = await store.transaction(async (tx) => {
            if (first) {
              const endpoint = await enabledEndpoint(tx, grant)
              if (BigInt(cursor.s) < (await purgedThrough(tx, grant.clientCode))) {
                throw new Problem(
                  'cursor_expired',
                  'Events after this cursor were purged (kept 30 days); replay from a newer cursor and re-read the resources.',
                )
              }
              throughSeq = endpoint.scanned_seq
            }
            const c = await replayDeliveries(tx, grant.clientCode, grant.integrationId, {
              afterSeq,
              throughSeq,
              types,
              now,
              limit: REPLAY_CHUNK_SIZE,
            })
            const last = c.lastSeq === null || c.queued < REPLAY_CHUNK_SIZE
            if (last) released = await slot.releaseIn(tx)
            return { ...c, last }
          })
        } catch (err) {
          if (first || err instanceof Problem) throw err
          throw new Problem(
            'projection_unavailable',
            `The replay stopped after queueing ${queued} deliveries: the store failed before the rest was queued. Those are queued and will be sent; repeat the replay to queue the rest (what is queued already is queued again, at least once).`,
          )
        }
        released()
        queued += chunk.queued
        if (chunk.last || chunk.lastSeq === null) return { queued }
        afterSeq = chunk.lastSeq
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
