import { z } from 'zod'
import { digestSecret, newApiKey, randomBase62 } from '../access/keys.ts'
import {
  type ApiKeyRow,
  findApiKey,
  findGrant,
  type GrantRow,
  insertApiKey,
  listApiKeys,
  listGrantsOfClient,
  listGrantsOfIntegration,
  revokeApiKey,
  revokeGrant,
  shortenApiKeyExpiry,
  upsertGrant,
} from '../access/store.ts'
import type { Environment } from '../config.ts'
import { encodeCursor, IdentifierCursor, readCursor } from '../domain/cursor.ts'
import { fieldProblem, Problem } from '../domain/problems.ts'
import { type Clock, isoNow, Timestamp } from '../domain/time.ts'
import { listAuditEvents, recordAudit } from '../resources/audit/store.ts'
import { recordClientFact } from '../resources/holds/client-facts-store.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import type { Queryable, Store, Tx } from '../store/store.ts'
import { type ApiKeyCreate, ApiKeyParams, type ApiKeyRotate, DEFAULT_API_KEY_NAME, type GrantPut } from './schema.ts'
import {
  type ClientRow,
  deleteClientData,
  findClient,
  findIntegration,
  type IntegrationRow,
  listClients,
  listIntegrations,
  upsertClient,
  upsertIntegration,
} from './store.ts'

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
/** A key's status at `now` (ms): revoked wins over expired; only an active key is accepted. */
export function apiKeyStatus(r: Pick<ApiKeyRow, 'revoked_at' | 'expires_at'>, now: number): 'active' | 'expired' | 'revoked' {
  if (r.revoked_at !== null) return 'revoked'
  if (r.expires_at !== null && Date.parse(r.expires_at) <= now) return 'expired'
  return 'active'
}

/** A key as an operator sees it at `now` (ms): never the key, nor its digest. */
export const apiKeyView = (r: ApiKeyRow, now: number) => ({
  apiKeyId: r.api_key_id,
  integrationId: r.integration_id,
  environment: r.environment,
  name: r.name,
  hint: r.last4 === null ? null : `irk_${r.environment}_…${r.last4}`,
  status: apiKeyStatus(r, now),
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  lastUsedAt: r.last_used_at,
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

/** `?cursor=&limit=` of the operator lists (the API's list convention). */
export interface Page {
  cursor?: string | undefined
  limit: number
}

const AfterKey = IdentifierCursor
/** `[createdAt, apiKeyId]`; year 0 is a valid ISO date but no PostgreSQL timestamp (there is no year 0). */
const AfterApiKey = z.strictObject({
  after: z.tuple([Timestamp.refine((s) => !s.startsWith('0000')), ApiKeyParams.shape.apiKeyId]),
})

/** The decoded cursor; a cursor this list did not return is a 422 at /query/cursor (as the public lists answer). */
function pageAfter<T>(list: string, q: Page, schema: z.ZodType<T>): T | undefined {
  return readCursor(list, q.cursor, schema, '/query/cursor', 'is not a cursor this list returned')
}

/** Rows were read with limit + 1: the extra row only says whether another page follows. */
function page<R, V>(list: string, rows: R[], limit: number, view: (r: R) => V, cursorOf: (r: R) => Record<string, unknown>) {
  const shown = rows.slice(0, limit)
  const last = shown.at(-1)
  return { data: shown.map(view), nextCursor: rows.length > limit && last ? encodeCursor(list, cursorOf(last)) : null }
}

/** A chosen expiry must lie ahead of the service's time `now`: else 422 `custom` at `pointer`, nothing changed. */
function assertFuture(expiresAt: string | undefined, pointer: string, now: string): void {
  if (expiresAt !== undefined && Date.parse(expiresAt) <= Date.parse(now)) {
    throw fieldProblem(pointer, 'custom', `must be in the future (the service's time is ${now})`)
  }
}

/**
 * Issues a key in `tx`: only its digest and last 4 characters are stored, and the audit event holds neither the
 * key nor the digest. Returns the creation answer, the one time the key is shown.
 */
async function issueKey(
  tx: Tx,
  environment: Environment,
  k: { integrationId: string; name: string; expiresAt: string | null; now: string; rotatedFrom?: string },
) {
  const apiKey = newApiKey(environment)
  const apiKeyId = `ak_${randomBase62(24)}`
  const row = await insertApiKey(tx, {
    apiKeyId,
    integrationId: k.integrationId,
    environment,
    digest: digestSecret(apiKey),
    last4: apiKey.slice(-4),
    name: k.name,
    createdAt: k.now,
    expiresAt: k.expiresAt,
  })
  const details = {
    integrationId: k.integrationId,
    environment,
    name: k.name,
    expiresAt: row.expires_at,
    ...(k.rotatedFrom ? { rotatedFrom: k.rotatedFrom } : {}),
  }
  await recordAudit(tx, {
    action: 'api_key.created',
    clientCode: null,
    targetType: 'api_key',
    targetId: apiKeyId,
    details,
    change: { apiKeyId, ...details },
    occurredAt: k.now,
  })
  return {
    apiKeyId,
    apiKey,
    integrationId: k.integrationId,
    environment,
    name: row.name,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
  }
}

export interface AdminServiceDeps {
  store: Store
  clock: Clock
  environment: Environment
  /** Hooks other families attach to operator events (a revoked grant disables its webhook endpoint). */
  onGrantRevoked?: (tx: Tx, integrationId: string, clientCode: string) => Promise<void>
  /** Called in the client reset's transaction after the client's data is deleted (a receipt route's test receipt). */
  onClientReset?: (tx: Tx, clientCode: string, now: string) => Promise<void>
  /** Called after a collection toggle committed its client fact (the client fan-out worker's wake-up). */
  onClientFact?: () => void
  /** Real time, for operator actions on a client whose sandbox clock is stopped (the client reset); `clock` by default. */
  baseClock?: Clock
}

/** The deps every part of the operator service reads, with `baseClock` defaulted to `clock`. */
type AdminParts = Required<Pick<AdminServiceDeps, 'store' | 'clock' | 'environment' | 'baseClock'>> &
  Pick<AdminServiceDeps, 'onGrantRevoked' | 'onClientReset' | 'onClientFact'>

/**
 * The operator's service, one part per audience of its routes: clients and integrations, API keys, grants, the
 * reads (and the audit trail), and the sandbox's client reset. Every write is one transaction with its audit event.
 */
export function createAdminService({ baseClock, ...deps }: AdminServiceDeps) {
  const parts: AdminParts = { ...deps, baseClock: baseClock ?? deps.clock }
  return {
    ...clientAndIntegrationWrites(parts),
    ...apiKeyWrites(parts),
    ...grantWrites(parts),
    ...operatorReads(parts),
    ...sandboxReset(parts),
  }
}

/** Creating and changing clients (a collection toggle records a client fact) and integrations. */
function clientAndIntegrationWrites({ store, clock, onClientFact }: AdminParts) {
  return {
    async putClient(clientCode: string, body: { name?: string; collectionEnabled?: boolean }) {
      let factRecorded = false
      const result = await inUnitOfWork(store, async ({ tx }) => {
        const now = isoNow(clock)
        // Locked: two concurrent toggles must see each other, or both would record a fact for one change.
        const existing = await findClient(tx, clientCode, true)
        const row = await upsertClient(tx, clientCode, body, now)
        if (existing && existing.collection_enabled !== row.collection_enabled) {
          // collection_not_enabled is a hold of every Receivable of the client: one client fact here; each
          // Receivable's new revision and event follow in the background (src/workers/client-fanout.ts).
          await recordClientFact(
            tx,
            clientCode,
            {
              kind: row.collection_enabled ? 'collection_enabled' : 'collection_disabled',
              collectionEnabledBefore: existing.collection_enabled,
            },
            now,
          )
          factRecorded = true
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
      if (factRecorded) onClientFact?.()
      return result
    },

    putIntegration(integrationId: string, body: { name: string }) {
      return inUnitOfWork(store, async ({ tx }) => {
        const now = isoNow(clock)
        const existing = await findIntegration(tx, integrationId)
        const row = await upsertIntegration(tx, integrationId, body.name, now)
        await recordAudit(tx, {
          action: existing ? 'integration.updated' : 'integration.created',
          clientCode: null,
          targetType: 'integration',
          targetId: integrationId,
          details: {},
          change: body,
          occurredAt: now,
        })
        return { status: existing ? 200 : 201, body: integrationView(row) }
      })
    },
  }
}

/** Issuing, rotating and revoking API keys. */
function apiKeyWrites({ store, clock, environment }: AdminParts) {
  return {
    /** The key is returned once; only its digest is stored. */
    createApiKey(integrationId: string, body: ApiKeyCreate = {}) {
      return inUnitOfWork(store, async ({ tx }) => {
        if (!(await findIntegration(tx, integrationId))) {
          throw new Problem('integration_not_found', `No integration ${integrationId}.`)
        }
        const now = isoNow(clock)
        assertFuture(body.expiresAt, '/expiresAt', now)
        return issueKey(tx, environment, { integrationId, name: body.name ?? DEFAULT_API_KEY_NAME, expiresAt: body.expiresAt ?? null, now })
      })
    },

    /**
     * A new key for the same integration, and the old one ending after `gracePeriodSeconds` (its expiresAt brought
     * forward to now plus the grace, never pushed back), in one transaction: the Source switches to the new key while
     * the old still works. The old key's row is locked, so two rotations of one key at once are serialized (each
     * issues its own new key; the second can only shorten the grace). A revoked or expired key: 409
     * `api_key_inactive`, nothing issued.
     */
    rotateApiKey(apiKeyId: string, body: ApiKeyRotate) {
      return inUnitOfWork(store, async ({ tx }) => {
        const old = await findApiKey(tx, apiKeyId, true)
        if (!old) throw new Problem('api_key_not_found', `No API key ${apiKeyId}.`)
        const now = isoNow(clock)
        const nowMs = Date.parse(now)
        const status = apiKeyStatus(old, nowMs)
        if (status !== 'active') {
          throw new Problem(
            'api_key_inactive',
            `API key ${apiKeyId} is ${status}: only an active key can be rotated; issue a new key instead.`,
            {
              extensions: { apiKeyStatus: status },
            },
          )
        }
        assertFuture(body.expiresAt, '/expiresAt', now)
        const created = await issueKey(tx, environment, {
          integrationId: old.integration_id,
          name: body.name ?? old.name,
          expiresAt: body.expiresAt ?? null,
          now,
          rotatedFrom: apiKeyId,
        })
        const ends = new Date(nowMs + body.gracePeriodSeconds * 1000).toISOString()
        const rotated = await shortenApiKeyExpiry(tx, apiKeyId, ends)
        await recordAudit(tx, {
          action: 'api_key.rotated',
          clientCode: null,
          targetType: 'api_key',
          targetId: apiKeyId,
          details: {
            integrationId: old.integration_id,
            replacedBy: created.apiKeyId,
            gracePeriodSeconds: body.gracePeriodSeconds,
            expiresAt: rotated.expires_at,
          },
          change: { apiKeyId, replacedBy: created.apiKeyId, expiresAt: rotated.expires_at },
          occurredAt: now,
        })
        return { ...created, rotated: apiKeyView(rotated, nowMs) }
      })
    },

    /** Idempotent: revoking a revoked key answers the key as it is, and changes and records nothing. */
    revokeApiKey(apiKeyId: string) {
      return inUnitOfWork(store, async ({ tx }) => {
        const now = isoNow(clock)
        const row = await revokeApiKey(tx, apiKeyId, now)
        if (!row) {
          const existing = await findApiKey(tx, apiKeyId)
          if (!existing) throw new Problem('api_key_not_found', `No API key ${apiKeyId}.`)
          return apiKeyView(existing, Date.parse(now))
        }
        await recordAudit(tx, {
          action: 'api_key.revoked',
          clientCode: null,
          targetType: 'api_key',
          targetId: apiKeyId,
          details: { integrationId: row.integration_id },
          change: { apiKeyId, revokedAt: row.revoked_at },
          occurredAt: now,
        })
        return apiKeyView(row, Date.parse(now))
      })
    },
  }
}

/** Granting an integration access to a client, and revoking it (the other families' hooks run in its transaction). */
function grantWrites({ store, clock, onGrantRevoked }: AdminParts) {
  return {
    /** Replace semantics: omitted settings take their defaults. Re-activates a revoked grant. */
    putGrant(integrationId: string, clientCode: string, body: GrantPut) {
      return inUnitOfWork(store, async ({ tx }) => {
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
        const row = await upsertGrant(tx, integrationId, clientCode, settings, now)
        await recordAudit(tx, {
          action: existing ? 'grant.updated' : 'grant.created',
          clientCode,
          targetType: 'grant',
          targetId: `${integrationId}/${clientCode}`,
          details: { integrationId, scopes: settings.scopes, status: 'active' },
          change: settings,
          occurredAt: now,
        })
        return { status: existing ? 200 : 201, body: grantView(row) }
      })
    },

    /** Idempotent like a key's revocation: revoking a revoked grant answers it as it is, and changes and records nothing. */
    revokeGrant(integrationId: string, clientCode: string) {
      return inUnitOfWork(store, async ({ tx }) => {
        const now = isoNow(clock)
        const row = await revokeGrant(tx, integrationId, clientCode, now)
        if (!row) {
          const existing = await findGrant(tx, integrationId, clientCode)
          if (!existing) throw new Problem('grant_not_found', `No grant of integration ${integrationId} for client ${clientCode}.`)
          return grantView(existing)
        }
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
  }
}

/** What the operator reads: clients, integrations, grants, API keys, the audit trail. */
function operatorReads({ store, clock }: AdminParts) {
  return {
    async getClient(clientCode: string) {
      const row = await findClient(store, clientCode)
      if (!row) throw new Problem('client_not_found', `No client ${clientCode}.`)
      return clientView(row)
    },

    async listClients(q: Page) {
      const after = pageAfter('admin/clients', q, AfterKey)
      const rows = await listClients(store, after?.after, q.limit + 1)
      return page('admin/clients', rows, q.limit, clientView, (r) => ({ after: r.client_code }))
    },

    async getIntegration(integrationId: string) {
      const row = await findIntegration(store, integrationId)
      if (!row) throw new Problem('integration_not_found', `No integration ${integrationId}.`)
      return integrationView(row)
    },

    async listIntegrations(q: Page) {
      const after = pageAfter('admin/integrations', q, AfterKey)
      const rows = await listIntegrations(store, after?.after, q.limit + 1)
      return page('admin/integrations', rows, q.limit, integrationView, (r) => ({ after: r.integration_id }))
    },

    async getGrant(integrationId: string, clientCode: string) {
      const row = await findGrant(store, integrationId, clientCode)
      if (!row) throw new Problem('grant_not_found', `No grant of integration ${integrationId} for client ${clientCode}.`)
      return grantView(row)
    },

    /** An unknown integration is a 404, not an empty list: a typo must not read as "no grants". */
    async listGrantsOfIntegration(integrationId: string, q: Page) {
      const after = pageAfter('admin/grants-of-integration', q, AfterKey)
      if (!(await findIntegration(store, integrationId))) throw new Problem('integration_not_found', `No integration ${integrationId}.`)
      const rows = await listGrantsOfIntegration(store, integrationId, after?.after, q.limit + 1)
      return page('admin/grants-of-integration', rows, q.limit, grantView, (r) => ({ after: r.client_code }))
    },

    async listGrantsOfClient(clientCode: string, q: Page) {
      const after = pageAfter('admin/grants-of-client', q, AfterKey)
      if (!(await findClient(store, clientCode))) throw new Problem('client_not_found', `No client ${clientCode}.`)
      const rows = await listGrantsOfClient(store, clientCode, after?.after, q.limit + 1)
      return page('admin/grants-of-client', rows, q.limit, grantView, (r) => ({ after: r.integration_id }))
    },

    async getApiKey(apiKeyId: string) {
      const row = await findApiKey(store, apiKeyId)
      if (!row) throw new Problem('api_key_not_found', `No API key ${apiKeyId}.`)
      return apiKeyView(row, clock.now().getTime())
    },

    async listApiKeys(integrationId: string, q: Page) {
      const after = pageAfter('admin/api-keys', q, AfterApiKey)
      if (!(await findIntegration(store, integrationId))) throw new Problem('integration_not_found', `No integration ${integrationId}.`)
      const rows = await listApiKeys(store, integrationId, after && { createdAt: after.after[0], apiKeyId: after.after[1] }, q.limit + 1)
      const now = clock.now().getTime()
      return page(
        'admin/api-keys',
        rows,
        q.limit,
        (r) => apiKeyView(r, now),
        (r) => ({ after: [r.created_at, r.api_key_id] }),
      )
    },

    async listAudit(db: Queryable, q: { clientCode?: string; cursor?: string; limit: number }) {
      const rows = await listAuditEvents(db, { clientCode: q.clientCode ?? null, afterSeq: q.cursor ?? null, limit: q.limit + 1 })
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

/** The sandbox's client reset, on real time (a stopped client clock does not date it). */
function sandboxReset({ store, environment, baseClock, onClientReset }: AdminParts) {
  return {
    /**
     * Sandbox only (the route does not exist in production): deletes every resource, feed event, batch and
     * webhook delivery of the client, and its sandbox clock (back to real time); keeps the client, its grants
     * (and so every key), its webhook endpoints and its feed head (admin/store.ts, RESET_KEEPS). Audited as
     * `client.sandbox_reset` with the rows deleted per table. One transaction.
     */
    resetClient(clientCode: string) {
      if (environment !== 'sandbox') throw new Problem('route_not_found', 'A client reset exists only in sandbox.')
      return inUnitOfWork(store, async ({ tx }) => {
        if (!(await findClient(tx, clientCode, true))) throw new Problem('client_not_found', `No client ${clientCode}.`)
        const deleted = await deleteClientData(tx, clientCode)
        const now = isoNow(baseClock)
        await onClientReset?.(tx, clientCode, now)
        await recordAudit(tx, {
          action: 'client.sandbox_reset',
          clientCode,
          targetType: 'client',
          targetId: clientCode,
          details: { deleted },
          change: { reset: clientCode, deleted },
          occurredAt: now,
        })
        return { clientCode, deleted, resetAt: now }
      })
    },
  }
}

export type AdminService = ReturnType<typeof createAdminService>
