import type { EncryptedColumns } from '../../store/secret-keys.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import { recordAudit } from '../audit/store.ts'

/**
 * SQL of a client's receipt route as the API sees it (configuration, confirmation, reads) and of the receipt
 * delivery read (`GET .../receipt-delivery`). The dispatcher's own SQL (deriving, claiming, recording) is
 * delivery-store.ts. Every function takes the queryable and the client code.
 */

export type RouteState = 'unverified' | 'verified' | 'disabled'
export type RouteDisabledReason = 'grant_revoked' | 'destination_unsafe' | 'signing_secret_unreadable'

export interface RouteRow {
  client_code: string
  integration_id: string
  url: string
  state: RouteState
  disabled_reason: RouteDisabledReason | null
  secret_ciphertext: string
  confirmation_digest: string | null
  version: number
  verified_at: string | null
  scanned_seq: string
  created_at: string
  updated_at: string
}

export const ROUTE_COLUMNS = `client_code, integration_id, url, state, disabled_reason, secret_ciphertext, confirmation_digest, version,
  verified_at, scanned_seq, created_at, updated_at`

/** What AES-GCM binds a route's secret to: a ciphertext copied to another client's row does not decrypt. */
export const routeSecretAad = (clientCode: string) => `receipt-route/${clientCode}`

/** The route's secret column, for the key ring's rewrap (src/app.ts `encryptedSecrets`). */
export const receiptSecretColumns: EncryptedColumns = {
  table: 'receipt_routes',
  keyColumns: ['client_code'],
  ciphertextColumns: ['secret_ciphertext'],
  aad: (row) => routeSecretAad(row.client_code as string),
}

export async function findRoute(db: Queryable, clientCode: string, forUpdate = false): Promise<RouteRow | undefined> {
  return (
    await db.query<RouteRow>(`SELECT ${ROUTE_COLUMNS} FROM receipt_routes WHERE client_code = $1${forUpdate ? ' FOR UPDATE' : ''}`, [
      clientCode,
    ])
  )[0]
}

/**
 * Creates the route or replaces its configuration: unverified again, a new secret, no confirmation code until its
 * test receipt is sent. Receipts cover the change-feed events committed after the route's first configuration (its
 * scanned sequence starts at the feed head then and is kept by later PUTs): what happens while it is unverified is
 * delivered once it is verified.
 */
export async function upsertRoute(
  tx: Tx,
  r: { clientCode: string; integrationId: string; url: string; secretCiphertext: string; now: string },
): Promise<RouteRow> {
  const rows = await tx.query<RouteRow>(
    `INSERT INTO receipt_routes (client_code, integration_id, url, state, secret_ciphertext, confirmation_digest, version,
                                 scanned_seq, created_at, updated_at)
     VALUES ($1, $2, $3, 'unverified', $4, NULL, 1, COALESCE((SELECT last_seq FROM feed_heads WHERE client_code = $1), 0), $5, $5)
     ON CONFLICT (client_code) DO UPDATE SET integration_id = $2, url = $3, state = 'unverified', disabled_reason = NULL,
       secret_ciphertext = $4, confirmation_digest = NULL, version = receipt_routes.version + 1, verified_at = NULL, updated_at = $5
     RETURNING ${ROUTE_COLUMNS}`,
    [r.clientCode, r.integrationId, r.url, r.secretCiphertext, r.now],
  )
  return rows[0] as RouteRow
}

/**
 * The Source sent the confirmation code back: verified. The scanned sequence stays where it is: the receipts of what
 * happened while the route was unverified are derived by the next run and delivered.
 */
export async function verifyRoute(tx: Tx, clientCode: string, now: string): Promise<RouteRow> {
  const rows = await tx.query<RouteRow>(
    `UPDATE receipt_routes SET state = 'verified', verified_at = $2, updated_at = $2
      WHERE client_code = $1 RETURNING ${ROUTE_COLUMNS}`,
    [clientCode, now],
  )
  return rows[0] as RouteRow
}

/** Disables a route not disabled yet; true when this call did. `integrationId`: only while that Integration's. */
export async function disableRoute(
  db: Queryable,
  clientCode: string,
  reason: RouteDisabledReason,
  now: string,
  integrationId?: string,
): Promise<boolean> {
  const rows = await db.query(
    `UPDATE receipt_routes SET state = 'disabled', disabled_reason = $2, updated_at = $3
      WHERE client_code = $1 AND state <> 'disabled' AND ($4::text IS NULL OR integration_id = $4) RETURNING 1`,
    [clientCode, reason, now, integrationId ?? null],
  )
  return rows.length > 0
}

/** The route's audit event (actor `integration:<id>` or `service`): identifiers and state, never the URL or secret. */
export async function auditRoute(
  db: Queryable,
  a: { clientCode: string; actor: string; action: string; details: Record<string, unknown>; change: unknown; now: string },
): Promise<void> {
  await recordAudit(db, {
    actor: a.actor,
    action: a.action,
    clientCode: a.clientCode,
    targetType: 'receipt_route',
    targetId: a.clientCode,
    details: a.details,
    change: a.change,
    occurredAt: a.now,
  })
}

/**
 * A new test receipt for the route's configuration `version`, due at `dueAt`; the pending test receipts of earlier
 * configurations are dropped (they can prove nothing any more). The same configuration's, if there is one (a sandbox
 * reset), is due again from the start.
 */
export async function queueTestReceipt(
  tx: Tx,
  t: { clientCode: string; receiptId: string; version: number; payload: unknown; now: string; dueAt: string },
): Promise<void> {
  await tx.query(
    `WITH gone AS (DELETE FROM receipt_deliveries WHERE client_code = $1 AND kind = 'test' AND status = 'pending' RETURNING 1)
     INSERT INTO receipt_deliveries (client_code, receipt_id, kind, source_key, payload, status, next_attempt_at, created_at)
     VALUES ($1, $2, 'test', $3, $4, 'pending', $6, $5)
     ON CONFLICT (client_code, receipt_id) DO NOTHING`,
    [t.clientCode, t.receiptId, String(t.version), JSON.stringify(t.payload), t.now, t.dueAt],
  )
}

export interface AttemptRow {
  receipt_id: string
  kind: string
  attempt: number
  route: string
  outcome: 'delivered' | 'failed'
  http_status: number | null
  attempted_at: string
  next_attempt_at: string | null
}

/** Every attempt to deliver a receipt of this Payment request (its Payment's, refunds', reversals'), oldest first. */
export async function requestAttempts(db: Queryable, clientCode: string, requestId: string): Promise<AttemptRow[]> {
  return db.query<AttemptRow>(
    `SELECT a.receipt_id, d.kind, a.attempt, a.route, a.outcome, a.http_status, a.attempted_at, a.next_attempt_at
       FROM receipt_delivery_attempts a
       JOIN receipt_deliveries d ON d.client_code = a.client_code AND d.receipt_id = a.receipt_id
      WHERE a.client_code = $1 AND a.external_payment_request_id = $2
      ORDER BY a.attempted_at, a.receipt_id, a.attempt`,
    [clientCode, requestId],
  )
}

export interface ReceiptCountsRow {
  pending: number
  due: number
  delivered: number
  abandoned: number
  oldest_pending_at: string | null
  unscanned_events: string
}

/**
 * The operator's view of a route's delivery state: receipt counts by status (`due`: pending and due at `now`),
 * the oldest pending receipt, and the change-feed events committed after the route's scanned sequence (not yet
 * looked at for receipts; 0 unless the route is verified).
 */
export async function receiptCounts(db: Queryable, clientCode: string, now: string): Promise<ReceiptCountsRow> {
  const rows = await db.query<ReceiptCountsRow>(
    `SELECT count(*) FILTER (WHERE d.status = 'pending')::int AS pending,
            count(*) FILTER (WHERE d.status = 'pending' AND d.next_attempt_at <= $2)::int AS due,
            count(*) FILTER (WHERE d.status = 'delivered')::int AS delivered,
            count(*) FILTER (WHERE d.status = 'abandoned')::int AS abandoned,
            min(d.created_at) FILTER (WHERE d.status = 'pending') AS oldest_pending_at,
            (SELECT CASE WHEN r.state = 'verified' THEN GREATEST(COALESCE(h.last_seq, 0) - r.scanned_seq, 0) ELSE 0 END
               FROM receipt_routes r LEFT JOIN feed_heads h ON h.client_code = r.client_code
              WHERE r.client_code = $1)::text AS unscanned_events
       FROM receipt_deliveries d WHERE d.client_code = $1`,
    [clientCode, now],
  )
  return rows[0] as ReceiptCountsRow
}

export interface RecentAttemptRow extends AttemptRow {
  external_payment_request_id: string | null
  error_class: string | null
}

/** The client's latest `limit` receipt delivery attempts, newest first. */
export async function recentAttempts(db: Queryable, clientCode: string, limit: number): Promise<RecentAttemptRow[]> {
  return db.query<RecentAttemptRow>(
    `SELECT a.receipt_id, COALESCE(d.kind, 'test') AS kind, a.external_payment_request_id, a.attempt, a.route, a.outcome,
            a.http_status, a.error_class, a.attempted_at, a.next_attempt_at
       FROM receipt_delivery_attempts a
       LEFT JOIN receipt_deliveries d ON d.client_code = a.client_code AND d.receipt_id = a.receipt_id
      WHERE a.client_code = $1
      ORDER BY a.attempted_at DESC, a.receipt_id DESC, a.attempt DESC LIMIT $2`,
    [clientCode, limit],
  )
}
