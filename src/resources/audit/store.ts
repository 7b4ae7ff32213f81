import { randomUUID } from 'node:crypto'
import { canonicalDigest } from '../../domain/canonical.ts'
import type { Queryable } from '../../store/store.ts'

/**
 * The audit trail: every operator action records one event, in the action's own transaction; so do an Integration's
 * changes to its delivery targets and the service's own (a webhook endpoint or receipt route disabled or lagging).
 * The one writer of the audit tables. An event of one client is a row of audit_events (keyed by client); an event
 * of no client (integrations, API keys, settings) a row of operator_audit_events (migration 0043). Both draw `seq`
 * from one sequence: one order.
 */

export interface AuditInput {
  /** `operator` (the default), `integration:<id>`, or `service`. */
  actor?: string
  action: string
  clientCode: string | null
  targetType: string
  targetId: string
  /** Identifiers and non-secret settings only: never a key, secret or URL. */
  details: Record<string, unknown>
  /** What changed; only its SHA-256 digest is kept. */
  change: unknown
  occurredAt: string
}

export async function recordAudit(db: Queryable, a: AuditInput): Promise<void> {
  const values = [
    a.action,
    a.targetType,
    a.targetId,
    JSON.stringify(a.details),
    canonicalDigest(a.change),
    a.occurredAt,
    randomUUID(),
    a.actor ?? 'operator',
  ]
  if (a.clientCode === null)
    await db.query(
      `INSERT INTO operator_audit_events (audit_event_id, actor, action, target_type, target_id, details, change_digest, occurred_at)
       VALUES ($7, $8, $1, $2, $3, $4, $5, $6)`,
      values,
    )
  else
    await db.query(
      `INSERT INTO audit_events (audit_event_id, client_code, actor, action, target_type, target_id, details, change_digest, occurred_at)
       VALUES ($7, $9, $8, $1, $2, $3, $4, $5, $6)`,
      [...values, a.clientCode],
    )
}

export interface AuditRow {
  seq: string
  audit_event_id: string
  occurred_at: string
  actor: string
  action: string
  client_code: string | null
  target_type: string
  target_id: string
  details: Record<string, unknown>
  change_digest: string
}

/**
 * Audit events in sequence order. With a client code: that client's events, and also the creation and revocation
 * of the API keys of every integration holding a grant for it, active or revoked, whenever the key event happened
 * (such a key can reach, or could reach, the client's data; its events are recorded with no client code). The
 * audit trail grows with operator actions (thousands of rows, not millions): the primary key's order, filtered.
 */
export async function listAuditEvents(
  db: Queryable,
  q: { clientCode: string | null; afterSeq: string | null; limit: number },
): Promise<AuditRow[]> {
  if (q.clientCode === null)
    // Every client's events and the operator's: the operator's whole trail, read across clients (docs/scaling.md).
    return db.query<AuditRow>(
      `SELECT * FROM (
         (SELECT a.* FROM audit_events a WHERE ($1::bigint IS NULL OR a.seq > $1) ORDER BY a.seq LIMIT $2)
         UNION ALL
         (SELECT o.seq, o.audit_event_id, NULL::text AS client_code, o.actor, o.action, o.target_type, o.target_id, o.details,
                 o.change_digest, o.occurred_at
            FROM operator_audit_events o WHERE ($1::bigint IS NULL OR o.seq > $1) ORDER BY o.seq LIMIT $2)) e
        ORDER BY e.seq LIMIT $2`,
      [q.afterSeq, q.limit],
    )
  // The client's events, and the API key events of the integrations granted it (grants, keyed by the client).
  return db.query<AuditRow>(
    `SELECT * FROM (
       (SELECT a.* FROM audit_events a WHERE a.client_code = $1 AND ($2::bigint IS NULL OR a.seq > $2) ORDER BY a.seq LIMIT $3)
       UNION ALL
       (SELECT o.seq, o.audit_event_id, NULL::text AS client_code, o.actor, o.action, o.target_type, o.target_id, o.details,
               o.change_digest, o.occurred_at
          FROM operator_audit_events o
         WHERE ($2::bigint IS NULL OR o.seq > $2) AND o.target_type = 'api_key' AND EXISTS (
                 SELECT 1 FROM api_keys k JOIN grants g ON g.integration_id = k.integration_id
                  WHERE k.api_key_id = o.target_id AND g.client_code = $1)
         ORDER BY o.seq LIMIT $3)) e
      ORDER BY e.seq LIMIT $3`,
    [q.clientCode, q.afterSeq, q.limit],
  )
}
