import { z } from 'zod'
import { ExternalId, Text200 } from '../domain/identifiers.ts'
import { SCOPES } from '../domain/scopes.ts'
import { Timestamp } from '../domain/time.ts'
import { isValidCidr } from '../http/auth.ts'

export const ClientCodeParams = z.strictObject({ clientCode: ExternalId })
export const IntegrationParams = z.strictObject({ integrationId: ExternalId })
export const GrantParams = z.strictObject({ integrationId: ExternalId, clientCode: ExternalId })
export const ApiKeyParams = z.strictObject({ apiKeyId: z.string().regex(/^ak_[A-Za-z0-9]{24}$/, 'must be an apiKeyId such as ak_…') })
export const EmptyBody = z.strictObject({})

export const ClientPut = z.strictObject({ name: Text200.optional(), collectionEnabled: z.boolean().optional() })
export const ClientView = z.object({
  clientCode: z.string(),
  name: z.string().nullable(),
  collectionEnabled: z.boolean(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
})

export const IntegrationPut = z.strictObject({ name: Text200 })
export const IntegrationView = z.object({ integrationId: z.string(), name: z.string(), createdAt: Timestamp, updatedAt: Timestamp })

export const ApiKeyCreated = z.object({
  apiKeyId: z.string(),
  apiKey: z.string(),
  environment: z.enum(['sandbox', 'production']),
  createdAt: Timestamp,
})
export const ApiKeyView = z.object({
  apiKeyId: z.string(),
  integrationId: z.string(),
  environment: z.enum(['sandbox', 'production']),
  createdAt: Timestamp,
  revokedAt: Timestamp.nullable(),
})

const Cidr = z.string().refine(isValidCidr, 'must be a CIDR such as 203.0.113.0/24 or 2001:db8::/32')

export const GrantPut = z.strictObject({
  scopes: z
    .array(z.enum(SCOPES))
    .min(1)
    .refine((s) => new Set(s).size === s.length, 'must not repeat a scope'),
  ipAllowlist: z.array(Cidr).max(100).optional(),
  recoveryEntryMode: z.enum(['explicit_instruction', 'approved_rules']).optional(),
  feedMode: z.enum(['transaction', 'snapshot_only']).optional(),
  industryProfile: z.enum(['credit_union']).optional(),
  receiptDeliveryOwner: z.enum(['partner', 'service']).optional(),
})
export type GrantPut = z.output<typeof GrantPut>

export const GrantView = z.object({
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

export const AuditQuery = z.strictObject({
  clientCode: ExternalId.optional(),
  cursor: z
    .string()
    .regex(/^\d{1,19}$/, 'must be a cursor returned by a previous page')
    .optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
})

export const AuditEventView = z.object({
  auditEventId: z.string(),
  occurredAt: Timestamp,
  actor: z.string(),
  action: z.string(),
  clientCode: z.string().nullable(),
  targetType: z.string(),
  targetId: z.string(),
  details: z.record(z.string(), z.unknown()),
  changeDigest: z.string(),
})
export const AuditList = z.object({ data: z.array(AuditEventView), nextCursor: z.string().nullable() })
