import { leaseHolderGone } from '../../store/lease-holder.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import { DELIVERY_COLUMNS, type DeliveryRow, ENDPOINT_COLUMNS, type EndpointRow, supersedeStale } from './store.ts'

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
  /** The client's feed head (0 when it has none). */
  feed_head: string
  lagging_since: string | null
  grant_status: string | null
  scopes: string[] | null
  /** Its pending deliveries, counted up to the backlog limit. */
  pending: number
}

/**
 * The enabled endpoints a run has to derive for: behind their client's feed head, lagging (to clear it), or whose
 * grant is no longer active (to disable them). One read-only statement across clients (docs/decisions.md, "One delivery engine": the few
 * statements that find which clients have work); each endpoint is then locked and derived in its own transaction.
 */
export async function endpointsToDerive(db: Queryable, limit: number): Promise<{ client_code: string; integration_id: string }[]> {
  return db.query(
    `SELECT e.client_code, e.integration_id
       FROM webhook_endpoints e LEFT JOIN grants g ON g.client_code = e.client_code AND g.integration_id = e.integration_id
       LEFT JOIN feed_heads f ON f.client_code = e.client_code
      WHERE e.status = 'enabled'
        AND (e.scanned_seq < COALESCE(f.last_seq, 0) OR e.lagging_since IS NOT NULL OR g.status IS DISTINCT FROM 'active')
      ORDER BY e.client_code, e.integration_id LIMIT $1`,
    [limit],
  )
}

/**
 * One enabled endpoint with its grant, its client's feed head and its pending deliveries (counted up to `cap`),
 * locked for this transaction; undefined when another instance holds it (it derives it) or it is not enabled.
 */
export async function lockEndpointToDerive(
  tx: Tx,
  clientCode: string,
  integrationId: string,
  cap: number,
): Promise<EnabledEndpoint | undefined> {
  const rows = await tx.query<EnabledEndpoint>(
    `SELECT e.client_code, e.integration_id, e.scanned_seq, COALESCE(f.last_seq, 0) AS feed_head, e.lagging_since,
            g.status AS grant_status, g.scopes,
            (SELECT count(*) FROM (SELECT 1 FROM webhook_deliveries d
                                    WHERE d.client_code = $1 AND d.integration_id = $2 AND d.status = 'pending' LIMIT $3) p)::int AS pending
       FROM webhook_endpoints e LEFT JOIN grants g ON g.client_code = e.client_code AND g.integration_id = e.integration_id
       LEFT JOIN feed_heads f ON f.client_code = e.client_code
      WHERE e.client_code = $1 AND e.integration_id = $2 AND e.status = 'enabled'
      FOR UPDATE OF e SKIP LOCKED`,
    [clientCode, integrationId, cap],
  )
  return rows[0]
}

/** The endpoint's pending deliveries, counted up to `cap` (the backlog limit: more is never needed). */
export async function countPending(db: Queryable, clientCode: string, integrationId: string, cap: number): Promise<number> {
  const rows = await db.query<{ n: string }>(
    `SELECT count(*) AS n FROM (SELECT 1 FROM webhook_deliveries
        WHERE client_code = $1 AND integration_id = $2 AND status = 'pending' LIMIT $3) p`,
    [clientCode, integrationId, cap],
  )
  return Number(rows[0]?.n ?? 0)
}

/** Marks the endpoint lagging (true when this call marked it) or caught up (true when this call cleared it). */
export async function setLagging(db: Queryable, clientCode: string, integrationId: string, since: string | null): Promise<boolean> {
  const rows = await db.query(
    since === null
      ? `UPDATE webhook_endpoints SET lagging_since = NULL WHERE client_code = $1 AND integration_id = $2 AND lagging_since IS NOT NULL RETURNING 1`
      : `UPDATE webhook_endpoints SET lagging_since = $3 WHERE client_code = $1 AND integration_id = $2 AND lagging_since IS NULL RETURNING 1`,
    since === null ? [clientCode, integrationId] : [clientCode, integrationId, since],
  )
  return rows.length > 0
}

/**
 * Turns up to `limit` feed events after the endpoint's scanned sequence into deliveries (only those of the
 * readable resource types), and advances the scanned sequence past every event looked at. Sequence order is
 * commit order (feed/store.ts), so an event seen here has every lower-numbered event visible too: nothing
 * committed is skipped, and nothing uncommitted is ever read.
 *
 * Coalescing (docs/decisions.md, "Webhook coalescing, backlog and ping"): one notification per resource is queued,
 * the newest. Of several events of a resource in the chunk only the newest gets a delivery (the others are counted
 * on it as folded); a pending delivery of the resource that was never attempted and is not leased takes the newest
 * event instead (folded, in place: no row per superseded event); any other pending delivery of the resource
 * (waiting for a retry, or an expired lease) is marked `superseded`, naming the newer one. A delivery being attempted
 * right now is left to its attempt: if that fails, completeAttempts supersedes it.
 */
export async function deriveDeliveries(
  tx: Tx,
  e: { clientCode: string; integrationId: string; afterSeq: string; types: string[]; limit: number; now: string; leaseNow: string },
): Promise<{ queued: number; lastSeq: string | null }> {
  const rows = await tx.query<{ last: string | null; delivery_id: string | null; resource_type: string; resource_id: string; seq: string }>(
    `WITH batch AS (
       SELECT seq, event_id, type, resource_type, resource_id, revision, occurred_at FROM change_events
        WHERE client_code = $1 AND seq > $3 ORDER BY seq LIMIT $5),
     moved AS (
       UPDATE webhook_endpoints SET scanned_seq = (SELECT max(seq) FROM batch)
        WHERE client_code = $1 AND integration_id = $2 AND EXISTS (SELECT 1 FROM batch) RETURNING scanned_seq),
     newest AS (
       SELECT DISTINCT ON (resource_type, resource_id) seq, event_id, type, resource_type, resource_id, revision, occurred_at,
              count(*) OVER w AS n, min(seq) OVER w AS first_seq, first_value(revision) OVER (w ORDER BY seq) AS first_revision
         FROM batch WHERE resource_type = ANY($4::text[])
       WINDOW w AS (PARTITION BY resource_type, resource_id)
        ORDER BY resource_type, resource_id, seq DESC),
     target AS (
       SELECT DISTINCT ON (d.resource_type, d.resource_id) d.delivery_id
         FROM webhook_deliveries d JOIN newest n ON n.resource_type = d.resource_type AND n.resource_id = d.resource_id
        WHERE d.client_code = $1 AND d.integration_id = $2 AND d.status = 'pending' AND d.type <> 'ping'
          AND d.attempt_count = 0 AND d.lease_token IS NULL
        ORDER BY d.resource_type, d.resource_id, d.seq DESC),
     folded AS (
       UPDATE webhook_deliveries d
          SET seq = n.seq, event_id = n.event_id, type = n.type, revision = n.revision, occurred_at = n.occurred_at,
              folded_count = d.folded_count + n.n, folded_from_seq = COALESCE(d.folded_from_seq, d.seq),
              folded_from_revision = COALESCE(d.folded_from_revision, d.revision)
         FROM target t, newest n
        WHERE d.client_code = $1 AND d.integration_id = $2 AND d.delivery_id = t.delivery_id
          AND n.resource_type = d.resource_type AND n.resource_id = d.resource_id
          AND d.status = 'pending' AND d.attempt_count = 0 AND d.lease_token IS NULL
       RETURNING d.delivery_id, d.resource_type, d.resource_id, d.seq),
     ins AS (
       INSERT INTO webhook_deliveries (client_code, integration_id, delivery_id, seq, event_id, type, resource_type, resource_id,
                                       revision, occurred_at, status, next_attempt_at, created_at,
                                       folded_count, folded_from_seq, folded_from_revision)
       SELECT $1, $2, 'dlv_' || replace(gen_random_uuid()::text, '-', ''), seq, event_id, type, resource_type, resource_id,
              revision, occurred_at, 'pending', $6, $6,
              n - 1, CASE WHEN n > 1 THEN first_seq END, CASE WHEN n > 1 THEN first_revision END
         FROM newest n
        WHERE NOT EXISTS (SELECT 1 FROM folded f WHERE f.resource_type = n.resource_type AND f.resource_id = n.resource_id)
       ON CONFLICT (client_code, integration_id, seq) WHERE type <> 'ping' DO NOTHING
       RETURNING delivery_id, resource_type, resource_id, seq)
     SELECT (SELECT scanned_seq FROM moved) AS last, w.delivery_id, w.resource_type, w.resource_id, w.seq
       FROM (SELECT 1) one LEFT JOIN (SELECT * FROM folded UNION ALL SELECT * FROM ins) w ON true`,
    [e.clientCode, e.integrationId, e.afterSeq, e.types, e.limit, e.now],
  )
  const winners = rows.filter((r) => r.delivery_id !== null) as { resource_type: string; resource_id: string }[]
  await supersedeStale(tx, e.clientCode, e.integrationId, winners, e.now)
  return { queued: winners.length, lastSeq: rows[0]?.last ?? null }
}

/**
 * Endpoints with a delivery due at `now` whose lease (if any) expired at `leaseNow` (real time: leases
 * coordinate processes), and budget left in their current window (`budget` notifications per `windowMs`, real
 * time). With `clocked`, a client whose sandbox clock is stopped is due at its clock's time.
 */
export async function dueEndpoints(
  db: Queryable,
  now: string,
  limit: number,
  opts: { leaseNow?: string; clocked?: boolean; windowMs?: number; budget?: number } = {},
) {
  const dueAt = opts.clocked ? 'COALESCE((SELECT sc.frozen_at FROM sandbox_clocks sc WHERE sc.client_code = e.client_code), $1)' : '$1'
  return db.query<{ client_code: string; integration_id: string }>(
    `SELECT e.client_code, e.integration_id FROM webhook_endpoints e
      WHERE e.status = 'enabled'
        AND (e.budget_window_start IS NULL OR e.budget_used < $5
             OR e.budget_window_start <= $3::timestamptz - make_interval(secs => $4::double precision / 1000))
        AND EXISTS (
        SELECT 1 FROM webhook_deliveries d
         WHERE d.client_code = e.client_code AND d.integration_id = e.integration_id AND d.status = 'pending'
           AND d.next_attempt_at <= ${dueAt}
           AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= $3 OR ${leaseHolderGone('d.lease_holder')}))
      LIMIT $2`,
    [now, limit, opts.leaseNow ?? now, opts.windowMs ?? 60_000, opts.budget ?? 10],
  )
}

/** What a claim took, and when the endpoint's budget window ends when the claim used it up (null otherwise). */
export interface Claim {
  /** The endpoint as it is, read under the claim's lock (undefined: there is none any more). */
  endpoint: EndpointRow | undefined
  /** The scopes of its grant, or null when the grant is not active. */
  grantScopes: string[] | null
  deliveries: DeliveryRow[]
  /** Claimed deliveries found superseded by a newer pending one of their resource (marked so, never sent). */
  superseded: number
  exhaustedUntil: string | null
}

/**
 * Claims up to `limit` due deliveries of one endpoint as a lease, within the endpoint's budget: at most `budget`
 * notifications per window of `windowMs` (real time), counted in the endpoint's row, so every instance shares
 * it (call it in a transaction of its own). The endpoint row is locked first (the budget is read and written under it), then the deliveries are picked
 * with FOR UPDATE SKIP LOCKED, so two instances never claim the same row. Pings first, then by due time. A
 * picked delivery of a resource with a newer delivery pending or delivered (a lease that expired, or an attempt
 * that was under way, while a newer revision was queued) is marked `superseded` instead, and costs no budget. A dead worker's lease is taken again
 * at once when its holder's lock is gone (src/store/lease-holder.ts), else when it expires (at least once).
 */
export async function claimDeliveries(
  tx: Tx,
  /**
   * `now`: the client's time (due deliveries); `leaseNow`: real time (expired leases, the budget window), `now`
   * when omitted; `holder`: this instance's lease key (null: none, the lease only expires).
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
    /** Notifications per window (10); the window (WEBHOOK_INTERVAL_MS). */
    budget?: number
    windowMs?: number
  },
): Promise<Claim> {
  const leaseNow = c.leaseNow ?? c.now
  const budget = c.budget ?? Number.POSITIVE_INFINITY
  const windowMs = c.windowMs ?? 60_000
  {
    // The endpoint and its grant as they are now, under the endpoint's lock: what the attempts are checked against.
    const [ep] = await tx.query<EndpointRow & { budget_window_start: string | null; budget_used: number; grant_scopes: string[] | null }>(
      `SELECT ${ENDPOINT_COLUMNS.replace(/(\w+)/g, 'e.$1')}, e.budget_window_start, e.budget_used,
              CASE WHEN g.status = 'active' THEN g.scopes END AS grant_scopes
         FROM webhook_endpoints e LEFT JOIN grants g ON g.client_code = e.client_code AND g.integration_id = e.integration_id
        WHERE e.client_code = $1 AND e.integration_id = $2 FOR UPDATE OF e`,
      [c.clientCode, c.integrationId],
    )
    if (!ep) return { endpoint: undefined, grantScopes: null, deliveries: [], superseded: 0, exhaustedUntil: null }
    const found = { endpoint: ep as EndpointRow, grantScopes: ep.grant_scopes }
    // Disabled, or its grant revoked: nothing is claimed (the engine disables the endpoint of a revoked grant).
    if (ep.status !== 'enabled' || ep.grant_scopes === null) return { ...found, deliveries: [], superseded: 0, exhaustedUntil: null }
    const nowMs = Date.parse(leaseNow)
    const startMs = ep.budget_window_start === null ? null : Date.parse(ep.budget_window_start)
    const current = startMs !== null && startMs > nowMs - windowMs
    const used = current ? ep.budget_used : 0
    const windowStart = current ? (startMs as number) : nowMs
    const room = Math.min(c.limit, budget - used)
    const windowEnd = new Date(windowStart + windowMs).toISOString()
    if (room <= 0) return { ...found, deliveries: [], superseded: 0, exhaustedUntil: windowEnd }
    const rows = await tx.query<DeliveryRow & { newer: string | null }>(
      `WITH cand AS (
         (SELECT delivery_id FROM webhook_deliveries
           WHERE client_code = $1 AND integration_id = $2 AND status = 'pending' AND resource_type = 'webhook_endpoint'
             AND next_attempt_at <= $4 LIMIT $6)
         UNION
         (SELECT delivery_id FROM webhook_deliveries
           WHERE client_code = $1 AND integration_id = $2 AND status = 'pending' AND next_attempt_at <= $4
             AND (lease_expires_at IS NULL OR lease_expires_at <= $7 OR ${leaseHolderGone('lease_holder')})
           ORDER BY next_attempt_at, seq LIMIT $6)),
       picked AS (
         SELECT d.delivery_id,
                (SELECT n.delivery_id FROM webhook_deliveries n
                  WHERE n.client_code = $1 AND n.integration_id = $2 AND n.status IN ('pending', 'delivered') AND n.type <> 'ping'
                    AND d.type <> 'ping' AND n.resource_type = d.resource_type AND n.resource_id = d.resource_id AND n.seq > d.seq
                  ORDER BY n.seq DESC LIMIT 1) AS newer
           FROM webhook_deliveries d
          WHERE d.client_code = $1 AND d.integration_id = $2 AND d.delivery_id IN (SELECT delivery_id FROM cand)
            AND d.status = 'pending' AND d.next_attempt_at <= $4
            AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= $7 OR ${leaseHolderGone('d.lease_holder')})
          ORDER BY (d.resource_type = 'webhook_endpoint') DESC, d.next_attempt_at, d.seq LIMIT $6
          FOR UPDATE OF d SKIP LOCKED)
       UPDATE webhook_deliveries d
          SET lease_token = CASE WHEN picked.newer IS NULL THEN $3::uuid END,
              lease_expires_at = CASE WHEN picked.newer IS NULL THEN $5::timestamptz END,
              lease_holder = CASE WHEN picked.newer IS NULL THEN $8::bigint END,
              status = CASE WHEN picked.newer IS NULL THEN d.status ELSE 'superseded' END,
              superseded_by = picked.newer,
              next_attempt_at = CASE WHEN picked.newer IS NULL THEN d.next_attempt_at END,
              completed_at = CASE WHEN picked.newer IS NULL THEN d.completed_at ELSE $4::timestamptz END
         FROM picked WHERE d.client_code = $1 AND d.integration_id = $2 AND d.delivery_id = picked.delivery_id
       RETURNING ${DELIVERY_COLUMNS.replace(/(\w+)/g, 'd.$1')}, picked.newer`,
      [c.clientCode, c.integrationId, c.token, c.now, c.leaseUntil, room, leaseNow, c.holder ?? null],
    )
    const deliveries = rows.filter((r) => r.newer === null)
    const usedNow = used + deliveries.length
    if (deliveries.length > 0 || !current) {
      await tx.query(
        `UPDATE webhook_endpoints SET budget_window_start = $3, budget_used = $4 WHERE client_code = $1 AND integration_id = $2`,
        [c.clientCode, c.integrationId, new Date(windowStart).toISOString(), usedNow],
      )
    }
    return {
      ...found,
      deliveries,
      superseded: rows.length - deliveries.length,
      exhaustedUntil: usedNow >= budget ? windowEnd : null,
    }
  }
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
 * A delivery of the same resource as `d` (the row being updated) of a later feed event, pending or delivered
 * already: it supersedes `d` (a retry of `d` would tell the receiver nothing newer than what it has or will have).
 * The client and the endpoint are the statement's own ($1, $2), not the outer row's, so that the subquery names its
 * client (docs/scaling.md).
 */
const NEWER_PENDING_WHERE = `n.client_code = $1 AND n.integration_id = $2 AND n.status IN ('pending', 'delivered')
  AND n.type <> 'ping' AND d.type <> 'ping' AND n.resource_type = d.resource_type AND n.resource_id = d.resource_id AND n.seq > d.seq`
const NEWER_PENDING = `SELECT 1 FROM webhook_deliveries n WHERE ${NEWER_PENDING_WHERE}`

/**
 * Records the outcomes of one endpoint's attempts in one statement. A failed attempt (`pending`: to be retried)
 * whose resource got a newer delivery meanwhile (pending, or delivered already) is `superseded` by it instead: only
 * the newest is sent. The claim token guards it: a worker
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
          SET status = CASE WHEN r.status = 'pending' AND EXISTS (${NEWER_PENDING}) THEN 'superseded' ELSE r.status END,
              superseded_by = CASE WHEN r.status = 'pending' THEN (SELECT n.delivery_id FROM webhook_deliveries n
                WHERE ${NEWER_PENDING_WHERE} ORDER BY n.seq DESC LIMIT 1) END,
              next_attempt_at = CASE WHEN r.status = 'pending' AND EXISTS (${NEWER_PENDING}) THEN NULL ELSE r.next_attempt_at END,
              last_error = r.last_error,
              round_attempts = d.round_attempts + 1, attempt_count = d.attempt_count + 1,
              lease_token = NULL, lease_expires_at = NULL,
              completed_at = CASE WHEN r.status = 'pending' AND NOT EXISTS (${NEWER_PENDING}) THEN NULL ELSE r.attempted_at END
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

/** Retention: one client's delivery records older than `days` at its time `now` (attempts go with them). */
export async function purgeClientDeliveries(db: Queryable, clientCode: string, now: string, days: number): Promise<void> {
  await db.query(`DELETE FROM webhook_deliveries WHERE client_code = $1 AND created_at < $2::timestamptz - make_interval(days => $3)`, [
    clientCode,
    now,
    days,
  ])
}
