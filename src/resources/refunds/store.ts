import { claimKey, type LeaseHolder, leaseHolderGone } from '../../store/lease-holder.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'

/**
 * SQL of the refunds table (migration 0020): the API's writes and reads, and the refund worker's claims. A refund
 * is created `pending` (the PUT, or the confirmation's refund of unapplied money), asked of the provider by the
 * worker outside any transaction, and decided (`succeeded` | `failed`) in a transaction fenced by the claim's token.
 */
export type RefundStatus = 'pending' | 'succeeded' | 'failed'
export type RefundReason = 'requested_by_customer' | 'duplicate' | 'fraudulent' | 'other' | 'unapplied_funds'
/** `service`: asked for through the service (the API, unapplied money); `provider`: made at the provider itself. */
export type RefundOrigin = 'service' | 'provider'

export interface RefundRow {
  external_payment_request_id: string
  external_refund_id: string
  revision: string
  currency: string
  amount_minor: string
  reason: RefundReason
  status: RefundStatus
  body: unknown
  provider_refund_id: string | null
  failure_reason: string | null
  attempts: number
  created_at: string
  decided_at: string | null
  origin: RefundOrigin
}

const COLUMNS = `external_payment_request_id, external_refund_id, revision, currency, amount_minor, reason, status, body,
  provider_refund_id, failure_reason, attempts, created_at, decided_at, origin`

/** What a refund needs to know of its request and Payment (no Payment yet: the payment columns are null). */
export interface RefundedPaymentRow {
  payment_status: 'confirmed' | 'failed' | null
  currency: string | null
  amount_minor: string | null
  reversed_minor: string | null
  /** Refunds pending or succeeded: what the Payment's amount must still cover with reversals. */
  refunds_minor: string
}

/**
 * The request row, locked FOR UPDATE (the one lock of a refund's PUT and of a reversal: two of them for one
 * request run one after the other, so refunds and reversals never pass the Payment's amount together), with its
 * Payment and the refunds it carries. Undefined for an unknown request.
 */
export async function lockRefundedPayment(tx: Tx, clientCode: string, requestId: string): Promise<RefundedPaymentRow | undefined> {
  const locking = tx.query<{ id: string }>(
    `SELECT external_payment_request_id AS id FROM payment_requests
      WHERE client_code = $1 AND external_payment_request_id = $2 FOR UPDATE`,
    [clientCode, requestId],
  )
  // Sent with the lock and run after it: every refund and reversal committed before the lock is counted.
  const reading = tx.query<RefundedPaymentRow>(
    `SELECT p.status AS payment_status, p.currency, p.amount_minor, p.reversed_minor,
            (SELECT COALESCE(sum(f.amount_minor), 0)::text FROM refunds f
              WHERE f.client_code = $1 AND f.external_payment_request_id = $2 AND f.status IN ('pending', 'succeeded')) AS refunds_minor
       FROM (SELECT 1) one LEFT JOIN payments p ON p.client_code = $1 AND p.external_payment_request_id = $2`,
    [clientCode, requestId],
  )
  const [locked, read] = await answersInOrder([locking, reading])
  return locked.length === 0 ? undefined : read[0]
}

export async function findRefund(db: Queryable, clientCode: string, requestId: string, refundId: string): Promise<RefundRow | undefined> {
  return (
    await db.query<RefundRow>(
      `SELECT ${COLUMNS} FROM refunds WHERE client_code = $1 AND external_payment_request_id = $2 AND external_refund_id = $3`,
      [clientCode, requestId, refundId],
    )
  )[0]
}

export async function insertRefund(
  tx: Tx,
  clientCode: string,
  r: {
    requestId: string
    refundId: string
    currency: string
    amountMinor: bigint
    reason: RefundReason
    body: unknown
    now: string
    /** Who asked for it: the service (default), or the provider itself (a Dashboard refund; migration 0029). */
    origin?: RefundOrigin
  },
): Promise<RefundRow> {
  const rows = await tx.query<RefundRow>(
    `INSERT INTO refunds (client_code, external_payment_request_id, external_refund_id, revision, currency, amount_minor, reason,
                          status, body, created_at, origin)
     VALUES ($1, $2, $3, 1, $4, $5, $6, 'pending', $7, $8, $9)
     RETURNING ${COLUMNS}`,
    [
      clientCode,
      r.requestId,
      r.refundId,
      r.currency,
      r.amountMinor.toString(),
      r.reason,
      JSON.stringify(r.body),
      r.now,
      r.origin ?? 'service',
    ],
  )
  return rows[0] as RefundRow
}

/** Whether the request exists (the list of an unknown request is 404, not an empty page). */
export async function refundedRequestExists(db: Queryable, clientCode: string, requestId: string): Promise<boolean> {
  const rows = await db.query<{ found: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = $2) AS found`,
    [clientCode, requestId],
  )
  return rows[0]?.found === true
}

/** A page of a request's refunds in identifier order, after `after`; `limit` rows at most. */
export async function listRefunds(
  db: Queryable,
  clientCode: string,
  requestId: string,
  after: string | undefined,
  limit: number,
): Promise<RefundRow[]> {
  return db.query<RefundRow>(
    `SELECT ${COLUMNS} FROM refunds
      WHERE client_code = $1 AND external_payment_request_id = $2 AND ($3::text IS NULL OR external_refund_id > $3)
      ORDER BY external_refund_id LIMIT $4`,
    [clientCode, requestId, after ?? null, limit],
  )
}

/** A refund the worker claimed, with what the provider needs of its Payment. */
export interface ClaimedRefund {
  client_code: string
  external_payment_request_id: string
  external_refund_id: string
  currency: string
  amount_minor: string
  reason: RefundReason
  attempts: number
  provider: string
  provider_payment_id: string
}

/** A refund is due to be asked for (`f`: the alias; `$2`: now): pending, not yet accepted, due, not leased. */
function refundDue(f: string): string {
  return `${f}.status = 'pending' AND ${f}.provider_refund_id IS NULL AND (${f}.next_attempt_at IS NULL OR ${f}.next_attempt_at <= $2)
          AND (${f}.lease_expires_at IS NULL OR ${f}.lease_expires_at <= $2 OR ${leaseHolderGone(`${f}.lease_holder`)})`
}

/**
 * Claims up to `limit` refunds to ask the provider for, as a lease. A refund is due when pending, not yet accepted
 * by the provider (no provider_refund_id), its next attempt due, and not leased (or its lease expired at `now`, or
 * its holder's lock is gone: a killed process's claim is taken again). `now` is the base clock's time, as for every
 * lease. Per client (docs/scaling.md): one read-only statement finds the clients with a due refund (the most
 * overdue first), then each client's are claimed by one UPDATE over rows picked with FOR UPDATE SKIP LOCKED within
 * that client, so two instances never claim the same refund.
 */
export async function claimRefunds(
  db: Queryable,
  c: { token: string; now: string; leaseUntil: string; limit: number; holder?: LeaseHolder | undefined },
): Promise<ClaimedRefund[]> {
  const holder = claimKey(c.holder)
  if (holder === 'not_held') return []
  const clients = await db.query<{ client_code: string }>(
    `SELECT f.client_code FROM refunds f WHERE ${refundDue('f')}
      GROUP BY f.client_code ORDER BY bool_or(f.next_attempt_at IS NULL) DESC, min(f.next_attempt_at), min(f.created_at), f.client_code LIMIT $1`,
    [c.limit, c.now],
  )
  const claimed: ClaimedRefund[] = []
  for (const { client_code } of clients) {
    if (claimed.length >= c.limit) break
    const rows = await db.query<ClaimedRefund>(
      `WITH picked AS (
         SELECT f.external_payment_request_id, f.external_refund_id FROM refunds f
          WHERE f.client_code = $6 AND ${refundDue('f')}
          ORDER BY f.next_attempt_at NULLS FIRST, f.created_at
          LIMIT $4
          FOR UPDATE SKIP LOCKED)
       UPDATE refunds r SET lease_token = $1, lease_expires_at = $3, lease_holder = $5, attempts = r.attempts + 1
         FROM picked, payments p
        WHERE r.client_code = $6 AND r.external_payment_request_id = picked.external_payment_request_id
          AND r.external_refund_id = picked.external_refund_id
          AND p.client_code = $6 AND p.external_payment_request_id = r.external_payment_request_id
       RETURNING r.client_code, r.external_payment_request_id, r.external_refund_id, r.currency, r.amount_minor, r.reason, r.attempts,
                 p.provider, p.provider_payment_id`,
      [c.token, c.now, c.leaseUntil, c.limit - claimed.length, holder, client_code],
    )
    claimed.push(...rows)
  }
  return claimed
}

/** Identifies a refund; `token`: the claim's (the worker), null for a decision no claim makes (a provider's event). */
export interface RefundKey {
  clientCode: string
  requestId: string
  refundId: string
  token: string | null
}

/**
 * Locks a pending refund for its decision: under a claim, only while the claim is still this worker's (a stale
 * worker whose lease another instance took finds nothing and changes nothing). Undefined otherwise.
 */
export async function lockPendingRefund(tx: Tx, k: RefundKey): Promise<RefundRow | undefined> {
  return (
    await tx.query<RefundRow>(
      `SELECT ${COLUMNS} FROM refunds
        WHERE client_code = $1 AND external_payment_request_id = $2 AND external_refund_id = $3 AND status = 'pending'
          AND ($4::text IS NULL OR lease_token = $4)
        FOR UPDATE`,
      [k.clientCode, k.requestId, k.refundId, k.token],
    )
  )[0]
}

/** Records a locked pending refund's decision (revision 2); the lease ends. */
export async function decideRefund(
  tx: Tx,
  k: RefundKey,
  d: { status: 'succeeded' | 'failed'; providerRefundId: string; failureReason: string | null; now: string },
): Promise<RefundRow> {
  const rows = await tx.query<RefundRow>(
    `UPDATE refunds SET status = $4, provider_refund_id = $5, failure_reason = $6, decided_at = $7, revision = revision + 1,
            lease_token = NULL, lease_expires_at = NULL, lease_holder = NULL, next_attempt_at = NULL
      WHERE client_code = $1 AND external_payment_request_id = $2 AND external_refund_id = $3 AND status = 'pending'
      RETURNING ${COLUMNS}`,
    [k.clientCode, k.requestId, k.refundId, d.status, d.providerRefundId, d.failureReason, d.now],
  )
  return rows[0] as RefundRow
}

/** The provider accepted the refund and decides it later (its event): recorded, and the worker asks no more. */
export async function markRefundAccepted(db: Queryable, k: RefundKey & { token: string }, providerRefundId: string): Promise<boolean> {
  const rows = await db.query(
    `UPDATE refunds SET provider_refund_id = $5, lease_token = NULL, lease_expires_at = NULL, lease_holder = NULL
      WHERE client_code = $1 AND external_payment_request_id = $2 AND external_refund_id = $3 AND status = 'pending'
        AND lease_token = $4
      RETURNING external_refund_id`,
    [k.clientCode, k.requestId, k.refundId, k.token, providerRefundId],
  )
  return rows.length > 0
}

/** Asking the provider failed (no answer): the claim ends and the refund is asked again at `nextAttemptAt`. */
export async function retryRefundLater(
  db: Queryable,
  k: RefundKey & { token: string },
  nextAttemptAt: string,
  error: string,
): Promise<void> {
  await db.query(
    `UPDATE refunds SET next_attempt_at = $5, last_error = $6, lease_token = NULL, lease_expires_at = NULL, lease_holder = NULL
      WHERE client_code = $1 AND external_payment_request_id = $2 AND external_refund_id = $3 AND status = 'pending'
        AND lease_token = $4`,
    [k.clientCode, k.requestId, k.refundId, k.token, nextAttemptAt, error.slice(0, 500)],
  )
}

/**
 * A refund made at the provider beyond what its Payment held (migration 0054): a dispute's withdrawal held the rest.
 * Written once per provider refund; false when it was already (another of its events, or the sweep).
 */
export async function insertWithheldProviderRefund(
  tx: Tx,
  clientCode: string,
  r: {
    provider: string
    providerRefundId: string
    requestId: string
    currency: string
    reason: Exclude<RefundReason, 'unapplied_funds'>
    amountMinor: bigint
    now: string
  },
): Promise<boolean> {
  const rows = await tx.query(
    `INSERT INTO provider_refunds_withheld (client_code, provider, provider_refund_id, external_payment_request_id, currency, reason,
                                            amount_minor, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (client_code, provider, provider_refund_id) DO NOTHING
     RETURNING provider_refund_id`,
    [clientCode, r.provider, r.providerRefundId, r.requestId, r.currency, r.reason, r.amountMinor.toString(), r.now],
  )
  return rows.length > 0
}

export interface WithheldProviderRefundRow {
  provider: string
  provider_refund_id: string
  currency: string
  reason: Exclude<RefundReason, 'unapplied_funds'>
  /** What of it is still waiting for money to come back. */
  waiting_minor: string
}

/** The request's provider refunds still waiting for money given back, oldest first, locked. */
export async function lockWithheldProviderRefunds(tx: Tx, clientCode: string, requestId: string): Promise<WithheldProviderRefundRow[]> {
  return tx.query<WithheldProviderRefundRow>(
    `SELECT provider, provider_refund_id, currency, reason, (amount_minor - recorded_minor)::text AS waiting_minor
       FROM provider_refunds_withheld
      WHERE client_code = $1 AND external_payment_request_id = $2 AND recorded_minor < amount_minor
      ORDER BY created_at, provider_refund_id
      FOR UPDATE`,
    [clientCode, requestId],
  )
}

/** `amountMinor` more of a withheld provider refund is recorded (a refund of its Payment). */
export async function recordWithheldPart(
  tx: Tx,
  clientCode: string,
  r: { provider: string; providerRefundId: string; amountMinor: bigint },
): Promise<void> {
  await tx.query(
    `UPDATE provider_refunds_withheld SET recorded_minor = recorded_minor + $4
      WHERE client_code = $1 AND provider = $2 AND provider_refund_id = $3`,
    [clientCode, r.provider, r.providerRefundId, r.amountMinor.toString()],
  )
}

/** The family's store functions, for the factories that receive them as a `Pick<>`. */
export const refundStore = {
  lockRefundedPayment,
  findRefund,
  insertRefund,
  refundedRequestExists,
  listRefunds,
  claimRefunds,
  lockPendingRefund,
  decideRefund,
  markRefundAccepted,
  retryRefundLater,
}
export type RefundStore = typeof refundStore
