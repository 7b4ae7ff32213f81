import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import { ADMIN_TOKEN, problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { pathParams, routeKey } from '../helpers/route-walk.ts'

/**
 * Every public write route, fed random bodies: the answer is never a 5xx, and a refused request changes no
 * stored data (a fingerprint of every table is the same before and after). Strings — member names and
 * values alike — are drawn from all of Unicode plus what the store cannot keep (U+0000, lone surrogates),
 * so a body that reaches the store with such text cannot come back unnoticed.
 */
let t: TestApp
let k: Tenant
/** A second client for the query and path fuzzers, with a webhook endpoint (so its delivery log reads its cursor). */
let q: Tenant
const TABLES = [
  'customers',
  'receivables',
  'receivable_customers',
  'financial_events',
  'payment_observations',
  'batches',
  'batch_records',
  'book_completions',
  'book_omissions',
  'balance_snapshots',
  'recovery_instructions',
  'restrictions',
  'change_events',
]
/** Every table a read or a refused request must leave as it is: the client's data, and the operator's and webhooks' tables. */
const ALL_TABLES = [
  ...TABLES,
  'clients',
  'integrations',
  'grants',
  'api_keys',
  'audit_events',
  'operator_audit_events',
  'webhook_endpoints',
  'webhook_deliveries',
]

before(async () => {
  t = await startTestApp({}, { resolver: async () => [{ address: '93.184.215.14', family: 4 }] })
  k = await t.tenant('fuzz')
  q = await t.tenant('fuzzq')
  const hook = await t.call('PUT', '/v1/clients/fuzzq/webhook-endpoint', { key: q.apiKey, body: { url: 'https://hooks.fuzz.com/x' } })
  assert.equal(hook.status, 201, hook.body)
  await t.call('PUT', '/v1/clients/fuzz/customers/cust-1', {
    key: k.apiKey,
    body: { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: 'r/1' },
  })
  await t.call('PUT', '/v1/clients/fuzz/receivables/r-1', {
    key: k.apiKey,
    body: {
      financialType: 'loan_balance',
      sourceRevision: 1,
      recoverableAmount: { amount: '10.00', currency: 'USD' },
      creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
      dueDate: '2026-01-01',
      responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'primary' }],
      sourceReference: 'r/1',
    },
  })
  // A Payment request of fuzzq, whose refunds list the query fuzzers read (and its Receivable, whose timeline).
  await payableReceivable(t, q, 'fuzz-r')
  const request = await t.call('PUT', '/v1/clients/fuzzq/payment-requests/fuzz-pr', {
    key: q.apiKey,
    body: { externalReceivableId: 'fuzz-r', amount: { amount: '1.00', currency: 'USD' } },
  })
  assert.equal(request.status, 201, request.body)
})
after(() => t.close())

async function fingerprint(tables: readonly string[] = TABLES): Promise<string> {
  const parts: string[] = []
  for (const table of tables) {
    const [row] = await t.store.query<{ h: string | null }>(`SELECT md5(string_agg(x::text, ',' ORDER BY x::text)) AS h FROM ${table} x`)
    parts.push(`${table}:${row?.h ?? 'empty'}`)
  }
  return parts.join('|')
}

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c))
/** One UTF-16 unit of hostile text: any code point (fast-check's 'binary' leaves out lone surrogates), NUL, or a lone surrogate. */
const hostileUnit = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: fc.constant('\u0000') },
  { weight: 1, arbitrary: loneSurrogate },
)
const hostileText = fc.string({ unit: hostileUnit, maxLength: 12 })
/** Text the store cannot keep, for sure: hostile text around a NUL or a lone surrogate. */
const unstorableText = fc
  .tuple(
    fc.string({ unit: hostileUnit, maxLength: 4 }),
    fc.oneof(fc.constant('\u0000'), loneSurrogate),
    fc.string({ unit: hostileUnit, maxLength: 4 }),
  )
  // The 'x's keep the bad unit from pairing with a neighbour into a valid surrogate pair.
  .map(([a, bad, b]) => `${a}x${bad}x${b}`)
const isStorable = (x: string) => !x.includes('\u0000') && !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(x)

/** Every member name and string value, at any depth, can be stored. */
function allStorable(v: unknown): boolean {
  if (typeof v === 'string') return isStorable(v)
  if (Array.isArray(v)) return v.every(allStorable)
  if (v !== null && typeof v === 'object') return Object.entries(v).every(([key, value]) => isStorable(key) && allStorable(value))
  return true
}

const writeRoutes = () =>
  t.app.routes
    .filter((r) => r.public && r.body)
    .map((r) => ({
      method: r.method,
      path: r.path.replace(':clientCode', 'fuzz').replace(/:[A-Za-z]+/g, (p) => (p === ':externalReceivableId' ? 'r-1' : 'fz-1')),
    }))

test('random bodies to every write route: never a 5xx; a refusal changes nothing', async () => {
  const routes = writeRoutes()
  assert.ok(routes.length >= 15, `${routes.length} write routes`)
  const hostile = { key: hostileText, stringUnit: hostileUnit }
  const body = fc.oneof(
    fc.anything(hostile),
    fc.object(hostile),
    fc.dictionary(
      fc.oneof(
        fc.constantFrom('type', 'amount', 'records', 'scope', 'state', 'revision', 'balances', 'effectiveAt', 'reason', 'batches'),
        hostileText,
      ),
      fc.anything(hostile),
    ),
  )
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...routes), body, async (route, b) => {
      const before = await fingerprint()
      const res = await t.call(route.method, route.path, { key: k.apiKey, rawBody: JSON.stringify(b) ?? 'null' })
      assert.ok(res.status < 500, `${route.method} ${route.path}: ${res.status} ${res.body}`)
      if (res.status >= 400) assert.equal(await fingerprint(), before, `${route.method} ${route.path} changed data on ${res.status}`)
    }),
    { numRuns: 300 },
  )
})

test('valid bodies with hostile text in their fields: stored exactly when storable, else 422 at the field and nothing changed', async () => {
  let refused = 0
  let stored = 0
  // Weighted so that both outcomes come up often: about a quarter of the bodies hold only storable text.
  const customer = fc.record({
    firstName: fc.oneof(
      { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }) },
      { weight: 2, arbitrary: hostileText },
      { weight: 1, arbitrary: unstorableText },
    ),
    lastName: fc.oneof({ weight: 3, arbitrary: fc.constant('Lovelace') }, { weight: 1, arbitrary: unstorableText }),
    extraKey: fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: unstorableText }),
  })
  await fc.assert(
    fc.asyncProperty(customer, fc.integer({ min: 1, max: 1_000_000 }), async (c, n) => {
      const body: Record<string, unknown> = {
        type: 'person',
        name: { firstName: c.firstName, lastName: c.lastName },
        sourceReference: 'r/1',
      }
      if (c.extraKey !== undefined) body[c.extraKey] = 'x'
      const before = await fingerprint()
      const url = `/v1/clients/fuzz/customers/fz-text-${n}`
      const res = await t.call('PUT', url, { key: k.apiKey, body })
      assert.ok(res.status < 500, `${res.status} ${res.body}`)
      const expected: { code: string; pointer: string }[] = []
      if (c.extraKey !== undefined)
        expected.push({ code: 'invalid_key', pointer: `/${c.extraKey.replace(/~/g, '~0').replace(/\//g, '~1')}` })
      if (!isStorable(c.firstName)) expected.push({ code: 'invalid_format', pointer: '/name/firstName' })
      if (!isStorable(c.lastName)) expected.push({ code: 'invalid_format', pointer: '/name/lastName' })
      if (expected.length > 0) {
        refused++
        assert.equal(res.status, 422, res.body)
        const got = res.json.errors.map((e: { code: string; pointer: string }) => ({ code: e.code, pointer: e.pointer }))
        assert.deepEqual(new Set(got.map((e: object) => JSON.stringify(e))), new Set(expected.map((e) => JSON.stringify(e))))
        assert.equal(await fingerprint(), before)
      } else if (res.status < 300) {
        stored++
        const read = await t.call('GET', url, { key: k.apiKey })
        assert.equal(read.json.name.firstName, c.firstName)
      }
    }),
    { numRuns: 150 },
  )
  assert.ok(refused > 0 && stored > 0, `refused ${refused}, stored ${stored}`)
})

test('batches whose record bodies hold hostile text (a batch body is stored before its records run): never a 5xx', async () => {
  const hostile = { key: hostileText, stringUnit: hostileUnit, maxDepth: 3 }
  const record = fc.record({
    recordId: fc.constantFrom('r1'),
    kind: fc.constantFrom('customer', 'receivable', 'payment_observation'),
    externalId: fc.constantFrom('fz-b-1'),
    body: fc.dictionary(hostileText, fc.anything(hostile), { maxKeys: 4 }),
  })
  let n = 0
  await fc.assert(
    fc.asyncProperty(record, async (r) => {
      const before = await fingerprint()
      // What is actually sent (JSON drops undefined members).
      const sent = JSON.stringify({ records: [r] })
      const res = await t.call('PUT', `/v1/clients/fuzz/batches/fz-batch-${++n}`, { key: k.apiKey, rawBody: sent })
      assert.ok(res.status < 500, `${res.status} ${res.body}`)
      if (/"(__proto__|constructor)"/.test(sent) && res.status === 400) {
        // secure-json-parse refuses prototype poisoning before anything else looks at the body.
        assert.equal(problemCode(res), 'malformed_json')
        assert.equal(await fingerprint(), before)
      } else if (!allStorable(JSON.parse(sent))) {
        assert.equal(res.status, 422, res.body)
        assert.equal(await fingerprint(), before)
      } else {
        assert.equal(res.status, 202, res.body)
      }
    }),
    { numRuns: 100 },
  )
})

/**
 * Text as it goes into a URL, every character but `A-Za-z0-9_-` percent-encoded as UTF-8 bytes; a lone surrogate as
 * the three bytes of its (ill-formed) UTF-8 spelling, which no decoder may accept as text.
 */
function pctEncode(text: string): string {
  let out = ''
  for (const ch of text) {
    if (/^[A-Za-z0-9_-]$/.test(ch)) out += ch
    else {
      const c = ch.codePointAt(0) as number
      const bytes =
        c >= 0xd800 && c <= 0xdfff ? [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)] : [...Buffer.from(ch, 'utf8')]
      out += bytes.map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('')
    }
  }
  return out
}
const pctBytes = (bytes: Uint8Array) => [...bytes].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('')

/** JSON a cursor could carry: the shapes the lists use, with values of every kind, and anything at all. */
const cursorJson = fc.oneof(
  fc.record({
    s: fc.oneof(
      fc.bigInt({ min: -(10n ** 25n), max: 10n ** 25n }).map(String),
      fc.constantFrom('9223372036854775807', '9223372036854775808', '9999999999999999999', '-1', '01', '1e3', ' 1', '0x10'),
      fc.anything({ stringUnit: hostileUnit }),
    ),
  }),
  fc.record({ after: fc.oneof(hostileText, fc.tuple(hostileText, hostileText), fc.anything({ stringUnit: hostileUnit })) }),
  fc.record({
    after: fc.tuple(
      fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
      hostileText,
    ),
  }),
  fc.anything({ key: hostileText, stringUnit: hostileUnit }),
)
/** A query value as sent (already URL-encoded): what a client can put in a query string. */
const queryValue = fc.oneof(
  fc.constantFrom('', '0', '1', '200', '201', '-1', '1.5', '1e2', '1e400', 'NaN', 'Infinity', '-0', '0x10', '9223372036854775807'),
  fc.constantFrom('9223372036854775808', '9999999999999999999', '%00', '%ED%A0%80', '%FF', '%C0%80', '%', '%G0', '+', 'active'),
  fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }).map(String),
  fc.double().map(String),
  hostileText.map(pctEncode),
  fc.uint8Array({ minLength: 1, maxLength: 12 }).map(pctBytes),
  fc.integer({ min: 100, max: 5000 }).map((n) => 'A'.repeat(n)),
  cursorJson.map((v) => (v === undefined ? '' : Buffer.from(JSON.stringify(v)).toString('base64url'))),
)

/** The URL of a route, its parameters naming the query fuzzer's client and integration. */
const queryRouteUrl = (path: string) =>
  path.replace(/:([A-Za-z]+)/g, (_, p: string) => {
    if (p === 'clientCode') return 'fuzzq'
    if (p === 'integrationId') return 'int-fuzzq'
    if (p === 'externalPaymentRequestId') return 'fuzz-pr'
    if (p === 'externalReceivableId') return 'fuzz-r'
    throw new Error(`${path}: no value for :${p}`)
  })

const headersFor = (route: { auth: { kind: string } }) =>
  route.auth.kind === 'admin' ? { authorization: `Bearer ${ADMIN_TOKEN}` } : { authorization: `Bearer ${q.apiKey}` }

function assertFieldProblem(res: Response, prefix: '/query' | '/path', what: string) {
  assert.equal(res.status, 422, `${what}: ${res.status} ${res.body}`)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/, what)
  assert.equal(problemCode(res), 'validation_error', what)
  assert.ok(Array.isArray(res.json.errors) && res.json.errors.length > 0, `${what}: no field error`)
  for (const e of res.json.errors as { pointer: string }[])
    assert.ok(e.pointer === prefix || e.pointer.startsWith(`${prefix}/`), `${what}: ${e.pointer}`)
}

test('random query strings to every route with query parameters: 200, or 422 with a field error under /query; nothing changes', async () => {
  // The reads: a DELETE's query (the provider's `force`) acts on what exists, tested with its route.
  const routes = t.app.routes
    .filter((r) => r.query && r.method === 'GET')
    .map((r) => ({ route: r, names: Object.keys((r.query as unknown as { shape: Record<string, unknown> }).shape) }))
  assert.ok(routes.length >= 10, `${routes.length} routes with query parameters`)
  const seen = new Set<string>()
  let refused = 0
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...routes.keys()),
      fc.array(fc.tuple(fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: hostileText }), queryValue), {
        minLength: 1,
        maxLength: 4,
      }),
      fc.nat(),
      async (i, pairs, pick) => {
        const { route, names } = routes[i] as (typeof routes)[number]
        // Mostly the route's own parameter names (repeats included), sometimes a name it does not know.
        const query = pairs
          .map(([name, value], i) => `${name === null ? (names[(pick + i) % names.length] as string) : pctEncode(name)}=${value}`)
          .join('&')
        const url = `${queryRouteUrl(route.path)}?${query}`
        const before = await fingerprint(ALL_TABLES)
        const res = await t.call('GET', url, { headers: headersFor(route) })
        seen.add(routeKey(route))
        if (res.status !== 200) {
          refused++
          assertFieldProblem(res, '/query', `GET ${url}`)
        }
        assert.equal(await fingerprint(ALL_TABLES), before, `GET ${url} changed data`)
      },
    ),
    { numRuns: 400 },
  )
  assert.ok(refused > 0, 'some query strings were refused')
  assert.equal(seen.size, routes.length, 'every route with query parameters was called')
})

test('crafted cursors (out-of-range numbers, NUL, wrong types, any JSON) on every cursor parameter and in replay: 422 at its pointer', async () => {
  const cursorRoutes = t.app.routes
    .filter((r) => r.query)
    .flatMap((r) =>
      Object.keys((r.query as unknown as { shape: Record<string, unknown> }).shape)
        .filter((n) => n === 'cursor' || n === 'after')
        .map((name) => ({ route: r, name })),
    )
  assert.equal(cursorRoutes.length, 21, cursorRoutes.map((c) => routeKey(c.route)).join(', '))
  // A crafted cursor no list ever returns: the shapes with values out of every column's range or of the wrong type.
  const crafted = fc.oneof(
    fc.record({ s: fc.oneof(fc.bigInt({ min: 9223372036854775808n, max: 10n ** 30n }).map(String), fc.bigInt({ max: -1n }).map(String)) }),
    fc.record({ s: fc.oneof(fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(fc.nat())) }),
    fc.record({ after: unstorableText }),
    fc.record({ after: fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.dictionary(hostileText, fc.nat())) }),
    fc.record({ after: fc.tuple(fc.constant('0000-01-01T00:00:00.000Z'), fc.constant(`ak_${'A'.repeat(24)}`)) }),
    fc.record({ s: fc.constant('1'), after: fc.constant('a'), extra: fc.anything() }),
  )
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...cursorRoutes.keys()), crafted, async (i, value) => {
      const { route, name } = cursorRoutes[i] as (typeof cursorRoutes)[number]
      // Named by no list: the change feed (and the replay) still read such a cursor as a position, so there the value is judged.
      const cursor = Buffer.from(JSON.stringify(value)).toString('base64url')
      // The operator audit list's cursor is a sequence number in decimal, not base64url JSON.
      const s = (value as { s?: unknown }).s
      const sent = route.path === '/admin/v1/audit-events' && typeof s === 'string' && Object.keys(value).length === 1 ? s : cursor
      const url = `${queryRouteUrl(route.path)}?${name}=${encodeURIComponent(sent)}`
      const res = await t.call('GET', url, { headers: headersFor(route) })
      assertFieldProblem(res, '/query', `GET ${url}`)
      assert.deepEqual(
        res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer]),
        [['invalid_format', `/query/${name}`]],
        url,
      )
      const replay = await t.call('POST', '/v1/clients/fuzzq/webhook-endpoint/replay', { key: q.apiKey, body: { after: cursor } })
      assert.deepEqual([replay.status, replay.json.errors?.map((e: { pointer: string }) => e.pointer)], [422, ['/after']], replay.body)
    }),
    { numRuns: 200 },
  )
})

test('hostile path parameters on every route: 422 at /path before authentication, whatever the value', async () => {
  const routes = t.app.routes.filter((r) => pathParams(r.path).length > 0)
  assert.ok(routes.length >= 40, `${routes.length} routes with path parameters`)
  const ID = /^[A-Za-z0-9_-]{1,128}$/
  const segment = fc
    .oneof(
      hostileText.filter((s) => s.length > 0 && !ID.test(s)).map(pctEncode),
      unstorableText.map(pctEncode),
      fc
        .uint8Array({ minLength: 1, maxLength: 12 })
        .filter((b) => [...b].some((x) => !/[A-Za-z0-9_-]/.test(String.fromCharCode(x))))
        .map(pctBytes),
      fc.integer({ min: 129, max: 700 }).map((n) => 'a'.repeat(n)),
      fc.constantFrom('bad.id', 'a%2Fb', 'a%00', '%ED%A0%80', '%', '%ZZ', 'a%20b', '%2E%2E%2E'),
      // A whole segment `.` or `..` (in any spelling) is a dot segment: URL parsing removes it, so the path is another
      // path (404 route_not_found), not a parameter value.
    )
    .filter((v) => !/^(\.|%2E){1,2}$/i.test(v))
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...routes.map(routeKey)), fc.nat(), segment, async (key, pick, value) => {
      const route = routes.find((r) => routeKey(r) === key) as (typeof routes)[number]
      const params = pathParams(route.path)
      const target = params[pick % params.length] as string
      const url = route.path.replace(/:([A-Za-z]+)/g, (_, p: string) => (p === target ? value : p === 'clientCode' ? 'fuzzq' : 'fz-1'))
      const before = await fingerprint(ALL_TABLES)
      // No credentials: route parameters are judged before authentication (spec, endpoint rule 12).
      const res = await t.call(route.method, url, route.body ? { body: {} } : {})
      assertFieldProblem(res, '/path', `${route.method} ${url}`)
      assert.equal(await fingerprint(ALL_TABLES), before, `${route.method} ${url} changed data`)
    }),
    { numRuns: 300 },
  )
})

test('/docs renders the OpenAPI document for people; every problem type has a page', async () => {
  const page = await t.call('GET', '/docs')
  assert.equal(page.status, 200)
  assert.match(String(page.headers['content-type']), /^text\/html/)
  assert.match(page.body, /url: '\/v1\/openapi\.json'/)
  for (const asset of ['swagger-ui.css', 'swagger-ui-bundle.js']) {
    const res = await t.call('GET', `/docs/assets/${asset}`)
    assert.equal(res.status, 200, asset)
    assert.ok(res.body.length > 10_000, asset)
  }
  assert.equal((await t.call('GET', '/docs/assets/package.json')).status, 404)
  const { problemCatalogue } = await import('../../src/domain/problems.ts')
  for (const [code, p] of Object.entries(problemCatalogue)) {
    const res = await t.call('GET', `/docs/problems/${code}`)
    assert.equal(res.status, 200, code)
    assert.ok(res.body.includes(`<code>${code}</code>`) && res.body.includes(String(p.status)), code)
  }
  assert.equal((await t.call('GET', '/docs/problems/no_such_problem')).status, 404)
})
