import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { type ProblemCode, problemCatalogue } from '../../src/domain/problems.ts'
import { problemDocs } from '../../src/http/problem-docs.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'

/** The human documentation: the API reference at /docs, a page per problem type, and the redirects to them. */
let t: TestApp

before(async () => {
  t = await startTestApp()
})
after(async () => {
  await t.close()
})

const CODES = Object.keys(problemCatalogue) as ProblemCode[]

/** What a reader sees: inline tags dropped, block tags as spaces, the entities the pages use decoded, whitespace collapsed. */
function visibleText(html: string): string {
  return html
    .replace(/<\/?(code|strong)>/g, '')
    .replace(/<[^>]*>/g, ' ')
    .replace(/&#(\d+);/g, (_, n) => String.fromCharCode(Number(n)))
    .replace(/\s+/g, ' ')
}

/** Page text as written in problem-docs.ts, without the backticks that mark code. */
const plain = (s: string) => s.replace(/`/g, '').replace(/\s+/g, ' ')

test('every problem code has its own page text, distinct cause and fix', () => {
  for (const code of CODES) {
    assert.ok(Object.hasOwn(problemDocs, code), code)
    const text = problemDocs[code]
    for (const part of ['cause', 'fix', 'retry'] as const) {
      assert.ok(text[part].length >= 25, `${code}.${part} is too short to help: ${text[part]}`)
      assert.doesNotMatch(text[part], /see the detail field/i, `${code}.${part}`)
    }
    assert.notEqual(text.cause, text.fix, code)
  }
})

test('every problem page answers 200 text/html with its title, status, cause, fix and retry advice', async () => {
  for (const code of CODES) {
    const res = await t.call('GET', `/docs/problems/${code}`)
    assert.equal(res.status, 200, code)
    assert.equal(res.headers['content-type'], 'text/html; charset=utf-8', code)
    const text = visibleText(res.body)
    const { title, status } = problemCatalogue[code]
    assert.ok(res.body.includes(`<title>${title} (${code})</title>`), `${code}: <title>`)
    assert.ok(text.includes(` ${title} `), `${code}: heading`)
    assert.ok(text.includes(`HTTP status ${status}, code ${code},`), `${code}: status and code`)
    const page = problemDocs[code]
    assert.ok(text.includes(` What causes it ${plain(page.cause)} `), `${code}: cause`)
    assert.ok(text.includes(` How to fix it ${plain(page.fix)} `), `${code}: fix`)
    assert.ok(text.includes(` Retrying the identical request ${plain(page.retry)} `), `${code}: retry`)
    assert.doesNotMatch(text, /see the detail field/i, code)
  }
})

test('page text is escaped, and backticked spans are rendered as code', async () => {
  // contact_update_unsupported's cause has an apostrophe ("Customer's") and backticked field names.
  const res = await t.call('GET', '/docs/problems/contact_update_unsupported')
  assert.ok(res.body.includes('the Customer&#39;s contacts'))
  assert.ok(res.body.includes('has no <code>externalContactId</code>'))
  assert.ok(!res.body.includes('`'))
})

test('a problem page lists the routes that can answer it, from the route table', async () => {
  const batch = await t.call('GET', '/docs/problems/batch_conflict')
  assert.ok(
    batch.body.includes(
      '<h2>Routes that answer it</h2><ul><li><code>PUT /v1/clients/{clientCode}/batches/{externalBatchId}</code></li></ul>',
    ),
  )

  const notFound = await t.call('GET', '/docs/problems/customer_not_found')
  const listed = [...notFound.body.matchAll(/<li><code>([^<]+)<\/code><\/li>/g)].map((m) => m[1])
  assert.deepEqual(listed.sort(), [
    'GET /v1/clients/{clientCode}/customers/{externalCustomerId}',
    'PATCH /v1/clients/{clientCode}/customers/{externalCustomerId}',
    'POST /admin/v1/clients/{clientCode}/customers/{externalCustomerId}/erasure',
    'POST /v1/clients/{clientCode}/customers/{externalCustomerId}/erasure',
  ])

  // A cross-cutting code names nearly every route; the list folds away behind its count.
  const apiRoutes = t.app.routes.filter((r) => r.auth.kind === 'api_key').length
  const rate = await t.call('GET', '/docs/problems/rate_limit_exceeded')
  assert.ok(rate.body.includes(`<details><summary>${apiRoutes} routes</summary>`), `expected ${apiRoutes} routes`)

  // Answered by the router, not by a route: no list.
  const route = await t.call('GET', '/docs/problems/route_not_found')
  assert.equal(route.status, 200)
  assert.ok(!route.body.includes('Routes that answer it'))
})

test('the problem index links every code; unknown codes answer 404', async () => {
  const index = await t.call('GET', '/docs/problems')
  assert.equal(index.status, 200)
  assert.equal(index.headers['content-type'], 'text/html; charset=utf-8')
  const linked = [...index.body.matchAll(/href="\/docs\/problems\/([a-z_]+)"/g)].map((m) => m[1])
  assert.deepEqual(linked, CODES)

  for (const code of ['no_such_problem', '__proto__', 'constructor', 'toString', 'MALFORMED_JSON']) {
    const res = await t.call('GET', `/docs/problems/${code}`)
    assert.equal(res.status, 404, code)
    assert.equal(res.headers['content-type'], 'text/html; charset=utf-8', code)
    assert.ok(res.body.includes('<h1>Unknown problem type</h1>'), code)
  }
})

test('/ and /docs/ redirect to /docs (302, query kept), for GET and HEAD', async () => {
  const cases: [string, string][] = [
    ['/', '/docs'],
    ['/?utm_source=readme', '/docs?utm_source=readme'],
    ['/docs/', '/docs'],
    ['/docs/?a=1&b=two', '/docs?a=1&b=two'],
    ['/docs/problems/', '/docs/problems'],
    ['/docs/problems/?x=1', '/docs/problems?x=1'],
  ]
  for (const method of ['GET', 'HEAD'] as const) {
    for (const [from, to] of cases) {
      const res = await t.call(method, from)
      assert.equal(res.status, 302, `${method} ${from}`)
      assert.equal(res.headers.location, to, `${method} ${from}`)
      assert.equal(res.body, '', `${method} ${from}`)
      assert.equal(res.headers['cache-control'], 'no-store', `${method} ${from}`)
      assert.equal(res.headers['service-api-version'], 'v1', `${method} ${from}`)
    }
  }
  // A scheme-relative-looking path cannot turn the redirect into one to another host.
  const odd = await t.call('GET', '/docs/?//evil.example/')
  assert.equal(odd.headers.location, '/docs?//evil.example/')
})

test('only GET and HEAD redirect: other methods on / are still unknown routes', async () => {
  const res = await t.call('POST', '/', { body: {} })
  assert.equal(res.status, 404)
  assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8')
  assert.equal(res.json.type, 'https://docs.irs.test/problems/route_not_found')
})

test('/docs itself answers the HTML reference page (GET and HEAD)', async () => {
  const page = await t.call('GET', '/docs')
  assert.equal(page.status, 200)
  assert.equal(page.headers['content-type'], 'text/html; charset=utf-8')
  assert.ok(page.body.includes('<title>Inbound Receivables Service API</title>'))
  assert.ok(page.body.includes("SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#ui'"))
  assert.ok(page.body.includes('<a href="/docs/problems">problem types</a>'))

  const head = await t.call('HEAD', '/docs')
  assert.equal(head.status, 200)
  assert.equal(head.headers['content-type'], 'text/html; charset=utf-8')
  assert.equal(head.body, '')
})
