import { type WorkingAmountFacts, workingAmountMinor } from '../../domain/money-rules.ts'
import type { Queryable, Tx } from '../../store/store.ts'

export interface PaymentRow {
  external_payment_request_id: string
  provider: string
  provider_payment_id: string
  status: 'confirmed' | 'failed'
  revision: string
  currency: string
  amount_minor: string
  allocated_minor: string
  unapplied_minor: string
  external_receivable_id: string
  decided_at: string
  /** Succeeded refunds and recorded reversals (migration 0020). */
  refunded_minor: string
  reversed_minor: string
  /** Where what was taken back came from: unapplied money first, then allocated. */
  taken_back_unapplied_minor: string
  taken_back_allocated_minor: string
  /**
   * This Payment's share of its Receivable's acknowledged-undeclared money (migration 0023), counted only while
   * `undeclared_as_of` equals the Receivable's `declarations` (take-back.ts, undeclaredShareMinor).
   */
  acknowledged_undeclared_minor: string
  undeclared_as_of: string
}

export const COLUMNS = `external_payment_request_id, provider, provider_payment_id, status, revision, currency, amount_minor, allocated_minor,
  unapplied_minor, external_receivable_id, decided_at, refunded_minor, reversed_minor, taken_back_unapplied_minor,
  taken_back_allocated_minor, acknowledged_undeclared_minor, undeclared_as_of`

export async function findPayment(db: Queryable, clientCode: string, requestId: string): Promise<PaymentRow | undefined> {
  return (
    await db.query<PaymentRow>(`SELECT ${COLUMNS} FROM payments WHERE client_code = $1 AND external_payment_request_id = $2`, [
      clientCode,
      requestId,
    ])
  )[0]
}

export async function insertPayment(
  tx: Tx,
  clientCode: string,
  p: {
    requestId: string
    receivableId: string
    provider: string
    providerPaymentId: string
    status: 'confirmed' | 'failed'
    currency: string
    amountMinor: bigint
    allocatedMinor: bigint
    unappliedMinor: bigint
    decidedAt: string
  },
): Promise<PaymentRow> {
  const rows = await tx.query<PaymentRow>(
    `INSERT INTO payments (client_code, external_payment_request_id, provider, provider_payment_id, status, revision, currency,
                           amount_minor, allocated_minor, unapplied_minor, external_receivable_id, decided_at)
     VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, $9, $10, $11)
     RETURNING ${COLUMNS}`,
    [
      clientCode,
      p.requestId,
      p.provider,
      p.providerPaymentId,
      p.status,
      p.currency,
      p.amountMinor.toString(),
      p.allocatedMinor.toString(),
      p.unappliedMinor.toString(),
      p.receivableId,
      p.decidedAt,
    ],
  )
  return rows[0] as PaymentRow
}

/**
 * Allocates a confirmed Payment to its Receivable: at most its working amount (src/domain/money-rules.ts) at this
 * moment, computed from `amounts`, which the caller read under the Receivable's row lock (payment-requests/store.ts,
 * lockPayingReceivable) so that two confirmations of different requests for one Receivable cannot both take the
 * same working amount. Nothing changes when nothing is allocated. Returns what was allocated and, when something
 * was, the Receivable's new revision.
 */
export async function allocateToReceivable(
  tx: Tx,
  clientCode: string,
  receivableId: string,
  amounts: WorkingAmountFacts,
  amountMinor: bigint,
  now: string,
): Promise<{ allocatedMinor: bigint; revision: number | null }> {
  const working = workingAmountMinor(amounts)
  const allocatedMinor = working < amountMinor ? working : amountMinor
  if (allocatedMinor === 0n) return { allocatedMinor, revision: null }
  const updated = await tx.query<{ revision: string }>(
    `UPDATE receivables SET confirmed_unreconciled_minor = confirmed_unreconciled_minor + $3, revision = revision + 1, updated_at = $4
      WHERE client_code = $1 AND external_receivable_id = $2 RETURNING revision`,
    [clientCode, receivableId, allocatedMinor.toString(), now],
  )
  return { allocatedMinor, revision: Number(updated[0]?.revision) }
}

/**
 * The Payment of a request, row-locked: what takes money back (a refund's success, a reversal) and a
 * reconciliation (reconciliations/store.ts) lock it, so what it says was taken back and matched is read by one at a time.
 */
export async function lockPayment(tx: Tx, clientCode: string, requestId: string): Promise<PaymentRow | undefined> {
  return (
    await tx.query<PaymentRow>(`SELECT ${COLUMNS} FROM payments WHERE client_code = $1 AND external_payment_request_id = $2 FOR UPDATE`, [
      clientCode,
      requestId,
    ])
  )[0]
}

/**
 * The Receivable amounts money taken back moves, row-locked, and its count of the Source's declarations (which
 * Payments' undeclared shares still count).
 */
export interface TakeBackReceivableRow {
  confirmed_unreconciled_minor: string
  acknowledged_undeclared_minor: string
  declarations: string
}

export async function lockTakeBackReceivable(tx: Tx, clientCode: string, receivableId: string): Promise<TakeBackReceivableRow | undefined> {
  return (
    await tx.query<TakeBackReceivableRow>(
      `SELECT confirmed_unreconciled_minor, acknowledged_undeclared_minor, declarations FROM receivables
        WHERE client_code = $1 AND external_receivable_id = $2 FOR UPDATE`,
      [clientCode, receivableId],
    )
  )[0]
}

/**
 * Records money taken back from a Payment (a succeeded refund, or a reversal) and its split: `unapplied` and
 * `allocated` of it, the Payment's refunded or reversed total rising by their sum. The table's CHECKs refuse
 * more than the Payment's amount. The Payment's undeclared share becomes `undeclared` as of the Receivable's
 * `declarations` count (read under the Receivable's row lock).
 */
export async function recordTakenBack(
  tx: Tx,
  clientCode: string,
  requestId: string,
  t: {
    kind: 'refund' | 'reversal'
    unappliedMinor: bigint
    allocatedMinor: bigint
    undeclared: { minor: bigint; asOf: bigint }
  },
): Promise<PaymentRow> {
  const column = t.kind === 'refund' ? 'refunded_minor' : 'reversed_minor'
  const rows = await tx.query<PaymentRow>(
    `UPDATE payments SET ${column} = ${column} + $3 + $4, taken_back_unapplied_minor = taken_back_unapplied_minor + $3,
            taken_back_allocated_minor = taken_back_allocated_minor + $4, acknowledged_undeclared_minor = $5,
            undeclared_as_of = $6, revision = revision + 1
      WHERE client_code = $1 AND external_payment_request_id = $2 RETURNING ${COLUMNS}`,
    [
      clientCode,
      requestId,
      t.unappliedMinor.toString(),
      t.allocatedMinor.toString(),
      t.undeclared.minor.toString(),
      t.undeclared.asOf.toString(),
    ],
  )
  return rows[0] as PaymentRow
}

/**
 * Gives allocated money back to the Receivable's working amount: `unacknowledged` leaves its
 * confirmed_unreconciled_minor, `acknowledged` its acknowledged_undeclared_minor. Returns the new revision.
 */
export async function releaseAllocation(
  tx: Tx,
  clientCode: string,
  receivableId: string,
  r: { unacknowledgedMinor: bigint; acknowledgedMinor: bigint },
  now: string,
): Promise<number> {
  const rows = await tx.query<{ revision: string }>(
    `UPDATE receivables SET confirmed_unreconciled_minor = confirmed_unreconciled_minor - $3,
            acknowledged_undeclared_minor = acknowledged_undeclared_minor - $4, revision = revision + 1, updated_at = $5
      WHERE client_code = $1 AND external_receivable_id = $2 RETURNING revision`,
    [clientCode, receivableId, r.unacknowledgedMinor.toString(), r.acknowledgedMinor.toString(), now],
  )
  return Number(rows[0]?.revision)
}

/** Receipt lines of this Payment that acknowledged money (state matched), in minor units. */
export async function matchedMinor(db: Queryable, clientCode: string, requestId: string): Promise<bigint> {
  const rows = await db.query<{ matched: string }>(
    `SELECT COALESCE(sum(amount_minor), 0)::text AS matched FROM receipt_lines
      WHERE client_code = $1 AND external_payment_request_id = $2 AND state = 'matched'`,
    [clientCode, requestId],
  )
  return BigInt(rows[0]?.matched ?? '0')
}

/** `matchedMinor` of several Payments, in one statement: request id to the matched total (absent: none matched). */
export async function matchedMinorOf(db: Queryable, clientCode: string, requestIds: readonly string[]): Promise<Map<string, bigint>> {
  const rows = await db.query<{ id: string; matched: string }>(
    `SELECT external_payment_request_id AS id, sum(amount_minor)::text AS matched FROM receipt_lines
      WHERE client_code = $1 AND external_payment_request_id = ANY($2::text[]) AND state = 'matched'
      GROUP BY external_payment_request_id`,
    [clientCode, requestIds],
  )
  return new Map(rows.map((r) => [r.id, BigInt(r.matched)]))
}

/** The Payments of several requests, in one statement: request id to its Payment (absent: none yet). */
export async function findPayments(db: Queryable, clientCode: string, requestIds: readonly string[]): Promise<Map<string, PaymentRow>> {
  const rows = await db.query<PaymentRow>(
    `SELECT ${COLUMNS} FROM payments WHERE client_code = $1 AND external_payment_request_id = ANY($2::text[])`,
    [clientCode, requestIds],
  )
  return new Map(rows.map((r) => [r.external_payment_request_id, r]))
}

/** Is a reconciliation of this Payment held (a difference not yet resolved)? */
export async function hasHeldReconciliation(db: Queryable, clientCode: string, requestId: string): Promise<boolean> {
  const rows = await db.query<{ held: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM payment_reconciliations
                     WHERE client_code = $1 AND external_payment_request_id = $2 AND status = 'held') AS held`,
    [clientCode, requestId],
  )
  return rows[0]?.held === true
}

export interface DeliveryAttemptRow {
  attempt: number
  route: string
  outcome: string
  attempted_at: string
}

export async function deliveryAttempts(db: Queryable, clientCode: string, requestId: string): Promise<DeliveryAttemptRow[]> {
  return db.query<DeliveryAttemptRow>(
    `SELECT attempt, route, outcome, attempted_at FROM receipt_delivery_attempts
      WHERE client_code = $1 AND external_payment_request_id = $2 ORDER BY attempt`,
    [clientCode, requestId],
  )
}

/** The family's store functions, for the factories that receive them as a `Pick<>`. */
export const paymentStore = {
  findPayment,
  findPayments,
  insertPayment,
  allocateToReceivable,
  lockPayment,
  lockTakeBackReceivable,
  recordTakenBack,
  releaseAllocation,
  matchedMinor,
  matchedMinorOf,
  hasHeldReconciliation,
  deliveryAttempts,
}
export type PaymentStore = typeof paymentStore
