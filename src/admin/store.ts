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
  created_at: string
  revoked_at: string | null
}

export async function findApiKey(db: Queryable, id: string): Promise<ApiKeyRow | undefined> {
  return (
    await db.query<ApiKeyRow>(
      'SELECT api_key_id, integration_id, environment, created_at, revoked_at FROM api_keys WHERE api_key_id = $1',
      [id],
    )
  )[0]
}
