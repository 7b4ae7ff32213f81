import ipaddr from 'ipaddr.js'
import type { Environment } from '../config.ts'
import { Problem } from '../domain/problems.ts'
import type { Scope } from '../domain/scopes.ts'

/**
 * Access: who a key is, what its Integration's grant for a Client allows, and the rules that admit a call. Below
 * the HTTP layer (src/http/auth.ts reads the header and calls these) and every family and worker that rechecks
 * a grant, so none of them reaches into http/ for it.
 */

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

export interface KeyGrantRow {
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

export type GrantColumns = Pick<
  KeyGrantRow,
  'integration_id' | 'scopes' | 'ip_allowlist' | 'recovery_entry_mode' | 'feed_mode' | 'industry_profile' | 'receipt_delivery_owner'
>

export function toGrant(clientCode: string, row: GrantColumns): Grant {
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

export type CallerRow = Omit<KeyGrantRow, 'environment'>

/** The caller a key row (joined with its grant for `clientCode`, if any) describes. */
export function callerFromRow(clientCode: string, row: CallerRow): Caller {
  const grant = row.grant_status === 'active' ? toGrant(clientCode, row as GrantColumns) : null
  return { apiKeyId: row.api_key_id, integrationId: row.integration_id, grant }
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
