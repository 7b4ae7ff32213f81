import { leaseHolderGone } from '../../store/lease-holder.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import { ROUTE_COLUMNS, type RouteRow } from './store.ts'

/**
 * SQL of the receipt dispatcher (src/workers/receipt-dispatcher.ts), the second actor on a client's receipt rows:
 * deriving receipts from committed facts, claiming them as leases, recording attempts. The route's own CRUD and the
 * receipt-delivery read are store.ts. Every function takes the queryable and the client code.
 */

export interface VerifiedRoute {
  client_code: string
  integration_id: string
  scanned_seq: string
  grant_status: string | null
  receipt_delivery_owner: string | null
}

/**
 * The verified routes a run has to derive for: behind their client's feed head, or whose grant is no longer active
 * (to disable them). One read-only statement across clients (the few that find which clients have work); each
 * route is then locked and derived in its own transaction.
 */
export async function routesToDerive(db: Queryable, limit: number): Promise<string[]> {
  const rows = await db.query<{ client_code: string }>(
    `SELECT r.client_code
       FROM receipt_routes r LEFT JOIN grants g ON g.client_code = r.client_code AND g.integration_id = r.integration_id
       LEFT JOIN feed_heads f ON f.client_code = r.client_code
      WHERE r.state = 'verified' AND (r.scanned_seq < COALESCE(f.last_seq, 0) OR g.status IS DISTINCT FROM 'active')
      ORDER BY r.client_code LIMIT $1`,
    [limit],
  )
  return rows.map((r) => r.client_code)
}

/** The client's verified route with its grant, locked for this transaction; undefined when another instance holds it. */
export async function lockRouteToDerive(tx: Tx, clientCode: string): Promise<VerifiedRoute | undefined> {
  const rows = await tx.query<VerifiedRoute>(
    `SELECT r.client_code, r.integration_id, r.scanned_seq, g.status AS grant_status, g.receipt_delivery_owner
       FROM receipt_routes r LEFT JOIN grants g ON g.client_code = r.client_code AND g.integration_id = r.integration_id
      WHERE r.client_code = $1 AND r.state = 'verified'
      FOR UPDATE OF r SKIP LOCKED`,
    [clientCode],
  )
  return rows[0]
}

/**
 * A feed event after the route's scanned sequence, with the facts of the receipt it may give: `payment.confirmed`
 * (the confirmed Payment), `refund.succeeded`, `payment.reversed` and `payment.reinstated` (the Payment, and the one
 * take-back the event reports: payments/take-back-store.ts, keyed `refund/<refund id>`, `reversal/<the revision the
 * event carries>` or `reinstatement/<the revision the event carries>`).
 * `external_payment_request_id` is null for every other event.
 */
export interface ScannedEvent {
  seq: string
  type: string
  revision: string
  external_payment_request_id: string | null
  take_back_key: string | null
  take_back_minor: string | null
  take_back_unapplied_minor: string | null
  take_back_occurred_at: string | null
  provider_payment_id: string | null
  currency: string | null
  amount_minor: string | null
  unapplied_minor: string | null
  external_receivable_id: string | null
  decided_at: string | null
}

/**
 * The next `limit` change-feed events of the client after `afterSeq`, each with the confirmed Payment it
 * reports, if any, and the take-back of a refund or reversal event. Sequence order is commit order
 * (feed/store.ts): an event seen here has every lower-numbered event visible too, so nothing committed is skipped
 * and nothing uncommitted is read.
 */
export async function scanFeed(db: Queryable, clientCode: string, afterSeq: string, limit: number): Promise<ScannedEvent[]> {
  return db.query<ScannedEvent>(
    `WITH batch AS (
       SELECT seq, type, resource_id, revision, occurred_at FROM change_events WHERE client_code = $1 AND seq > $2 ORDER BY seq LIMIT $3)
     SELECT b.seq, b.type, b.revision, p.external_payment_request_id, t.take_back_key, t.amount_minor AS take_back_minor,
            t.unapplied_minor AS take_back_unapplied_minor, t.occurred_at AS take_back_occurred_at, p.provider_payment_id,
            p.currency, p.amount_minor, p.unapplied_minor, p.external_receivable_id, p.decided_at
       FROM batch b
       LEFT JOIN refunds f ON b.type = 'refund.succeeded' AND f.client_code = $1 AND f.status = 'succeeded'
                          AND f.external_payment_request_id || '/' || f.external_refund_id = b.resource_id
       LEFT JOIN payments p ON p.client_code = $1 AND p.status = 'confirmed'
                           AND ((b.type IN ('payment.confirmed', 'payment.reversed', 'payment.reinstated')
                                 AND p.external_payment_request_id = b.resource_id)
                                OR (b.type = 'refund.succeeded' AND p.external_payment_request_id = f.external_payment_request_id))
       LEFT JOIN payment_take_backs t ON t.client_code = $1 AND t.external_payment_request_id = p.external_payment_request_id
                                     AND t.take_back_key = CASE b.type WHEN 'refund.succeeded' THEN 'refund/' || f.external_refund_id
                                                                       WHEN 'payment.reversed' THEN 'reversal/' || b.revision
                                                                       WHEN 'payment.reinstated' THEN 'reinstatement/' || b.revision END
      ORDER BY b.seq`,
    [clientCode, afterSeq, limit],
  )
}

export interface NewReceipt {
  receiptId: string
  kind: 'payment' | 'refund' | 'reversal' | 'reinstatement'
  sourceKey: string
  requestId: string
  payload: unknown
}

/**
 * Inserts the receipts (one statement; a receipt already there is left as it is: the same receipt id, the payload
 * fixed when it was first created) and moves the route's scanned sequence to `throughSeq`.
 */
export async function insertReceipts(tx: Tx, clientCode: string, receipts: readonly NewReceipt[], throughSeq: string, now: string) {
  await tx.query(
    `WITH r AS (
       SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[])
         AS r(receipt_id, kind, source_key, request_id, payload)),
     ins AS (
       INSERT INTO receipt_deliveries (client_code, receipt_id, kind, source_key, external_payment_request_id, payload,
                                       status, next_attempt_at, created_at)
       SELECT $1, receipt_id, kind, source_key, request_id, payload, 'pending', $8, $8 FROM r
       ON CONFLICT DO NOTHING RETURNING 1)
     UPDATE receipt_routes SET scanned_seq = GREATEST(scanned_seq, $7::bigint) WHERE client_code = $1`,
    [
      clientCode,
      receipts.map((r) => r.receiptId),
      receipts.map((r) => r.kind),
      receipts.map((r) => r.sourceKey),
      receipts.map((r) => r.requestId),
      receipts.map((r) => JSON.stringify(r.payload)),
      throughSeq,
      now,
    ],
  )
}

/**
 * Clients with a receipt due at `now` whose lease (if any) expired at `leaseNow` (real time) or whose holder is
 * gone, and whose route could send it: verified, or unverified for a test receipt.
 */
export async function dueClients(db: Queryable, now: string, leaseNow: string, limit: number): Promise<string[]> {
  const rows = await db.query<{ client_code: string }>(
    `SELECT r.client_code FROM receipt_routes r
      WHERE r.state <> 'disabled' AND EXISTS (
        SELECT 1 FROM receipt_deliveries d
         WHERE d.client_code = r.client_code AND d.status = 'pending' AND d.next_attempt_at <= $1
           AND (d.kind = 'test') = (r.state = 'unverified')
           AND (d.lease_expires_at IS NULL OR d.lease_expires_at <= $2 OR ${leaseHolderGone('d.lease_holder')}))
      LIMIT $3`,
    [now, leaseNow, limit],
  )
  return rows.map((r) => r.client_code)
}

export interface ReceiptRow {
  receipt_id: string
  kind: 'test' | 'payment' | 'refund' | 'reversal' | 'reinstatement'
  source_key: string
  external_payment_request_id: string | null
  payload: Record<string, unknown>
  round_attempts: number
  attempt_count: number
}

/** The route and the grant that governs it, as a claim reads them under the route's lock. */
export interface ClaimRoute extends RouteRow {
  grant_status: string | null
  receipt_delivery_owner: string | null
}

/** The client's route and its grant, locked for the claim's transaction (undefined: no route). */
export async function lockRouteForClaim(tx: Tx, clientCode: string): Promise<ClaimRoute | undefined> {
  const rows = await tx.query<ClaimRoute>(
    `SELECT ${ROUTE_COLUMNS.replace(/(\w+)/g, 'r.$1')}, g.status AS grant_status, g.receipt_delivery_owner
       FROM receipt_routes r LEFT JOIN grants g ON g.client_code = r.client_code AND g.integration_id = r.integration_id
      WHERE r.client_code = $1 FOR UPDATE OF r`,
    [clientCode],
  )
  return rows[0]
}

/**
 * Claims up to `limit` due receipts of one client as a lease: one UPDATE over rows picked with FOR UPDATE SKIP
 * LOCKED, so two instances never claim the same row. `testVersion`: the route is unverified, so only the test receipt
 * of that configuration may go, and the digest of the new confirmation code it will carry (`confirmationDigest`)
 * replaces the route's in the same statement when it is claimed; null: only real receipts. A dead worker's lease is
 * taken again at once when its holder's lock is gone (src/store/lease-holder.ts), else when it expires (at least once).
 */
export async function claimReceipts(
  tx: Tx,
  c: {
    clientCode: string
    testVersion: number | null
    confirmationDigest: string | null
    token: string
    now: string
    leaseNow: string
    leaseUntil: string
    limit: number
    holder: number | null
  },
): Promise<ReceiptRow[]> {
  return tx.query<ReceiptRow>(
    `WITH picked AS (
       SELECT receipt_id FROM receipt_deliveries
        WHERE client_code = $1 AND status = 'pending' AND next_attempt_at <= $3
          AND (CASE WHEN $8::int IS NULL THEN kind <> 'test' ELSE kind = 'test' AND source_key = $8::int::text END)
          AND (lease_expires_at IS NULL OR lease_expires_at <= $6 OR ${leaseHolderGone('lease_holder')})
        ORDER BY next_attempt_at, created_at, receipt_id LIMIT $5
        FOR UPDATE SKIP LOCKED),
     claimed AS (
       UPDATE receipt_deliveries d SET lease_token = $2, lease_expires_at = $4, lease_holder = $7
         FROM picked WHERE d.client_code = $1 AND d.receipt_id = picked.receipt_id
       RETURNING d.receipt_id, d.kind, d.source_key, d.external_payment_request_id, d.payload, d.round_attempts, d.attempt_count),
     code AS (
       UPDATE receipt_routes SET confirmation_digest = $9
        WHERE client_code = $1 AND $9::text IS NOT NULL AND EXISTS (SELECT 1 FROM claimed) RETURNING 1)
     SELECT * FROM claimed`,
    [c.clientCode, c.token, c.now, c.leaseUntil, c.limit, c.leaseNow, c.holder, c.testVersion, c.confirmationDigest],
  )
}

/** Hands claimed receipts back untouched (no attempt was made). */
export async function releaseReceipts(db: Queryable, clientCode: string, token: string, ids: readonly string[]) {
  if (ids.length === 0) return
  await db.query(
    `UPDATE receipt_deliveries SET lease_token = NULL, lease_expires_at = NULL, lease_holder = NULL
      WHERE client_code = $1 AND lease_token = $2 AND receipt_id = ANY($3::text[])`,
    [clientCode, token, ids],
  )
}

export interface ReceiptOutcome {
  receiptId: string
  status: 'pending' | 'delivered' | 'abandoned'
  nextAttemptAt: string | null
  lastError: string | null
  attemptedAt: string
  httpStatus: number | null
  errorClass: string | null
}

/**
 * Records the outcomes of one client's attempts in one statement, each with its attempt row. The claim token
 * guards it: a worker whose lease was taken over (and whose receipts another instance sent) changes nothing.
 */
export async function completeReceiptAttempts(db: Queryable, clientCode: string, token: string, outcomes: readonly ReceiptOutcome[]) {
  if (outcomes.length === 0) return
  await db.query(
    `WITH r AS (
       SELECT * FROM unnest($3::text[], $4::text[], $5::timestamptz[], $6::text[], $7::timestamptz[], $8::int[], $9::text[])
         AS r(receipt_id, status, next_attempt_at, last_error, attempted_at, http_status, error_class)),
     upd AS (
       UPDATE receipt_deliveries d
          SET status = r.status, next_attempt_at = r.next_attempt_at, last_error = r.last_error,
              round_attempts = d.round_attempts + 1, attempt_count = d.attempt_count + 1,
              lease_token = NULL, lease_expires_at = NULL, lease_holder = NULL,
              completed_at = CASE WHEN r.status = 'pending' THEN NULL ELSE r.attempted_at END
         FROM r
        WHERE d.client_code = $1 AND d.receipt_id = r.receipt_id AND d.lease_token = $2
       RETURNING d.receipt_id, d.external_payment_request_id, d.attempt_count, r.status, r.next_attempt_at, r.attempted_at,
                 r.http_status, r.error_class)
     INSERT INTO receipt_delivery_attempts (client_code, receipt_id, external_payment_request_id, attempt, route, outcome,
                                            attempted_at, http_status, error_class, next_attempt_at)
     SELECT $1, receipt_id, external_payment_request_id, attempt_count, 'vendor_receipt_posting',
            CASE WHEN status = 'delivered' THEN 'delivered' ELSE 'failed' END, attempted_at, http_status, error_class, next_attempt_at
       FROM upd`,
    [
      clientCode,
      token,
      outcomes.map((o) => o.receiptId),
      outcomes.map((o) => o.status),
      outcomes.map((o) => o.nextAttemptAt),
      outcomes.map((o) => o.lastError),
      outcomes.map((o) => o.attemptedAt),
      outcomes.map((o) => o.httpStatus),
      outcomes.map((o) => o.errorClass),
    ],
  )
}

/**
 * Retention (src/resources/retention/service.ts): one client's finished receipt delivery records (delivered or
 * abandoned) whose last attempt is older than `days` at its time `now`, with their attempts. A pending receipt is
 * still owed and is never purged.
 */
export async function purgeClientReceiptDeliveries(db: Queryable, clientCode: string, now: string, days: number): Promise<void> {
  await db.query(
    `WITH gone AS (
       DELETE FROM receipt_deliveries
        WHERE client_code = $1 AND status <> 'pending' AND completed_at < $2::timestamptz - make_interval(days => $3)
       RETURNING receipt_id)
     DELETE FROM receipt_delivery_attempts a USING gone g WHERE a.client_code = $1 AND a.receipt_id = g.receipt_id`,
    [clientCode, now, days],
  )
}
