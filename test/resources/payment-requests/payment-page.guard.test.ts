import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
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

  test('the limiter: fixed minute windows, memory dropped when the window turns, new addresses beyond the cap share one count', () => {
    let at = Date.parse('2026-11-23T12:00:59.000Z')
    const limiter = createAddressLimiter({ perMinute: 2, clock: { now: () => new Date(at) }, maxAddresses: 2 })
    assert.deepEqual(limiter.hit('192.0.2.1'), { allowed: true, limit: 2, remaining: 1, resetSeconds: 1 })
    assert.deepEqual(limiter.hit('192.0.2.2'), { allowed: true, limit: 2, remaining: 1, resetSeconds: 1 })
    // The cap is reached: two new addresses share the overflow count.
    assert.equal(limiter.hit('192.0.2.3').allowed, true)
    assert.equal(limiter.hit('192.0.2.4').allowed, true)
    assert.deepEqual(limiter.hit('192.0.2.5'), { allowed: false, limit: 2, remaining: 0, resetSeconds: 1 })
    assert.equal(limiter.hit('192.0.2.1').allowed, true)
    assert.equal(limiter.hit('192.0.2.1').allowed, false)
    at = Date.parse('2026-11-23T12:01:00.000Z')
    assert.deepEqual(limiter.hit('192.0.2.5'), { allowed: true, limit: 2, remaining: 1, resetSeconds: 60 })
  })
})

describe('the page read is cheap', () => {
  test("a page GET is two statements (the token's client, then the read naming it), outside any transaction; a malformed token none", async () => {
    now = new Date('2026-11-23T12:03:00.000Z')
    counting.reset()
    const res = await page('GET', `/pay/${token}`, '203.0.113.30')
    assert.equal(res.status, 200)
    assert.match(res.body, /<form method="post"/)
    assert.equal(counting.outside.length, 2, counting.outside.join('\n---\n'))
    assert.equal(counting.outside[0], 'SELECT client_code FROM page_tokens WHERE page_token = $1')
    assert.match(counting.outside[1] ?? '', /WHERE p\.client_code = \$1 AND p\.page_token = \$2/)
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
