import { leaseHolderGone } from '../../store/lease-holder.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import { DELIVERY_COLUMNS, type DeliveryRow } from './store.ts'

/**
 * SQL of the webhook dispatcher (src/workers/webhook-dispatcher.ts), the second actor on an endpoint's rows:
 * deriving deliveries from the feed, claiming them as leases, recording attempts, and purging old records. The
 * endpoint's own CRUD and the delivery log's reads are store.ts. Every function takes the queryable and the client
 * code (and the Integration).
 */

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
 * commit order (feed/store.ts), so an event seen here has every lower-numbered event visible too: nothing
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
