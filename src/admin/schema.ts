import { z } from 'zod'
import { isValidCidr } from '../access/grants.ts'
import { sequenceNumber } from '../domain/cursor.ts'
import { refuseUnsafeDisplayText, refuseUnsafeOperatorText } from '../domain/display-text.ts'
import { ExternalId, Text200 } from '../domain/identifiers.ts'
import { SCOPES } from '../domain/scopes.ts'
import { Timestamp } from '../domain/time.ts'
import { listResponse, PageLimit } from '../http/common-schemas.ts'

/*
 * Schemas of the operator API (docs/operator-api.md). Every request and response schema carries an id so
 * that the operator OpenAPI document (/admin/v1/openapi.json) can name it; the ids start with `Operator`
 * because Zod's registry is global and the public document has its own `Customer`, `Receivable`, ...
 */

/** The time in the examples. */
const AT = '2026-01-31T09:30:00.000Z'

export const ClientCodeParams = z.strictObject({ clientCode: ExternalId })
export const IntegrationParams = z.strictObject({ integrationId: ExternalId })
export const GrantParams = z.strictObject({ integrationId: ExternalId, clientCode: ExternalId })
export const ApiKeyParams = z.strictObject({ apiKeyId: z.string().regex(/^ak_[A-Za-z0-9]{24}$/, 'must be an apiKeyId such as ak_…') })
export const EmptyBody = z.strictObject({}).meta({ id: 'OperatorEmptyBody', description: 'An empty object (or no body at all).' })

export const ClientPut = z
  .strictObject({
    name: Text200.superRefine(refuseUnsafeDisplayText)
      .describe(
        'The creditor name the hosted payment page shows: no control characters, bidirectional controls, invisible characters or line and paragraph separators.',
      )
      .optional(),
    collectionEnabled: z.boolean().optional().describe('Unchanged when omitted; false for a new client.'),
  })
  .meta({ id: 'OperatorClientPut', examples: [{ name: 'Acme Credit Union', collectionEnabled: true }] })
export const ClientView = z
  .object({
    clientCode: z.string(),
    name: z.string().nullable(),
    collectionEnabled: z.boolean().describe('While false, every Receivable of the client carries hold `collection_not_enabled`.'),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({
    id: 'OperatorClient',
    examples: [
      { clientCode: 'acme-cu', name: 'Acme Credit Union', collectionEnabled: true, createdAt: AT, updatedAt: '2026-02-03T14:05:00.000Z' },
    ],
  })

export const IntegrationPut = z.strictObject({ name: Text200 }).meta({ id: 'OperatorIntegrationPut', examples: [{ name: 'Core ledger' }] })
export const IntegrationView = z
  .object({ integrationId: z.string(), name: z.string(), createdAt: Timestamp, updatedAt: Timestamp })
  .meta({ id: 'OperatorIntegration', examples: [{ integrationId: 'core-ledger', name: 'Core ledger', createdAt: AT, updatedAt: AT }] })

const Environment = z.enum(['sandbox', 'production'])

/** A key's name: display text an operator reads in lists and the audit trail (1 to 100 characters, not blank). */
export const ApiKeyName = z
  .string()
  .min(1)
  .max(100)
  .superRefine(refuseUnsafeOperatorText)
  .refine((s) => s.length === 0 || s.trim().length > 0, 'must not be blank')
  .describe(
    'What the key is for, as operators read it in lists (`Core ledger, production`): 1 to 100 characters, not only spaces; no control characters, bidirectional controls, invisible characters or line and paragraph separators.',
  )

/** The name a key gets when none is given (and that keys issued before names were kept have). */
export const DEFAULT_API_KEY_NAME = 'Unnamed key'

const KeyExpiresAt = Timestamp.describe(
  'When the key stops working: from then on it is refused exactly like a revoked key (401 `invalid_api_key`). Must be in the future. Omitted: the key works until revoked.',
)

export const ApiKeyCreate = z
  .strictObject({
    name: ApiKeyName.optional().describe(`Omitted: \`${DEFAULT_API_KEY_NAME}\`.`),
    expiresAt: KeyExpiresAt.optional(),
  })
  .meta({
    id: 'OperatorApiKeyCreate',
    description: 'Both fields are optional; an empty object (or no body) issues an unnamed key that never expires.',
    examples: [{ name: 'Core ledger, production', expiresAt: '2027-01-31T00:00:00Z' }],
  })
export type ApiKeyCreate = z.output<typeof ApiKeyCreate>

export const ApiKeyRotate = z
  .strictObject({
    gracePeriodSeconds: z
      .number()
      .int()
      .min(0)
      .max(2_592_000)
      .describe(
        'How long the old key keeps working, 0 to 2592000 (30 days): its `expiresAt` becomes now plus this (or stays earlier, if it already was). 0 ends it at once.',
      ),
    name: ApiKeyName.optional().describe("The new key's name; omitted: the old key's name."),
    expiresAt: KeyExpiresAt.optional().describe("The new key's expiry; omitted: the new key works until revoked."),
  })
  .meta({
    id: 'OperatorApiKeyRotate',
    examples: [{ gracePeriodSeconds: 86400 }, { gracePeriodSeconds: 0, name: 'Core ledger, production (2027)' }],
  })
export type ApiKeyRotate = z.output<typeof ApiKeyRotate>

const AK = 'ak_3kQ9wZxT0bVn7LmR2pYc8HdE'
const AK2 = 'ak_Jt6pWq1sNc4aXe9RfU2yK7oB'

export const ApiKeyView = z
  .object({
    apiKeyId: z.string(),
    integrationId: z.string(),
    environment: Environment,
    name: z.string(),
    hint: z
      .string()
      .nullable()
      .describe(
        'The key with all but its last 4 characters hidden (`irk_sandbox_…Ab3d`), to tell keys apart; null for keys issued before hints were kept. The key itself is never shown again.',
      ),
    status: z
      .enum(['active', 'expired', 'revoked'])
      .describe('`revoked` once revoked; else `expired` once `expiresAt` has passed; else `active`. Only an active key is accepted.'),
    createdAt: Timestamp,
    expiresAt: Timestamp.nullable().describe('When the key stops (or stopped) working; null: until revoked.'),
    lastUsedAt: Timestamp.nullable().describe(
      'When the key last authenticated a request, accurate to about a minute (recorded off the request path, written at most once a minute); null: never used.',
    ),
    revokedAt: Timestamp.nullable(),
  })
  .meta({
    id: 'OperatorApiKey',
    examples: [
      {
        apiKeyId: AK,
        integrationId: 'core-ledger',
        environment: 'sandbox',
        name: 'Core ledger, production',
        hint: 'irk_sandbox_…xamp',
        status: 'active',
        createdAt: AT,
        expiresAt: null,
        lastUsedAt: '2026-02-03T14:05:00.000Z',
        revokedAt: null,
      },
    ],
  })

export const ApiKeyCreated = z
  .object({
    apiKeyId: z.string(),
    apiKey: z.string().describe('irk_<environment>_<40 base62 characters>. Shown this once: only a digest is stored.'),
    integrationId: z.string(),
    environment: Environment,
    name: z.string(),
    createdAt: Timestamp,
    expiresAt: Timestamp.nullable(),
  })
  .meta({
    id: 'OperatorApiKeyCreated',
    examples: [
      {
        apiKeyId: AK,
        apiKey: 'irk_sandbox_EXAMPLEexampleEXAMPLEexampleEXAMPLEexamp',
        integrationId: 'core-ledger',
        environment: 'sandbox',
        name: 'Core ledger, production',
        createdAt: AT,
        expiresAt: null,
      },
    ],
  })

export const ApiKeyRotated = ApiKeyCreated.extend({
  rotated: ApiKeyView.describe('The old key as it now is: `expiresAt` is when it stops working.'),
}).meta({
  id: 'OperatorApiKeyRotated',
  examples: [
    {
      apiKeyId: AK2,
      apiKey: 'irk_sandbox_EXAMPLEexampleEXAMPLEexampleEXAMPLEexamp',
      integrationId: 'core-ledger',
      environment: 'sandbox',
      name: 'Core ledger, production',
      createdAt: '2026-02-03T14:05:00.000Z',
      expiresAt: null,
      rotated: {
        apiKeyId: AK,
        integrationId: 'core-ledger',
        environment: 'sandbox',
        name: 'Core ledger, production',
        hint: 'irk_sandbox_…xamp',
        status: 'active',
        createdAt: AT,
        expiresAt: '2026-02-04T14:05:00.000Z',
        lastUsedAt: '2026-02-03T14:04:00.000Z',
        revokedAt: null,
      },
    },
  ],
})

const Cidr = z.string().refine(isValidCidr, 'must be a CIDR such as 203.0.113.0/24 or 2001:db8::/32')

export const GrantPut = z
  .strictObject({
    scopes: z
      .array(z.enum(SCOPES))
      .min(1)
      .refine((s) => new Set(s).size === s.length, 'must not repeat a scope'),
    ipAllowlist: z.array(Cidr).max(100).optional().describe('CIDRs, IPv4 and IPv6; empty or omitted: any address.'),
    recoveryEntryMode: z.enum(['explicit_instruction', 'approved_rules']).optional(),
    feedMode: z.enum(['transaction', 'snapshot_only']).optional(),
    industryProfile: z.enum(['credit_union']).optional(),
    receiptDeliveryOwner: z.enum(['partner', 'service']).optional(),
  })
  .meta({
    id: 'OperatorGrantPut',
    description: 'Replaces the grant: omitted settings take their defaults.',
    examples: [{ scopes: ['customers:write', 'receivables:write', 'receivables:read'], ipAllowlist: ['203.0.113.0/24'] }],
  })
export type GrantPut = z.output<typeof GrantPut>

export const GrantView = z
  .object({
    integrationId: z.string(),
    clientCode: z.string(),
    scopes: z.array(z.string()),
    ipAllowlist: z.array(z.string()),
    status: z.enum(['active', 'revoked']),
    recoveryEntryMode: z.string(),
    feedMode: z.string(),
    industryProfile: z.string(),
    receiptDeliveryOwner: z.string(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({
    id: 'OperatorGrant',
    examples: [
      {
        integrationId: 'core-ledger',
        clientCode: 'acme-cu',
        scopes: ['customers:write', 'receivables:read', 'receivables:write'],
        ipAllowlist: ['203.0.113.0/24'],
        status: 'active',
        recoveryEntryMode: 'explicit_instruction',
        feedMode: 'transaction',
        industryProfile: 'credit_union',
        receiptDeliveryOwner: 'partner',
        createdAt: AT,
        updatedAt: AT,
      },
    ],
  })

export const ClientList = listResponse(ClientView, 'OperatorClientList')
export const IntegrationList = listResponse(IntegrationView, 'OperatorIntegrationList')
export const GrantList = listResponse(GrantView, 'OperatorGrantList')
export const ApiKeyList = listResponse(ApiKeyView, 'OperatorApiKeyList')

export const AuditQuery = z.strictObject({
  clientCode: ExternalId.optional(),
  cursor: sequenceNumber(1n, 'must be a cursor returned by a previous page').optional(),
  limit: PageLimit,
})

export const AuditEventView = z
  .object({
    auditEventId: z.string(),
    occurredAt: Timestamp,
    actor: z.string(),
    action: z.string(),
    clientCode: z.string().nullable(),
    targetType: z.string(),
    targetId: z.string(),
    details: z.record(z.string(), z.unknown()),
    changeDigest: z.string().describe('SHA-256 of the canonical JSON of what changed; the change itself is not kept.'),
  })
  .meta({
    id: 'OperatorAuditEvent',
    examples: [
      {
        auditEventId: '0b6f3c1e-9d2a-4c57-8e0f-2a7d1b9c4e55',
        occurredAt: AT,
        actor: 'operator',
        action: 'grant.created',
        clientCode: 'acme-cu',
        targetType: 'grant',
        targetId: 'core-ledger/acme-cu',
        details: { integrationId: 'core-ledger', scopes: ['customers:write', 'receivables:read', 'receivables:write'], status: 'active' },
        changeDigest: '9f2c4a7e1b3d5f6081a2c3e4f5061728394a5b6c7d8e9f0a1b2c3d4e5f607182',
      },
    ],
  })
export const AuditList = listResponse(AuditEventView, 'OperatorAuditEventList')

export const OperatorOpenApiDocument = z.record(z.string(), z.unknown()).meta({ id: 'OperatorOpenApiDocument' })

/** What a sandbox client reset deleted (service.ts, resetClient). */
export const SandboxResetView = z
  .object({
    clientCode: z.string(),
    deleted: z.record(z.string(), z.number().int()).describe('Rows deleted, by kind of record (table); kinds with none are left out.'),
    resetAt: Timestamp,
  })
  .meta({
    id: 'OperatorSandboxReset',
    examples: [
      { clientCode: 'acme-cu', deleted: { receivables: 12, customers: 4, change_events: 31 }, resetAt: '2026-01-31T09:30:00.000Z' },
    ],
  })
