import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'

/**
 * Every public write route, fed random bodies: the answer is never a 5xx, and a refused request changes no
 * stored data (a fingerprint of every table is the same before and after). Strings — member names and
 * values alike — are drawn from all of Unicode plus what the store cannot keep (U+0000, lone surrogates),
 * so a body that reaches the store with such text cannot come back unnoticed.
 */
let t: TestApp
let k: Tenant
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

before(async () => {
  t = await startTestApp()
  k = await t.tenant('fuzz')
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
})
after(() => t.close())

async function fingerprint(): Promise<string> {
  const parts: string[] = []
  for (const table of TABLES) {
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
