import type { NewestFirstKey } from '../../domain/cursor.ts'
import { newestFirst } from '../../store/newest-first.ts'
import type { Queryable, Tx } from '../../store/store.ts'
import { answersInOrder } from '../../store/transactions.ts'
import type { LineState, ReconciliationStatus, ReconciliationWrite, ResolutionWrite } from './schema.ts'

export interface ReconciliationRow {
  external_reconciliation_id: string
  external_payment_request_id: string
  revision: string
  status: ReconciliationStatus
  body: ReconciliationWrite
  resolution: ResolutionWrite | null
  accepted_at: string
  resolved_at: string | null
}

export interface ReceiptLineRow {
  external_receipt_line_id: string
  external_receivable_id: string
  currency: string
  amount_minor: string
  state: LineState
}

/** The Payment a reconciliation acknowledges: only what the reconciliation reads of it. */
export interface ReconciledPaymentRow {
  status: 'confirmed' | 'failed'
  currency: string
  amount_minor: string
  allocated_minor: string
  unapplied_minor: string
  external_receivable_id: string
  /** Allocated money refunds and reversals took back (migration 0020): no receipt line can acknowledge it. */
  taken_back_allocated_minor: string
}

const COLUMNS = `external_reconciliation_id, external_payment_request_id, revision, status, body, resolution, accepted_at, resolved_at`

export async function findReconciliation(
  db: Queryable,
  clientCode: string,
  id: string,
  opts: { forUpdate?: boolean } = {},
): Promise<ReconciliationRow | undefined> {
  return (
    await db.query<ReconciliationRow>(
      `SELECT ${COLUMNS} FROM payment_reconciliations WHERE client_code = $1 AND external_reconciliation_id = $2${opts.forUpdate ? ' FOR UPDATE' : ''}`,
      [clientCode, id],
    )
  )[0]
}

/**
 * A page of the client's reconciliations, newest first by acceptance (a reconciliation is accepted once; a
 * resolution does not move it), optionally of one Payment request and of one status: an index range scan of
 * payment_reconciliations_accepted, _payment_accepted or _status_accepted.
 */
export async function listReconciliations(
  db: Queryable,
  clientCode: string,
  q: { after: NewestFirstKey | undefined; requestId: string | undefined; status: ReconciliationStatus | undefined; limit: number },
): Promise<(ReconciliationRow & { list_at: string })[]> {
  const params: unknown[] = [clientCode, q.limit]
  let filter = ''
  if (q.requestId !== undefined) {
    params.push(q.requestId)
    filter += ` AND external_payment_request_id = $${params.length}`
  }
  if (q.status !== undefined) {
    params.push(q.status)
    filter += ` AND status = $${params.length}`
  }
  const page = newestFirst('accepted_at', 'external_reconciliation_id', q.after, params)
  return db.query(
    `SELECT ${COLUMNS}, ${page.listAt} FROM payment_reconciliations WHERE client_code = $1${filter}${page.where} ${page.order} LIMIT $2`,
    params,
  )
}

/** The receipt lines of several reconciliations, in one statement: reconciliation id to its lines in order. */
export async function receiptLinesOf(db: Queryable, clientCode: string, ids: readonly string[]): Promise<Map<string, ReceiptLineRow[]>> {
  const rows = await db.query<ReceiptLineRow & { external_reconciliation_id: string }>(
    `SELECT external_reconciliation_id, external_receipt_line_id, external_receivable_id, currency, amount_minor, state FROM receipt_lines
      WHERE client_code = $1 AND external_reconciliation_id = ANY($2::text[]) ORDER BY external_reconciliation_id, position`,
    [clientCode, ids],
  )
  const lines = new Map<string, ReceiptLineRow[]>()
  for (const { external_reconciliation_id: id, ...line } of rows) {
    const list = lines.get(id) ?? []
    list.push(line)
    lines.set(id, list)
  }
  return lines
}

/** The Payments of several requests as reconciliations read them, in one statement: request id to its Payment. */
export async function reconciledPaymentsOf(
  db: Queryable,
  clientCode: string,
  requestIds: readonly string[],
): Promise<Map<string, ReconciledPaymentRow>> {
  const rows = await db.query<ReconciledPaymentRow & { external_payment_request_id: string }>(
    `SELECT external_payment_request_id, status, currency, amount_minor, allocated_minor, unapplied_minor, external_receivable_id,
            taken_back_allocated_minor FROM payments
      WHERE client_code = $1 AND external_payment_request_id = ANY($2::text[])`,
    [clientCode, requestIds],
  )
  return new Map(rows.map(({ external_payment_request_id: id, ...p }) => [id, p]))
}

export async function receiptLines(db: Queryable, clientCode: string, id: string): Promise<ReceiptLineRow[]> {
  return db.query<ReceiptLineRow>(
    `SELECT external_receipt_line_id, external_receivable_id, currency, amount_minor, state FROM receipt_lines
      WHERE client_code = $1 AND external_reconciliation_id = $2 ORDER BY position`,
    [clientCode, id],
  )
}

/**
 * The Payment of a request. `forUpdate` row-locks it to the end of the transaction: every reconciliation of
 * one Payment takes this lock before it reads the matched total, so a second one waits for the first and
 * sees its matched lines (the allocation can never be matched twice).
 */
export async function findReconciledPayment(
  db: Queryable,
  clientCode: string,
  requestId: string,
  opts: { forUpdate?: boolean } = {},
): Promise<ReconciledPaymentRow | undefined> {
  return (
    await db.query<ReconciledPaymentRow>(
      `SELECT status, currency, amount_minor, allocated_minor, unapplied_minor, external_receivable_id, taken_back_allocated_minor FROM payments
        WHERE client_code = $1 AND external_payment_request_id = $2${opts.forUpdate ? ' FOR UPDATE' : ''}`,
      [clientCode, requestId],
    )
  )[0]
}

export async function paymentRequestExists(db: Queryable, clientCode: string, requestId: string): Promise<boolean> {
  const rows = await db.query<{ one: number }>(
    'SELECT 1 AS one FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = $2',
    [clientCode, requestId],
  )
  return rows.length > 0
}

/** Which of these receipt line ids earlier reconciliations of this Payment already used. */
export async function usedReceiptLineIds(
  db: Queryable,
  clientCode: string,
  requestId: string,
  lineIds: readonly string[],
): Promise<Set<string>> {
  const rows = await db.query<{ external_receipt_line_id: string }>(
    `SELECT external_receipt_line_id FROM receipt_lines
      WHERE client_code = $1 AND external_payment_request_id = $2 AND external_receipt_line_id = ANY($3::text[])`,
    [clientCode, requestId, lineIds],
  )
  return new Set(rows.map((r) => r.external_receipt_line_id))
}

export interface NewReceiptLine {
  externalReceiptLineId: string
  externalReceivableId: string
  currency: string
  amountMinor: bigint
  state: LineState
}

/** The reconciliation and its lines as received (original figures), the lines in one statement. */
export async function insertReconciliation(
  tx: Tx,
  clientCode: string,
  id: string,
  r: { requestId: string; status: ReconciliationStatus; body: ReconciliationWrite; lines: readonly NewReceiptLine[]; now: string },
): Promise<void> {
  // Both sent before either answer is awaited: the lines follow their reconciliation in the same round trip.
  const reconciliation = tx.query(
    `INSERT INTO payment_reconciliations (client_code, external_reconciliation_id, external_payment_request_id, revision, status, body,
                                          accepted_at, updated_at)
     VALUES ($1, $2, $3, 1, $4, $5, $6, $6)`,
    [clientCode, id, r.requestId, r.status, JSON.stringify(r.body), r.now],
  )
  const lines = tx.query(
    `INSERT INTO receipt_lines (client_code, external_reconciliation_id, position, external_payment_request_id, external_receipt_line_id,
                                external_receivable_id, currency, amount_minor, state)
     SELECT $1, $2, x.position, $3, x.line, x.receivable, x.currency, x.amount, x.state
       FROM unnest($4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[]) WITH ORDINALITY AS x(line, receivable, currency, amount, state, position)`,
    [
      clientCode,
      id,
      r.requestId,
      r.lines.map((l) => l.externalReceiptLineId),
      r.lines.map((l) => l.externalReceivableId),
      r.lines.map((l) => l.currency),
      r.lines.map((l) => l.amountMinor.toString()),
      r.lines.map((l) => l.state),
    ],
  )
  await answersInOrder([reconciliation, lines])
}

/**
 * Matched lines acknowledge money: the amount moves from confirmed-unreconciled to acknowledged-undeclared (until
 * the Source's next declaration of the balance clears it), receipt-acknowledged counts it cumulatively, and the
 * working amount does not change; with a new Receivable revision. The Payment's own share of the
 * acknowledged-undeclared money grows alike (payments/take-back.ts): its figure, zero if the Source declared the
 * balance since it was written, plus this amount, as of the Receivable's count of declarations. One statement; the
 * caller holds the Payment row lock. Returns the Receivable's new revision.
 */
export async function acknowledgeReceipt(
  tx: Tx,
  clientCode: string,
  receivableId: string,
  requestId: string,
  amountMinor: bigint,
  now: string,
): Promise<number> {
  const rows = await tx.query<{ revision: string }>(
    `WITH r AS (
       UPDATE receivables
          SET confirmed_unreconciled_minor = confirmed_unreconciled_minor - $4,
              receipt_acknowledged_minor = receipt_acknowledged_minor + $4,
              acknowledged_undeclared_minor = acknowledged_undeclared_minor + $4,
              revision = revision + 1, updated_at = $5
        WHERE client_code = $1 AND external_receivable_id = $2
        RETURNING revision, declarations)
     UPDATE payments p
        SET acknowledged_undeclared_minor = CASE WHEN p.undeclared_as_of = r.declarations THEN p.acknowledged_undeclared_minor ELSE 0 END + $4,
            undeclared_as_of = r.declarations
       FROM r
      WHERE p.client_code = $1 AND p.external_payment_request_id = $3 AND p.external_receivable_id = $2
      RETURNING r.revision`,
    [clientCode, receivableId, requestId, amountMinor.toString(), now],
  )
  if (rows.length !== 1) throw new Error(`Payment ${requestId} of Receivable ${receivableId} is missing`)
  return Number(rows[0]?.revision)
}

export async function insertHolds(tx: Tx, clientCode: string, id: string, receivableIds: readonly string[], now: string): Promise<void> {
  await tx.query(
    `INSERT INTO reconciliation_holds (client_code, external_reconciliation_id, external_receivable_id, held_at)
     SELECT $1, $2, r, $4 FROM unnest($3::text[]) AS x(r)`,
    [clientCode, id, receivableIds, now],
  )
}

/** The Receivables this reconciliation holds now (its unreleased holds), sorted. */
export async function heldReceivables(db: Queryable, clientCode: string, id: string): Promise<string[]> {
  const rows = await db.query<{ external_receivable_id: string }>(
    `SELECT external_receivable_id FROM reconciliation_holds
      WHERE client_code = $1 AND external_reconciliation_id = $2 AND released_at IS NULL ORDER BY 1`,
    [clientCode, id],
  )
  return rows.map((r) => r.external_receivable_id)
}

/** A resolution: only this reconciliation's holds are released; its lines stay as received. */
export async function resolveReconciliation(
  tx: Tx,
  clientCode: string,
  id: string,
  resolution: ResolutionWrite,
  now: string,
): Promise<number> {
  // Both sent before either answer is awaited.
  const released = tx.query(
    `UPDATE reconciliation_holds SET released_at = $3
      WHERE client_code = $1 AND external_reconciliation_id = $2 AND released_at IS NULL`,
    [clientCode, id, now],
  )
  const resolved = tx.query<{ revision: string }>(
    `UPDATE payment_reconciliations SET status = 'resolved', revision = revision + 1, resolution = $3, resolved_at = $4, updated_at = $4
      WHERE client_code = $1 AND external_reconciliation_id = $2
      RETURNING revision`,
    [clientCode, id, JSON.stringify(resolution), now],
  )
  const [, rows] = await answersInOrder([released, resolved])
  return Number(rows[0]?.revision)
}
