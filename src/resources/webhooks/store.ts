import { leaseHolderGone } from '../../store/lease-holder.ts'
import type { EncryptedColumns } from '../../store/secret-keys.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import { recordAudit } from '../audit/store.ts'
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
  lagging_since: string | null
}

/** An endpoint's columns, as its CRUD and the dispatcher's claim read them. */
export const ENDPOINT_COLUMNS = `client_code, integration_id, url, status, disabled_reason, secret_version, secret_ciphertext,
  previous_secret_ciphertext, previous_expires_at, configured_seq, scanned_seq, lagging_since`

export async function findEndpoint(db: Queryable, clientCode: string, integrationId: string, forUpdate = false) {
  const rows = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS}
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
            configured_seq = COALESCE($4::bigint, configured_seq), scanned_seq = COALESCE($4::bigint, scanned_seq),
            lagging_since = CASE WHEN $4::bigint IS NULL THEN lagging_since END
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
  await recordAudit(db, {
    actor: a.actor,
    action: a.action,
    clientCode: a.clientCode,
    targetType: 'webhook_endpoint',
    targetId: `${a.integrationId}/${a.clientCode}`,
    details: a.details,
    change: a.change,
    occurredAt: a.now,
  })
}

/** A delivery: the feed event it notifies (the change feed's own row shape) and its delivery state. */
export interface DeliveryRow extends EventRow {
  delivery_id: string
  status: 'pending' | 'delivered' | 'abandoned' | 'skipped' | 'superseded'
  round_attempts: number
  superseded_by: string | null
  folded_count: number
  folded_from_revision: string | null
  attempt_count: number
  next_attempt_at: string | null
  last_error: string | null
  created_at: string
  completed_at: string | null
}

/** A delivery's columns, as both the delivery log and the dispatcher's claim read them. */
export const DELIVERY_COLUMNS = `delivery_id, seq, event_id, type, resource_type, resource_id, revision, occurred_at, status,
  round_attempts, attempt_count, next_attempt_at, last_error, created_at, completed_at, superseded_by, folded_count,
  folded_from_revision`

/**
 * Newest first (by feed sequence; a ping sorts at the sequence the endpoint had scanned when it was asked for);
 * keyset on (seq, delivery_id).
 */
export async function listDeliveries(
  db: Queryable,
  clientCode: string,
  integrationId: string,
  q: { before: { seq: string; deliveryId: string } | null; eventId: string | null; limit: number },
): Promise<DeliveryRow[]> {
  return db.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
      WHERE client_code = $1 AND integration_id = $2 AND ($3::bigint IS NULL OR (seq, delivery_id) < ($3::bigint, $6::text))
        AND ($4::uuid IS NULL OR event_id = $4)
      ORDER BY seq DESC, delivery_id DESC LIMIT $5`,
    [clientCode, integrationId, q.before?.seq ?? null, q.eventId, q.limit, q.before?.deliveryId ?? ''],
  )
}

/** The endpoint's ping waiting to be sent, if any. */
export async function findPendingPing(db: Queryable, clientCode: string, integrationId: string) {
  const rows = await db.query<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
      WHERE client_code = $1 AND integration_id = $2 AND status = 'pending' AND resource_type = 'webhook_endpoint' LIMIT 1`,
    [clientCode, integrationId],
  )
  return rows[0]
}

/**
 * A `ping` (POST .../webhook-endpoint/test): a delivery of no feed event, due now, sorted at the endpoint's scanned
 * sequence. Its notification names the endpoint (`resource` webhook_endpoint, the client code) at revision 0.
 */
export async function insertPing(db: Queryable, clientCode: string, integrationId: string, seq: string, now: string) {
  const rows = await db.query<DeliveryRow>(
    `INSERT INTO webhook_deliveries (client_code, integration_id, delivery_id, seq, event_id, type, resource_type, resource_id,
                                     revision, occurred_at, status, next_attempt_at, created_at)
     VALUES ($1, $2, 'dlv_' || replace(gen_random_uuid()::text, '-', ''), $3, gen_random_uuid(), 'ping', 'webhook_endpoint', $1,
             0, $4, 'pending', $4, $4)
     RETURNING ${DELIVERY_COLUMNS}`,
    [clientCode, integrationId, seq, now],
  )
  return rows[0] as DeliveryRow
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

/** A new round for one delivery, due now (a manual retry); a superseded one too (it is then sent as it is). */
export async function requeueDelivery(db: Queryable, clientCode: string, integrationId: string, deliveryId: string, now: string) {
  await db.query(
    `UPDATE webhook_deliveries SET status = 'pending', round_attempts = 0, next_attempt_at = $4, completed_at = NULL, superseded_by = NULL
      WHERE client_code = $1 AND integration_id = $2 AND delivery_id = $3`,
    [clientCode, integrationId, deliveryId, now],
  )
}

/**
 * Replay, one chunk: the first `limit` feed events after `afterSeq` (up to `throughSeq`, what the worker has
 * scanned) of the given resource types are queued again, due now, coalesced as the worker queues them: of the
 * events of one resource in the chunk only the newest is queued (its delivery queued again in a new round, or
 * created, counting the older ones as folded), and a pending delivery of a resource older than another pending one
 * is superseded (supersedeStale). Returns how many were queued and the last sequence looked at (null when none was
 * left: the replay is complete). Keyset on the feed's primary key, so a chunk costs its own rows only.
 */
export async function replayDeliveries(
  db: Queryable,
  clientCode: string,
  integrationId: string,
  q: { afterSeq: string; throughSeq: string; types: string[]; now: string; limit: number },
): Promise<{ queued: number; lastSeq: string | null; events: number }> {
  const rows = await db.query<{ last: string | null; n: string; resource_type: string | null; resource_id: string | null }>(
    `WITH chunk AS (
       SELECT seq, event_id, type, resource_type, resource_id, revision, occurred_at FROM change_events
        WHERE client_code = $1 AND seq > $3 AND seq <= $4 AND resource_type = ANY($5::text[])
        ORDER BY seq LIMIT $7),
     newest AS (
       SELECT DISTINCT ON (resource_type, resource_id) seq, event_id, type, resource_type, resource_id, revision, occurred_at,
              count(*) OVER w AS n, min(seq) OVER w AS first_seq, first_value(revision) OVER (w ORDER BY seq) AS first_revision
         FROM chunk
       WINDOW w AS (PARTITION BY resource_type, resource_id)
        ORDER BY resource_type, resource_id, seq DESC),
     ins AS (
       INSERT INTO webhook_deliveries (client_code, integration_id, delivery_id, seq, event_id, type, resource_type, resource_id,
                                       revision, occurred_at, status, next_attempt_at, created_at,
                                       folded_count, folded_from_seq, folded_from_revision)
       SELECT $1, $2, 'dlv_' || replace(gen_random_uuid()::text, '-', ''), seq, event_id, type, resource_type, resource_id,
              revision, occurred_at, 'pending', $6, $6,
              n - 1, CASE WHEN n > 1 THEN first_seq END, CASE WHEN n > 1 THEN first_revision END
         FROM newest
       ON CONFLICT (client_code, integration_id, seq) WHERE type <> 'ping' DO UPDATE
          SET status = 'pending', round_attempts = 0, next_attempt_at = $6, completed_at = NULL, superseded_by = NULL
       RETURNING resource_type, resource_id)
     SELECT (SELECT max(seq) FROM chunk) AS last, (SELECT count(*) FROM chunk) AS n, ins.resource_type, ins.resource_id
       FROM (SELECT 1) one LEFT JOIN ins ON true`,
    [clientCode, integrationId, q.afterSeq, q.throughSeq, q.types, q.now, q.limit],
  )
  const resources = rows.filter((r) => r.resource_type !== null) as { resource_type: string; resource_id: string }[]
  await supersedeStale(db, clientCode, integrationId, resources, q.now)
  const row = rows[0]
  return { queued: resources.length, lastSeq: row?.last ?? null, events: Number(row?.n ?? 0) }
}

/**
 * For each of `resources`, every pending delivery but the newest (by feed sequence) is marked `superseded`, naming
 * the newest, unless it is leased by a live holder: one being attempted (even past its lease's expiry: a slow
 * store) is left to its attempt, which records its outcome (completeAttempts supersedes it if the attempt fails);
 * a lease that merely expired is superseded by the claim that takes it (claimDeliveries).
 */
export async function supersedeStale(
  db: Queryable,
  clientCode: string,
  integrationId: string,
  resources: readonly { resource_type: string; resource_id: string }[],
  now: string,
): Promise<void> {
  if (resources.length === 0) return
  await db.query(
    `WITH r AS (SELECT DISTINCT * FROM unnest($3::text[], $4::text[]) AS r(resource_type, resource_id)),
     newest AS (
       SELECT DISTINCT ON (d.resource_type, d.resource_id) d.delivery_id, d.resource_type, d.resource_id, d.seq
         FROM webhook_deliveries d JOIN r ON r.resource_type = d.resource_type AND r.resource_id = d.resource_id
        WHERE d.client_code = $1 AND d.integration_id = $2 AND d.status = 'pending' AND d.type <> 'ping'
        ORDER BY d.resource_type, d.resource_id, d.seq DESC)
     UPDATE webhook_deliveries d
        SET status = 'superseded', superseded_by = newest.delivery_id, next_attempt_at = NULL, completed_at = $5,
            lease_token = NULL, lease_expires_at = NULL, lease_holder = NULL
       FROM newest
      WHERE d.client_code = $1 AND d.integration_id = $2 AND d.status = 'pending' AND d.type <> 'ping'
        AND d.resource_type = newest.resource_type AND d.resource_id = newest.resource_id AND d.seq < newest.seq
        AND (d.lease_token IS NULL OR ${leaseHolderGone('d.lease_holder')})`,
    [clientCode, integrationId, resources.map((r) => r.resource_type), resources.map((r) => r.resource_id), now],
  )
}
