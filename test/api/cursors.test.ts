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
  /** The list's name, as its cursors carry it (src/domain/cursor.ts). */
  list: string
  url: (cursor: string) => string
  pointer: string
  /** A cursor of this list's shape at its bound (the end its order runs to): accepted, and an empty page. */
  boundary: string
}

const apiKeyAt = (ts: string) => ({ after: [ts, `ak_${'A'.repeat(24)}`] })
/** A newest-first list's cursor: a creation time in microseconds and an identifier (src/domain/cursor.ts). */
const newestAt = (ts: string) => ({ after: [ts, 'z'.repeat(128)] })
/** A cursor's JSON as written, naming no list (as every cursor did before issue 33). */
const unnamed = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
const NEWEST_FIRST = (
  [
    ['payment-requests', 'payment-requests'],
    ['recovery-instructions', 'recovery-instructions'],
    ['payment-reconciliations', 'payment-reconciliations'],
    ['adjustments', 'financial-events/adjustment'],
    ['credit-notes', 'financial-events/credit_note'],
    ['write-offs', 'financial-events/write_off'],
    ['payment-observations', 'payment-observations'],
    ['batches', 'batches'],
  ] as const
).map(
  ([segment, list]): CursorRoute => ({
    route: `GET /v1/clients/:clientCode/${segment}`,
    list,
    url: (c) => `/v1/clients/${C}/${segment}?cursor=${c}`,
    pointer: '/query/cursor',
    // Newest first: the page before the earliest instant PostgreSQL and the cursor both keep is empty.
    boundary: encodeCursor(list, newestAt('0001-01-01T00:00:00.000000Z')),
  }),
)
const LISTS: CursorRoute[] = [
  ...NEWEST_FIRST,
  {
    route: 'GET /v1/clients/:clientCode/customers',
    list: 'customers',
    url: (c) => `/v1/clients/${C}/customers?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor('customers', { after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /v1/clients/:clientCode/receivables',
    list: 'receivables',
    url: (c) => `/v1/clients/${C}/receivables?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor('receivables', { after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /v1/clients/:clientCode/payment-requests/:externalPaymentRequestId/refunds',
    list: 'refunds',
    url: (c) => `/v1/clients/${C}/payment-requests/cur-pr/refunds?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor('refunds', { after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /v1/clients/:clientCode/changes',
    list: 'changes',
    url: (c) => `/v1/clients/${C}/changes?after=${c}`,
    pointer: '/query/after',
    boundary: encodeCursor('changes', { s: BIGINT_MAX }),
  },
  {
    route: 'GET /v1/clients/:clientCode/webhook-endpoint/deliveries',
    list: 'webhook-deliveries',
    url: (c) => `/v1/clients/${C}/webhook-endpoint/deliveries?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor('webhook-deliveries', { s: BIGINT_MAX, d: `dlv_${'f'.repeat(32)}` }),
  },
  {
    route: 'GET /admin/v1/clients',
    list: 'admin/clients',
    url: (c) => `/admin/v1/clients?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor('admin/clients', { after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /admin/v1/integrations',
    list: 'admin/integrations',
    url: (c) => `/admin/v1/integrations?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor('admin/integrations', { after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /admin/v1/integrations/:integrationId/grants',
    list: 'admin/grants-of-integration',
    url: (c) => `/admin/v1/integrations/int-${C}/grants?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor('admin/grants-of-integration', { after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /admin/v1/clients/:clientCode/grants',
    list: 'admin/grants-of-client',
    url: (c) => `/admin/v1/clients/${C}/grants?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor('admin/grants-of-client', { after: 'z'.repeat(128) }),
  },
  {
    route: 'GET /admin/v1/integrations/:integrationId/api-keys',
    list: 'admin/api-keys',
    url: (c) => `/admin/v1/integrations/int-${C}/api-keys?cursor=${c}`,
    pointer: '/query/cursor',
    boundary: encodeCursor('admin/api-keys', apiKeyAt('9999-12-31T23:59:59.999Z')),
  },
]

/** Cursors no list returns, each of which reached the store before (503) or is another list's shape. */
const NOT_JSON = Symbol('not JSON')
const CRAFTED: [string, unknown][] = [
  ['the issue\'s cursor, {"s":"9999999999999999999"}', { s: '9999999999999999999' }],
  ['a sequence number one beyond bigint', { s: '9223372036854775808' }],
  ['a negative sequence number', { s: '-1' }],
  ['a sequence number as a JSON number', { s: 1 }],
  ['a sequence number with a leading zero', { s: '01' }],
  ['a sequence number in exponent form', { s: '1e3' }],
  ['an identifier holding NUL', { after: 'a\u0000b' }],
  ['an identifier holding a lone surrogate', { after: 'a\ud800b' }],
  ['an identifier too long for any column', { after: 'a'.repeat(129) }],
  ['an identifier as a number', { after: 123 }],
  ['a key cursor in year 0 (no PostgreSQL timestamp)', apiKeyAt('0000-01-01T00:00:00Z')],
  ['a key cursor with a calendar-invalid time', apiKeyAt('2026-02-30T00:00:00Z')],
  ['a cursor with an extra member', { s: '1', after: 'a', x: 1 }],
  ['a newest-first cursor in year 0', newestAt('0000-01-01T00:00:00.000000Z')],
  ['a newest-first cursor with a calendar-invalid time', newestAt('2026-02-30T00:00:00.000000Z')],
  ['a newest-first cursor with milliseconds only', newestAt('2026-01-01T00:00:00.000Z')],
  ['a newest-first cursor with an offset', newestAt('2026-01-01T00:00:00.000000+01:00')],
  ['a newest-first cursor whose identifier holds NUL', { after: ['2026-01-01T00:00:00.000000Z', 'a\u0000b'] }],
  ['a newest-first cursor with a third member', { after: ['2026-01-01T00:00:00.000000Z', 'a', 'b'] }],
  ['JSON null', null],
  ['a JSON array', [1, 2]],
  ['base64url of text that is not JSON', NOT_JSON],
]

/** A crafted value as list `list`'s cursor: named by the list, so what is checked is the value itself. */
function crafted(list: string, value: unknown): string {
  if (value === NOT_JSON) return Buffer.from('{"s":').toString('base64url')
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return unnamed(value)
  return encodeCursor(list, value as Record<string, unknown>)
}

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
      for (const [what, value] of CRAFTED) {
        // Each list's own shape at its bound is accepted below; everything crafted here is refused by every list,
        // named by the list itself, so the value is what is judged.
        assertCursorRefused(await call(crafted(list.list, value)), list.pointer, what)
      }
      const ok = await call(list.boundary)
      assert.equal(ok.status, 200, ok.body)
      assert.deepEqual(ok.json.data, [])
    })
  }

  test("the change feed: from 0 (an empty feed's cursor) to the largest bigint", async () => {
    for (const s of ['0', '1', BIGINT_MAX]) {
      const res = await t.call('GET', `/v1/clients/${C}/changes?after=${encodeCursor('changes', { s })}`, { key: k.apiKey })
      assert.equal(res.status, 200, `${s}: ${res.body}`)
      // A position kept from before cursors named their list still reads (integrators keep the feed's for good).
      const kept = await t.call('GET', `/v1/clients/${C}/changes?after=${unnamed({ s })}`, { key: k.apiKey })
      assert.equal(kept.status, 200, `${s}: ${kept.body}`)
    }
  })

  test('the delivery log: a cursor is a sequence number with the delivery id it was taken at', async () => {
    const log = (cursor: Record<string, unknown>) =>
      t.call('GET', `/v1/clients/${C}/webhook-endpoint/deliveries?cursor=${encodeCursor('webhook-deliveries', cursor)}`, {
        key: k.apiKey,
      })
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
    for (const [what, value] of CRAFTED) assertCursorRefused(await replay(crafted('changes', value)), '/after', what)
    // Another list's cursor is no position in the feed.
    for (const list of LISTS.filter((l) => l.list !== 'changes')) assertCursorRefused(await replay(list.boundary), '/after', list.list)
    assert.equal(await deliveries(), before)
    const atBound = await replay(encodeCursor('changes', { s: BIGINT_MAX }))
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

/** A GET of `list` with `cursor` (and `query` before it), as the list's caller. */
const callList = (list: CursorRoute, cursor: string, query = '') => {
  const url = list.url(cursor).replace('?', `?${query}`)
  return list.route.startsWith('GET /admin/') ? t.admin('GET', url) : t.call('GET', url, { key: k.apiKey })
}

describe(`issue 33 item 6: a cursor names its list; another list's cursor is 422 (${engineName})`, () => {
  test('every list has a name of its own', () => {
    assert.equal(new Set(LISTS.map((l) => l.list)).size, LISTS.length)
  })

  test("every list refuses every other list's cursor (each accepted by its own list), and a cursor that names no list", async () => {
    for (const list of LISTS) {
      for (const other of LISTS) {
        if (other === list) continue
        assertCursorRefused(await callList(list, other.boundary), list.pointer, `${other.list}'s cursor on ${list.list}`)
      }
      // The same value without a list name: refused, except by the change feed (positions kept from before).
      const value = JSON.parse(Buffer.from(list.boundary, 'base64url').toString('utf8'))
      delete value.l
      const res = await callList(list, unnamed(value))
      if (list.list === 'changes') assert.equal(res.status, 200, res.body)
      else assertCursorRefused(res, list.pointer, `${list.list} unnamed`)
    }
  })

  test("a real next page's cursor of Payment requests is refused by the seven other newest-first lists", async () => {
    const second = await t.call('PUT', `/v1/clients/${C}/payment-requests/cur-pr-2`, {
      key: k.apiKey,
      body: { externalReceivableId: 'cur-r', amount: { amount: '1.00', currency: 'USD' } },
    })
    assert.ok(second.status === 201 || second.status === 200, second.body)
    const first = await t.call('GET', `/v1/clients/${C}/payment-requests?limit=1`, { key: k.apiKey })
    assert.equal(first.status, 200, first.body)
    const next = first.json.nextCursor as string
    assert.equal(typeof next, 'string')
    const own = await t.call('GET', `/v1/clients/${C}/payment-requests?limit=1&cursor=${next}`, { key: k.apiKey })
    assert.equal(own.status, 200, own.body)
    assert.equal(own.json.data.length, 1)
    for (const list of LISTS.filter((l) => l.list !== 'payment-requests')) {
      assertCursorRefused(await callList(list, next), list.pointer, list.route)
    }
  })
})

describe(`issue 33 item 6: limit is 1 to 200 in decimal digits on every list (${engineName})`, () => {
  test('every list route with a limit is one of those checked here', () => {
    const withLimit = t.app.routes
      .filter((r) => 'limit' in ((r.query as { shape?: Record<string, unknown> } | undefined)?.shape ?? {}))
      .map(routeKey)
      .sort()
    assert.deepEqual(withLimit, [...LISTS.map((l) => l.route), 'GET /admin/v1/audit-events'].sort())
  })

  /** Every other spelling (what Number() or a lenient parser also reads) is refused with the code it always had. */
  const REFUSED: [string, string][] = [
    ['0x10', 'invalid_type'],
    ['1e2', 'invalid_type'],
    ['%205', 'invalid_type'],
    ['5%20', 'invalid_type'],
    ['%2B5', 'invalid_type'],
    ['-5', 'invalid_type'],
    ['05', 'invalid_type'],
    ['5.0', 'invalid_type'],
    ['1.5', 'invalid_type'],
    ['0b11', 'invalid_type'],
    ['Infinity', 'invalid_type'],
    ['', 'invalid_type'],
    ['%EF%BC%95', 'invalid_type'],
    ['5&limit=6', 'invalid_type'],
    ['0', 'too_small'],
    ['201', 'too_big'],
    ['99999999999999999999999', 'too_big'],
  ]
  const audit: CursorRoute = {
    route: 'GET /admin/v1/audit-events',
    list: 'admin/audit-events',
    url: () => '/admin/v1/audit-events?',
    pointer: '/query/cursor',
    boundary: '',
  }
  for (const list of [...LISTS, audit]) {
    test(list.route, async () => {
      const url = (limit: string) => list.url(list.boundary).replace('?', `?limit=${limit}&`)
      const call = (limit: string) =>
        list.route.startsWith('GET /admin/') ? t.admin('GET', url(limit)) : t.call('GET', url(limit), { key: k.apiKey })
      for (const [limit, code] of REFUSED) {
        const res = await call(limit)
        assert.equal(res.status, 422, `${limit}: ${res.body}`)
        assert.deepEqual(
          res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer]),
          [[code, '/query/limit']],
          `limit=${limit}`,
        )
      }
      assert.equal(
        (await call('%205')).json.errors[0].detail,
        'must be a whole number from 1 to 200 in decimal digits, such as 50 (no sign, space, leading zero, exponent or hex)',
      )
      for (const limit of ['1', '50', '200']) assert.equal((await call(limit)).status, 200, `limit=${limit}`)
    })
  }
})
