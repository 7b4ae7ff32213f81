import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { encodeCursor } from '../../src/domain/cursor.ts'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { routeKey } from '../helpers/route-walk.ts'
import { engineName } from '../helpers/store.ts'

/**
 * Issue 20 item 3: a cursor is client input. Every value it decodes to is checked as strictly as the column it is
 * compared with, so a crafted cursor (a number beyond bigint, a NUL, another list's shape) is a 422
 * `validation_error` at the cursor's pointer, never a store error answered 503.
 */
const BIGINT_MAX = '9223372036854775807'
const C = 'cur-c'
let t: TestApp
let k: Tenant

before(async () => {
  t = await startTestApp({}, { resolver: async () => [{ address: '93.184.215.14', family: 4 }] })
  k = await t.tenant(C)
  const put = await t.call('PUT', `/v1/clients/${C}/customers/cust-1`, {
    key: k.apiKey,
    body: { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: 'r/1' },
  })
  assert.equal(put.status, 201, put.body)
  const hook = await t.call('PUT', `/v1/clients/${C}/webhook-endpoint`, { key: k.apiKey, body: { url: 'https://hooks.cur.com/x' } })
  assert.equal(hook.status, 201, hook.body)
  // A Payment request, whose refunds list pages.
  await payableReceivable(t, k, 'cur-r')
  const request = await t.call('PUT', `/v1/clients/${C}/payment-requests/cur-pr`, {
    key: k.apiKey,
    body: { externalReceivableId: 'cur-r', amount: { amount: '1.00', currency: 'USD' } },
  })
  assert.equal(request.status, 201, request.body)
})
after(() => t.close())

interface CursorRoute {
  /** The route's key in the route table. */
  route: string
  url: (cursor: string) => string
  pointer: string
  /** A cursor of this list's shape at its bound (the end its order runs to): accepted, and an empty page. */
  boundary: string
}

const apiKeyAt = (ts: string) => encodeCursor({ after: [ts, `ak_${'A'.repeat(24)}`] })
/** A newest-first list's cursor: a creation time in microseconds and an identifier (src/domain/cursor.ts). */
const newestAt = (ts: string) => encodeCursor({ after: [ts, 'z'.repeat(128)] })
const NEWEST_FIRST = [
  'payment-requests',
  'recovery-instructions',
  'payment-reconciliations',
  'adjustments',
  'credit-notes',
  'write-offs',
  'payment-observations',
  'batches',
].map(
  (segment): CursorRoute => ({
    route: `GET /v1/clients/:clientCode/${segment}`,
    url: (c) => `/v1/clients/${C}/${segment}?cursor=${c}`,
    pointer: '/query/cursor',
    // Newest first: the page before the earliest instant PostgreSQL and the cursor both keep is empty.
    boundary: newestAt('0001-01-01T00:00:00.000000Z'),
  }),
)
const LISTS: CursorRoute[] = [
  ...NEWEST_FIRST,
  {
    route: 'GET /v1/clients/:clientCode/customers',
    url: (c) => `/v1/clients/${C}/customers?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor({ after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /v1/clients/:clientCode/receivables',
    url: (c) => `/v1/clients/${C}/receivables?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor({ after: 'z'.repeat(128) }),
  },
  {
    // Oldest first: the page after the latest instant the cursor keeps is empty.
    route: 'GET /v1/clients/:clientCode/receivables/:externalReceivableId/timeline',
    url: (c) => `/v1/clients/${C}/receivables/cur-r/timeline?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor({ timeline: ['9999-12-31T23:59:59.999999Z', 'z:z'] }),
  },
  {
    route: 'GET /v1/clients/:clientCode/payment-requests/:externalPaymentRequestId/refunds',
    url: (c) => `/v1/clients/${C}/payment-requests/cur-pr/refunds?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor({ after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /v1/clients/:clientCode/changes',
    url: (c) => `/v1/clients/${C}/changes?after=${c}`,
    pointer: '/query/after',
    boundary: encodeCursor({ s: BIGINT_MAX }),
  },
  {
    route: 'GET /v1/clients/:clientCode/webhook-endpoint/deliveries',
    url: (c) => `/v1/clients/${C}/webhook-endpoint/deliveries?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor({ s: BIGINT_MAX, d: `dlv_${'f'.repeat(32)}` }),
  },
  {
    route: 'GET /admin/v1/clients/:clientCode/receivables/:externalReceivableId/timeline',
    url: (c) => `/admin/v1/clients/${C}/receivables/cur-r/timeline?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor({ timeline: ['9999-12-31T23:59:59.999999Z', 'z:z'] }),
  },
  {
    route: 'GET /admin/v1/clients',
    url: (c) => `/admin/v1/clients?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor({ after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /admin/v1/integrations',
    url: (c) => `/admin/v1/integrations?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor({ after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /admin/v1/integrations/:integrationId/grants',
    url: (c) => `/admin/v1/integrations/int-${C}/grants?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor({ after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /admin/v1/clients/:clientCode/grants',
    url: (c) => `/admin/v1/clients/${C}/grants?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor({ after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /admin/v1/integrations/:integrationId/api-keys',
    url: (c) => `/admin/v1/integrations/int-${C}/api-keys?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: apiKeyAt('9999-12-31T23:59:59.999Z'),
  },
]

/** Cursors no list returns, each of which reached the store before (503) or is another list's shape. */
const CRAFTED: [string, string][] = [
  ['the issue\'s cursor, {"s":"9999999999999999999"}', 'eyJzIjoiOTk5OTk5OTk5OTk5OTk5OTk5OSJ9'],
  ['a sequence number one beyond bigint', encodeCursor({ s: '9223372036854775808' })],
  ['a negative sequence number', encodeCursor({ s: '-1' })],
  ['a sequence number as a JSON number', encodeCursor({ s: 1 })],
  ['a sequence number with a leading zero', encodeCursor({ s: '01' })],
  ['a sequence number in exponent form', encodeCursor({ s: '1e3' })],
  ['an identifier holding NUL', encodeCursor({ after: 'a\u0000b' })],
  ['an identifier holding a lone surrogate', encodeCursor({ after: 'a\ud800b' })],
  ['an identifier too long for any column', encodeCursor({ after: 'a'.repeat(129) })],
  ['an identifier as a number', encodeCursor({ after: 123 })],
  ['a key cursor in year 0 (no PostgreSQL timestamp)', apiKeyAt('0000-01-01T00:00:00Z')],
  ['a key cursor with a calendar-invalid time', apiKeyAt('2026-02-30T00:00:00Z')],
  ['a cursor with an extra member', encodeCursor({ s: '1', after: 'a', x: 1 })],
  ['a newest-first cursor in year 0', newestAt('0000-01-01T00:00:00.000000Z')],
  ['a newest-first cursor with a calendar-invalid time', newestAt('2026-02-30T00:00:00.000000Z')],
  ['a newest-first cursor with milliseconds only', newestAt('2026-01-01T00:00:00.000Z')],
  ['a newest-first cursor with an offset', newestAt('2026-01-01T00:00:00.000000+01:00')],
  ['a newest-first cursor whose identifier holds NUL', encodeCursor({ after: ['2026-01-01T00:00:00.000000Z', 'a\u0000b'] })],
  ['a newest-first cursor with a third member', encodeCursor({ after: ['2026-01-01T00:00:00.000000Z', 'a', 'b'] })],
  ['JSON null', encodeCursor(null)],
  ['a JSON array', encodeCursor([1, 2])],
  ['base64url of text that is not JSON', Buffer.from('{"s":').toString('base64url')],
]

function assertCursorRefused(res: Response, pointer: string, what: string) {
  assert.equal(res.status, 422, `${what}: ${res.body}`)
  assert.equal(problemCode(res), 'validation_error', what)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/, what)
  assert.deepEqual(
    res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer]),
    [['invalid_format', pointer]],
    what,
  )
}

describe(`crafted cursors are 422 validation_error, never 503 (${engineName})`, () => {
  test('every list route with a cursor is one of those checked here', () => {
    const withCursor = t.app.routes
      .filter((r) => {
        const shape = (r.query as { shape?: Record<string, unknown> } | undefined)?.shape
        return shape !== undefined && ('cursor' in shape || 'after' in shape)
      })
      .map(routeKey)
      .sort()
    assert.deepEqual(withCursor, [...LISTS.map((l) => l.route), 'GET /admin/v1/audit-events'].sort())
  })

  for (const list of LISTS) {
    test(list.route, async () => {
      const call = (cursor: string) =>
        list.route.startsWith('GET /admin/') ? t.admin('GET', list.url(cursor)) : t.call('GET', list.url(cursor), { key: k.apiKey })
      for (const [what, cursor] of CRAFTED) {
        // Each list's own shape at its bound is accepted below; everything crafted here is refused by every list.
        assertCursorRefused(await call(cursor), list.pointer, what)
      }
      const ok = await call(list.boundary)
      assert.equal(ok.status, 200, ok.body)
      assert.deepEqual(ok.json.data, [])
    })
  }

  test("the change feed: from 0 (an empty feed's cursor) to the largest bigint", async () => {
    for (const s of ['0', '1', BIGINT_MAX]) {
      const res = await t.call('GET', `/v1/clients/${C}/changes?after=${encodeCursor({ s })}`, { key: k.apiKey })
      assert.equal(res.status, 200, `${s}: ${res.body}`)
    }
  })

  test('the delivery log: a cursor is a sequence number with the delivery id it was taken at', async () => {
    const log = (cursor: unknown) =>
      t.call('GET', `/v1/clients/${C}/webhook-endpoint/deliveries?cursor=${encodeCursor(cursor)}`, { key: k.apiKey })
    assertCursorRefused(await log({ s: '5' }), '/query/cursor', 'no delivery id')
    assertCursorRefused(await log({ s: '5', d: 'dlv_xyz' }), '/query/cursor', 'a malformed delivery id')
    assertCursorRefused(await log({ s: '-1', d: `dlv_${'0'.repeat(32)}` }), '/query/cursor', 's -1')
    const first = await log({ s: '0', d: `dlv_${'0'.repeat(32)}` })
    assert.equal(first.status, 200, first.body)
    assert.deepEqual(first.json.data, [])
  })

  test('POST /webhook-endpoint/replay {after}: crafted cursors are 422 at /after and queue nothing', async () => {
    const replay = (after: string) => t.call('POST', `/v1/clients/${C}/webhook-endpoint/replay`, { key: k.apiKey, body: { after } })
    const deliveries = async () => (await t.store.query<{ n: string }>('SELECT count(*) AS n FROM webhook_deliveries'))[0]?.n
    const before = await deliveries()
    for (const [what, cursor] of CRAFTED) assertCursorRefused(await replay(cursor), '/after', what)
    assert.equal(await deliveries(), before)
    const atBound = await replay(encodeCursor({ s: BIGINT_MAX }))
    assert.equal(atBound.status, 202, atBound.body)
    assert.deepEqual(atBound.json, { queued: 0 })
  })

  test('GET /admin/v1/audit-events?cursor= (a sequence number in decimal): 1 to the largest bigint', async () => {
    for (const cursor of ['9999999999999999999', '9223372036854775808', '0', '01', '-1', '1e3', '12345678901234567890']) {
      assertCursorRefused(await t.admin('GET', `/admin/v1/audit-events?cursor=${cursor}`), '/query/cursor', cursor)
    }
    for (const cursor of ['1', BIGINT_MAX])
      assert.equal((await t.admin('GET', `/admin/v1/audit-events?cursor=${cursor}`)).status, 200, cursor)
    assert.deepEqual((await t.admin('GET', `/admin/v1/audit-events?cursor=${BIGINT_MAX}`)).json, { data: [], nextCursor: null })
  })
})
