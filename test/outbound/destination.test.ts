import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { Problem } from '../../src/domain/problems.ts'
import { problemDocs } from '../../src/http/problem-docs.ts'
import {
  checkConfiguredDestination,
  checkDestination,
  isPublicAddress,
  parseDestination,
  ResolutionError,
  type ResolvedAddress,
  type Resolver,
  resolveDestination,
  UnsafeDestinationError,
} from '../../src/outbound/destination.ts'

/** A resolver answering a fixed table; a name may answer differently on each lookup (rebinding). */
function stubResolver(table: Record<string, (string | string[])[]>): Resolver & { calls: string[] } {
  const calls: string[] = []
  const counts = new Map<string, number>()
  const fn = async (name: string): Promise<ResolvedAddress[]> => {
    calls.push(name)
    const answers = table[name]
    if (!answers) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
    const n = counts.get(name) ?? 0
    counts.set(name, n + 1)
    const answer = answers[Math.min(n, answers.length - 1)] as string | string[]
    return (Array.isArray(answer) ? answer : [answer]).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
  }
  return Object.assign(fn, { calls })
}

const PUBLIC_V4 = '93.184.215.14'
const PUBLIC_V6 = '2606:2800:21f:cb07:6820:80da:af6b:8b2c'

/** Names and what they resolve to, for the table below. */
const resolver = stubResolver({
  'hooks.acme.com': [PUBLIC_V4],
  'v6.acme.com': [PUBLIC_V6],
  'both.acme.com': [[PUBLIC_V4, PUBLIC_V6]],
  'loop.acme.com': ['127.0.0.1'],
  'ten.acme.com': ['10.1.2.3'],
  'rfc1918b.acme.com': ['172.16.5.4'],
  'rfc1918c.acme.com': ['192.168.1.1'],
  'linklocal.acme.com': ['169.254.169.254'],
  'cgnat.acme.com': ['100.64.0.1'],
  'zero.acme.com': ['0.0.0.0'],
  'multicast.acme.com': ['224.0.0.251'],
  'broadcast.acme.com': ['255.255.255.255'],
  'reserved.acme.com': ['240.0.0.1'],
  'docs.acme.com': ['192.0.2.10'],
  'docs2.acme.com': ['198.51.100.10'],
  'docs3.acme.com': ['203.0.113.10'],
  'bench.acme.com': ['198.18.0.1'],
  'v6loop.acme.com': ['::1'],
  'v6zero.acme.com': ['::'],
  'ula.acme.com': ['fd00::1'],
  'v6ll.acme.com': ['fe80::1'],
  'v6mc.acme.com': ['ff02::1'],
  'v6docs.acme.com': ['2001:db8::1'],
  'mapped.acme.com': ['::ffff:127.0.0.1'],
  'mapped10.acme.com': ['::ffff:10.0.0.1'],
  'nat64.acme.com': ['64:ff9b::a00:1'],
  'nat64public.acme.com': ['64:ff9b::5db8:d70e'],
  'sixtofour.acme.com': ['2002:7f00:1::1'],
  'teredo.acme.com': ['2001::1'],
  'mixed.acme.com': [[PUBLIC_V4, '10.0.0.1']],
  'empty.acme.com': [[]],
})

const cases: [input: string, expected: 'ok' | RegExp][] = [
  ['https://hooks.acme.com/irs', 'ok'],
  ['https://hooks.acme.com:443/irs?x=1', 'ok'],
  ['https://HOOKS.ACME.COM/irs', 'ok'],
  ['https://v6.acme.com/', 'ok'],
  ['https://both.acme.com/', 'ok'],
  // The URL itself.
  ['http://hooks.acme.com/irs', /not https/],
  ['ftp://hooks.acme.com/irs', /not https/],
  ['https://hooks.acme.com:8443/irs', /port 443/],
  ['https://user:pw@hooks.acme.com/irs', /credentials/],
  ['https://user@hooks.acme.com/irs', /credentials/],
  ['https://@hooks.acme.com/irs', /credentials/],
  ['https://hooks.acme.com/irs#frag', /fragment/],
  ['https://hooks.acme.com/irs#', /fragment/],
  ['hooks.acme.com/irs', /absolute URL/],
  ['https://hooks.acme.com/ir s', /white space/],
  ['https://hooks.acme.com\\@evil.com/', /backslash/],
  [`https://hooks.acme.com/${'a'.repeat(2048)}`, /longer than/],
  // IP literals in every spelling.
  ['https://127.0.0.1/', /IP address/],
  ['https://8.8.8.8/', /IP address/],
  ['https://2130706433/', /IP address/],
  ['https://0x7f000001/', /IP address/],
  ['https://0177.0.0.1/', /IP address/],
  ['https://127.1/', /IP address/],
  ['https://0x7f.0.0.1/', /IP address/],
  ['https://[::1]/', /IP address/],
  ['https://[::ffff:127.0.0.1]/', /IP address/],
  ['https://[2606:4700::1111]/', /IP address/],
  // Names that are not public.
  ['https://localhost/', /public DNS name|special-use/],
  ['https://api.localhost/', /special-use/],
  ['https://printer.local/', /special-use/],
  ['https://db.internal/', /special-use/],
  ['https://router.home.arpa/', /special-use/],
  ['https://hooks.acme.com./', /ends with a dot/],
  ['https://intranet/', /public DNS name/],
  ['https://-bad.acme.com/', /public DNS name/],
  // Resolution to non-public addresses.
  ['https://loop.acme.com/', /non-public/],
  ['https://ten.acme.com/', /non-public/],
  ['https://rfc1918b.acme.com/', /non-public/],
  ['https://rfc1918c.acme.com/', /non-public/],
  ['https://linklocal.acme.com/', /non-public/],
  ['https://cgnat.acme.com/', /non-public/],
  ['https://zero.acme.com/', /non-public/],
  ['https://multicast.acme.com/', /non-public/],
  ['https://broadcast.acme.com/', /non-public/],
  ['https://reserved.acme.com/', /non-public/],
  ['https://docs.acme.com/', /non-public/],
  ['https://docs2.acme.com/', /non-public/],
  ['https://docs3.acme.com/', /non-public/],
  ['https://bench.acme.com/', /non-public/],
  ['https://v6loop.acme.com/', /non-public/],
  ['https://v6zero.acme.com/', /non-public/],
  ['https://ula.acme.com/', /non-public/],
  ['https://v6ll.acme.com/', /non-public/],
  ['https://v6mc.acme.com/', /non-public/],
  ['https://v6docs.acme.com/', /non-public/],
  ['https://mapped.acme.com/', /non-public/],
  ['https://mapped10.acme.com/', /non-public/],
  ['https://nat64.acme.com/', /non-public/],
  ['https://nat64public.acme.com/', /non-public/],
  ['https://sixtofour.acme.com/', /non-public/],
  ['https://teredo.acme.com/', /non-public/],
  ['https://mixed.acme.com/', /non-public/],
  ['https://empty.acme.com/', /does not resolve/],
  ['https://unknown.acme.com/', /does not resolve/],
  // Loopback is refused unless the development flag is on.
  ['http://127.0.0.1:8080/hook', /not https/],
  ['http://localhost:8080/hook', /not https/],
]

describe('destination checks (no loopback)', () => {
  test(`the table has at least 35 unsafe inputs (${cases.filter(([, e]) => e !== 'ok').length})`, () => {
    assert.ok(cases.filter(([, e]) => e !== 'ok').length >= 35)
  })
  for (const [input, expected] of cases) {
    test(`${input.slice(0, 60)} -> ${expected === 'ok' ? 'accepted' : expected.source}`, async () => {
      const result = await checkDestination(input, { allowLoopback: false, resolver }).then(
        () => 'ok' as const,
        (err: unknown) => err,
      )
      if (expected === 'ok') assert.equal(result, 'ok')
      else {
        assert.ok(result instanceof UnsafeDestinationError, `expected unsafe, got ${String(result)}`)
        assert.match(result.reason, expected)
        // The reason never repeats the URL.
        assert.ok(!result.reason.includes('acme'))
      }
    })
  }
})

describe('WEBHOOK_DEV_ALLOW_LOOPBACK', () => {
  const loopbackCases: [string, 'ok' | RegExp][] = [
    ['http://127.0.0.1:8080/hook', 'ok'],
    ['http://localhost:9999/', 'ok'],
    ['http://localhost:9999', 'ok'],
    ['http://127.0.0.1/hook', /not https/],
    ['http://127.0.0.2:8080/', /not https/],
    ['http://2130706433:8080/', /not https/],
    ['http://[::1]:8080/', /not https/],
    ['http://user@localhost:8080/', /credentials/],
    ['http://localhost:8080/#x', /fragment/],
    ['https://localhost:8443/', /port 443/],
    ['https://hooks.acme.com/irs', 'ok'],
  ]
  for (const [input, expected] of loopbackCases) {
    test(`${input} -> ${expected === 'ok' ? 'accepted' : expected.source}`, async () => {
      const result = await checkDestination(input, { allowLoopback: true, resolver }).then(
        () => 'ok' as const,
        (err: unknown) => err,
      )
      if (expected === 'ok') assert.equal(result, 'ok')
      else {
        assert.ok(result instanceof UnsafeDestinationError, String(result))
        assert.match(result.reason, expected)
      }
    })
  }
  test('a loopback destination is pinned to 127.0.0.1 and never resolved', async () => {
    const r = stubResolver({})
    const pinned = await resolveDestination(parseDestination('http://localhost:8080/', { allowLoopback: true }), r)
    assert.deepEqual(pinned, { address: '127.0.0.1', family: 4 })
    assert.deepEqual(r.calls, [])
  })
})

describe('a refused loopback URL says how to allow it', () => {
  const hint = 'is not https (a loopback http URL is accepted in sandbox when the service runs with WEBHOOK_DEV_ALLOW_LOOPBACK=1)'
  const reasonOf = (input: string, allowLoopback: boolean) =>
    checkDestination(input, { allowLoopback, resolver }).then(
      () => 'accepted',
      (err: unknown) => (err instanceof UnsafeDestinationError ? err.reason : String(err)),
    )
  test('without the flag, http://127.0.0.1:<port> and http://localhost:<port> name WEBHOOK_DEV_ALLOW_LOOPBACK=1', async () => {
    for (const url of ['http://127.0.0.1:8080/hook', 'http://localhost:9999/', 'http://LOCALHOST:3000?x=1']) {
      assert.equal(await reasonOf(url, false), hint, url)
    }
  })
  test('other non-https URLs, which the flag would not accept either, do not mention it', async () => {
    for (const url of [
      'http://hooks.acme.com/irs',
      'http://127.0.0.1/hook',
      'http://127.0.0.2:8080/',
      'http://[::1]:8080/',
      'ftp://localhost:21/',
    ]) {
      assert.equal(await reasonOf(url, false), 'is not https', url)
      assert.equal(await reasonOf(url, true), 'is not https', url)
    }
  })
  test("the 422's detail and field error carry the hint, and the problem page says the same", async () => {
    const err = await checkConfiguredDestination('http://127.0.0.1:8080/hook', { allowLoopback: false, resolver }).catch((e: unknown) => e)
    assert.ok(err instanceof Problem)
    assert.equal(err.code, 'webhook_destination_unsafe')
    assert.equal(err.detail, `The url ${hint}.`)
    assert.deepEqual(err.errors, [{ code: 'webhook_destination_unsafe', detail: hint, pointer: '/url' }])
    assert.match(problemDocs.webhook_destination_unsafe.fix, /`WEBHOOK_DEV_ALLOW_LOOPBACK=1`.*`http:\/\/127\.0\.0\.1:<port>`/)
  })
})

describe('DNS rebinding', () => {
  test('a name that answers a public address first and a private one on the second lookup is refused then', async () => {
    const rebinding = stubResolver({ 'rebind.acme.com': [PUBLIC_V4, '10.0.0.7'] })
    const dest = await checkDestination('https://rebind.acme.com/hook', { allowLoopback: false, resolver: rebinding })
    await assert.rejects(resolveDestination(dest, rebinding), (err) => err instanceof UnsafeDestinationError)
    assert.deepEqual(rebinding.calls, ['rebind.acme.com', 'rebind.acme.com'])
  })
  test('a failed lookup before an attempt is a resolution error (retried), not unsafe', async () => {
    const flaky = stubResolver({})
    await assert.rejects(
      resolveDestination(parseDestination('https://gone.acme.com/', { allowLoopback: false }), flaky),
      (err) => err instanceof ResolutionError,
    )
  })
})

test('isPublicAddress: only ipaddr.js unicast, IPv4-mapped judged as IPv4, odd IPv4 spellings refused', () => {
  assert.equal(isPublicAddress(PUBLIC_V4), true)
  assert.equal(isPublicAddress(PUBLIC_V6), true)
  assert.equal(isPublicAddress('::ffff:93.184.215.14'), true)
  for (const a of ['127.1', '0x7f000001', '2130706433', '10.0.0.1', '::ffff:a00:1', 'fc00::1', 'not-an-ip', '']) {
    assert.equal(isPublicAddress(a), false, a)
  }
})
