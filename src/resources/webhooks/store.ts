import { randomUUID } from 'node:crypto'
import { canonicalDigest } from '../../domain/canonical.ts'
import type { EncryptedColumns } from '../../store/secret-keys.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import type { EventRow } from '../changes/store.ts'
import { secretAad } from './secrets.ts'

/**
 * SQL of the webhook endpoint, as its integrator and operator use it: the endpoint's CRUD, its audit, the delivery
 * log's reads, a retry and a replay. The dispatcher's SQL (deriving, claiming and completing deliveries) is its own
 * store, delivery-store.ts. Every function takes the queryable and the client code (and the Integration).
 */

export interface EndpointRow {
  client_code: string
  integration_id: string
  url: string
  status: 'enabled' | 'disabled'
  disabled_reason: 'grant_revoked' | 'destination_unsafe' | 'signing_secret_unreadable' | null
  secret_version: number
  secret_ciphertext: string
  previous_secret_ciphertext: string | null
  previous_expires_at: string | null
  configured_seq: string
  scanned_seq: string
}

export async function findEndpoint(db: Queryable, clientCode: string, integrationId: string, forUpdate = false) {
  const rows = await db.query<EndpointRow>(
    `SELECT client_code, integration_id, url, status, disabled_reason, secret_version, secret_ciphertext,
            previous_secret_ciphertext, previous_expires_at, configured_seq, scanned_seq
       FROM webhook_endpoints WHERE client_code = $1 AND integration_id = $2${forUpdate ? ' FOR UPDATE' : ''}`,
    [clientCode, integrationId],
  )
  return rows[0]
}

/** The client's feed head: events with a higher sequence are committed after this moment. */
export async function feedHead(db: Queryable, clientCode: string): Promise<string> {
  const rows = await db.query<{ last_seq: string }>('SELECT last_seq FROM feed_heads WHERE client_code = $1', [clientCode])
  return rows[0]?.last_seq ?? '0'
}

export async function insertEndpoint(
  tx: Tx,
  e: { clientCode: string; integrationId: string; url: string; secretCiphertext: string; seq: string; now: string },
): Promise<void> {
  await tx.query(
    `INSERT INTO webhook_endpoints (client_code, integration_id, url, status, disabled_reason, secret_version, secret_ciphertext,
                                    configured_seq, scanned_seq, created_at, updated_at)
     VALUES ($1, $2, $3, 'enabled', NULL, 1, $4, $5, $5, $6, $6)`,
    [e.clientCode, e.integrationId, e.url, e.secretCiphertext, e.seq, e.now],
  )
}

/** A PUT on an existing endpoint: new URL; a disabled endpoint is enabled again from the feed head. */
export async function reconfigureEndpoint(
  tx: Tx,
  e: { clientCode: string; integrationId: string; url: string; reenableAtSeq: string | null; now: string },
): Promise<void> {
  await tx.query(
    `UPDATE webhook_endpoints SET url = $3, updated_at = $5,
            status = 'enabled', disabled_reason = NULL,
            configured_seq = COALESCE($4::bigint, configured_seq), scanned_seq = COALESCE($4::bigint, scanned_seq)
      WHERE client_code = $1 AND integration_id = $2`,
    [e.clientCode, e.integrationId, e.url, e.reenableAtSeq, e.now],
  )
}

/** The signing secrets of every endpoint, encrypted with the key ring: the rewrap walks them (src/store/secret-keys.ts). */
export const webhookSecretColumns: EncryptedColumns = {
  table: 'webhook_endpoints',
  keyColumns: ['client_code', 'integration_id'],
  ciphertextColumns: ['secret_ciphertext', 'previous_secret_ciphertext'],
  aad: (row) => secretAad(row.client_code as string, row.integration_id as string),
}

/**
 * A new signing secret, version + 1. The previous one keeps signing until `previousExpiresAt`; both null when
 * there is none to keep (the old secret could not be opened).
 */
export async function rotateEndpointSecret(
  tx: Tx,
  e: {
    clientCode: string
    integrationId: string
    secretCiphertext: string
    previousCiphertext: string | null
    previousExpiresAt: string | null
    now: string
  },
): Promise<void> {
  await tx.query(
    `UPDATE webhook_endpoints SET secret_version = secret_version + 1, secret_ciphertext = $3,
            previous_secret_ciphertext = $4, previous_expires_at = $5, updated_at = $6
      WHERE client_code = $1 AND integration_id = $2`,
    [e.clientCode, e.integrationId, e.secretCiphertext, e.previousCiphertext, e.previousExpiresAt, e.now],
  )
}

/** Disables an enabled endpoint; true when this call disabled it. */
export async function disableEndpoint(
  db: Queryable,
  clientCode: string,
  integrationId: string,
  reason: EndpointRow['disabled_reason'],
  now: string,
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = $3, updated_at = $4
      WHERE client_code = $1 AND integration_id = $2 AND status = 'enabled' RETURNING 1`,
    [clientCode, integrationId, reason, now],
  )
  return rows.length > 0
}

/**
 * An audit event for a change to an endpoint: identifiers and non-secret settings in `details`, and the
 * SHA-256 digest of the change (which names the URL and secret version, never the secret).
 */
export async function auditEndpoint(
  db: Queryable,
  a: {
    clientCode: string
    integrationId: string
    actor: string
    action: string
    details: Record<string, unknown>
    change: unknown
    now: string
  },
): Promise<void> {
  await db.query(
    `INSERT INTO audit_events (audit_event_id, client_code, actor, action, target_type, target_id, details, change_digest, occurred_at)
     VALUES ($1, $2, $3, $4, 'webhook_endpoint', $5, $6, $7, $8)`,
    [
      randomUUID(),
      a.clientCode,
      a.actor,
      a.action,
      `${a.integrationId}/${a.clientCode}`,
      JSON.stringify(a.details),
      canonicalDigest(a.change),
      a.now,
    ],
  )
}

/** A delivery: the feed event it notifies (the change feed's own row shape) and its delivery state. */
export interface DeliveryRow extends EventRow {
  delivery_id: string
  status: 'pending' | 'delivered' | 'abandoned' | 'skipped'
  round_attempts: number
  attempt_count: number
  next_attempt_at: string | null
  last_error: string | null
  created_at: string
  completed_at: string | null
}

/** A delivery's columns, as both the delivery log and the dispatcher's claim read them. */
export const DELIVERY_COLUMNS = `delivery_id, seq, event_id, type, resource_type, resource_id, revision, occurred_at, status,
  round_attempts, attempt_count, next_attempt_at, last_error, created_at, completed_at`

/** Newest first (by feed sequence); keyset on seq. */
export async function listDeliveries(
  db: Queryable,
  clientCode: string,
  integrationId: string,
  q: { beforeSeq: string | null; eventId: string | null; limit: number },
): Promise<DeliveryRow[]> {
  return db.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
      WHERE client_code = $1 AND integration_id = $2 AND ($3::bigint IS NULL OR seq < $3) AND ($4::uuid IS NULL OR event_id = $4)
      ORDER BY seq DESC LIMIT $5`,
    [clientCode, integrationId, q.beforeSeq, q.eventId, q.limit],
  )
}

export async function findDelivery(db: Queryable, clientCode: string, integrationId: string, deliveryId: string) {
  const rows = await db.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE client_code = $1 AND integration_id = $2 AND delivery_id = $3`,
    [clientCode, integrationId, deliveryId],
  )
  return rows[0]
}

export interface AttemptRow {
  delivery_id: string
  attempt: number
  attempted_at: string
  duration_ms: number
  http_status: number | null
  error_class: string | null
}

export async function attemptsOf(db: Queryable, clientCode: string, integrationId: string, deliveryIds: string[]): Promise<AttemptRow[]> {
  if (deliveryIds.length === 0) return []
  return db.query<AttemptRow>(
    `SELECT delivery_id, attempt, attempted_at, duration_ms, http_status, error_class FROM webhook_attempts
      WHERE client_code = $1 AND integration_id = $2 AND delivery_id = ANY($3::text[]) ORDER BY delivery_id, attempt`,
    [clientCode, integrationId, deliveryIds],
  )
}

/** A new round for one delivery, due now (a manual retry). */
export async function requeueDelivery(db: Queryable, clientCode: string, integrationId: string, deliveryId: string, now: string) {
  await db.query(
    `UPDATE webhook_deliveries SET status = 'pending', round_attempts = 0, next_attempt_at = $4, completed_at = NULL
      WHERE client_code = $1 AND integration_id = $2 AND delivery_id = $3`,
    [clientCode, integrationId, deliveryId, now],
  )
}

/**
 * Replay, one chunk: the first `limit` feed events after `afterSeq` (up to `throughSeq`, what the worker has
 * scanned) of the given resource types each get a delivery in a new round, due now: existing deliveries are
 * queued again, missing ones created. Returns how many were queued and the last sequence queued (null when
 * none was left: the replay is complete). Keyset on the feed's primary key, so a chunk costs its own rows only.
 */
export async function replayDeliveries(
  db: Queryable,
  clientCode: string,
  integrationId: string,
  q: { afterSeq: string; throughSeq: string; types: string[]; now: string; limit: number },
): Promise<{ queued: number; lastSeq: string | null }> {
  const rows = await db.query<{ n: string; last: string | null }>(
    `WITH chunk AS (
       SELECT seq, event_id, type, resource_type, resource_id, revision, occurred_at FROM change_events
        WHERE client_code = $1 AND seq > $3 AND seq <= $4 AND resource_type = ANY($5::text[])
        ORDER BY seq LIMIT $7),
     ins AS (
       INSERT INTO webhook_deliveries (client_code, integration_id, delivery_id, seq, event_id, type, resource_type, resource_id,
                                       revision, occurred_at, status, next_attempt_at, created_at)
       SELECT $1, $2, 'dlv_' || replace(gen_random_uuid()::text, '-', ''), seq, event_id, type, resource_type, resource_id,
              revision, occurred_at, 'pending', $6, $6
         FROM chunk
       ON CONFLICT (client_code, integration_id, seq) DO UPDATE
          SET status = 'pending', round_attempts = 0, next_attempt_at = $6, completed_at = NULL
       RETURNING 1)
     SELECT (SELECT count(*) FROM ins) AS n, (SELECT max(seq) FROM chunk) AS last`,
    [clientCode, integrationId, q.afterSeq, q.throughSeq, q.types, q.now, q.limit],
  )
  const row = rows[0]
  return { queued: Number(row?.n ?? 0), lastSeq: row?.last ?? null }
}

// ---- the dispatcher's statements ----------------------------------------------------------------------
