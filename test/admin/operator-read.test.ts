import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import { z } from 'zod'
import * as adminSchemas from '../../src/admin/schema.ts'
import { ADMIN_TOKEN, problemCode, type Response, startTestApp, type TestApp } from '../helpers/app.ts'

/*
 * Reading the operator API back: one of each, lists with the API's paging convention, the operator's own
 * OpenAPI document, and that no read ever shows an API key or its digest.
 */

let t: TestApp
// A clock one millisecond further at each reading, so that creation order is createdAt order.
let tick = Date.parse('2026-03-02T10:00:00.000Z')
const clock = { now: () => new Date(tick++) }

const CLIENTS = Array.from({ length: 52 }, (_, i) => `c-${String(i).padStart(2, '0')}`)
const INTEGRATIONS = ['i-a', 'i-b', 'i-c']
const keys: { apiKeyId: string; apiKey: string }[] = []
const EXAMPLE_KEY = 'irk_sandbox_EXAMPLEexampleEXAMPLEexampleEXAMPLEexamp'

function must(res: Response, status: number): Response {
  assert.equal(res.status, status, res.body)
  return res
}

function assertProblem(res: Response, status: number, code: string) {
  assert.equal(res.status, status, res.body)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
  assert.equal(problemCode(res), code)
  assert.equal(res.json.status, status)
}

/** Follows nextCursor from the first page; returns the pages. */
async function walk(path: string, limit: number): Promise<Response[]> {
  const pages: Response[] = []
  let cursor: string | null = null
  do {
    const sep = path.includes('?') ? '&' : '?'
    const res = must(await t.admin('GET', `${path}${sep}limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`), 200)
    assert.ok(res.json.data.length <= limit)
    pages.push(res)
    cursor = res.json.nextCursor
    assert.ok(pages.length < 100, 'the cursor moves on')
  } while (cursor)
  return pages
}

before(async () => {
  t = await startTestApp({}, { clock })
  // Created out of order: the list order is the key order, not the creation order.
  for (const code of [...CLIENTS].reverse()) must(await t.admin('PUT', `/admin/v1/clients/${code}`, { name: `CU ${code}` }), 201)
  for (const id of INTEGRATIONS) must(await t.admin('PUT', `/admin/v1/integrations/${id}`, { name: `Ledger ${id}` }), 201)
  // i-a is granted 5 clients; c-00 is granted by every integration.
  for (const code of ['c-04', 'c-03', 'c-02', 'c-01', 'c-00']) {
    must(await t.admin('PUT', `/admin/v1/integrations/i-a/grants/${code}`, { scopes: ['customers:read'] }), 201)
  }
  for (const id of ['i-c', 'i-b']) {
    must(
      await t.admin('PUT', `/admin/v1/integrations/${id}/grants/c-00`, {
        scopes: ['receivables:write', 'customers:write'],
        ipAllowlist: ['203.0.113.0/24'],
        feedMode: 'snapshot_only',
      }),
      201,
    )
  }
  must(await t.admin('POST', '/admin/v1/integrations/i-b/grants/c-00/revoke', {}), 200)
  for (let i = 0; i < 4; i++) {
    const k = must(await t.admin('POST', '/admin/v1/integrations/i-a/api-keys', {}), 201).json
    keys.push({ apiKeyId: k.apiKeyId, apiKey: k.apiKey })
  }
  must(await t.admin('POST', `/admin/v1/api-keys/${keys[1]?.apiKeyId}/revoke`, {}), 200)
  // Keys issued before hints were kept (no last4), three of them in the same millisecond: ties on createdAt.
  for (const id of ['ak_legacy00000000000000000A', 'ak_legacy00000000000000000B', 'ak_legacy00000000000000000C']) {
    await t.store.query(
      `INSERT INTO api_keys (api_key_id, integration_id, environment, digest, created_at)
       VALUES ($1, 'i-a', 'sandbox', md5($1) || md5($1), '2026-03-01T00:00:00Z')`,
      [id],
    )
  }
})
after(() => t.close())

describe('one of each', () => {
  test('a client, an integration, a grant and an API key read back as they were written', async () => {
    const put = must(await t.admin('PUT', '/admin/v1/clients/c-07', { collectionEnabled: true }), 200)
    const client = must(await t.admin('GET', '/admin/v1/clients/c-07'), 200)
    assert.deepEqual(client.json, put.json)
    assert.deepEqual(Object.keys(client.json), ['clientCode', 'name', 'collectionEnabled', 'createdAt', 'updatedAt'])
    assert.deepEqual([client.json.clientCode, client.json.name, client.json.collectionEnabled], ['c-07', 'CU c-07', true])

    const integration = must(await t.admin('GET', '/admin/v1/integrations/i-b'), 200)
    assert.deepEqual(Object.keys(integration.json), ['integrationId', 'name', 'createdAt', 'updatedAt'])
    assert.deepEqual([integration.json.integrationId, integration.json.name], ['i-b', 'Ledger i-b'])

    const grant = must(await t.admin('GET', '/admin/v1/integrations/i-c/grants/c-00'), 200)
    assert.deepEqual(
      { ...grant.json, createdAt: undefined, updatedAt: undefined },
      {
        integrationId: 'i-c',
        clientCode: 'c-00',
        scopes: ['customers:write', 'receivables:write'],
        ipAllowlist: ['203.0.113.0/24'],
        status: 'active',
        recoveryEntryMode: 'explicit_instruction',
        feedMode: 'snapshot_only',
        industryProfile: 'credit_union',
        receiptDeliveryOwner: 'partner',
        createdAt: undefined,
        updatedAt: undefined,
      },
    )
    assert.equal(must(await t.admin('GET', '/admin/v1/integrations/i-b/grants/c-00'), 200).json.status, 'revoked')

    const k = keys[0] as { apiKeyId: string; apiKey: string }
    const key = must(await t.admin('GET', `/admin/v1/api-keys/${k.apiKeyId}`), 200)
    assert.deepEqual(Object.keys(key.json), [
      'apiKeyId',
      'integrationId',
      'environment',
      'name',
      'hint',
      'status',
      'createdAt',
      'expiresAt',
      'lastUsedAt',
      'revokedAt',
    ])
    assert.deepEqual(
      [key.json.apiKeyId, key.json.integrationId, key.json.environment, key.json.hint, key.json.revokedAt],
      [k.apiKeyId, 'i-a', 'sandbox', `irk_sandbox_…${k.apiKey.slice(-4)}`, null],
    )
    const revoked = must(await t.admin('GET', `/admin/v1/api-keys/${keys[1]?.apiKeyId}`), 200)
    assert.match(String(revoked.json.revokedAt), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    assert.equal(must(await t.admin('GET', '/admin/v1/api-keys/ak_legacy00000000000000000A'), 200).json.hint, null)
  })

  test('unknown ones are 404 with their own problem; a malformed id is 422', async () => {
    assertProblem(await t.admin('GET', '/admin/v1/clients/ghost'), 404, 'client_not_found')
    assertProblem(await t.admin('GET', '/admin/v1/clients/ghost/grants'), 404, 'client_not_found')
    assertProblem(await t.admin('GET', '/admin/v1/integrations/ghost'), 404, 'integration_not_found')
    assertProblem(await t.admin('GET', '/admin/v1/integrations/ghost/grants'), 404, 'integration_not_found')
    assertProblem(await t.admin('GET', '/admin/v1/integrations/ghost/api-keys'), 404, 'integration_not_found')
    assertProblem(await t.admin('GET', '/admin/v1/integrations/i-a/grants/c-40'), 404, 'grant_not_found')
    assertProblem(await t.admin('GET', '/admin/v1/integrations/ghost/grants/c-00'), 404, 'grant_not_found')
    assertProblem(await t.admin('GET', `/admin/v1/api-keys/ak_${'x'.repeat(24)}`), 404, 'api_key_not_found')
    const bad = await t.admin('GET', '/admin/v1/api-keys/irk_sandbox_notanid')
    assertProblem(bad, 422, 'validation_error')
    assert.deepEqual(
      bad.json.errors.map((e: { pointer: string }) => e.pointer),
      ['/path/apiKeyId'],
    )
    assertProblem(await t.admin('GET', '/admin/v1/clients/bad%20code'), 422, 'validation_error')
  })
})

describe('lists', () => {
  test('clients: by client code, default 50 a page, then the rest', async () => {
    const first = must(await t.admin('GET', '/admin/v1/clients'), 200)
    assert.deepEqual(Object.keys(first.json), ['data', 'nextCursor'])
    assert.deepEqual(
      first.json.data.map((c: { clientCode: string }) => c.clientCode),
      CLIENTS.slice(0, 50),
    )
    assert.equal(typeof first.json.nextCursor, 'string')
    const second = must(await t.admin('GET', `/admin/v1/clients?cursor=${first.json.nextCursor}`), 200)
    assert.deepEqual(
      second.json.data.map((c: { clientCode: string }) => c.clientCode),
      CLIENTS.slice(50),
    )
    assert.equal(second.json.nextCursor, null)
    const all = must(await t.admin('GET', '/admin/v1/clients?limit=200'), 200)
    assert.deepEqual(
      all.json.data.map((c: { clientCode: string }) => c.clientCode),
      CLIENTS,
    )
    assert.equal(all.json.nextCursor, null)
    assert.deepEqual(all.json.data[3], must(await t.admin('GET', '/admin/v1/clients/c-03'), 200).json)
  })

  test('limit is 1..200, and a cursor must be one a list returned', async () => {
    for (const limit of ['0', '201', '-1', '1.5', 'ten']) {
      const res = await t.admin('GET', `/admin/v1/clients?limit=${limit}`)
      assertProblem(res, 422, 'validation_error')
      assert.deepEqual(
        res.json.errors.map((e: { pointer: string }) => e.pointer),
        ['/query/limit'],
        limit,
      )
    }
    const one = must(await t.admin('GET', '/admin/v1/integrations?limit=1'), 200)
    assert.deepEqual(
      one.json.data.map((i: { integrationId: string }) => i.integrationId),
      ['i-a'],
    )
    for (const path of ['/admin/v1/clients', '/admin/v1/integrations/i-a/api-keys', '/admin/v1/integrations/i-a/grants']) {
      const notACursor = await t.admin('GET', `${path}?cursor=bm90LWpzb24`)
      assertProblem(notACursor, 422, 'validation_error')
      assert.deepEqual(
        notACursor.json.errors.map((e: { pointer: string; code: string }) => [e.pointer, e.code]),
        [['/query/cursor', 'invalid_format']],
      )
      assertProblem(await t.admin('GET', `${path}?cursor=not%20base64`), 422, 'validation_error')
      assertProblem(await t.admin('GET', `${path}?unknown=1`), 422, 'validation_error')
    }
    // A key-list cursor ({after: [createdAt, id]}) is not a client-list cursor ({after: code}).
    const keyPage = must(await t.admin('GET', '/admin/v1/integrations/i-a/api-keys?limit=1'), 200)
    assertProblem(await t.admin('GET', `/admin/v1/clients?cursor=${keyPage.json.nextCursor}`), 422, 'validation_error')
  })

  test('following the cursor gives every row once, in the same order as one long page', async () => {
    for (const [path, limit, expected] of [
      ['/admin/v1/clients', 7, CLIENTS],
      ['/admin/v1/integrations', 2, INTEGRATIONS],
      ['/admin/v1/integrations/i-a/grants', 2, ['c-00', 'c-01', 'c-02', 'c-03', 'c-04']],
      ['/admin/v1/clients/c-00/grants', 2, ['i-a', 'i-b', 'i-c']],
    ] as const) {
      const pages = await walk(path, limit)
      assert.equal(pages.length, Math.ceil(expected.length / limit), path)
      const ids = pages.flatMap((p) => p.json.data.map((r: Record<string, string>) => r.clientCode ?? r.integrationId))
      if (path.endsWith('/grants')) {
        const key = path.startsWith('/admin/v1/clients/') ? 'integrationId' : 'clientCode'
        assert.deepEqual(
          pages.flatMap((p) => p.json.data.map((r: Record<string, string>) => r[key])),
          expected,
          path,
        )
      } else assert.deepEqual(ids, expected, path)
      assert.equal(pages.at(-1)?.json.nextCursor, null)
    }
  })

  test("grants of a client list revoked ones too, with each grant's settings", async () => {
    const res = must(await t.admin('GET', '/admin/v1/clients/c-00/grants'), 200)
    assert.deepEqual(
      res.json.data.map((g: { integrationId: string; status: string; feedMode: string; scopes: string[] }) => [
        g.integrationId,
        g.status,
        g.feedMode,
        g.scopes.join(','),
      ]),
      [
        ['i-a', 'active', 'transaction', 'customers:read'],
        ['i-b', 'revoked', 'snapshot_only', 'customers:write,receivables:write'],
        ['i-c', 'active', 'snapshot_only', 'customers:write,receivables:write'],
      ],
    )
    assert.deepEqual(res.json.data[2], must(await t.admin('GET', '/admin/v1/integrations/i-c/grants/c-00'), 200).json)
    const none = must(await t.admin('GET', '/admin/v1/clients/c-51/grants'), 200)
    assert.deepEqual(none.json, { data: [], nextCursor: null })
    assert.deepEqual(must(await t.admin('GET', '/admin/v1/integrations/i-b/api-keys'), 200).json, { data: [], nextCursor: null })
  })

  test('API keys: oldest first, revoked ones included, ties on createdAt broken by id, over pages', async () => {
    const all = must(await t.admin('GET', '/admin/v1/integrations/i-a/api-keys?limit=200'), 200).json.data as {
      apiKeyId: string
      hint: string | null
      revokedAt: string | null
    }[]
    assert.deepEqual(
      all.map((k) => k.apiKeyId),
      ['ak_legacy00000000000000000A', 'ak_legacy00000000000000000B', 'ak_legacy00000000000000000C', ...keys.map((k) => k.apiKeyId)],
    )
    assert.deepEqual(
      all.map((k) => k.hint),
      [null, null, null, ...keys.map((k) => `irk_sandbox_…${k.apiKey.slice(-4)}`)],
    )
    assert.deepEqual(
      all.map((k) => k.revokedAt !== null),
      [false, false, false, false, true, false, false],
    )
    // limit 2 cuts between the tied legacy keys: the cursor carries (createdAt, apiKeyId).
    const pages = await walk('/admin/v1/integrations/i-a/api-keys', 2)
    assert.equal(pages.length, 4)
    assert.deepEqual(
      pages.flatMap((p) => p.json.data),
      all,
    )
  })

  test('a row added behind the cursor is not seen twice, one added ahead is seen once', async () => {
    const first = must(await t.admin('GET', '/admin/v1/integrations?limit=2'), 200)
    assert.deepEqual(
      first.json.data.map((i: { integrationId: string }) => i.integrationId),
      ['i-a', 'i-b'],
    )
    must(await t.admin('PUT', '/admin/v1/integrations/i-0', { name: 'behind' }), 201)
    must(await t.admin('PUT', '/admin/v1/integrations/i-d', { name: 'ahead' }), 201)
    const rest = must(await t.admin('GET', `/admin/v1/integrations?limit=2&cursor=${first.json.nextCursor}`), 200)
    assert.deepEqual(
      rest.json.data.map((i: { integrationId: string }) => i.integrationId),
      ['i-c', 'i-d'],
    )
    assert.equal(rest.json.nextCursor, null)
  })
})

describe('security', () => {
  const concrete = (path: string) =>
    path
      .replace(':clientCode', 'c-00')
      .replace(':integrationId', 'i-a')
      .replace(':apiKeyId', keys[0]?.apiKeyId ?? '')
      // Any other parameter (a new route's) gets a valid identifier, so the walk reaches authentication.
      .replace(/:[A-Za-z]+/g, 'id-1')

  test('every operator route answers 401 without the operator token, or with an API key instead', async () => {
    const adminRoutes = t.app.routes.filter((r) => r.path.startsWith('/admin/'))
    assert.ok(adminRoutes.length >= 16, `${adminRoutes.length} operator routes`)
    assert.ok(adminRoutes.every((r) => r.auth.kind === 'admin' && !r.public))
    const k = keys[0]?.apiKey as string
    for (const r of adminRoutes) {
      const path = concrete(r.path)
      const body = r.body ? {} : undefined
      const attempts: Record<string, string>[] = [
        {},
        { authorization: `Bearer ${k}` },
        { authorization: `Bearer ${ADMIN_TOKEN}x` },
        { authorization: ADMIN_TOKEN },
      ]
      for (const headers of attempts) {
        const res = await t.call(r.method, path, { headers, ...(body ? { body } : {}) })
        assertProblem(res, 401, 'invalid_admin_token')
      }
    }
  })

  test('no read shows an API key or its digest', async () => {
    const digests = (await t.store.query<{ digest: string }>('SELECT digest FROM api_keys')).map((r) => r.digest)
    assert.equal(digests.length, 7)
    const reads = [
      '/admin/v1/integrations/i-a/api-keys?limit=200',
      ...keys.map((k) => `/admin/v1/api-keys/${k.apiKeyId}`),
      '/admin/v1/api-keys/ak_legacy00000000000000000A',
      '/admin/v1/clients?limit=200',
      '/admin/v1/integrations?limit=200',
      '/admin/v1/integrations/i-a/grants?limit=200',
      '/admin/v1/clients/c-00/grants',
      '/admin/v1/audit-events?limit=200',
      '/admin/v1/openapi.json',
    ]
    const names = new Set<string>()
    const collect = (node: unknown): void => {
      if (Array.isArray(node)) {
        for (const item of node) collect(item)
      } else if (node && typeof node === 'object') {
        for (const [k, v] of Object.entries(node)) {
          names.add(k)
          collect(v)
        }
      }
    }
    for (const path of reads) {
      const res = must(await t.admin('GET', path), 200)
      for (const k of keys) assert.ok(!res.body.includes(k.apiKey), `${path} shows a key`)
      // The document's one key-shaped string is the example of the issuing answer.
      const body = path.endsWith('openapi.json') ? res.body.replaceAll(EXAMPLE_KEY, '') : res.body
      assert.ok(!/irk_(sandbox|production)_[A-Za-z0-9]{5,}/.test(body), `${path} shows a key`)
      for (const d of digests) assert.ok(!res.body.includes(d), `${path} shows a digest`)
      if (!path.endsWith('openapi.json')) collect(res.json)
    }
    assert.ok(!names.has('apiKey') && !names.has('digest') && !names.has('last4'), [...names].join(','))
    // The only place a key appears is the answer that issues it.
    const fresh = must(await t.admin('POST', '/admin/v1/integrations/i-c/api-keys', {}), 201)
    assert.deepEqual(Object.keys(fresh.json), ['apiKeyId', 'apiKey', 'integrationId', 'environment', 'name', 'createdAt', 'expiresAt'])
  })
})

describe('the operator OpenAPI document', () => {
  // biome-ignore lint/suspicious/noExplicitAny: the document is inspected structurally
  let doc: any
  before(async () => {
    doc = must(await t.admin('GET', '/admin/v1/openapi.json'), 200).json
  })

  test('is behind the operator token', async () => {
    assertProblem(await t.call('GET', '/admin/v1/openapi.json'), 401, 'invalid_admin_token')
  })

  test('is valid OpenAPI 3.1 of exactly the operator routes, each behind the operator token', async () => {
    const validator = new Validator()
    const result = await validator.validate(structuredClone(doc))
    assert.deepEqual(result.errors ?? [], [])
    assert.equal(result.valid, true)
    assert.equal(validator.version, '3.1')
    assert.equal(doc.info.version, '1.0.0')
    assert.deepEqual(doc.servers, [{ url: 'http://irs.test' }])
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
      .sort()
    const registered = t.app.routes
      .filter((r) => r.auth.kind === 'admin')
      .map((r) => `${r.method} ${r.path.replace(/:([A-Za-z]+)/g, '{$1}')}`)
      .sort()
    assert.deepEqual(documented, registered)
    assert.ok(documented.every((d) => d.split(' ')[1]?.startsWith('/admin/v1/')))
    for (const read of [
      'GET /admin/v1/clients',
      'GET /admin/v1/clients/{clientCode}',
      'GET /admin/v1/clients/{clientCode}/grants',
      'GET /admin/v1/integrations',
      'GET /admin/v1/integrations/{integrationId}',
      'GET /admin/v1/integrations/{integrationId}/grants',
      'GET /admin/v1/integrations/{integrationId}/grants/{clientCode}',
      'GET /admin/v1/integrations/{integrationId}/api-keys',
      'GET /admin/v1/api-keys/{apiKeyId}',
      'GET /admin/v1/openapi.json',
    ])
      assert.ok(documented.includes(read), read)
    assert.deepEqual(Object.keys(doc.components.securitySchemes), ['operatorToken'])
    for (const ops of Object.values(
      doc.paths as Record<string, Record<string, { security: unknown; responses: Record<string, unknown> }>>,
    )) {
      for (const op of Object.values(ops)) {
        assert.deepEqual(op.security, [{ operatorToken: [] }])
        assert.ok(op.responses['401'])
      }
    }
  })

  test('documents the paging, the 404s and the key-less API key shape', () => {
    const list = doc.paths['/admin/v1/integrations/{integrationId}/api-keys'].get
    assert.deepEqual(
      list.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`),
      ['path:integrationId', 'query:cursor', 'query:limit'],
    )
    const limit = list.parameters.find((p: { name: string }) => p.name === 'limit').schema
    assert.deepEqual([limit.minimum, limit.maximum, limit.default], [1, 200, 50])
    assert.deepEqual(Object.keys(list.responses['404'].content['application/problem+json'].examples), ['integration_not_found'])
    assert.deepEqual(list.responses['200'].content['application/json'].schema, { $ref: '#/components/schemas/OperatorApiKeyList' })
    const key = doc.components.schemas.OperatorApiKey
    assert.deepEqual(Object.keys(key.properties), [
      'apiKeyId',
      'integrationId',
      'environment',
      'name',
      'hint',
      'status',
      'createdAt',
      'expiresAt',
      'lastUsedAt',
      'revokedAt',
    ])
    assert.deepEqual(Object.keys(doc.components.schemas.OperatorApiKeyCreated.properties), [
      'apiKeyId',
      'apiKey',
      'integrationId',
      'environment',
      'name',
      'createdAt',
      'expiresAt',
    ])
    assert.deepEqual(
      Object.keys(doc.paths['/admin/v1/clients/{clientCode}'].get.responses['404'].content['application/problem+json'].examples),
      ['client_not_found'],
    )
    // Zod metadata examples reach the document, and each one is valid for the schema that publishes it.
    assert.deepEqual(doc.components.schemas.OperatorIntegrationPut.examples, [{ name: 'Core ledger' }])
    assert.deepEqual(doc.components.schemas.OperatorApiKeyCreated.examples[0].apiKey, EXAMPLE_KEY)
    let checked = 0
    for (const schema of Object.values(adminSchemas)) {
      if (!(schema instanceof z.ZodType)) continue
      const meta = z.globalRegistry.get(schema) as { id?: string; examples?: unknown[] } | undefined
      if (!meta?.id) continue
      assert.deepEqual(doc.components.schemas[meta.id]?.examples, meta.examples, meta.id)
      for (const example of meta.examples ?? []) {
        assert.deepEqual(schema.safeParse(example).error?.issues ?? [], [], meta.id)
        checked++
      }
    }
    assert.equal(checked, 19)
    assert.deepEqual(doc.components.schemas.Timestamp.examples, ['2026-01-31T09:30:00Z'])
    // Only what the operator routes use: no public resource schema.
    assert.ok(!doc.components.schemas.Receivable && !doc.components.schemas.Customer)
  })

  test('the public document still leaves every operator route out', async () => {
    const pub = must(await t.call('GET', '/v1/openapi.json'), 200).json
    assert.ok(!JSON.stringify(pub.paths).includes('/admin/'))
    assert.deepEqual(Object.keys(pub.components.securitySchemes), ['apiKey'])
    assert.ok(!Object.keys(pub.components.schemas).some((id) => id.startsWith('Operator')))
  })
})
