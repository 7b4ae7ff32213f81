import type { Queryable, Tx } from '../../store/store.ts'
import type { ReceivableWrite } from './schema.ts'

export type ReceivableStatus = 'active' | 'paused' | 'closed'

export interface ReceivableRow {
  external_receivable_id: string
  revision: string
  status: ReceivableStatus
  source_revision: string
  currency: string
  source_amount_minor: string
  confirmed_unreconciled_minor: string
  receipt_acknowledged_minor: string
  representation: ReceivableWrite
  updated_at: string
  collection_enabled: boolean
  /** Held by an unreleased complete-book omission. */
  flagged: boolean
  activity_feed_mode: 'transaction' | 'snapshot_only' | null
  last_received_at: string | null
  last_snapshot_at: string | null
  last_source_position: string | null
}

/** The Receivable with every fact its holds are computed from, in one statement. */
const SELECT = `SELECT r.external_receivable_id, r.revision, r.status, r.source_revision, r.currency, r.source_amount_minor,
       r.confirmed_unreconciled_minor, r.receipt_acknowledged_minor, r.representation, r.updated_at, c.collection_enabled,
       EXISTS (SELECT 1 FROM book_omissions o WHERE o.client_code = r.client_code
                 AND o.external_receivable_id = r.external_receivable_id AND o.released_at IS NULL) AS flagged,
       sa.feed_mode AS activity_feed_mode, sa.last_received_at, sa.last_snapshot_at, sa.last_source_position
  FROM receivables r JOIN clients c ON c.client_code = r.client_code
  LEFT JOIN source_activity sa ON sa.client_code = r.client_code`

export async function findReceivable(db: Queryable, clientCode: string, id: string): Promise<ReceivableRow | undefined> {
  return (await db.query<ReceivableRow>(`${SELECT} WHERE r.client_code = $1 AND r.external_receivable_id = $2`, [clientCode, id]))[0]
}

export async function listReceivables(
  db: Queryable,
  clientCode: string,
  opts: { after?: string | undefined; status?: ReceivableStatus | undefined; limit: number },
): Promise<ReceivableRow[]> {
  return db.query<ReceivableRow>(
    `${SELECT} WHERE r.client_code = $1 AND ($2::text IS NULL OR r.external_receivable_id > $2) AND ($3::text IS NULL OR r.status = $3)
      ORDER BY r.external_receivable_id LIMIT $4`,
    [clientCode, opts.after ?? null, opts.status ?? null, opts.limit],
  )
}

export async function insertReceivable(tx: Tx, clientCode: string, id: string, body: ReceivableWrite, amountMinor: bigint, now: string) {
  await tx.query(
    `INSERT INTO receivables (client_code, external_receivable_id, revision, status, source_revision, currency, source_amount_minor,
                              representation, created_at, updated_at)
     VALUES ($1, $2, 1, 'active', $3, $4, $5, $6, $7, $7)`,
    [clientCode, id, body.sourceRevision, body.recoverableAmount.currency, amountMinor.toString(), JSON.stringify(body), now],
  )
  await replaceResponsibleCustomers(tx, clientCode, id, body)
}

/** A Source replace: new representation, the declared balance becomes the source amount. */
export async function replaceReceivable(tx: Tx, clientCode: string, id: string, body: ReceivableWrite, amountMinor: bigint, now: string) {
  await tx.query(
    `UPDATE receivables SET representation = $3, source_revision = $4, source_amount_minor = $5, revision = revision + 1, updated_at = $6
      WHERE client_code = $1 AND external_receivable_id = $2`,
    [clientCode, id, JSON.stringify(body), body.sourceRevision, amountMinor.toString(), now],
  )
  await replaceResponsibleCustomers(tx, clientCode, id, body)
}

async function replaceResponsibleCustomers(tx: Tx, clientCode: string, id: string, body: ReceivableWrite) {
  await tx.query('DELETE FROM receivable_customers WHERE client_code = $1 AND external_receivable_id = $2', [clientCode, id])
  await tx.query(
    `INSERT INTO receivable_customers (client_code, external_customer_id, external_receivable_id, role)
     SELECT $1, c, $2, r FROM unnest($3::text[], $4::text[]) AS t(c, r)`,
    [clientCode, id, body.responsibleCustomers.map((c) => c.externalCustomerId), body.responsibleCustomers.map((c) => c.role)],
  )
}

export async function setStatus(
  tx: Tx,
  clientCode: string,
  id: string,
  status: ReceivableStatus,
  reason: string | null,
  effectiveAt: string,
  now: string,
) {
  await tx.query(
    `UPDATE receivables SET status = $3, status_reason = $4, status_effective_at = $5, revision = revision + 1, updated_at = $6
      WHERE client_code = $1 AND external_receivable_id = $2`,
    [clientCode, id, status, reason, effectiveAt, now],
  )
}

/** A financial event moves the source amount and the Receivable to the event's source revision. */
export async function moveSourceAmount(
  tx: Tx,
  clientCode: string,
  id: string,
  newAmountMinor: bigint,
  sourceRevision: number,
  now: string,
) {
  await tx.query(
    `UPDATE receivables SET source_amount_minor = $3, source_revision = $4, revision = revision + 1, updated_at = $5
      WHERE client_code = $1 AND external_receivable_id = $2`,
    [clientCode, id, newAmountMinor.toString(), sourceRevision, now],
  )
}

/** Bumps the revision of a Receivable whose derived state (holds) changed; returns the new revision. */
export async function bumpRevision(tx: Tx, clientCode: string, id: string, now: string): Promise<number> {
  const rows = await tx.query<{ revision: string }>(
    `UPDATE receivables SET revision = revision + 1, updated_at = $3 WHERE client_code = $1 AND external_receivable_id = $2 RETURNING revision`,
    [clientCode, id, now],
  )
  return Number(rows[0]?.revision)
}

export async function existingReceivables(
  db: Queryable,
  clientCode: string,
  ids: readonly string[],
): Promise<Map<string, { currency: string }>> {
  const rows = await db.query<{ external_receivable_id: string; currency: string }>(
    'SELECT external_receivable_id, currency FROM receivables WHERE client_code = $1 AND external_receivable_id = ANY($2::text[])',
    [clientCode, ids],
  )
  return new Map(rows.map((r) => [r.external_receivable_id, { currency: r.currency }]))
}
