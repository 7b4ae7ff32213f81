import { z } from 'zod'
import { fieldProblem, Problem } from '../../domain/problems.ts'
import type { Scope } from '../../domain/scopes.ts'
import { type Clock, isoNow } from '../../domain/time.ts'
import type { Grant } from '../../http/auth.ts'
import { decodeCursor, encodeCursor } from '../../http/common-schemas.ts'
import { checkDestination, type Resolver, UnsafeDestinationError } from '../../http/destination.ts'
import { inRequestTransaction, NO_SLOT, type SlotRelease } from '../../http/route.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { Queryable, Store, Tx } from '../../store/store.ts'
import { FEED_READ_SCOPES } from '../changes/service.ts'
import type { ResourceType } from '../changes/store.ts'
import type { WebhookDelivery } from './schema.ts'
import { decryptSecret, encryptSecret, loadSecretKey, newSigningSecret } from './secrets.ts'
import {
  attemptsOf,
  auditEndpoint,
  type DeliveryRow,
  disableEndpoint,
  type EndpointRow,
  feedHead,
  feedPurgedThrough,
  findDelivery,
  findEndpoint,
  insertEndpoint,
  listDeliveries,
  reconfigureEndpoint,
  replayDeliveries,
  requeueDelivery,
  rotateEndpointSecret,
} from './store.ts'

/** For 24 hours after a rotation notifications carry a signature with each secret. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000

/** The resource types whose notifications a grant may receive: those whose read scope it holds. */
export function readableTypes(scopes: ReadonlySet<string>): ResourceType[] {
  return (Object.keys(FEED_READ_SCOPES) as ResourceType[]).filter((t) => scopes.has(FEED_READ_SCOPES[t] as Scope))
}

/** What AES-GCM binds each endpoint's ciphertexts to. */
export const secretAad = (clientCode: string, integrationId: string) => `webhook/${clientCode}/${integrationId}`

const notFound = () =>
  new Problem('webhook_endpoint_not_found', 'This Integration has no webhook endpoint for this client; configure one with PUT.')

const Cursor = z.object({ s: z.string().regex(/^\d{1,19}$/) })

export interface WebhookServiceDeps {
  store: Store
  clock: Clock
  resolver: Resolver
  allowLoopback: boolean
  /** WEBHOOK_SECRET_KEY (64 hex digits), or undefined in a sandbox that generates its own. */
  secretKeyHex: string | undefined
}

export function createWebhookService({ store, clock, resolver, allowLoopback, secretKeyHex }: WebhookServiceDeps) {
  let key: Promise<Buffer> | undefined
  const secretKey = () => {
    key ??= loadSecretKey(store, secretKeyHex).catch((err) => {
      key = undefined
      throw err
    })
    return key
  }

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
      const k = await secretKey()
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
            secretCiphertext: encryptSecret(k, signingSecret, secretAad(grant.clientCode, grant.integrationId)),
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
        const after = { url, status: 'enabled' as const, disabled_reason: null, secret_version: row.secret_version }
        if (reenable || row.url !== url)
          await audit(tx, grant, reenable ? 'webhook_endpoint.enabled' : 'webhook_endpoint.updated', after, now)
        return { status: 200 as const, body: view(after) }
      })
    },

    async get(grant: Grant) {
      return view(await existing(store, grant))
    },

    async rotateSecret(grant: Grant, slot: SlotRelease = NO_SLOT) {
      const k = await secretKey()
      return inRequestTransaction(store, slot, async (tx) => {
        const now = isoNow(clock)
        const row = await existing(tx, grant, true)
        const aad = secretAad(grant.clientCode, grant.integrationId)
        const signingSecret = newSigningSecret()
        await rotateEndpointSecret(tx, {
          clientCode: grant.clientCode,
          integrationId: grant.integrationId,
          secretCiphertext: encryptSecret(k, signingSecret, aad),
          // Re-encrypted under a fresh IV; checks that the stored secret still decrypts.
          previousCiphertext: encryptSecret(k, decryptSecret(k, row.secret_ciphertext, aad), aad),
          previousExpiresAt: new Date(clock.now().getTime() + ROTATION_OVERLAP_MS).toISOString(),
          now,
        })
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
      const cursor = decodeCursor(q.cursor, Cursor)
      if (q.cursor !== undefined && !cursor) throw fieldProblem('/query/cursor', 'invalid_format', 'is not a cursor this list returned')
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

    /** Queues again every notification after a change-feed cursor (of the types the grant may read). */
    async replay(grant: Grant, after: string, slot: SlotRelease = NO_SLOT) {
      const cursor = decodeCursor(after, Cursor)
      if (!cursor) throw fieldProblem('/after', 'invalid_format', 'is not a cursor the change feed returned')
      return inRequestTransaction(store, slot, async (tx) => {
        const endpoint = await enabledEndpoint(tx, grant)
        if (BigInt(cursor.s) < (await feedPurgedThrough(tx, grant.clientCode))) {
          throw new Problem(
            'cursor_expired',
            'Events after this cursor were purged (kept 30 days); replay from a newer cursor and re-read the resources.',
          )
        }
        const queued = await replayDeliveries(tx, grant.clientCode, grant.integrationId, {
          afterSeq: cursor.s,
          throughSeq: endpoint.scanned_seq,
          types: readableTypes(grant.scopes),
          now: isoNow(clock),
        })
        return { queued }
      })
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

    secretKey,
  }
}

export type WebhookService = ReturnType<typeof createWebhookService>
