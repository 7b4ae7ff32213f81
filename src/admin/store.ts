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
