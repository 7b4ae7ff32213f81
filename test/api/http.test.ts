import assert from 'node:assert/strict'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const customer = { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' }

let t: TestApp
let a: Tenant
let b: Tenant
before(async () => {
  t = await startTestApp()
  a = await t.tenant('client-a')
  b = await t.tenant('client-b')
})
after(() => t.close())

function assertCommonHeaders(res: Response) {
  assert.equal(res.headers['cache-control'], 'no-store')
  assert.equal(res.headers['service-api-version'], 'v1')
  assert.match(String(res.headers['x-request-id']), UUID)
}

function assertProblem(res: Response, status: number, code: string) {
  assert.equal(res.status, status, res.body)
  assertCommonHeaders(res)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
  assert.equal(problemCode(res), code)
  assert.equal(res.json.status, status)
  assert.equal(typeof res.json.title, 'string')
  assert.equal(typeof res.json.detail, 'string')
  assert.equal(res.json.requestId, res.headers['x-request-id'])
}

describe('headers and problem documents', () => {
  test('a success carries the three headers, and each request gets its own UUID', async () => {
    const one = await t.call('PUT', '/v1/clients/client-a/customers/c-1', { key: a.apiKey, body: customer })
    const two = await t.call('GET', '/v1/clients/client-a/customers/c-1', { key: a.apiKey })
    assert.equal(one.status, 201)
    assertCommonHeaders(one)
    assertCommonHeaders(two)
    assert.notEqual(one.headers['x-request-id'], two.headers['x-request-id'])
  })

  test('an unknown route is a 404 problem, a known path with another method a 405 with Allow', async () => {
    assertProblem(await t.call('GET', '/v1/nothing-here'), 404, 'route_not_found')
    const res = await t.call('DELETE', '/v1/clients/client-a/customers/c-1', { key: a.apiKey })
    assertProblem(res, 405, 'method_not_allowed')
    assert.equal(res.headers.allow, 'PUT, PATCH, GET, HEAD')
  })

  test('health, readiness and the OpenAPI document need no key and carry the headers', async () => {
    for (const url of ['/healthz', '/readyz', '/v1/openapi.json']) {
      const res = await t.call('GET', url)
      assert.equal(res.status, 200, url)
      assertCommonHeaders(res)
    }
  })
})

describe('route parameters are validated before authentication', () => {
  for (const [what, url, pointer, code] of [
    ['bad client code', '/v1/clients/bad%20code/customers/c-1', '/path/clientCode', 'invalid_format'],
    ['client code over 128', `/v1/clients/${'x'.repeat(129)}/customers/c-1`, '/path/clientCode', 'invalid_format'],
    ['path segment over the router limit', `/v1/clients/${'y'.repeat(600)}/customers/c-1`, '/path', 'invalid_format'],
    ['undecodable path segment', '/v1/clients/%E0%A4%A/customers/c-1', '/path', 'invalid_format'],
    ['customer id with a 9-digit run', '/v1/clients/client-a/customers/123456789', '/path/externalCustomerId', 'sensitive_external_id'],
    [
      'customer id that is an IBAN',
      '/v1/clients/client-a/customers/GB82WEST12345698765432',
      '/path/externalCustomerId',
      'sensitive_external_id',
    ],
  ] as const) {
    test(`${what}: 422 with no Authorization header`, async () => {
      const res = await t.call('GET', url)
      assertProblem(res, 422, 'validation_error')
      assert.deepEqual(
        res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer]),
        [[code, pointer]],
      )
    })
  }
})

describe('401 invalid_api_key', () => {
  const url = '/v1/clients/client-a/customers/c-1'
  test('missing, non-Bearer, malformed and unknown keys', async () => {
    assertProblem(await t.call('GET', url), 401, 'invalid_api_key')
    assertProblem(await t.call('GET', url, { headers: { authorization: `Basic ${a.apiKey}` } }), 401, 'invalid_api_key')
    assertProblem(await t.call('GET', url, { key: 'irk_sandbox_short' }), 401, 'invalid_api_key')
    assertProblem(await t.call('GET', url, { key: `irk_sandbox_${'A'.repeat(40)}` }), 401, 'invalid_api_key')
  })

  test('a key of the other environment is refused even if it were stored', async () => {
    const other = a.apiKey.replace('irk_sandbox_', 'irk_production_')
    assertProblem(await t.call('GET', url, { key: other }), 401, 'invalid_api_key')
    const prod = await startTestApp({ SERVICE_ENVIRONMENT: 'production' }, { db: t.db })
    try {
      const issued = await prod.admin('POST', `/admin/v1/integrations/${a.integrationId}/api-keys`, {})
      assert.match(issued.json.apiKey, /^irk_production_[A-Za-z0-9]{40}$/)
      assertProblem(await t.call('GET', url, { key: issued.json.apiKey }), 401, 'invalid_api_key')
      assert.equal((await prod.call('GET', url, { key: issued.json.apiKey })).status, 200)
      assertProblem(await prod.call('GET', url, { key: a.apiKey }), 401, 'invalid_api_key')
    } finally {
      await prod.app.app.close()
    }
  })

  test('every 401 carries a Bearer challenge (RFC 6750): error="invalid_token" only when a Bearer credential was refused', async () => {
    const api = 'Bearer realm="inbound-receivables"'
    const operator = 'Bearer realm="inbound-receivables-operator"'
    const cases: [Response, string, string][] = [
      [await t.call('GET', url), 'invalid_api_key', api],
      [await t.call('GET', url, { headers: { authorization: `Basic ${a.apiKey}` } }), 'invalid_api_key', api],
      [await t.call('GET', url, { key: 'irk_sandbox_short' }), 'invalid_api_key', `${api}, error="invalid_token"`],
      [await t.call('GET', url, { key: `irk_sandbox_${'A'.repeat(40)}` }), 'invalid_api_key', `${api}, error="invalid_token"`],
      [await t.call('GET', '/admin/v1/audit-events'), 'invalid_admin_token', operator],
      [await t.call('GET', '/admin/v1/audit-events', { key: 'wrong-token' }), 'invalid_admin_token', `${operator}, error="invalid_token"`],
    ]
    for (const [res, code, challenge] of cases) {
      assertProblem(res, 401, code)
      assert.equal(res.headers['www-authenticate'], challenge, code)
    }
    // Only 401s challenge.
    assert.equal((await t.call('GET', url, { key: a.apiKey })).headers['www-authenticate'], undefined)
  })

  test('a revoked key stops working at once', async () => {
    const extra = await t.admin('POST', `/admin/v1/integrations/${a.integrationId}/api-keys`, {})
    assert.equal((await t.call('GET', url, { key: extra.json.apiKey })).status, 200)
    assert.equal((await t.admin('POST', `/admin/v1/api-keys/${extra.json.apiKeyId}/revoke`, {})).status, 200)
    assertProblem(await t.call('GET', url, { key: extra.json.apiKey }), 401, 'invalid_api_key')
  })
})

describe('403 client_scope_denied', () => {
  test('unknown client code, and a client the key has no grant for', async () => {
    assertProblem(await t.call('GET', '/v1/clients/nobody/customers/c-1', { key: a.apiKey }), 403, 'client_scope_denied')
    assertProblem(await t.call('GET', '/v1/clients/client-b/customers/c-1', { key: a.apiKey }), 403, 'client_scope_denied')
  })

  test('a grant without the scope', async () => {
    const ro = await t.tenant('client-ro', { scopes: ['customers:read'] })
    assertProblem(
      await t.call('PUT', '/v1/clients/client-ro/customers/c-1', { key: ro.apiKey, body: customer }),
      403,
      'client_scope_denied',
    )
    assert.equal((await t.call('GET', '/v1/clients/client-ro/customers/c-1', { key: ro.apiKey })).status, 404)
  })

  test('a revoked grant is refused; a re-PUT of the grant re-activates it', async () => {
    const g = await t.tenant('client-rev')
    const url = '/v1/clients/client-rev/customers/c-1'
    assert.equal((await t.call('GET', url, { key: g.apiKey })).status, 404)
    assert.equal((await t.admin('POST', `/admin/v1/integrations/${g.integrationId}/grants/client-rev/revoke`, {})).status, 200)
    assertProblem(await t.call('GET', url, { key: g.apiKey }), 403, 'client_scope_denied')
    assert.equal(
      (await t.admin('PUT', `/admin/v1/integrations/${g.integrationId}/grants/client-rev`, { scopes: ['customers:read'] })).status,
      200,
    )
    assert.equal((await t.call('GET', url, { key: g.apiKey })).status, 404)
  })

  test('the IP allowlist admits IPv4 and IPv6 CIDRs and IPv4-mapped IPv6 callers, and nobody else', async () => {
    const g = await t.tenant('client-ip', { ipAllowlist: ['203.0.113.0/24', '2001:db8:1::/48'] })
    const url = '/v1/clients/client-ip/customers/c-1'
    const from = (remoteAddress: string) => t.call('GET', url, { key: g.apiKey, remoteAddress })
    assert.equal((await from('203.0.113.7')).status, 404)
    assert.equal((await from('::ffff:203.0.113.200')).status, 404)
    assert.equal((await from('2001:db8:1:ffff::1')).status, 404)
    assertProblem(await from('203.0.114.1'), 403, 'client_scope_denied')
    assertProblem(await from('2001:db8:2::1'), 403, 'client_scope_denied')
    assertProblem(await from('127.0.0.1'), 403, 'client_scope_denied')
  })
})

describe('tenant isolation', () => {
  test('the same customer id in two clients is two resources, and neither key reaches the other', async () => {
    const put = (tenant: Tenant, first: string) =>
      t.call('PUT', `/v1/clients/${tenant.clientCode}/customers/shared`, {
        key: tenant.apiKey,
        body: { ...customer, name: { firstName: first, lastName: 'X' } },
      })
    assert.equal((await put(a, 'Alice')).status, 201)
    assert.equal((await put(b, 'Bob')).status, 201)
    assert.equal((await t.call('GET', '/v1/clients/client-a/customers/shared', { key: a.apiKey })).json.name.firstName, 'Alice')
    assert.equal((await t.call('GET', '/v1/clients/client-b/customers/shared', { key: b.apiKey })).json.name.firstName, 'Bob')
    assertProblem(await t.call('GET', '/v1/clients/client-b/customers/shared', { key: a.apiKey }), 403, 'client_scope_denied')
    assertProblem(
      await t.call('PUT', '/v1/clients/client-b/customers/shared', { key: a.apiKey, body: customer }),
      403,
      'client_scope_denied',
    )
    const listA = await t.call('GET', '/v1/clients/client-a/customers?limit=200', { key: a.apiKey })
    assert.ok(listA.json.data.every((c: { name: { firstName: string } }) => c.name.firstName !== 'Bob'))
  })
})

describe('media types and bodies', () => {
  const url = '/v1/clients/client-a/customers/c-media'
  test('415 for a wrong or missing media type, merge-patch on PUT, json on PATCH, and any Content-Encoding', async () => {
    assertProblem(
      await t.call('PUT', url, { key: a.apiKey, rawBody: JSON.stringify(customer), contentType: 'text/plain' }),
      415,
      'unsupported_media_type',
    )
    assertProblem(
      await t.call('PUT', url, { key: a.apiKey, rawBody: JSON.stringify(customer), contentType: 'application/merge-patch+json' }),
      415,
      'unsupported_media_type',
    )
    assertProblem(await t.call('PUT', url, { key: a.apiKey }), 415, 'unsupported_media_type')
    assert.equal((await t.call('PUT', url, { key: a.apiKey, body: customer })).status, 201)
    assertProblem(
      await t.call('PATCH', url, { key: a.apiKey, body: { sourceReference: 'x/1' }, contentType: 'application/json' }),
      415,
      'unsupported_media_type',
    )
    assertProblem(
      await t.call('PUT', url, {
        key: a.apiKey,
        body: customer,
        headers: { 'content-encoding': 'gzip', 'content-type': 'application/json' },
      }),
      415,
      'unsupported_media_type',
    )
  })

  test('400 malformed_json for invalid JSON, an empty body and a __proto__ key', async () => {
    assertProblem(await t.call('PUT', url, { key: a.apiKey, rawBody: '{"type":' }), 400, 'malformed_json')
    assertProblem(await t.call('PUT', url, { key: a.apiKey, rawBody: '' }), 400, 'malformed_json')
    assertProblem(await t.call('PUT', url, { key: a.apiKey, rawBody: '{"__proto__":{"x":1}}' }), 400, 'malformed_json')
  })

  test('413 request_too_large is answered from the Content-Length, without waiting for the body', async () => {
    await t.app.app.listen({ host: '127.0.0.1', port: 0 })
    const { port } = t.app.app.server.address() as net.AddressInfo
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => {
        socket.write(
          `PUT /v1/clients/client-a/customers/c-big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\n\r\n{"type":"person",`,
        )
      })
      let data = ''
      socket.on('data', (d) => {
        data += d.toString()
      })
      socket.on('close', () => resolve(data))
      socket.on('error', reject)
      socket.setTimeout(10_000, () => {
        socket.destroy()
        reject(new Error(`no answer; got ${data}`))
      })
    })
    assert.match(answer, /^HTTP\/1\.1 413 /)
    assert.match(answer, /application\/problem\+json/)
    assert.match(answer, /"type":"https:\/\/docs\.irs\.test\/problems\/request_too_large"/)
    assert.match(answer.toLowerCase(), /connection: close/)
    assert.equal((await t.call('GET', '/v1/clients/client-a/customers/c-big', { key: a.apiKey })).status, 404)
  })
})

describe('an unexpected store failure mid-transaction', () => {
  test('answers 503 projection_unavailable and leaves nothing saved', async () => {
    await t.store.exec(`
      CREATE FUNCTION fail_feed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$;
      CREATE TRIGGER fail_feed BEFORE INSERT ON change_events FOR EACH ROW EXECUTE FUNCTION fail_feed();`)
    const before = await t.store.query<{ n: string }>(`SELECT count(*)::text AS n FROM change_events`)
    const res = await t.call('PUT', '/v1/clients/client-a/customers/c-fail', { key: a.apiKey, body: customer })
    assertProblem(res, 503, 'projection_unavailable')
    assert.deepEqual(await t.store.query(`SELECT 1 FROM customers WHERE client_code = 'client-a' AND external_customer_id = 'c-fail'`), [])
    assert.deepEqual(await t.store.query<{ n: string }>(`SELECT count(*)::text AS n FROM change_events`), before)
    await t.store.exec('DROP TRIGGER fail_feed ON change_events; DROP FUNCTION fail_feed();')
    assert.equal((await t.call('PUT', '/v1/clients/client-a/customers/c-fail', { key: a.apiKey, body: customer })).status, 201)
  })
})
