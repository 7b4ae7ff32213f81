import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'

/**
 * Text the store cannot keep — U+0000 and unpaired UTF-16 surrogates, which JSON escapes can spell — is
 * refused where bodies are parsed, for every route: 422 `validation_error` with one entry per offending
 * string (`invalid_format` for a value, `invalid_key` for a member name) and its RFC 6901 pointer. Route
 * parameters and query strings (`%00`) likewise. Nothing reaches the store; nothing is stored.
 */
let t: TestApp
let k: Tenant
before(async () => {
  t = await startTestApp()
  k = await t.tenant('uni')
})
after(() => t.close())

const person = (firstName: string) => ({ type: 'person', name: { firstName, lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' })

function assertRefused(res: Response, errors: { code: string; pointer: string }[]) {
  assert.equal(res.status, 422, res.body)
  assert.equal(problemCode(res), 'validation_error')
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
  assert.deepEqual(
    res.json.errors.map((e: { code: string; pointer: string }) => ({ code: e.code, pointer: e.pointer })),
    errors,
  )
}

const BAD = { nul: 'A\u0000da', high: 'A\ud800da', low: 'A\udfffda', trailingHigh: 'Ada\udbff', reversedPair: 'A\udc00\ud800da' }

describe('customer PUT: the cases from the issue', () => {
  for (const [name, firstName] of Object.entries(BAD)) {
    test(`name.firstName with ${name}: 422 at /name/firstName; nothing stored`, async () => {
      const id = `c-${name}`
      const res = await t.call('PUT', `/v1/clients/uni/customers/${id}`, { key: k.apiKey, body: person(firstName) })
      assertRefused(res, [{ code: 'invalid_format', pointer: '/name/firstName' }])
      // The JSON of the answer is well formed (the lone surrogate is escaped, never sent raw).
      assert.equal(Buffer.from(res.body, 'utf8').toString('utf8'), res.body)
      const read = await t.call('GET', `/v1/clients/uni/customers/${id}`, { key: k.apiKey })
      assert.equal(read.status, 404)
      assert.equal(problemCode(read), 'customer_not_found')
    })
  }

  test('a valid surrogate pair (an emoji) and other non-ASCII text are stored and read back exactly', async () => {
    const firstName = 'A\u{1F600}da \u00e9\u4e2d\ufffd'
    const res = await t.call('PUT', '/v1/clients/uni/customers/c-emoji', { key: k.apiKey, body: person(firstName) })
    assert.equal(res.status, 201, res.body)
    const read = await t.call('GET', '/v1/clients/uni/customers/c-emoji', { key: k.apiKey })
    assert.equal(read.json.name.firstName, firstName)
  })

  test('a raw NUL byte inside a JSON string is not JSON: 400 malformed_json', async () => {
    const res = await t.call('PUT', '/v1/clients/uni/customers/c-raw', {
      key: k.apiKey,
      rawBody: '{"type":"person","name":{"firstName":"A\u0000da","lastName":"L"},"sourceReference":"r"}',
    })
    assert.equal(res.status, 400)
    assert.equal(problemCode(res), 'malformed_json')
  })
})

describe('member names, nested arrays, pointers', () => {
  test('a member name with NUL or a lone surrogate: invalid_key at the member, ~ and / escaped', async () => {
    const body = { ...person('Ada'), 'we\u0000ird': 1, nested: { 'a/b~c\ud800': { ok: 'x' } } }
    const res = await t.call('PUT', '/v1/clients/uni/customers/c-key', { key: k.apiKey, body })
    assertRefused(res, [
      { code: 'invalid_key', pointer: '/we\u0000ird' },
      { code: 'invalid_key', pointer: '/nested/a~1b~0c\ud800' },
    ])
    assert.equal((await t.call('GET', '/v1/clients/uni/customers/c-key', { key: k.apiKey })).status, 404)
  })

  test('strings deep in arrays of objects: every one named, in order', async () => {
    const body = {
      ...person('Ada'),
      contacts: [
        { externalContactId: 'ok', type: 'email', value: 'a@b.c' },
        { externalContactId: 'x', parts: [['fine', 'bad\u0000'], { v: '\udfff' }] },
      ],
    }
    const res = await t.call('PUT', '/v1/clients/uni/customers/c-deep', { key: k.apiKey, body })
    assertRefused(res, [
      { code: 'invalid_format', pointer: '/contacts/1/parts/0/1' },
      { code: 'invalid_format', pointer: '/contacts/1/parts/1/v' },
    ])
  })

  test('nesting deeper than the call stack is handled (no 5xx)', async () => {
    const depth = 50_000
    const rawBody = `${'['.repeat(depth)}"\\u0000"${']'.repeat(depth)}`
    const res = await t.call('PUT', '/v1/clients/uni/customers/c-nest', { key: k.apiKey, rawBody })
    assert.equal(res.status, 422, res.body.slice(0, 300))
    assert.ok(res.json.errors[0].pointer === '/0'.repeat(depth), 'the pointer names every level')
  })

  test('merge patch: the same rule', async () => {
    await t.call('PUT', '/v1/clients/uni/customers/c-patch', { key: k.apiKey, body: person('Ada') })
    const res = await t.call('PATCH', '/v1/clients/uni/customers/c-patch', { key: k.apiKey, body: { name: { firstName: 'A\ud800' } } })
    assertRefused(res, [{ code: 'invalid_format', pointer: '/name/firstName' }])
    const read = await t.call('GET', '/v1/clients/uni/customers/c-patch', { key: k.apiKey })
    assert.equal(read.json.name.firstName, 'Ada')
  })
})

describe('batch PUT: a record body is checked with the batch, before the batch is stored', () => {
  for (const [name, bad] of Object.entries({ nul: 'A\u0000da', lone: 'A\ud800da' })) {
    test(`record body with ${name}: 422 at the record's field; no batch`, async () => {
      const id = `b-${name}`
      const records = [
        { recordId: 'r1', kind: 'customer', externalId: 'bc-1', body: person('Ada') },
        { recordId: 'r2', kind: 'customer', externalId: 'bc-2', body: person(bad) },
      ]
      const res = await t.call('PUT', `/v1/clients/uni/batches/${id}`, { key: k.apiKey, body: { records } })
      assertRefused(res, [{ code: 'invalid_format', pointer: '/records/1/body/name/firstName' }])
      const read = await t.call('GET', `/v1/clients/uni/batches/${id}`, { key: k.apiKey })
      assert.equal(read.status, 404)
      assert.equal(problemCode(read), 'batch_not_found')
      const [row] = await t.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM batches WHERE client_code = 'uni'`)
      assert.equal(row?.n, 0)
    })
  }
})

describe('operator routes parse bodies the same way', () => {
  test('client PUT with a NUL in its name: 422; no client', async () => {
    const res = await t.admin('PUT', '/admin/v1/clients/uni-op', { name: 'Acme\u0000' })
    assertRefused(res, [{ code: 'invalid_format', pointer: '/name' }])
    const [row] = await t.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM clients WHERE client_code = 'uni-op'`)
    assert.equal(row?.n, 0)
  })
})

describe('route parameters and query strings', () => {
  test('%00 in a path parameter: 422 at /path/<name>, before authentication', async () => {
    const res = await t.call('GET', '/v1/clients/uni/customers/a%00b')
    assertRefused(res, [{ code: 'invalid_format', pointer: '/path/externalCustomerId' }])
  })

  test('%00 in a query parameter: 422 at /query/<name>', async () => {
    const res = await t.call('GET', '/v1/clients/uni/customers?cursor=x%00y', { key: k.apiKey })
    assertRefused(res, [{ code: 'invalid_format', pointer: '/query/cursor' }])
    const admin = await t.call('GET', '/admin/v1/audit-events?clientCode=%00', {
      headers: { authorization: 'Bearer test-operator-token-0123456789abcdef' },
    })
    assertRefused(admin, [{ code: 'invalid_format', pointer: '/query/clientCode' }])
  })

  test('a percent-encoded surrogate (%ED%A0%80) is no UTF-8: refused in a path, inert text in a query', async () => {
    const path = await t.call('GET', '/v1/clients/uni/customers/a%ED%A0%80b', { key: k.apiKey })
    assert.equal(path.status, 422, path.body)
    assert.equal(problemCode(path), 'validation_error')
    const query = await t.call('GET', '/v1/clients/uni/customers?cursor=%ED%A0%80', { key: k.apiKey })
    assert.ok(query.status >= 400 && query.status < 500, `${query.status} ${query.body}`)
  })
})
