import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import fc from 'fast-check'
import ipaddr from 'ipaddr.js'
import { addressKey, createAddressLimiter } from '../../../src/http/limits.ts'
import { startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { type CountingStore, countingStore } from '../../helpers/counting-store.ts'
import { payableReceivable } from '../../helpers/payments.ts'
import { createTestDatabase, type TestDatabase } from '../../helpers/store.ts'

/**
 * Issue 20, items 5 and 7: the hosted page under a flood (a per-address limit answered from memory, a read of one
 * statement), and a page that judges holds exactly as its POST does.
 */

let now = new Date('2026-11-23T12:00:10.000Z')
const clock = { now: () => now }
const FORM = 'application/x-www-form-urlencoded'

let db: TestDatabase
let counting: CountingStore
/** PAY_RATE_LIMIT_PER_MINUTE 3, TRUST_PROXY 1: the limit is per client address as the proxy reports it. */
let t: TestApp
let tenant: Tenant
let token: string
before(async () => {
  db = await createTestDatabase()
  counting = countingStore(db.store)
  t = await startTestApp({ PAY_RATE_LIMIT_PER_MINUTE: '3', TRUST_PROXY: '1' }, { clock, db: { ...db, store: counting } })
  tenant = await t.tenant('guard', { grant: {} })
  await t.admin('PUT', '/admin/v1/clients/guard', { name: 'Guard Credit Union' })
  const id = await payableReceivable(t, tenant, 'rcv-guard')
  const res = await t.call('PUT', '/v1/clients/guard/payment-requests/pr-guard', {
    key: tenant.apiKey,
    body: { externalReceivableId: id, amount: { amount: '10.00', currency: 'USD' }, description: 'Instalment' },
  })
  assert.equal(res.status, 201, res.body)
  token = String(res.json.hostedUrl).split('/pay/')[1] as string
})
after(async () => {
  await t?.close()
  await db?.drop()
})

/** A page request from `client`, through the trusted proxy 10.0.0.1. */
const page = (method: 'GET' | 'POST' | 'HEAD', path: string, client: string, body?: string) =>
  t.call(method, path, {
    remoteAddress: '10.0.0.1',
    headers: { 'x-forwarded-for': client },
    ...(body !== undefined ? { rawBody: body, contentType: FORM } : {}),
  })

const statements = () => [...counting.outside, ...counting.inTransactions]

describe('PAY_RATE_LIMIT_PER_MINUTE: per client address, GET and POST together', () => {
  test('the 4th request of a minute is a 429 page with Retry-After, and reaches no store; others and the next minute are served', async () => {
    now = new Date('2026-11-23T12:00:10.000Z')
    const a = '203.0.113.10'
    assert.equal((await page('GET', `/pay/${token}`, a)).status, 200)
    assert.equal((await page('POST', `/pay/${token}`, a, 'outcome=bogus')).status, 400)
    assert.equal((await page('GET', `/pay/${'A'.repeat(43)}`, a)).status, 404)
    counting.reset()
    for (const method of ['GET', 'POST', 'HEAD'] as const) {
      const res = await page(method, `/pay/${token}`, a, method === 'POST' ? 'outcome=confirmed' : undefined)
      assert.equal(res.status, 429, method)
      assert.equal(res.headers['retry-after'], '50', method)
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8')
      assert.equal(res.headers['cache-control'], 'no-store')
      if (method !== 'HEAD') {
        assert.match(res.body, /<h1>Too many requests<\/h1>/)
        assert.equal(res.body.includes('<form'), false)
      }
    }
    assert.match(
      (await page('POST', `/pay/${token}`, a, 'outcome=confirmed')).body,
      /Your payment was not made: this page was opened too often/,
    )
    assert.deepEqual(statements(), [], 'a refused request runs no statement')
    // The stylesheet is not counted; another address has its own budget.
    assert.equal((await page('GET', '/pay/assets/page.css', a)).status, 200)
    assert.equal((await page('GET', `/pay/${token}`, '203.0.113.11')).status, 200)
    // The request was not paid by the refused POSTs.
    assert.equal((await t.call('GET', '/v1/clients/guard/payment-requests/pr-guard', { key: tenant.apiKey })).json.status, 'open')
    now = new Date('2026-11-23T12:01:00.000Z')
    assert.equal((await page('GET', `/pay/${token}`, a)).status, 200)
  })

  test('the address is the one TRUST_PROXY decides: a client cannot reset its count by writing its own X-Forwarded-For', async () => {
    now = new Date('2026-11-23T12:02:00.000Z')
    // Through the trusted proxy, the right-most untrusted hop is the client: the spoofed left part changes nothing.
    for (let i = 0; i < 3; i++) assert.equal((await page('GET', `/pay/${token}`, `198.51.100.${i}, 203.0.113.20`)).status, 200)
    assert.equal((await page('GET', `/pay/${token}`, '198.51.100.99, 203.0.113.20')).status, 429)
  })

  test('addresses: IPv4 as is, IPv4-mapped IPv6 as its IPv4, IPv6 by its /64', () => {
    assert.equal(addressKey('203.0.113.7'), '203.0.113.7')
    assert.equal(addressKey('::ffff:203.0.113.7'), '203.0.113.7')
    assert.equal(addressKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64')
    assert.equal(addressKey('2001:db8:1:2:bbbb::9'), '2001:db8:1:2::/64')
  })

  test('issue 33 item 5: a port, brackets, a zone id or a mapped spelling is the same address; what is not an address is no key', () => {
    for (const spelling of [
      '198.51.100.9',
      '198.51.100.9:1000',
      '198.51.100.9:1007',
      ' 198.51.100.9 ',
      '::ffff:198.51.100.9',
      '[::ffff:c633:6409]:443',
    ]) {
      assert.equal(addressKey(spelling), '198.51.100.9', spelling)
    }
    for (const spelling of [
      '2001:db8:1:2::1',
      '[2001:db8:1:2::1]',
      '[2001:db8:1:2::1]:8443',
      '2001:DB8:1:2::1%eth0',
      '[2001:0db8:0001:0002:0:0:0:9%25en0]:1',
    ]) {
      assert.equal(addressKey(spelling), '2001:db8:1:2::/64', spelling)
    }
    for (const bad of [
      '',
      'unknown',
      '198.51.100.9:',
      '198.51.100.256',
      '010.0.0.1',
      '0x7f.0.0.1',
      '1',
      '198.51.100.9:123456',
      '[198.51.100.9',
      '::1::2',
      'fe80::g1',
      '1.2.3.4.5',
      '_hidden',
    ]) {
      assert.equal(addressKey(bad), null, bad)
    }
  })

  test('property: every spelling of one address is one key, and two addresses (two /64s) are two keys', () => {
    const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((o) => o.join('.'))
    const port = fc.integer({ min: 0, max: 65535 })
    const v4Spellings = (a: string, p: number) => {
      const [w, x, y, z] = a.split('.').map(Number) as [number, number, number, number]
      const hi = ((w << 8) | x).toString(16)
      const lo = ((y << 8) | z).toString(16)
      return [
        a,
        `${a}:${p}`,
        `::ffff:${a}`,
        `::FFFF:${a}`,
        `0:0:0:0:0:ffff:${a}`,
        `[::ffff:${a}]:${p}`,
        `::ffff:${hi}:${lo}`,
        `[::ffff:${hi}:${lo}%1]`,
      ]
    }
    fc.assert(
      fc.property(v4, v4, port, (a, b, p) => {
        const keys = new Set(v4Spellings(a, p).map(addressKey))
        assert.deepEqual([...keys], [a])
        assert.equal(addressKey(b) === addressKey(a), a === b)
      }),
    )
    const groups = fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 })
    const v6Spellings = (g: number[], p: number) => {
      const full = g.map((n) => n.toString(16)).join(':')
      const padded = g.map((n) => n.toString(16).padStart(4, '0')).join(':')
      const compressed = ipaddr.IPv6.parse(full).toString()
      return [
        full,
        padded,
        padded.toUpperCase(),
        compressed,
        `[${compressed}]`,
        `[${compressed}]:${p}`,
        `${compressed}%eth0`,
        `[${padded}%25en0]:${p}`,
      ]
    }
    fc.assert(
      fc.property(groups, groups, port, (g, h, p) => {
        const mapped = g.slice(0, 6).every((n, i) => n === (i === 5 ? 0xffff : 0))
        fc.pre(!mapped)
        const keys = new Set(v6Spellings(g, p).map(addressKey))
        assert.equal(keys.size, 1, [...keys].join(' '))
        // Another interface of the same /64 is the same key; another /64 another key.
        const sameNet = [...g.slice(0, 4), ...h.slice(4)]
        assert.equal(addressKey(v6Spellings(sameNet, p)[0] as string), [...keys][0])
        const otherNet = h.slice(0, 4).join() !== g.slice(0, 4).join()
        if (otherNet && !h.slice(0, 6).every((n, i) => n === (i === 5 ? 0xffff : 0))) {
          assert.notEqual(addressKey(v6Spellings(h, p)[0] as string), [...keys][0])
        }
      }),
    )
  })

  test('the limiter: fixed minute windows, memory dropped when the window turns, the address seen least recently forgotten beyond the cap', () => {
    let at = Date.parse('2026-11-23T12:00:59.000Z')
    const limiter = createAddressLimiter({ perMinute: 2, clock: { now: () => new Date(at) }, maxAddresses: 2 })
    assert.deepEqual(limiter.hit('192.0.2.1'), { allowed: true, limit: 2, remaining: 1, resetSeconds: 1 })
    assert.deepEqual(limiter.hit('192.0.2.2'), { allowed: true, limit: 2, remaining: 1, resetSeconds: 1 })
    assert.deepEqual(limiter.hit('192.0.2.1'), { allowed: true, limit: 2, remaining: 0, resetSeconds: 1 })
    // The cap is reached: a new address has a count of its own; 192.0.2.2, seen least recently, is forgotten.
    assert.deepEqual(limiter.hit('192.0.2.3'), { allowed: true, limit: 2, remaining: 1, resetSeconds: 1 })
    assert.equal(limiter.hit('192.0.2.1').allowed, false)
    assert.deepEqual(limiter.hit('192.0.2.2'), { allowed: true, limit: 2, remaining: 1, resetSeconds: 1 })
    at = Date.parse('2026-11-23T12:01:00.000Z')
    assert.deepEqual(limiter.hit('192.0.2.1'), { allowed: true, limit: 2, remaining: 1, resetSeconds: 60 })
  })

  test('issue 33 item 5: past the cap, every new debtor is served (a flood from many addresses locks nobody out)', () => {
    const at = Date.parse('2026-11-23T12:00:00.000Z')
    const limiter = createAddressLimiter({ perMinute: 3, clock: { now: () => new Date(at) }, maxAddresses: 1000 })
    for (let i = 0; i < 5000; i++) for (let n = 0; n < 3; n++) limiter.hit(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`)
    for (let i = 0; i < 100; i++) {
      assert.deepEqual(limiter.hit(`2001:db8:${i.toString(16)}::1`), { allowed: true, limit: 3, remaining: 2, resetSeconds: 60 })
    }
  })

  test("not an address: counted as the connection's address, so texts are not fresh counts", () => {
    const limiter = createAddressLimiter({ perMinute: 2, clock: { now: () => new Date('2026-11-23T12:00:00.000Z') } })
    assert.equal(limiter.hit('garbage-1', '10.0.0.1').remaining, 1)
    assert.equal(limiter.hit('garbage-2', '::ffff:10.0.0.1').remaining, 0)
    assert.equal(limiter.hit('10.0.0.1:5', '10.0.0.9').allowed, false)
  })

  test('through the proxy: one address with eight ports, or one /64 spelled five ways, is one budget', async () => {
    now = new Date('2026-11-23T12:04:00.000Z')
    const ports = Array.from({ length: 8 }, (_, i) => `198.51.100.9:${1000 + i}`)
    const served = []
    for (const client of ports) served.push((await page('GET', `/pay/${token}`, client)).status)
    assert.deepEqual(served, [200, 200, 200, 429, 429, 429, 429, 429])
    const v6 = ['[2001:db8:7:7::1]:4000', '2001:DB8:7:7::2', '2001:db8:7:7::3%eth0', '[2001:0db8:0007:0007::4]', '2001:db8:7:7:ffff::5']
    const v6Served = []
    for (const client of v6) v6Served.push((await page('GET', `/pay/${token}`, client)).status)
    assert.deepEqual(v6Served, [200, 200, 200, 429, 429])
    // A forwarded value that is no address is counted as the proxy's connection, not as itself.
    const junk = []
    for (const client of ['junk-1', 'junk-2', 'junk-3', 'junk-4']) junk.push((await page('GET', `/pay/${token}`, client)).status)
    assert.deepEqual(junk, [200, 200, 200, 429])
  })
})

describe('the page read is cheap', () => {
  test('a page GET is one statement, outside any transaction; a malformed token none', async () => {
    now = new Date('2026-11-23T12:03:00.000Z')
    counting.reset()
    const res = await page('GET', `/pay/${token}`, '203.0.113.30')
    assert.equal(res.status, 200)
    assert.match(res.body, /<form method="post"/)
    assert.equal(counting.outside.length, 1, counting.outside.join('\n---\n'))
    assert.deepEqual(counting.inTransactions, [])
    counting.reset()
    for (const [i, bad] of ['short', `${'A'.repeat(42)}!`, 'A'.repeat(44)].entries()) {
      assert.equal((await page('GET', `/pay/${bad}`, `203.0.113.${31 + i}`)).status, 404, bad)
    }
    assert.equal((await page('POST', '/pay/short', '203.0.113.34', 'outcome=confirmed')).status, 404)
    assert.deepEqual(statements(), [])
  })
})

describe('holds: the page judges a Payment request as its POST does', () => {
  const form = (html: string) => html.includes('<form method="post"')
  const held = (html: string) => html.includes('<h1>This payment request is on hold</h1>')

  test('collection turned off: the next page GET is on hold with no form, every time; turned on, the form is back', async () => {
    let minute = 4
    for (let round = 0; round < 6; round++) {
      // A fresh minute per round keeps the page within its per-address budget (3 here).
      now = new Date(`2026-11-23T12:${String(minute++).padStart(2, '0')}:00.000Z`)
      assert.equal((await t.admin('PUT', '/admin/v1/clients/guard', { collectionEnabled: false })).status, 200)
      const off = await page('GET', `/pay/${token}`, '203.0.113.40')
      assert.equal(off.status, 200)
      assert.ok(held(off.body) && !form(off.body), `round ${round}: held, no form`)
      const post = await page('POST', `/pay/${token}`, '203.0.113.40', 'outcome=confirmed')
      assert.equal(post.status, 409)
      assert.match(post.body, /Your payment was not made: this payment request is on hold/)
      assert.equal((await t.admin('PUT', '/admin/v1/clients/guard', { collectionEnabled: true })).status, 200)
      const on = await page('GET', `/pay/${token}`, '203.0.113.40')
      assert.ok(form(on.body) && !held(on.body), `round ${round}: payable again`)
    }
  })

  test('race: the operator toggle, then at once the page GET while the fan-out runs: held every time', async () => {
    let minute = 20
    for (let round = 0; round < 10; round++) {
      now = new Date(`2026-11-23T12:${String(minute++).padStart(2, '0')}:00.000Z`)
      assert.equal((await t.admin('PUT', '/admin/v1/clients/guard', { collectionEnabled: false })).status, 200)
      const [res] = await Promise.all([page('GET', `/pay/${token}`, '203.0.113.50'), t.app.clientFanout.runUntilIdle()])
      assert.ok(held(res.body) && !form(res.body), `round ${round}: held`)
      assert.equal((await t.admin('PUT', '/admin/v1/clients/guard', { collectionEnabled: true })).status, 200)
      const [back] = await Promise.all([page('GET', `/pay/${token}`, '203.0.113.50'), t.app.clientFanout.runUntilIdle()])
      assert.ok(form(back.body), `round ${round}: payable`)
    }
  })
})
