import type { Queryable, Tx } from '../../store/store.ts'

/**
 * The SQL of erasing a Customer's personal data (docs/decisions.md, "Erasure of a Customer's personal data"), in one
 * module although it updates the tables of other families: what an erasure touches is read in one place. Every
 * statement names one client (`client_code = $1`) on every client-keyed table it touches, and every update of
 * another family's rows takes at most `limit` rows (the worker's chunk), so no statement fans out over a book.
 */

/** What replaces a personal value. */
export const TOMBSTONE = 'erased'

export interface ErasureRow {
  external_customer_id: string
  cause: 'request' | 'retention'
  status: 'pending' | 'done'
  step: 'batch_records' | 'payment_requests' | 'audit' | 'done'
  after_seq: string
  erased_strings: string[] | null
  requested_at: string
  completed_at: string | null
}

const COLUMNS = 'external_customer_id, cause, status, step, after_seq, erased_strings, requested_at, completed_at'

export async function findErasure(db: Queryable, clientCode: string, customerId: string): Promise<ErasureRow | undefined> {
  const rows = await db.query<ErasureRow>(`SELECT ${COLUMNS} FROM customer_erasures WHERE client_code = $1 AND external_customer_id = $2`, [
    clientCode,
    customerId,
  ])
  return rows[0]
}

/**
 * Records the erasure (the fact the worker follows up) and tombstones the Customer's own rows in the same statement:
 * its representation (identifiers and restriction types kept), its deactivated contacts, the references of its
 * restrictions; its revision goes up by one. Returns the Customer's new revision, or undefined when an erasure of
 * it was already recorded (nothing changed).
 */
export async function recordErasure(
  tx: Tx,
  clientCode: string,
  customerId: string,
  e: { cause: ErasureRow['cause']; strings: readonly string[]; tombstone: unknown; now: string },
): Promise<number | undefined> {
  const rows = await tx.query<{ revision: string }>(
    `WITH fact AS (
       INSERT INTO customer_erasures (client_code, external_customer_id, cause, status, erased_strings, requested_at)
       VALUES ($1, $2, $3, 'pending', $4, $5) ON CONFLICT (client_code, external_customer_id) DO NOTHING RETURNING 1),
     refs AS (
       UPDATE restrictions SET reference = NULL
        WHERE client_code = $1 AND subject_type = 'customer' AND subject_id = $2 AND reference IS NOT NULL
          AND EXISTS (SELECT 1 FROM fact))
     UPDATE customers c SET representation = $6, deactivated_contacts = '[]', erased_at = $5, revision = c.revision + 1,
            updated_at = $5
      WHERE c.client_code = $1 AND c.external_customer_id = $2 AND EXISTS (SELECT 1 FROM fact)
     RETURNING c.revision`,
    [clientCode, customerId, e.cause, JSON.stringify(e.strings), e.now, JSON.stringify(e.tombstone)],
  )
  return rows[0] ? Number(rows[0].revision) : undefined
}

/** The clients with an erasure to follow up whose lease is free (a named read across clients: which have work). */
export async function erasureClients(db: Queryable, now: string, limit: number): Promise<string[]> {
  const rows = await db.query<{ client_code: string }>(
    `SELECT DISTINCT client_code FROM customer_erasures
      WHERE status = 'pending' AND (lease_expires_at IS NULL OR lease_expires_at <= $1) LIMIT $2`,
    [now, limit],
  )
  return rows.map((r) => r.client_code)
}

/** Claims one pending erasure of the client whose lease is free, under `token`, until `until`. */
export async function claimErasure(db: Queryable, clientCode: string, token: string, now: string, until: string) {
  const rows = await db.query<ErasureRow>(
    `UPDATE customer_erasures e SET lease_token = $2, lease_expires_at = $4, attempts = e.attempts + 1
      WHERE e.client_code = $1 AND e.external_customer_id = (
              SELECT external_customer_id FROM customer_erasures
               WHERE client_code = $1 AND status = 'pending' AND (lease_expires_at IS NULL OR lease_expires_at <= $3)
               ORDER BY requested_at LIMIT 1 FOR UPDATE SKIP LOCKED)
     RETURNING ${COLUMNS.split(', ')
       .map((c) => `e.${c}`)
       .join(', ')}`,
    [clientCode, token, now, until],
  )
  return rows[0]
}

/** Where the erasure got to, in the chunk's transaction; false when the lease is no longer `token`'s. */
export async function advanceErasure(
  tx: Tx,
  clientCode: string,
  customerId: string,
  token: string,
  at: { step: ErasureRow['step']; afterSeq: string; now: string; until: string },
): Promise<boolean> {
  const done = at.step === 'done'
  const rows = await tx.query(
    `UPDATE customer_erasures SET step = $4, after_seq = $5,
            status = CASE WHEN $6 THEN 'done' ELSE status END,
            completed_at = CASE WHEN $6 THEN $7::timestamptz ELSE completed_at END,
            erased_strings = CASE WHEN $6 THEN NULL ELSE erased_strings END,
            lease_token = CASE WHEN $6 THEN NULL ELSE lease_token END,
            lease_expires_at = CASE WHEN $6 THEN NULL ELSE $8::timestamptz END
      WHERE client_code = $1 AND external_customer_id = $2 AND lease_token = $3 RETURNING 1`,
    [clientCode, customerId, token, at.step, at.afterSeq, done, at.now, at.until],
  )
  return rows.length > 0
}

/** A failed chunk: the error class is kept and the lease freed, so another turn (or instance) takes it up. */
export async function releaseErasure(db: Queryable, clientCode: string, customerId: string, token: string, error: string) {
  await db.query(
    `UPDATE customer_erasures SET lease_token = NULL, lease_expires_at = NULL, last_error = $4
      WHERE client_code = $1 AND external_customer_id = $2 AND lease_token = $3`,
    [clientCode, customerId, token, error],
  )
}

/** Up to `limit` of the Customer's batch records (kind `customer`) still holding its body: the body becomes `tombstone`. */
export async function eraseBatchRecords(tx: Tx, clientCode: string, customerId: string, tombstone: unknown, limit: number) {
  const rows = await tx.query(
    `UPDATE batch_records r SET body = $3
      WHERE r.client_code = $1 AND (r.external_batch_id, r.position) IN (
              SELECT external_batch_id, position FROM batch_records
               WHERE client_code = $1 AND kind = 'customer' AND external_id = $2 AND body <> $3::jsonb LIMIT $4)
     RETURNING 1`,
    [clientCode, customerId, JSON.stringify(tombstone), limit],
  )
  return rows.length
}

/**
 * Up to `limit` Payment requests of the Receivables the Customer is responsible for whose free text (description,
 * its copy in the request body, the cancellation note) is not a tombstone yet: each becomes one.
 */
export async function erasePaymentRequestTexts(tx: Tx, clientCode: string, customerId: string, limit: number) {
  const rows = await tx.query(
    `UPDATE payment_requests p
        SET description = CASE WHEN p.description IS NULL THEN NULL ELSE $3 END,
            body = CASE WHEN p.body ? 'description' THEN jsonb_set(p.body, '{description}', to_jsonb($3::text)) ELSE p.body END,
            cancellation_note = CASE WHEN p.cancellation_note IS NULL THEN NULL ELSE $3 END
      WHERE p.client_code = $1 AND p.external_payment_request_id IN (
              SELECT q.external_payment_request_id FROM receivable_customers rc
                JOIN payment_requests q ON q.client_code = $1 AND q.external_receivable_id = rc.external_receivable_id
               WHERE rc.client_code = $1 AND rc.external_customer_id = $2
                 AND (q.description <> $3 OR q.cancellation_note <> $3 OR q.body->>'description' <> $3)
               LIMIT $4)
     RETURNING 1`,
    [clientCode, customerId, TOMBSTONE, limit],
  )
  return rows.length
}

/** The client's audit events after `afterSeq`, `limit` of them in sequence order (the worker looks for the values in them). */
export async function auditAfter(db: Queryable, clientCode: string, afterSeq: string, limit: number) {
  return db.query<{ seq: string; details: unknown }>(
    'SELECT seq, details FROM audit_events WHERE client_code = $1 AND seq > $2 ORDER BY seq LIMIT $3',
    [clientCode, afterSeq, limit],
  )
}

/** New details for these audit events of the client (one statement). */
export async function rewriteAuditDetails(tx: Tx, clientCode: string, rows: readonly { seq: string; details: unknown }[]) {
  if (rows.length === 0) return
  await tx.query(
    `UPDATE audit_events a SET details = t.details::jsonb
       FROM unnest($2::bigint[], $3::text[]) AS t(seq, details)
      WHERE a.client_code = $1 AND a.seq = t.seq`,
    [clientCode, rows.map((r) => r.seq), rows.map((r) => JSON.stringify(r.details))],
  )
}

/**
 * Customers of the client not erased yet, responsible for at least one Receivable and only for Receivables closed
 * at or before `cutoff` (PERSONAL_DATA_RETENTION_DAYS), `limit` of them.
 */
export async function customersPastRetention(db: Queryable, clientCode: string, cutoff: string, limit: number): Promise<string[]> {
  const rows = await db.query<{ external_customer_id: string }>(
    `SELECT c.external_customer_id FROM customers c
      WHERE c.client_code = $1 AND c.erased_at IS NULL
        AND EXISTS (SELECT 1 FROM receivable_customers rc WHERE rc.client_code = $1 AND rc.external_customer_id = c.external_customer_id)
        AND NOT EXISTS (
              SELECT 1 FROM receivable_customers rc
                JOIN receivables r ON r.client_code = $1 AND r.external_receivable_id = rc.external_receivable_id
               WHERE rc.client_code = $1 AND rc.external_customer_id = c.external_customer_id
                 AND (r.status <> 'closed' OR COALESCE(r.status_effective_at, r.updated_at) > $2))
        AND NOT EXISTS (SELECT 1 FROM customer_erasures e WHERE e.client_code = $1 AND e.external_customer_id = c.external_customer_id)
      ORDER BY c.external_customer_id LIMIT $3`,
    [clientCode, cutoff, limit],
  )
  return rows.map((r) => r.external_customer_id)
}

/** Every client (a named read across clients: the retention rule runs per client). */
export async function allClients(db: Queryable): Promise<string[]> {
  const rows = await db.query<{ client_code: string }>('SELECT client_code FROM clients ORDER BY client_code')
  return rows.map((r) => r.client_code)
}
