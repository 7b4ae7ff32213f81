import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import fc from 'fast-check'
import { authorize, type Caller, type Grant, grantWithScopes, ipAllowed, isValidCidr, toGrant } from '../../src/access/grants.ts'
import { API_KEY_PATTERN, digestSecret, newApiKey, randomBase62 } from '../../src/access/keys.ts'
import type { Problem } from '../../src/domain/problems.ts'
import type { Scope } from '../../src/domain/scopes.ts'

/**
 * Access (src/access/): the rules that admit a call once its key is known: the grant, its scopes, its IP allowlist
 * (docs/design/tenancy-and-credentials.md), and the shape of a key. The HTTP walk over every route
 * (test/api/security.test.ts) checks them through the edge; these check each rule on its own, exactly.
 */
const grant = (overrides: Partial<Grant> = {}): Grant => ({
  clientCode: 'cu-1',
  integrationId: 'int-1',
  scopes: new Set<Scope>(['customers:read', 'receivables:read']),
  ipAllowlist: [],
  recoveryEntryMode: 'explicit_instruction',
  feedMode: 'transaction',
  industryProfile: 'credit_union',
  receiptDeliveryOwner: 'partner',
  ...overrides,
})
const caller = (g: Grant | null): Caller => ({ apiKeyId: 'key-1', integrationId: 'int-1', grant: g })
const refusal = (fn: () => unknown) => {
  try {
    fn()
  } catch (err) {
    return [(err as Problem).code, (err as Problem).detail]
  }
  return undefined
}

describe('the IP allowlist', () => {
  test('an empty list admits every address; a listed range admits exactly its addresses', () => {
    assert.equal(ipAllowed('203.0.113.9', []), true)
    assert.equal(ipAllowed('not an address', []), true)
    const list = ['10.0.0.0/8', '192.0.2.7/32', '2001:db8::/32']
    for (const ip of ['10.0.0.1', '10.255.255.255', '192.0.2.7', '2001:db8::1', '2001:db8:ffff::9', '::ffff:10.1.2.3'])
      assert.equal(ipAllowed(ip, list), true, ip)
    for (const ip of ['11.0.0.1', '9.255.255.255', '192.0.2.8', '2001:db9::1', '::1', '127.0.0.1', '::ffff:11.0.0.1', '', 'localhost'])
      assert.equal(ipAllowed(ip, list), false, ip)
  })

  test('an IPv4 range never admits an IPv6 address, nor the reverse, except an IPv4-mapped one', () => {
    assert.equal(ipAllowed('::ffff:192.0.2.1', ['192.0.2.0/24']), true)
    assert.equal(ipAllowed('192.0.2.1', ['::/0']), false)
    assert.equal(ipAllowed('2001:db8::1', ['0.0.0.0/0']), false)
  })

  test('an IPv4 address is in a /n range exactly when their first n bits agree', () => {
    const ipv4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255))
    fc.assert(
      fc.property(ipv4, ipv4, fc.integer({ min: 0, max: 32 }), (a, r, bits) => {
        const n = (o: number[]) =>
          ((((o[0] as number) << 24) >>> 0) + ((o[1] as number) << 16) + ((o[2] as number) << 8) + (o[3] as number)) >>> 0
        const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0
        const same = (n(a) & mask) >>> 0 === (n(r) & mask) >>> 0
        return ipAllowed(a.join('.'), [`${r.join('.')}/${bits}`]) === same
      }),
      { numRuns: 500 },
    )
  })

  test('CIDR strings: valid IPv4 and IPv6 ranges, nothing else', () => {
    for (const ok of ['10.0.0.0/8', '0.0.0.0/0', '192.0.2.7/32', '2001:db8::/32', '::/0', '::1/128'])
      assert.equal(isValidCidr(ok), true, ok)
    for (const bad of ['10.0.0.0', '10.0.0.0/33', '2001:db8::/129', 'a.b.c.d/8', '', '/8', '10.0.0.0/-1'])
      assert.equal(isValidCidr(bad), false, bad)
  })
})

describe('authorization', () => {
  test('no active grant, a missing scope, an address outside the allowlist: 403 client_scope_denied, each saying why', () => {
    assert.deepEqual(
      refusal(() => authorize(caller(null), 'cu-1', ['customers:read'], '10.0.0.1')),
      ['client_scope_denied', 'This API key has no active grant for client cu-1.'],
    )
    assert.deepEqual(
      refusal(() => authorize(caller(grant()), 'cu-1', ['customers:read', 'payment_requests:write'], '10.0.0.1')),
      ['client_scope_denied', 'The grant for client cu-1 lacks the scope payment_requests:write.'],
    )
    assert.deepEqual(
      refusal(() => authorize(caller(grant({ ipAllowlist: ['192.0.2.0/24'] })), 'cu-1', ['customers:read'], '10.0.0.1')),
      ['client_scope_denied', "The calling address is outside the grant's IP allowlist."],
    )
  })

  test('a grant holding every required scope, called from an allowed address, is the grant answered', () => {
    const g = grant({ ipAllowlist: ['10.0.0.0/8'] })
    assert.equal(authorize(caller(g), 'cu-1', ['customers:read', 'receivables:read'], '10.9.9.9'), g)
    assert.equal(authorize(caller(g), 'cu-1', [], '10.9.9.9'), g)
    // A batch record rechecks only the grant and its scopes: the address was the batch PUT's.
    assert.equal(grantWithScopes(g, 'cu-1', ['receivables:read']), g)
  })

  test('any set of required scopes is admitted exactly when the grant holds all of them', () => {
    const all: Scope[] = ['customers:read', 'customers:write', 'receivables:read', 'receivables:write', 'payment_requests:write']
    fc.assert(
      fc.property(fc.subarray(all), fc.subarray(all), (held, required) => {
        const g = grant({ scopes: new Set(held) })
        const admitted = refusal(() => grantWithScopes(g, 'cu-1', required)) === undefined
        return admitted === required.every((s) => held.includes(s))
      }),
    )
  })

  test("a grant row's absent settings take the documented defaults", () => {
    const g = toGrant('cu-2', {
      integration_id: 'int-2',
      scopes: null,
      ip_allowlist: null,
      recovery_entry_mode: null,
      feed_mode: null,
      industry_profile: null,
      receipt_delivery_owner: null,
    })
    assert.deepEqual(g, {
      clientCode: 'cu-2',
      integrationId: 'int-2',
      scopes: new Set(),
      ipAllowlist: [],
      recoveryEntryMode: 'explicit_instruction',
      feedMode: 'transaction',
      industryProfile: 'credit_union',
      receiptDeliveryOwner: 'partner',
    })
  })
})

describe('API keys', () => {
  test('a new key names its environment and carries 40 random base62 characters; only its SHA-256 digest is kept', () => {
    for (const environment of ['sandbox', 'production'] as const) {
      const key = newApiKey(environment)
      assert.match(key, API_KEY_PATTERN)
      assert.match(key, new RegExp(`^irk_${environment}_[A-Za-z0-9]{40}$`))
      assert.match(digestSecret(key), /^[0-9a-f]{64}$/)
      assert.notEqual(newApiKey(environment), key)
    }
    assert.equal(digestSecret('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad')
  })

  test('random base62 has the asked length and only base62 characters', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 300 }), (n) => {
        const s = randomBase62(n)
        return s.length === n && /^[A-Za-z0-9]*$/.test(s)
      }),
      { numRuns: 100 },
    )
  })

  test('the key pattern refuses other prefixes, environments, short or non-base62 bodies', () => {
    for (const bad of [
      `irk_staging_${'a'.repeat(40)}`,
      `irk_sandbox_${'a'.repeat(31)}`,
      `irk_sandbox_${'a'.repeat(39)}-`,
      `irx_sandbox_${'a'.repeat(40)}`,
      ` irk_sandbox_${'a'.repeat(40)}`,
      '',
    ])
      assert.doesNotMatch(bad, API_KEY_PATTERN, bad)
  })
})
