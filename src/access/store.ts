import type { Environment } from '../config.ts'
import type { Queryable, Tx } from '../store/store.ts'
import { type Caller, callerFromRow, type Grant, type KeyGrantRow, toGrant } from './grants.ts'

/**
 * The active key of this environment with this digest, with its grant for the Client; null if there is none. A key
 * whose expiry is at or before `now` is not active: refused exactly like a revoked one (request_gate, on PostgreSQL,
 * makes the same test). A read only: the key's last use is recorded in memory (key-usage.ts), never written here.
 */
export async function lookupKey(
  db: Queryable,
  digest: string,
  environment: Environment,
  clientCode: string,
  now: Date,
): Promise<Caller | null> {
  const rows = await db.query<KeyGrantRow>(
    `SELECT k.api_key_id, k.integration_id, k.environment, g.status AS grant_status, g.scopes, g.ip_allowlist,
            g.recovery_entry_mode, g.feed_mode, g.industry_profile, g.receipt_delivery_owner
       FROM api_keys k
       LEFT JOIN grants g ON g.client_code = $2 AND g.integration_id = k.integration_id
      WHERE k.digest = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > $3)`,
    [digest, clientCode, now.toISOString()],
    { prepared: true },
  )
  const row = rows[0]
  if (!row || row.environment !== environment) return null
  return callerFromRow(clientCode, row)
}

/** The current grant of an integration for a client, if active (a batch record rechecks it when it runs). */
export async function loadActiveGrant(db: Queryable, integrationId: string, clientCode: string): Promise<Grant | null> {
  const rows = await db.query<Omit<KeyGrantRow, 'api_key_id' | 'environment' | 'grant_status'> & { status: string }>(
    `SELECT integration_id, status, scopes, ip_allowlist, recovery_entry_mode, feed_mode, industry_profile, receipt_delivery_owner
       FROM grants WHERE client_code = $1 AND integration_id = $2`,
    [clientCode, integrationId],
  )
  const row = rows[0]
  return row?.status === 'active' ? toGrant(clientCode, row) : null
}

/*
 * The operator's side of keys and grants (src/admin/service.ts): the rows as an operator sees them, in keyset
 * pages (the lists' order is explained in src/admin/store.ts).
 */

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

export interface GrantSettings {
  scopes: string[]
  ipAllowlist: string[]
  recoveryEntryMode: string
  feedMode: string
  industryProfile: string
  receiptDeliveryOwner: string
}

/** Creates the grant or replaces its settings; a revoked grant becomes active again. */
export async function upsertGrant(
  tx: Tx,
  integrationId: string,
  clientCode: string,
  settings: GrantSettings,
  now: string,
): Promise<GrantRow> {
  const rows = await tx.query<GrantRow>(
    `INSERT INTO grants (client_code, integration_id, scopes, ip_allowlist, status, recovery_entry_mode, feed_mode,
                         industry_profile, receipt_delivery_owner, created_at, updated_at)
     VALUES ($1, $2, $3, $4, 'active', $5, $6, $7, $8, $9, $9)
     ON CONFLICT (client_code, integration_id) DO UPDATE SET scopes = $3, ip_allowlist = $4, status = 'active',
       recovery_entry_mode = $5, feed_mode = $6, industry_profile = $7, receipt_delivery_owner = $8, updated_at = $9
     RETURNING *`,
    [
      clientCode,
      integrationId,
      settings.scopes,
      settings.ipAllowlist,
      settings.recoveryEntryMode,
      settings.feedMode,
      settings.industryProfile,
      settings.receiptDeliveryOwner,
      now,
    ],
  )
  return rows[0] as GrantRow
}

/**
 * Revokes an active grant; undefined when there is none to revoke. Only an active grant is updated: a concurrent
 * second revocation waits for the first's row lock, then finds the grant revoked (one `grant.revoked` event).
 */
export async function revokeGrant(tx: Tx, integrationId: string, clientCode: string, now: string): Promise<GrantRow | undefined> {
  const rows = await tx.query<GrantRow>(
    `UPDATE grants SET status = 'revoked', updated_at = $3
      WHERE client_code = $1 AND integration_id = $2 AND status <> 'revoked' RETURNING *`,
    [clientCode, integrationId, now],
  )
  return rows[0]
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

export interface ApiKeyRow {
  api_key_id: string
  integration_id: string
  environment: 'sandbox' | 'production'
  /** The key's last 4 characters (null for keys issued before migration 0008). Never the key or its digest. */
  last4: string | null
  name: string
  created_at: string
  revoked_at: string | null
  expires_at: string | null
  last_used_at: string | null
}

/** The api_keys columns an operator may see: every column but `digest`. */
export const API_KEY_COLUMNS = 'api_key_id, integration_id, environment, last4, name, created_at, revoked_at, expires_at, last_used_at'

/** The key; `forUpdate` locks its row (a rotation: two concurrent rotations of one key are serialized). */
export async function findApiKey(db: Queryable, id: string, forUpdate = false): Promise<ApiKeyRow | undefined> {
  return (
    await db.query<ApiKeyRow>(`SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE api_key_id = $1${forUpdate ? ' FOR UPDATE' : ''}`, [id])
  )[0]
}

export async function insertApiKey(
  tx: Tx,
  k: {
    apiKeyId: string
    integrationId: string
    environment: Environment
    digest: string
    last4: string
    name: string
    createdAt: string
    expiresAt: string | null
  },
): Promise<ApiKeyRow> {
  const rows = await tx.query<ApiKeyRow>(
    `INSERT INTO api_keys (api_key_id, integration_id, environment, digest, last4, name, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${API_KEY_COLUMNS}`,
    [k.apiKeyId, k.integrationId, k.environment, k.digest, k.last4, k.name, k.createdAt, k.expiresAt],
  )
  return rows[0] as ApiKeyRow
}

/**
 * A rotated key's end: its expiry brought forward to `expiresAt` (never pushed back: an earlier expiry it already
 * had stands). Returns the key as it now is.
 */
export async function shortenApiKeyExpiry(tx: Tx, apiKeyId: string, expiresAt: string): Promise<ApiKeyRow> {
  const rows = await tx.query<ApiKeyRow>(
    `UPDATE api_keys SET expires_at = LEAST(COALESCE(expires_at, $2::timestamptz), $2::timestamptz)
      WHERE api_key_id = $1 RETURNING ${API_KEY_COLUMNS}`,
    [apiKeyId, expiresAt],
  )
  return rows[0] as ApiKeyRow
}

/**
 * Records the last use of keys, from the memory of one process (src/access/key-usage.ts): one set-based statement
 * for every key used since the last flush. A key's `last_used_at` moves only forward and only by at least a minute,
 * so however many instances flush, a key's row is written at most once a minute; a use that lands within a minute
 * of the recorded one is not written (lastUsedAt is accurate to a minute). Returns how many keys were updated.
 */
export async function recordKeyUses(db: Queryable, uses: readonly { apiKeyId: string; at: string }[]): Promise<number> {
  if (uses.length === 0) return 0
  const rows = await db.query<{ api_key_id: string }>(
    `UPDATE api_keys k SET last_used_at = u.at
       FROM unnest($1::text[], $2::timestamptz[]) AS u(api_key_id, at)
      WHERE k.api_key_id = u.api_key_id
        AND (k.last_used_at IS NULL OR k.last_used_at <= u.at - interval '1 minute')
      RETURNING k.api_key_id`,
    [uses.map((u) => u.apiKeyId), uses.map((u) => u.at)],
  )
  return rows.length
}

/**
 * Revokes a key not yet revoked; undefined when there is none. Of two concurrent revocations the second waits for
 * the first's row lock, then finds the key revoked and updates nothing: one `api_key.revoked` event, ever.
 */
export async function revokeApiKey(tx: Tx, apiKeyId: string, now: string): Promise<ApiKeyRow | undefined> {
  const rows = await tx.query<ApiKeyRow>(
    `UPDATE api_keys SET revoked_at = $2 WHERE api_key_id = $1 AND revoked_at IS NULL
     RETURNING ${API_KEY_COLUMNS}`,
    [apiKeyId, now],
  )
  return rows[0]
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
