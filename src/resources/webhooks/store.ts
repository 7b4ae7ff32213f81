import { randomUUID } from 'node:crypto'
import { canonicalDigest } from '../../domain/canonical.ts'
import { leaseHolderGone } from '../../store/lease-holder.ts'
import type { EncryptedColumns } from '../../store/secret-keys.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import { secretAad } from './secrets.ts'

/** SQL of the webhook family. Every function takes the queryable and the client code (and the Integration). */

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

export async function feedPurgedThrough(db: Queryable, clientCode: string): Promise<bigint> {
  const rows = await db.query<{ purged_through_seq: string }>('SELECT purged_through_seq FROM feed_heads WHERE client_code = $1', [
    clientCode,
  ])
  return BigInt(rows[0]?.purged_through_seq ?? '0')
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

export interface DeliveryRow {
  delivery_id: string
  seq: string
  event_id: string
  type: string
  resource_type: string
  resource_id: string
  revision: string
  occurred_at: string
  status: 'pending' | 'delivered' | 'abandoned' | 'skipped'
  round_attempts: number
  attempt_count: number
  next_attempt_at: string | null
  last_error: string | null
  created_at: string
  completed_at: string | null
}

const DELIVERY_COLUMNS = `delivery_id, seq, event_id, type, resource_type, resource_id, revision, occurred_at, status,
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

export interface EnabledEndpoint {
  client_code: string
  integration_id: string
  scanned_seq: string
  grant_status: string | null
  scopes: string[] | null
}

/**
 * Up to `limit` enabled endpoints after the `after` key, with their grant, locked for this transaction
 * (another instance skips them). Callers walk every endpoint in keyset chunks, one transaction each.
 */
export async function lockEnabledEndpoints(
  tx: Tx,
  after: { clientCode: string; integrationId: string } | null,
  limit: number,
): Promise<EnabledEndpoint[]> {
  return tx.query<EnabledEndpoint>(
    `SELECT e.client_code, e.integration_id, e.scanned_seq, g.status AS grant_status, g.scopes
       FROM webhook_endpoints e LEFT JOIN grants g ON g.client_code = e.client_code AND g.integration_id = e.integration_id
      WHERE e.status = 'enabled' AND ($1::text IS NULL OR (e.client_code, e.integration_id) > ($1::text, $2::text))
      ORDER BY e.client_code, e.integration_id LIMIT $3
      FOR UPDATE OF e SKIP LOCKED`,
    [after?.clientCode ?? null, after?.integrationId ?? null, limit],
  )
}

/**
 * Turns up to `limit` feed events after the endpoint's scanned sequence into deliveries (only those of the
 * readable resource types), and advances the scanned sequence past every event looked at. Sequence order is
 * commit order (changes/store.ts), so an event seen here has every lower-numbered event visible too: nothing
 * committed is skipped, and nothing uncommitted is ever read.
 */
export async function deriveDeliveries(
  tx: Tx,
  e: { clientCode: string; integrationId: string; afterSeq: string; types: string[]; limit: number; now: string },
): Promise<number> {
  const rows = await tx.query<{ last: string | null; n: string }>(
    `WITH batch AS (
       SELECT seq, event_id, type, resource_type, resource_id, revision, occurred_at FROM change_events
        WHERE client_code = $1 AND seq > $3 ORDER BY seq LIMIT $5),
     ins AS (
       INSERT INTO webhook_deliveries (client_code, integration_id, delivery_id, seq, event_id, type, resource_type, resource_id,
                                       revision, occurred_at, status, next_attempt_at, created_at)
       SELECT $1, $2, 'dlv_' || replace(gen_random_uuid()::text, '-', ''), seq, event_id, type, resource_type, resource_id,
              revision, occurred_at, 'pending', $6, $6
         FROM batch WHERE resource_type = ANY($4::text[])
       ON CONFLICT (client_code, integration_id, seq) DO NOTHING RETURNING 1),
     moved AS (
       UPDATE webhook_endpoints SET scanned_seq = (SELECT max(seq) FROM batch)
        WHERE client_code = $1 AND integration_id = $2 AND EXISTS (SELECT 1 FROM batch) RETURNING scanned_seq)
     SELECT (SELECT scanned_seq FROM moved) AS last, (SELECT count(*) FROM ins) AS n`,
    [e.clientCode, e.integrationId, e.afterSeq, e.types, e.limit, e.now],
  )
  return Number(rows[0]?.n ?? 0)
}

/** Endpoints with deliveries due now and not leased. */
/**
 * Endpoints with a delivery due at `now` whose lease (if any) expired at `leaseNow` (real time: leases
 * coordinate processes). With `clocked`, a client whose sandbox clock is stopped is due at its clock's time.
 */
export async function dueEndpoints(db: Queryable, now: string, limit: number, opts: { leaseNow?: string; clocked?: boolean } = {}) {
  const dueAt = opts.clocked ? 'COALESCE((SELECT sc.frozen_at FROM sandbox_clocks sc WHERE sc.client_code = e.client_code), $1)' : '$1'
  return db.query<{ client_code: string; integration_id: string }>(
    `SELECT e.client_code, e.integration_id FROM webhook_endpoints e
      WHERE e.status = 'enabled' AND EXISTS (
        SELECT 1 FROM webhook_deliveries d
         WHERE d.client_code = e.client_code AND d.integration_id = e.integration_id AND d.status = 'pending'
           AND d.next_attempt_at <= ${dueAt}
           AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= $3 OR ${leaseHolderGone('d.lease_holder')}))
      LIMIT $2`,
    [now, limit, opts.leaseNow ?? now],
  )
}

/**
 * Claims up to `limit` due deliveries of one endpoint as a lease: one UPDATE over rows picked with
 * FOR UPDATE SKIP LOCKED, so two instances never claim the same row. A dead worker's lease is taken again at
 * once when its holder's lock is gone (src/store/lease-holder.ts), else when it expires (at least once).
 */
export async function claimDeliveries(
  db: Queryable,
  /**
   * `now`: the client's time (due deliveries); `leaseNow`: real time (expired leases), `now` when omitted;
   * `holder`: this instance's lease key (null: none, the lease only expires).
   */
  c: {
    clientCode: string
    integrationId: string
    token: string
    now: string
    leaseNow?: string
    leaseUntil: string
    limit: number
    holder?: number | null
  },
): Promise<DeliveryRow[]> {
  return db.query<DeliveryRow>(
    `WITH picked AS (
       SELECT delivery_id FROM webhook_deliveries
        WHERE client_code = $1 AND integration_id = $2 AND status = 'pending' AND next_attempt_at <= $4
          AND (lease_expires_at IS NULL OR lease_expires_at <= $7 OR ${leaseHolderGone('lease_holder')})
        ORDER BY next_attempt_at, seq LIMIT $6
        FOR UPDATE SKIP LOCKED)
     UPDATE webhook_deliveries d SET lease_token = $3, lease_expires_at = $5, lease_holder = $8
       FROM picked WHERE d.client_code = $1 AND d.integration_id = $2 AND d.delivery_id = picked.delivery_id
     RETURNING ${DELIVERY_COLUMNS.replace(/(\w+)/g, 'd.$1')}`,
    [c.clientCode, c.integrationId, c.token, c.now, c.leaseUntil, c.limit, c.leaseNow ?? c.now, c.holder ?? null],
  )
}

/** Hands claimed deliveries back untouched (no attempt was made). */
export async function releaseDeliveries(db: Queryable, clientCode: string, integrationId: string, token: string, ids: string[]) {
  if (ids.length === 0) return
  await db.query(
    `UPDATE webhook_deliveries SET lease_token = NULL, lease_expires_at = NULL
      WHERE client_code = $1 AND integration_id = $2 AND lease_token = $3 AND delivery_id = ANY($4::text[])`,
    [clientCode, integrationId, token, ids],
  )
}

/**
 * Says on every pending delivery of the endpoint why it is not being sent (the delivery log's `lastError`), when
 * the endpoint was disabled for a reason the integrator has to act on. A later attempt overwrites it.
 */
export async function notePendingDeliveries(db: Queryable, clientCode: string, integrationId: string, lastError: string) {
  await db.query(`UPDATE webhook_deliveries SET last_error = $3 WHERE client_code = $1 AND integration_id = $2 AND status = 'pending'`, [
    clientCode,
    integrationId,
    lastError,
  ])
}

/** Claimed deliveries the grant may no longer read: nothing is sent, ever (a replay can queue them again). */
export async function skipDeliveries(db: Queryable, clientCode: string, integrationId: string, token: string, ids: string[], now: string) {
  if (ids.length === 0) return
  await db.query(
    `UPDATE webhook_deliveries SET status = 'skipped', last_error = 'grant_lacks_read_scope', completed_at = $5,
            lease_token = NULL, lease_expires_at = NULL
      WHERE client_code = $1 AND integration_id = $2 AND lease_token = $3 AND delivery_id = ANY($4::text[])`,
    [clientCode, integrationId, token, ids, now],
  )
}

export interface AttemptOutcome {
  deliveryId: string
  status: 'pending' | 'delivered' | 'abandoned'
  nextAttemptAt: string | null
  lastError: string | null
  attemptedAt: string
  durationMs: number
  httpStatus: number | null
  errorClass: string | null
}

/**
 * Records the outcomes of one endpoint's attempts in one statement. The claim token guards it: a worker
 * whose lease expired (and whose deliveries another instance took) changes nothing.
 */
export async function completeAttempts(
  db: Queryable,
  clientCode: string,
  integrationId: string,
  token: string,
  outcomes: AttemptOutcome[],
): Promise<void> {
  if (outcomes.length === 0) return
  await db.query(
    `WITH r AS (
       SELECT * FROM unnest($4::text[], $5::text[], $6::timestamptz[], $7::text[], $8::timestamptz[], $9::int[], $10::int[], $11::text[])
         AS r(delivery_id, status, next_attempt_at, last_error, attempted_at, duration_ms, http_status, error_class)),
     upd AS (
       UPDATE webhook_deliveries d
          SET status = r.status, next_attempt_at = r.next_attempt_at, last_error = r.last_error,
              round_attempts = d.round_attempts + 1, attempt_count = d.attempt_count + 1,
              lease_token = NULL, lease_expires_at = NULL,
              completed_at = CASE WHEN r.status = 'pending' THEN NULL ELSE r.attempted_at END
         FROM r
        WHERE d.client_code = $1 AND d.integration_id = $2 AND d.delivery_id = r.delivery_id AND d.lease_token = $3
       RETURNING d.delivery_id, d.attempt_count, r.attempted_at, r.duration_ms, r.http_status, r.error_class)
     INSERT INTO webhook_attempts (client_code, integration_id, delivery_id, attempt, attempted_at, duration_ms, http_status, error_class)
     SELECT $1, $2, delivery_id, attempt_count, attempted_at, duration_ms, http_status, error_class FROM upd`,
    [
      clientCode,
      integrationId,
      token,
      outcomes.map((o) => o.deliveryId),
      outcomes.map((o) => o.status),
      outcomes.map((o) => o.nextAttemptAt),
      outcomes.map((o) => o.lastError),
      outcomes.map((o) => o.attemptedAt),
      outcomes.map((o) => o.durationMs),
      outcomes.map((o) => o.httpStatus),
      outcomes.map((o) => o.errorClass),
    ],
  )
}

/** Delivery records older than the retention period (attempts go with them). */
export async function purgeDeliveries(db: Queryable, days: number): Promise<void> {
  await db.query(`DELETE FROM webhook_deliveries WHERE created_at < now() - make_interval(days => $1)`, [days])
}

/** One client's delivery records older than `days` at its time `now` (a sandbox clock). */
export async function purgeClientDeliveries(db: Queryable, clientCode: string, now: string, days: number): Promise<void> {
  await db.query(`DELETE FROM webhook_deliveries WHERE client_code = $1 AND created_at < $2::timestamptz - make_interval(days => $3)`, [
    clientCode,
    now,
    days,
  ])
}
