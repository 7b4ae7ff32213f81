import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'

/**
 * Every public write route, fed random bodies: the answer is never a 5xx, and a refused request changes no
 * stored data (a fingerprint of every table is the same before and after).
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
  const body = fc.oneof(
    fc.anything(),
    fc.object(),
    fc.dictionary(
      fc.constantFrom('type', 'amount', 'records', 'scope', 'state', 'revision', 'balances', 'effectiveAt', 'reason', 'batches'),
      fc.anything(),
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
