import { randomUUID } from 'node:crypto'
import { canonicalDigest } from '../domain/canonical.ts'
import type { Queryable, Tx } from '../store/store.ts'

export interface AuditInput {
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

export async function recordAudit(tx: Tx, a: AuditInput): Promise<void> {
  await tx.query(
    `INSERT INTO audit_events (audit_event_id, client_code, actor, action, target_type, target_id, details, change_digest, occurred_at)
     VALUES ($1, $2, 'operator', $3, $4, $5, $6, $7, $8)`,
    [randomUUID(), a.clientCode, a.action, a.targetType, a.targetId, JSON.stringify(a.details), canonicalDigest(a.change), a.occurredAt],
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
  return db.query<AuditRow>(
    `SELECT a.* FROM audit_events a
      WHERE ($2::bigint IS NULL OR a.seq > $2)
        AND ($1::text IS NULL OR a.client_code = $1
             OR (a.client_code IS NULL AND a.target_type = 'api_key' AND EXISTS (
                   SELECT 1 FROM api_keys k JOIN grants g ON g.integration_id = k.integration_id
                    WHERE k.api_key_id = a.target_id AND g.client_code = $1)))
      ORDER BY a.seq LIMIT $3`,
    [q.clientCode, q.afterSeq, q.limit],
  )
}

export interface ClientRow {
  client_code: string
  name: string | null
  collection_enabled: boolean
  created_at: string
  updated_at: string
}

export async function findClient(db: Queryable, clientCode: string): Promise<ClientRow | undefined> {
  return (await db.query<ClientRow>('SELECT * FROM clients WHERE client_code = $1', [clientCode]))[0]
}

export interface IntegrationRow {
  integration_id: string
  name: string
  created_at: string
  updated_at: string
}

export async function findIntegration(db: Queryable, id: string): Promise<IntegrationRow | undefined> {
  return (await db.query<IntegrationRow>('SELECT * FROM integrations WHERE integration_id = $1', [id]))[0]
}

export interface GrantRow {
  client_code: string
  integration_id: string
  scopes: string[]
  ip_allowlist: string[]
  status: 'active' | 'revoked'
  recovery_entry_mode: string
  feed_mode: string
  industry_profile: string
  receipt_delivery_owner: string
  created_at: string
  updated_at: string
}

export async function findGrant(db: Queryable, integrationId: string, clientCode: string): Promise<GrantRow | undefined> {
  return (await db.query<GrantRow>('SELECT * FROM grants WHERE client_code = $1 AND integration_id = $2', [clientCode, integrationId]))[0]
}

export interface ApiKeyRow {
  api_key_id: string
  integration_id: string
  environment: 'sandbox' | 'production'
  /** The key's last 4 characters (null for keys issued before migration 0008). Never the key or its digest. */
  last4: string | null
  created_at: string
  revoked_at: string | null
}

/** The api_keys columns an operator may see: every column but `digest`. */
export const API_KEY_COLUMNS = 'api_key_id, integration_id, environment, last4, created_at, revoked_at'

export async function findApiKey(db: Queryable, id: string): Promise<ApiKeyRow | undefined> {
  return (await db.query<ApiKeyRow>(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE api_key_id = $1`, [id]))[0]
}

/*
 * Lists for the operator API: keyset pages in a stable order (`WHERE key > after ORDER BY key LIMIT n`), so
 * a page never repeats or skips a row that existed when the listing started, however many are added
 * meanwhile. The operator tables are small (clients and integrations by the hundred, keys and grants by the
 * handful per integration); each order is served by the primary key or a short sort.
 */

export async function listClients(db: Queryable, after: string | undefined, limit: number): Promise<ClientRow[]> {
  return db.query<ClientRow>('SELECT * FROM clients WHERE ($1::text IS NULL OR client_code > $1) ORDER BY client_code LIMIT $2', [
    after ?? null,
    limit,
  ])
}

export async function listIntegrations(db: Queryable, after: string | undefined, limit: number): Promise<IntegrationRow[]> {
  return db.query<IntegrationRow>(
    'SELECT * FROM integrations WHERE ($1::text IS NULL OR integration_id > $1) ORDER BY integration_id LIMIT $2',
    [after ?? null, limit],
  )
}

/** The grants of one integration, by client code. */
export async function listGrantsOfIntegration(
  db: Queryable,
  integrationId: string,
  after: string | undefined,
  limit: number,
): Promise<GrantRow[]> {
  return db.query<GrantRow>(
    `SELECT * FROM grants WHERE integration_id = $1 AND ($2::text IS NULL OR client_code > $2)
      ORDER BY client_code LIMIT $3`,
    [integrationId, after ?? null, limit],
  )
}

/** The grants for one client, by integration id (the primary key's order). */
export async function listGrantsOfClient(db: Queryable, clientCode: string, after: string | undefined, limit: number): Promise<GrantRow[]> {
  return db.query<GrantRow>(
    `SELECT * FROM grants WHERE client_code = $1 AND ($2::text IS NULL OR integration_id > $2)
      ORDER BY integration_id LIMIT $3`,
    [clientCode, after ?? null, limit],
  )
}

/** The keys of one integration, oldest first; the id breaks ties between keys issued in the same millisecond. */
export async function listApiKeys(
  db: Queryable,
  integrationId: string,
  after: { createdAt: string; apiKeyId: string } | undefined,
  limit: number,
): Promise<ApiKeyRow[]> {
  return db.query<ApiKeyRow>(
    `SELECT ${API_KEY_COLUMNS} FROM api_keys
      WHERE integration_id = $1 AND ($2::timestamptz IS NULL OR (created_at, api_key_id) > ($2::timestamptz, $3::text))
      ORDER BY created_at, api_key_id LIMIT $4`,
    [integrationId, after?.createdAt ?? null, after?.apiKeyId ?? null, limit],
  )
}

/**
 * What a sandbox client reset keeps (docs/operator-api.md): the client itself, its grants (and so the
 * Integrations' keys, which belong to no client), its webhook endpoints (configuration holding a signing
 * secret), its feed head (sequence numbers keep rising, so a cursor from before the reset answers 410
 * `cursor_expired` instead of skipping events) and the audit trail. Every other table with a `client_code`
 * column is the client's data and is emptied of it, so a table added later is covered without a change here.
 */
export const RESET_KEEPS: ReadonlySet<string> = new Set(['clients', 'grants', 'webhook_endpoints', 'feed_heads', 'audit_events'])

/**
 * Deletes every row of the client in every table but RESET_KEEPS, children before parents (foreign keys),
 * and marks its whole feed purged. Returns the rows deleted per table (tables with none left out).
 */
export async function deleteClientData(tx: Tx, clientCode: string): Promise<Record<string, number>> {
  // First, under the feed head's row lock (held to commit): a write that allocates a sequence number waits for
  // the reset, and its event then follows the purge mark.
  await tx.query('UPDATE feed_heads SET purged_through_seq = last_seq WHERE client_code = $1', [clientCode])
  const tables = (
    await tx.query<{ table_name: string }>(
      `SELECT c.table_name FROM information_schema.columns c
         JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
        WHERE c.column_name = 'client_code' AND c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
        ORDER BY c.table_name`,
    )
  )
    .map((r) => r.table_name)
    .filter((t) => !RESET_KEEPS.has(t))
  const edges = await tx.query<{ child: string; parent: string }>(
    `SELECT cl.relname AS child, pl.relname AS parent FROM pg_constraint k
       JOIN pg_class cl ON cl.oid = k.conrelid JOIN pg_class pl ON pl.oid = k.confrelid
      WHERE k.contype = 'f' AND k.connamespace = current_schema()::regnamespace AND k.conrelid <> k.confrelid`,
  )
  // Children first: a table is deleted from once no table still to do references it.
  const todo = new Set(tables)
  const order: string[] = []
  while (todo.size > 0) {
    const ready = [...todo].filter((t) => !edges.some((e) => e.parent === t && e.child !== t && todo.has(e.child)))
    if (ready.length === 0) throw new Error(`client reset: foreign keys form a cycle among ${[...todo].join(', ')}`)
    for (const t of ready) {
      order.push(t)
      todo.delete(t)
    }
  }
  const deleted: Record<string, number> = {}
  for (const table of order) {
    const rows = await tx.query<{ n: string }>(
      `WITH d AS (DELETE FROM ${quoteIdent(table)} WHERE client_code = $1 RETURNING 1) SELECT count(*) AS n FROM d`,
      [clientCode],
    )
    const n = Number(rows[0]?.n ?? 0)
    if (n > 0) deleted[table] = n
  }
  return deleted
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`
}
