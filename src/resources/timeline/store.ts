import type { Queryable } from '../../store/store.ts'

/**
 * A Receivable's timeline, read from what the service already records (docs/decisions.md, "A Receivable's
 * timeline"): no table of its own. Each source is one branch of a UNION ALL, each branch one Receivable's index
 * range (migration 0038 adds the ranges that were missing); a page is the branches' rows after the cursor's
 * `(at, key)`, oldest first, `limit + 1` of them (the extra one only says another page follows).
 *
 * Every branch names the client (`client_code = $1`) on every client-keyed table it touches. `key` is unique within
 * one Receivable's timeline and never changes once the row exists, so paging while others write never skips or
 * repeats an entry. Each branch returns `detail`, the facts the service renders the entry's summary and ref from.
 */

export interface TimelineRow {
  /** The entry's time as the cursor carries it (UTC, microseconds). */
  list_at: string
  key: string
  kind: string
  actor_type: string | null
  /** The API key's name (an Integration's entry whose key is known), or the provider's name. */
  actor_name: string | null
  detail: Record<string, unknown>
}

/** The Receivable's Payment requests (the payment-keyed sources join through them). */
const REQUESTS = `SELECT external_payment_request_id AS id FROM payment_requests WHERE client_code = $1 AND external_receivable_id = $2`

const BRANCHES = [
  // Revisions: the Receivable's feed events (kept as long as the feed keeps them: 30 days).
  `SELECT e.occurred_at AS at, 'revision:' || lpad(e.revision::text, 19, '0') AS key, 'revision' AS kind,
          e.actor_type, e.actor_ref, jsonb_build_object('revision', e.revision, 'type', e.type) AS detail
     FROM change_events e
    WHERE e.client_code = $1 AND e.resource_type = 'receivable' AND e.resource_id = $2`,
  // Adjustments, credit notes and write-offs: only an Integration sends them.
  `SELECT f.accepted_at, 'financial:' || f.family || ':' || f.external_event_id, f.family, 'integration', NULL,
          jsonb_build_object('id', f.external_event_id, 'amountMinor', f.signed_amount_minor::text,
                             'currency', f.body->'amount'->>'currency', 'reason', f.body->>'reason')
     FROM financial_events f
    WHERE f.client_code = $1 AND f.external_receivable_id = $2`,
  // Payment observations allocated to the Receivable.
  `SELECT o.accepted_at, 'observation:' || a.external_event_id, 'payment_observation', 'integration', NULL,
          jsonb_build_object('id', a.external_event_id, 'amountMinor', a.amount_minor::text, 'currency', a.currency,
                             'type', o.body->>'type')
     FROM payment_observation_allocations a
     JOIN payment_observations o ON o.client_code = $1 AND o.external_event_id = a.external_event_id
    WHERE a.client_code = $1 AND a.external_receivable_id = $2`,
  // Holds: omitted from a complete-book declaration (placed; released when a later declaration covers it).
  `SELECT b.flagged_at, 'hold:book:' || b.external_completion_id, 'hold_placed', 'integration', NULL,
          jsonb_build_object('reason', 'book_omission', 'id', b.external_completion_id)
     FROM book_omissions b WHERE b.client_code = $1 AND b.external_receivable_id = $2`,
  `SELECT b.released_at, 'hold:book:' || b.external_completion_id || ':released', 'hold_released', 'integration', NULL,
          jsonb_build_object('reason', 'book_omission', 'id', b.external_completion_id)
     FROM book_omissions b WHERE b.client_code = $1 AND b.external_receivable_id = $2 AND b.released_at IS NOT NULL`,
  // Holds: a reconciliation whose receipt lines differ from the Payment.
  `SELECT h.held_at, 'hold:reconciliation:' || h.external_reconciliation_id, 'hold_placed', 'integration', NULL,
          jsonb_build_object('reason', 'reconciliation_held', 'id', h.external_reconciliation_id)
     FROM reconciliation_holds h WHERE h.client_code = $1 AND h.external_receivable_id = $2`,
  `SELECT h.released_at, 'hold:reconciliation:' || h.external_reconciliation_id || ':released', 'hold_released',
          'integration', NULL, jsonb_build_object('reason', 'reconciliation_held', 'id', h.external_reconciliation_id)
     FROM reconciliation_holds h WHERE h.client_code = $1 AND h.external_receivable_id = $2 AND h.released_at IS NOT NULL`,
  // Client-wide holds since the Receivable exists: collection switched off by an operator, the Source gone quiet.
  `SELECT f.recorded_at, 'client:' || lpad(f.seq::text, 19, '0'),
          CASE WHEN f.kind IN ('collection_disabled', 'source_stale') THEN 'hold_placed' ELSE 'hold_released' END,
          CASE WHEN f.kind LIKE 'collection%' THEN 'operator' WHEN f.kind = 'source_fresh' THEN 'integration' ELSE 'service' END,
          NULL,
          jsonb_build_object('reason', CASE WHEN f.kind LIKE 'collection%' THEN 'collection_disabled' ELSE 'source_stale' END)
     FROM client_facts f
     JOIN receivables r ON r.client_code = $1 AND r.external_receivable_id = $2
    WHERE f.client_code = $1 AND f.recorded_at >= r.created_at`,
  // Recovery instructions: every revision, the Source's and the service's (a suspension says why).
  `SELECT h.recorded_at, 'instruction:' || h.external_instruction_id || ':' || lpad(h.revision::text, 19, '0'),
          'recovery_instruction', CASE WHEN h.actor = 'source' THEN 'integration' ELSE 'service' END, NULL,
          jsonb_build_object('id', h.external_instruction_id, 'revision', h.revision, 'state', h.state, 'cause', h.cause)
     FROM recovery_instructions i
     JOIN recovery_instruction_history h ON h.client_code = $1 AND h.external_instruction_id = i.external_instruction_id
    WHERE i.client_code = $1 AND i.external_receivable_id = $2`,
  // Payment requests: created, and ended without a payment (expired by the service, canceled by whom the reason says).
  `SELECT p.created_at, 'request:' || p.external_payment_request_id, 'payment_request', 'integration', NULL,
          jsonb_build_object('id', p.external_payment_request_id, 'amountMinor', p.amount_minor::text, 'currency', p.currency)
     FROM payment_requests p WHERE p.client_code = $1 AND p.external_receivable_id = $2`,
  `SELECT p.updated_at, 'request:' || p.external_payment_request_id || ':' || p.status, 'payment_request_' || p.status,
          CASE WHEN p.cancel_reason = 'requested' THEN 'integration' ELSE 'service' END, NULL,
          jsonb_build_object('id', p.external_payment_request_id, 'reason', p.cancel_reason)
     FROM payment_requests p
    WHERE p.client_code = $1 AND p.external_receivable_id = $2 AND p.status IN ('expired', 'canceled')`,
  // Payments, refunds, reversals, reconciliations and receipts: through the Receivable's Payment requests.
  `SELECT y.decided_at, 'payment:' || y.external_payment_request_id, 'payment', 'provider', y.provider,
          jsonb_build_object('id', y.external_payment_request_id, 'status', y.status, 'amountMinor', y.amount_minor::text,
                             'currency', y.currency)
     FROM (${REQUESTS}) q JOIN payments y ON y.client_code = $1 AND y.external_payment_request_id = q.id`,
  `SELECT f.created_at, 'refund:' || f.external_payment_request_id || ':' || f.external_refund_id, 'refund',
          CASE WHEN f.reason = 'unapplied_funds' THEN 'service' ELSE 'integration' END, NULL,
          jsonb_build_object('id', f.external_refund_id, 'paymentRequestId', f.external_payment_request_id,
                             'amountMinor', f.amount_minor::text, 'currency', f.currency, 'reason', f.reason)
     FROM (${REQUESTS}) q JOIN refunds f ON f.client_code = $1 AND f.external_payment_request_id = q.id`,
  `SELECT f.decided_at, 'refund:' || f.external_payment_request_id || ':' || f.external_refund_id || ':' || f.status,
          'refund_' || f.status, 'provider', NULL,
          jsonb_build_object('id', f.external_refund_id, 'paymentRequestId', f.external_payment_request_id,
                             'reason', f.failure_reason)
     FROM (${REQUESTS}) q JOIN refunds f ON f.client_code = $1 AND f.external_payment_request_id = q.id
    WHERE f.decided_at IS NOT NULL`,
  `SELECT t.occurred_at, t.kind || ':' || t.external_payment_request_id || ':' || t.take_back_key, t.kind, 'provider', NULL,
          jsonb_build_object('id', t.take_back_key, 'paymentRequestId', t.external_payment_request_id,
                             'amountMinor', t.amount_minor::text, 'currency', y.currency)
     FROM (${REQUESTS}) q
     JOIN payment_take_backs t ON t.client_code = $1 AND t.external_payment_request_id = q.id AND t.kind IN ('reversal', 'reinstatement')
     JOIN payments y ON y.client_code = $1 AND y.external_payment_request_id = q.id`,
  `SELECT c.accepted_at, 'reconciliation:' || c.external_reconciliation_id, 'reconciliation', 'integration', NULL,
          jsonb_build_object('id', c.external_reconciliation_id, 'paymentRequestId', c.external_payment_request_id,
                             'status', c.status)
     FROM (${REQUESTS}) q JOIN payment_reconciliations c ON c.client_code = $1 AND c.external_payment_request_id = q.id`,
  `SELECT c.resolved_at, 'reconciliation:' || c.external_reconciliation_id || ':resolved', 'reconciliation_resolved',
          'integration', NULL, jsonb_build_object('id', c.external_reconciliation_id, 'paymentRequestId', c.external_payment_request_id)
     FROM (${REQUESTS}) q JOIN payment_reconciliations c ON c.client_code = $1 AND c.external_payment_request_id = q.id
    WHERE c.resolved_at IS NOT NULL`,
  `SELECT d.created_at, 'receipt:' || d.receipt_id, 'receipt', 'service', NULL,
          jsonb_build_object('id', d.receipt_id, 'paymentRequestId', d.external_payment_request_id, 'of', d.kind)
     FROM (${REQUESTS}) q JOIN receipt_deliveries d ON d.client_code = $1 AND d.external_payment_request_id = q.id`,
  `SELECT d.completed_at, 'receipt:' || d.receipt_id || ':' || d.status, 'receipt_' || d.status, 'service', NULL,
          jsonb_build_object('id', d.receipt_id, 'paymentRequestId', d.external_payment_request_id, 'of', d.kind)
     FROM (${REQUESTS}) q JOIN receipt_deliveries d ON d.client_code = $1 AND d.external_payment_request_id = q.id
    WHERE d.completed_at IS NOT NULL`,
]

/**
 * One page of the Receivable's timeline after `(afterAt, afterKey)`, oldest first; `limit` rows (ask `limit + 1`).
 * The name of an Integration's API key is read from api_keys for the page's rows only.
 */
export async function timelinePage(
  db: Queryable,
  clientCode: string,
  receivableId: string,
  after: { at: string; key: string } | undefined,
  limit: number,
): Promise<TimelineRow[]> {
  return db.query<TimelineRow>(
    `WITH page AS (
       SELECT * FROM (${BRANCHES.join('\n     UNION ALL\n')}) e
        WHERE $3::timestamptz IS NULL OR (e.at, e.key) > ($3::timestamptz, $4::text)
        ORDER BY e.at, e.key LIMIT $5)
     SELECT to_char(p.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS list_at, p.key, p.kind, p.actor_type,
            CASE WHEN p.actor_type = 'integration' THEN k.name ELSE p.actor_ref END AS actor_name, p.detail
       FROM page p LEFT JOIN api_keys k ON p.actor_type = 'integration' AND k.api_key_id = p.actor_ref
      ORDER BY p.at, p.key`,
    [clientCode, receivableId, after?.at ?? null, after?.key ?? null, limit],
  )
}

/** Whether the Receivable exists (a timeline of an unknown one is 404). */
export async function receivableExists(db: Queryable, clientCode: string, receivableId: string): Promise<boolean> {
  const rows = await db.query('SELECT 1 FROM receivables WHERE client_code = $1 AND external_receivable_id = $2', [
    clientCode,
    receivableId,
  ])
  return rows.length > 0
}
