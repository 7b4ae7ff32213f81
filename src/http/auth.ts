import { createHash, timingSafeEqual } from 'node:crypto'
import ipaddr from 'ipaddr.js'
import type { Environment } from '../config.ts'
import { Problem } from '../domain/problems.ts'
import type { Scope } from '../domain/scopes.ts'
import type { Queryable } from '../store/store.ts'

export const API_KEY_PATTERN = /^irk_(sandbox|production)_[A-Za-z0-9]{32,}$/

export function digestSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex')
}

export function bearerToken(header: string | undefined): string | null {
  const m = header ? /^Bearer ([^\s]+)$/.exec(header) : null
  return m?.[1] ?? null
}

export function constantTimeEqualHex(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'hex')
  const bb = Buffer.from(b, 'hex')
  return ab.length === bb.length && timingSafeEqual(ab, bb)
}

export interface Grant {
  clientCode: string
  integrationId: string
  scopes: Set<Scope>
  ipAllowlist: string[]
  recoveryEntryMode: 'explicit_instruction' | 'approved_rules'
  feedMode: 'transaction' | 'snapshot_only'
  industryProfile: 'credit_union'
  receiptDeliveryOwner: 'partner' | 'service'
}

/** Who is calling: the key, and its Integration's grant for the Client in the path (if any, and active). */
export interface Caller {
  apiKeyId: string
  integrationId: string
  grant: Grant | null
}

interface KeyGrantRow {
  api_key_id: string
  integration_id: string
  environment: Environment
  grant_status: string | null
  scopes: Scope[] | null
  ip_allowlist: string[] | null
  recovery_entry_mode: Grant['recoveryEntryMode'] | null
  feed_mode: Grant['feedMode'] | null
  industry_profile: Grant['industryProfile'] | null
  receipt_delivery_owner: Grant['receiptDeliveryOwner'] | null
}

type GrantColumns = Pick<
  KeyGrantRow,
  'integration_id' | 'scopes' | 'ip_allowlist' | 'recovery_entry_mode' | 'feed_mode' | 'industry_profile' | 'receipt_delivery_owner'
>

function toGrant(clientCode: string, row: GrantColumns): Grant {
  return {
    clientCode,
    integrationId: row.integration_id,
    scopes: new Set(row.scopes ?? []),
    ipAllowlist: row.ip_allowlist ?? [],
    recoveryEntryMode: row.recovery_entry_mode ?? 'explicit_instruction',
    feedMode: row.feed_mode ?? 'transaction',
    industryProfile: row.industry_profile ?? 'credit_union',
    receiptDeliveryOwner: row.receipt_delivery_owner ?? 'partner',
  }
}

export const invalidKey = () =>
  new Problem('invalid_api_key', 'The API key is missing, malformed, unknown, revoked or for another environment.')

/** The digest of the Bearer key presented, or 401 unless it has the shape of a key of this environment. */
export function presentedKeyDigest(authorization: string | undefined, environment: Environment): string {
  const token = bearerToken(authorization)
  const m = token ? API_KEY_PATTERN.exec(token) : null
  if (!token || !m || m[1] !== environment) throw invalidKey()
  return digestSecret(token)
}

export type CallerRow = Omit<KeyGrantRow, 'environment'>

/** The caller a key row (joined with its grant for `clientCode`, if any) describes. */
export function callerFromRow(clientCode: string, row: CallerRow): Caller {
  const grant = row.grant_status === 'active' ? toGrant(clientCode, row as GrantColumns) : null
  return { apiKeyId: row.api_key_id, integrationId: row.integration_id, grant }
}

/** The active key of this environment with this digest, with its grant for the Client; null if there is none. */
export async function lookupKey(db: Queryable, digest: string, environment: Environment, clientCode: string): Promise<Caller | null> {
  const rows = await db.query<KeyGrantRow>(
    `SELECT k.api_key_id, k.integration_id, k.environment, g.status AS grant_status, g.scopes, g.ip_allowlist,
            g.recovery_entry_mode, g.feed_mode, g.industry_profile, g.receipt_delivery_owner
       FROM api_keys k
       LEFT JOIN grants g ON g.client_code = $2 AND g.integration_id = k.integration_id
      WHERE k.digest = $1 AND k.revoked_at IS NULL`,
    [digest, clientCode],
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

/** IPv4-mapped IPv6 (::ffff:10.0.0.1) is matched as the IPv4 address it carries. */
export function ipAllowed(ip: string, allowlist: readonly string[]): boolean {
  if (allowlist.length === 0) return true
  if (!ipaddr.isValid(ip)) return false
  let addr = ipaddr.parse(ip)
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).isIPv4MappedAddress()) addr = (addr as ipaddr.IPv6).toIPv4Address()
  return allowlist.some((cidr) => {
    const [range, bits] = ipaddr.parseCIDR(cidr)
    return range.kind() === addr.kind() && addr.match(range, bits)
  })
}

export function isValidCidr(cidr: string): boolean {
  try {
    ipaddr.parseCIDR(cidr)
    return true
  } catch {
    return false
  }
}

const denied = (why: string) => new Problem('client_scope_denied', why)

/** 403 unless the grant is active and holds every required scope (a batch record checks this when it runs). */
export function grantWithScopes(grant: Grant | null, clientCode: string, required: readonly Scope[]): Grant {
  if (!grant) throw denied(`This API key has no active grant for client ${clientCode}.`)
  const missing = required.filter((s) => !grant.scopes.has(s))
  if (missing.length > 0) throw denied(`The grant for client ${clientCode} lacks the scope ${missing.join(', ')}.`)
  return grant
}

/** 403 unless the grant is active, holds every required scope and admits the calling address. */
export function authorize(caller: Caller, clientCode: string, required: readonly Scope[], ip: string): Grant {
  const grant = grantWithScopes(caller.grant, clientCode, required)
  if (!ipAllowed(ip, grant.ipAllowlist)) throw denied(`The calling address is outside the grant's IP allowlist.`)
  return grant
}
