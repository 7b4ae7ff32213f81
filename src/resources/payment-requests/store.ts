import type { NewestFirstKey } from '../../domain/cursor.ts'
import { holdColumns } from '../../domain/holds.ts'
import { newestFirst } from '../../store/newest-first.ts'
import type { Queryable, QueryOptions, Tx } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import type { PaymentRequestWrite } from './schema.ts'

/**
 * SQL condition "this row's client runs on real time" (no sandbox clock, src/sandbox) for the workers' real-time
 * pass (alias: the table alias holding `client_code`). Only used in sandbox: production workers run their
 * original statements.
 */
function onRealTime(alias: string): string {
  return `NOT EXISTS (SELECT 1 FROM sandbox_clocks sc WHERE sc.client_code = ${alias}.client_code)`
}

export type PaymentRequestStatus = 'open' | 'confirmed' | 'failed' | 'expired' | 'canceled'
/** Why a request was canceled: the integrator asked (cancel), or at pay time its amount no longer fit. */
export type CancelReason = 'requested' | 'balance_changed'

export interface PaymentRequestRow {
  client_code: string
  external_payment_request_id: string
  external_receivable_id: string
  revision: string
  status: PaymentRequestStatus
  currency: string
  amount_minor: string
  description: string | null
  expires_at: string
  body: PaymentRequestWrite
  page_token: string
  created_at: string
  updated_at: string
  /** Set exactly when status is canceled. */
  cancel_reason: CancelReason | null
  /** The integrator's reason given with its cancel, as given; null otherwise. */
  cancellation_note: string | null
}

const COLUMNS = `client_code, external_payment_request_id, external_receivable_id, revision, status, currency, amount_minor,
  description, expires_at, body, page_token, created_at, updated_at, cancel_reason, cancellation_note`

export async function findPaymentRequest(db: Queryable, clientCode: string, id: string): Promise<PaymentRequestRow | undefined> {
  return (
    await db.query<PaymentRequestRow>(
      `SELECT ${COLUMNS} FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = $2`,
      [clientCode, id],
    )
  )[0]
}

/**
 * A page of the client's Payment requests, newest first by creation, optionally of one Receivable and of one status
 * as it is at `now`: a request whose expiry has passed is `expired` even before its expiry is recorded (the caller
 * records it), never `open`. Each branch is an index range scan of payment_requests_created,
 * _receivable_created or _status_created; `expired` merges two (recorded, and open past expiresAt), each limited.
 */
export async function listPaymentRequests(
  db: Queryable,
  clientCode: string,
  q: {
    after: NewestFirstKey | undefined
    receivableId: string | undefined
    status: PaymentRequestStatus | undefined
    now: string
    limit: number
  },
): Promise<(PaymentRequestRow & { list_at: string })[]> {
  const params: unknown[] = [clientCode, q.limit]
  let filter = ''
  if (q.receivableId !== undefined) {
    params.push(q.receivableId)
    filter = ` AND external_receivable_id = $${params.length}`
  }
  const page = newestFirst('created_at', 'external_payment_request_id', q.after, params)
  const branch = (status: string) =>
    `SELECT ${COLUMNS}, ${page.listAt} FROM payment_requests WHERE client_code = $1${filter}${status}${page.where} ${page.order} LIMIT $2`
  if (q.status === undefined) return db.query(branch(''), params)
  if (q.status !== 'open' && q.status !== 'expired') {
    params.push(q.status)
    return db.query(branch(` AND status = $${params.length}`), params)
  }
  params.push(q.now)
  const due = `payment_request_expired(expires_at, $${params.length}::timestamptz)`
  if (q.status === 'open') return db.query(branch(` AND status = 'open' AND NOT ${due}`), params)
  return db.query(
    `SELECT * FROM ((${branch(" AND status = 'expired'")}) UNION ALL (${branch(` AND status = 'open' AND ${due}`)})) u ${page.order} LIMIT $2`,
    params,
  )
}

/** The request, row-locked to the end of the transaction: every state change of a request starts here. */
export async function lockPaymentRequest(tx: Tx, clientCode: string, id: string): Promise<PaymentRequestRow | undefined> {
  return (
    await tx.query<PaymentRequestRow>(
      `SELECT ${COLUMNS} FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = $2 FOR UPDATE`,
      [clientCode, id],
    )
  )[0]
}

export async function insertPaymentRequest(
  tx: Tx,
  clientCode: string,
  id: string,
  r: {
    receivableId: string
    currency: string
    amountMinor: bigint
    description: string | null
    expiresAt: string
    body: PaymentRequestWrite
    token: string
    now: string
  },
): Promise<PaymentRequestRow> {
  // The hosted page finds the client of its token here first (findPageRow); the token's uniqueness is this key's.
  // Both statements are sent before either answer is awaited (UnitOfWork.send sends this write ahead).
  const token = tx.query('INSERT INTO page_tokens (page_token, client_code, external_payment_request_id) VALUES ($1, $2, $3)', [
    r.token,
    clientCode,
    id,
  ])
  const request = tx.query<PaymentRequestRow>(
    `INSERT INTO payment_requests (client_code, external_payment_request_id, external_receivable_id, revision, status, currency,
                                   amount_minor, description, expires_at, body, page_token, created_at, updated_at)
     VALUES ($1, $2, $3, 1, 'open', $4, $5, $6, $7, $8, $9, $10, $10)
     RETURNING ${COLUMNS}`,
    [
      clientCode,
      id,
      r.receivableId,
      r.currency,
      r.amountMinor.toString(),
      r.description,
      r.expiresAt,
      JSON.stringify(r.body),
      r.token,
      r.now,
    ],
  )
  const [, rows] = await answersInOrder([token, request])
  return rows[0] as PaymentRequestRow
}

/** A state change of a locked request: the new status, revision + 1. Returns the row as it now is. */
export async function setPaymentRequestStatus(
  tx: Tx,
  clientCode: string,
  id: string,
  status: PaymentRequestStatus,
  now: string,
): Promise<PaymentRequestRow> {
  const rows = await tx.query<PaymentRequestRow>(
    `UPDATE payment_requests SET status = $3, revision = revision + 1, updated_at = $4
      WHERE client_code = $1 AND external_payment_request_id = $2
      RETURNING ${COLUMNS}`,
    [clientCode, id, status, now],
  )
  return rows[0] as PaymentRequestRow
}

/** Cancels a locked open request (status canceled, its reason and the integrator's note), revision + 1. */
export async function cancelPaymentRequest(
  tx: Tx,
  clientCode: string,
  id: string,
  reason: CancelReason,
  note: string | null,
  now: string,
): Promise<PaymentRequestRow> {
  const rows = await tx.query<PaymentRequestRow>(
    `UPDATE payment_requests SET status = 'canceled', cancel_reason = $3, cancellation_note = $4, revision = revision + 1, updated_at = $5
      WHERE client_code = $1 AND external_payment_request_id = $2
      RETURNING ${COLUMNS}`,
    [clientCode, id, reason, note, now],
  )
  return rows[0] as PaymentRequestRow
}

/**
 * The expiry sweeper's search (read only, across clients: docs/scaling.md): the clients with an open request past
 * its expiry at `now`, the longest overdue first; `realTimeOnly` leaves out the clients whose sandbox clock is
 * stopped (their own pass expires them at their time). Each is then swept on its own (expireDue).
 */
export async function clientsWithExpiredRequests(db: Queryable, now: string, limit: number, realTimeOnly: boolean): Promise<string[]> {
  const rows = await db.query<{ client_code: string }>(
    `SELECT r.client_code FROM payment_requests r
      WHERE r.status = 'open' AND payment_request_expired(r.expires_at, $1) ${realTimeOnly ? `AND ${onRealTime('r')}` : ''}
      GROUP BY r.client_code ORDER BY min(r.expires_at), r.client_code LIMIT $2`,
    [now, limit],
  )
  return rows.map((r) => r.client_code)
}

/**
 * The expiry sweeper's claim: up to `limit` open requests of one client past their expiry at `now`, row-locked.
 * SKIP LOCKED leaves rows another sweeper (or a confirmation) holds to it, so instances never wait on
 * each other and never expire a request twice. The partial index payment_requests_open_expiry serves it (the rule,
 * payment_request_expired, is an SQL function the planner inlines into `expires_at <= $1`).
 */
export async function expireDue(
  tx: Tx,
  clientCode: string,
  now: string,
  limit: number,
): Promise<{ client_code: string; id: string; revision: number }[]> {
  const rows = await tx.query<{ client_code: string; external_payment_request_id: string; revision: string }>(
    `UPDATE payment_requests p SET status = 'expired', revision = p.revision + 1, updated_at = $1
       FROM (SELECT external_payment_request_id FROM payment_requests r
              WHERE r.client_code = $3 AND status = 'open' AND payment_request_expired(expires_at, $1)
              ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) due
      WHERE p.client_code = $3 AND p.external_payment_request_id = due.external_payment_request_id
      RETURNING p.client_code, p.external_payment_request_id, p.revision`,
    [now, limit, clientCode],
  )
  return rows.map((r) => ({ client_code: r.client_code, id: r.external_payment_request_id, revision: Number(r.revision) }))
}

/**
 * Holds as they are now, for one Receivable (LATERAL, over the client code `client` names, a parameter, and the
 * outer row's `external_receivable_id`, alias `h`; the client named, not taken from the outer row, so that every
 * table of the view is narrowed to one client by the statement itself: docs/scaling.md): the facts of receivable_hold_facts, with the client-wide two (collection
 * enabled, Source stale) read live rather than as of the Receivable's last client fact. That is exactly what
 * catchUpReceivable followed by the view gives, without the write: so a read (the hosted page's GET) judges a
 * collection switched off a moment ago as the writes do (the page's POST, the operator's simulate, a Payment
 * request PUT), instead of waiting for the background fan-out to reach the Receivable. The hold predicates are
 * still the one definition (src/domain/holds.ts, holdColumns over alias `h`).
 *
 * `OFFSET 0` keeps the subquery from being flattened into the outer query: flattened, PostgreSQL 15 planned the
 * view's grouped subqueries (restrictions per Receivable, per Customer) over the whole tables with hash joins,
 * since the key comes from another table's row and not from a constant; kept apart, the key is a parameter of
 * the subquery and every table of the view is read by index for that one Receivable (EXPLAIN, checked).
 */
function holdFactsNow(outer: string, client: string): string {
  return `LATERAL (
    SELECT v.client_code, v.external_receivable_id, v.instruction_state, c.collection_enabled, v.has_source_restriction,
           v.has_dispute, COALESCE(sa.stale_recorded, true) AS source_stale, v.status, v.flagged, v.reconciliation_held
      FROM receivable_hold_facts v
      JOIN clients c ON c.client_code = ${client}
      LEFT JOIN source_activity sa ON sa.client_code = ${client}
     WHERE v.client_code = ${client} AND v.external_receivable_id = ${outer}.external_receivable_id
    OFFSET 0) h`
}

/**
 * The Receivable a Payment request is made or paid against, row-locked: the amounts its working amount is computed
 * from, what its other open requests reserve, and its holds now.
 */
export interface PayingReceivableRow {
  currency: string
  source_amount_minor: string
  confirmed_unreconciled_minor: string
  acknowledged_undeclared_minor: string
  /**
   * The sum of the Receivable's other open requests not expired at the instant given: what they reserve of the
   * working amount (docs/design/money.md). When a request is paid, the others made before it (`ahead`).
   */
  reserved_minor: string
  [hold: `hold_${string}`]: boolean | null
}

/**
 * One statement: the Receivable row-locked to the end of the transaction (its working amount is allocated and
 * reserved from the amounts read under the lock, so two confirmations or creations of requests for one Receivable
 * never both take the same working amount) with what its open requests other than `request.id` reserve at `now`,
 * and its holds as they are now (see holdFactsNow; `hold_<category>` booleans). `request.createdAt` (a request being
 * paid): only the open requests made before it count, in (created_at, id) order, the order their reservations were
 * made in; absent (a request being made): every other open request. The caller holds the Receivable's identity lock,
 * which every write of its requests takes (creation, confirmation), so the reserve read here stays true.
 */
export async function lockPayingReceivable(
  tx: Tx,
  clientCode: string,
  receivableId: string,
  request: { id: string; createdAt?: string },
  now: string,
): Promise<PayingReceivableRow | undefined> {
  return (
    await tx.query<PayingReceivableRow>(
      `SELECT r.currency, r.source_amount_minor, r.confirmed_unreconciled_minor, r.acknowledged_undeclared_minor,
              (SELECT COALESCE(sum(o.amount_minor), 0) FROM payment_requests o
                WHERE o.client_code = $1 AND o.external_receivable_id = r.external_receivable_id
                  AND o.status = 'open' AND NOT payment_request_expired(o.expires_at, $4)
                  AND o.external_payment_request_id <> $3
                  AND ($5::timestamptz IS NULL OR (o.created_at, o.external_payment_request_id) < ($5::timestamptz, $3)))::text
              AS reserved_minor,
              ${holdColumns()}
         FROM receivables r
         LEFT JOIN ${holdFactsNow('r', '$1')} ON true
        WHERE r.client_code = $1 AND r.external_receivable_id = $2
          FOR UPDATE OF r`,
      [clientCode, receivableId, request.id, now, request.createdAt ?? null],
      PREPARED,
    )
  )[0]
}

/** Everything the hosted page shows of the request its token names, with the holds as they are now. */
export interface PageRow {
  client_code: string
  external_payment_request_id: string
  status: PaymentRequestStatus
  currency: string
  amount_minor: string
  description: string | null
  expires_at: string
  creditor_name: string
  /** The client's sandbox clock (src/sandbox), null on real time (always in production). */
  frozen_at: string | null
  /** When the provider decided (the request's Payment), else null. */
  decided_at: string | null
  cancel_reason: CancelReason | null
  /** The client's branding for the page (clients.branding, migration 0028), null when none is set. */
  branding: Record<string, unknown> | null
  /** The provider's id of the request's Payment (the debtor's confirmation number), else null. */
  provider_payment_id: string | null
  /** The mode of the client's real provider (client_payment_providers), null when it has none. */
  provider_mode: 'test' | 'live' | null
  /** That provider's name (payments/<name>/), null when it has none. */
  provider_name: string | null
  /** The request's latest checkout attempt at that provider (provider_checkouts), null when none. */
  checkout_status: string | null
  checkout_session_id: string | null
  /** What refunds took back of the request's Payment (minor units), null without a Payment. */
  refunded_minor: string | null
  [hold: `hold_${string}`]: boolean
}

/**
 * The hosted page's read: two statements, outside any transaction. The token alone (256 random bits) finds its
 * client in page_tokens (migration 0043; on Citus a table of its own, docs/scaling.md); the read then names that
 * client for every table it joins. It writes nothing: an expiry that has passed unrecorded is shown as expired
 * (payable() judges it), and recorded by the next write or the expiry sweeper.
 */
export async function findPageRow(db: Queryable, token: string): Promise<PageRow | undefined> {
  const owner = (await db.query<{ client_code: string }>('SELECT client_code FROM page_tokens WHERE page_token = $1', [token], PREPARED))[0]
  if (!owner) return undefined
  return (
    await db.query<PageRow>(
      `SELECT p.client_code, p.external_payment_request_id, p.status, p.currency, p.amount_minor, p.description, p.expires_at,
              COALESCE(c.name, p.client_code) AS creditor_name, sc.frozen_at, pay.decided_at, p.cancel_reason,
              c.branding, pay.provider_payment_id, pay.refunded_minor,
              cpp.mode AS provider_mode, cpp.provider AS provider_name, ck.status AS checkout_status, ck.session_id AS checkout_session_id,
              ${holdColumns()}
         FROM payment_requests p
         JOIN clients c ON c.client_code = $1
         LEFT JOIN sandbox_clocks sc ON sc.client_code = $1
         LEFT JOIN payments pay ON pay.client_code = $1 AND pay.external_payment_request_id = p.external_payment_request_id
         LEFT JOIN client_payment_providers cpp ON cpp.client_code = $1 AND cpp.retired_at IS NULL
         LEFT JOIN LATERAL (SELECT k.status, k.session_id FROM provider_checkouts k
                             WHERE k.client_code = $1 AND k.external_payment_request_id = p.external_payment_request_id
                             ORDER BY k.attempt DESC LIMIT 1) ck ON true
         JOIN ${holdFactsNow('p', '$1')} ON true
        WHERE p.client_code = $1 AND p.page_token = $2`,
      [owner.client_code, token],
      PREPARED,
    )
  )[0]
}

/** Statements whose text never varies: planned once per PostgreSQL connection. */
const PREPARED: QueryOptions = { prepared: true }
