import { randomBytes } from 'node:crypto'
import type { Environment } from '../config.ts'
import { Problem } from '../domain/problems.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import { digestSecret } from '../http/auth.ts'
import { recordReceivableChanges } from '../resources/receivables/store.ts'
import type { Queryable, Store, Tx } from '../store/store.ts'
import type { GrantPut } from './schema.ts'
import {
  type ApiKeyRow,
  type ClientRow,
  findClient,
  findGrant,
  findIntegration,
  type GrantRow,
  type IntegrationRow,
  recordAudit,
} from './store.ts'

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

/** Uniform base62 from a CSPRNG (rejection sampling: bytes >= 248 are dropped, so no character is favoured). */
export function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < 248 && out.length < length) out += BASE62[b % 62]
    }
  }
  return out
}

export function newApiKey(environment: Environment): string {
  return `irk_${environment}_${randomBase62(40)}`
}

export const clientView = (r: ClientRow) => ({
  clientCode: r.client_code,
  name: r.name,
  collectionEnabled: r.collection_enabled,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
})
export const integrationView = (r: IntegrationRow) => ({
  integrationId: r.integration_id,
  name: r.name,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
})
export const apiKeyView = (r: ApiKeyRow) => ({
  apiKeyId: r.api_key_id,
  integrationId: r.integration_id,
  environment: r.environment,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
})
export const grantView = (r: GrantRow) => ({
  integrationId: r.integration_id,
  clientCode: r.client_code,
  scopes: r.scopes,
  ipAllowlist: r.ip_allowlist,
  status: r.status,
  recoveryEntryMode: r.recovery_entry_mode,
  feedMode: r.feed_mode,
  industryProfile: r.industry_profile,
  receiptDeliveryOwner: r.receipt_delivery_owner,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
})

export interface AdminServiceDeps {
  store: Store
  clock: Clock
  environment: Environment
  /** Hooks other families attach to operator events (a revoked grant disables its webhook endpoint). */
  onGrantRevoked?: (tx: Tx, integrationId: string, clientCode: string) => Promise<void>
}

export function createAdminService({ store, clock, environment, onGrantRevoked }: AdminServiceDeps) {
  return {
    putClient(clientCode: string, body: { name?: string; collectionEnabled?: boolean }) {
      return store.transaction(async (tx) => {
        const now = isoNow(clock)
        const existing = await findClient(tx, clientCode)
        const rows = await tx.query<ClientRow>(
          `INSERT INTO clients (client_code, name, collection_enabled, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
           ON CONFLICT (client_code) DO UPDATE SET name = COALESCE($2, clients.name),
             collection_enabled = COALESCE($5, clients.collection_enabled), updated_at = $4
           RETURNING *`,
          [clientCode, body.name ?? null, body.collectionEnabled ?? false, now, body.collectionEnabled ?? null],
        )
        const row = rows[0] as ClientRow
        if (existing && existing.collection_enabled !== row.collection_enabled) {
          // collection_not_enabled is a hold of every Receivable of the client: each one changes.
          await recordReceivableChanges(tx, clientCode, { allExcept: [] }, now)
        }
        await recordAudit(tx, {
          action: existing ? 'client.updated' : 'client.created',
          clientCode,
          targetType: 'client',
          targetId: clientCode,
          details: { collectionEnabled: row.collection_enabled },
          change: body,
          occurredAt: now,
        })
        return { status: existing ? 200 : 201, body: clientView(row) }
      })
    },

    putIntegration(integrationId: string, body: { name: string }) {
      return store.transaction(async (tx) => {
        const now = isoNow(clock)
        const existing = await findIntegration(tx, integrationId)
        const rows = await tx.query<IntegrationRow>(
          `INSERT INTO integrations (integration_id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)
           ON CONFLICT (integration_id) DO UPDATE SET name = $2, updated_at = $3 RETURNING *`,
          [integrationId, body.name, now],
        )
        await recordAudit(tx, {
          action: existing ? 'integration.updated' : 'integration.created',
          clientCode: null,
          targetType: 'integration',
          targetId: integrationId,
          details: {},
          change: body,
          occurredAt: now,
        })
        return { status: existing ? 200 : 201, body: integrationView(rows[0] as IntegrationRow) }
      })
    },

    /** The key is returned once; only its digest is stored. */
    createApiKey(integrationId: string) {
      return store.transaction(async (tx) => {
        if (!(await findIntegration(tx, integrationId))) {
          throw new Problem('integration_not_found', `No integration ${integrationId}.`)
        }
        const now = isoNow(clock)
        const apiKey = newApiKey(environment)
        const apiKeyId = `ak_${randomBase62(24)}`
        await tx.query('INSERT INTO api_keys (api_key_id, integration_id, environment, digest, created_at) VALUES ($1, $2, $3, $4, $5)', [
          apiKeyId,
          integrationId,
          environment,
          digestSecret(apiKey),
          now,
        ])
        await recordAudit(tx, {
          action: 'api_key.created',
          clientCode: null,
          targetType: 'api_key',
          targetId: apiKeyId,
          details: { integrationId, environment },
          change: { apiKeyId, integrationId, environment },
          occurredAt: now,
        })
        return { apiKeyId, apiKey, environment, createdAt: now }
      })
    },

    revokeApiKey(apiKeyId: string) {
      return store.transaction(async (tx) => {
        const now = isoNow(clock)
        const rows = await tx.query<ApiKeyRow>(
          `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $2) WHERE api_key_id = $1
           RETURNING api_key_id, integration_id, environment, created_at, revoked_at`,
          [apiKeyId, now],
        )
        const row = rows[0]
        if (!row) throw new Problem('api_key_not_found', `No API key ${apiKeyId}.`)
        await recordAudit(tx, {
          action: 'api_key.revoked',
          clientCode: null,
          targetType: 'api_key',
          targetId: apiKeyId,
          details: { integrationId: row.integration_id },
          change: { apiKeyId, revokedAt: row.revoked_at },
          occurredAt: now,
        })
        return apiKeyView(row)
      })
    },

    /** Replace semantics: omitted settings take their defaults. Re-activates a revoked grant. */
    putGrant(integrationId: string, clientCode: string, body: GrantPut) {
      return store.transaction(async (tx) => {
        if (!(await findIntegration(tx, integrationId))) throw new Problem('integration_not_found', `No integration ${integrationId}.`)
        if (!(await findClient(tx, clientCode))) throw new Problem('client_not_found', `No client ${clientCode}.`)
        const now = isoNow(clock)
        const existing = await findGrant(tx, integrationId, clientCode)
        const settings = {
          scopes: [...body.scopes].sort(),
          ipAllowlist: body.ipAllowlist ?? [],
          recoveryEntryMode: body.recoveryEntryMode ?? 'explicit_instruction',
          feedMode: body.feedMode ?? 'transaction',
          industryProfile: body.industryProfile ?? 'credit_union',
          receiptDeliveryOwner: body.receiptDeliveryOwner ?? 'partner',
        }
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
        await recordAudit(tx, {
          action: existing ? 'grant.updated' : 'grant.created',
          clientCode,
          targetType: 'grant',
          targetId: `${integrationId}/${clientCode}`,
          details: { integrationId, scopes: settings.scopes, status: 'active' },
          change: settings,
          occurredAt: now,
        })
        return { status: existing ? 200 : 201, body: grantView(rows[0] as GrantRow) }
      })
    },

    revokeGrant(integrationId: string, clientCode: string) {
      return store.transaction(async (tx) => {
        const now = isoNow(clock)
        const rows = await tx.query<GrantRow>(
          `UPDATE grants SET status = 'revoked', updated_at = CASE WHEN status = 'revoked' THEN updated_at ELSE $3 END
            WHERE client_code = $1 AND integration_id = $2 RETURNING *`,
          [clientCode, integrationId, now],
        )
        const row = rows[0]
        if (!row) throw new Problem('grant_not_found', `No grant of integration ${integrationId} for client ${clientCode}.`)
        await onGrantRevoked?.(tx, integrationId, clientCode)
        await recordAudit(tx, {
          action: 'grant.revoked',
          clientCode,
          targetType: 'grant',
          targetId: `${integrationId}/${clientCode}`,
          details: { integrationId, status: 'revoked' },
          change: { status: 'revoked' },
          occurredAt: now,
        })
        return grantView(row)
      })
    },

    async listAudit(db: Queryable, q: { clientCode?: string; cursor?: string; limit: number }) {
      const rows = await db.query<{
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
      }>(
        `SELECT * FROM audit_events WHERE ($1::text IS NULL OR client_code = $1) AND ($2::bigint IS NULL OR seq > $2)
          ORDER BY seq LIMIT $3`,
        [q.clientCode ?? null, q.cursor ?? null, q.limit + 1],
      )
      const page = rows.slice(0, q.limit)
      return {
        data: page.map((r) => ({
          auditEventId: r.audit_event_id,
          occurredAt: r.occurred_at,
          actor: r.actor,
          action: r.action,
          clientCode: r.client_code,
          targetType: r.target_type,
          targetId: r.target_id,
          details: r.details,
          changeDigest: r.change_digest,
        })),
        nextCursor: rows.length > q.limit ? (page.at(-1)?.seq ?? null) : null,
      }
    },
  }
}

export type AdminService = ReturnType<typeof createAdminService>

/**
 * The operator token: ADMIN_TOKEN when set; otherwise one generated at first start, of which only the
 * digest is stored and the token printed once. Returns the digest to check against, and the token when
 * it was generated now (for printing).
 */
export async function resolveAdminToken(store: Store, configured: string | undefined): Promise<{ digest: string; generated?: string }> {
  if (configured) return { digest: digestSecret(configured) }
  const generated = `adm_${randomBase62(40)}`
  return store.transaction(async (tx) => {
    const inserted = await tx.query<{ value: string }>(
      `INSERT INTO settings (key, value) VALUES ('admin_token_digest', $1) ON CONFLICT (key) DO NOTHING RETURNING value`,
      [digestSecret(generated)],
    )
    if (inserted[0]) return { digest: inserted[0].value, generated }
    const rows = await tx.query<{ value: string }>(`SELECT value FROM settings WHERE key = 'admin_token_digest'`)
    return { digest: (rows[0] as { value: string }).value }
  })
}
