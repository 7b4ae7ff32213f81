import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { digestSecret } from '../../src/access/keys.ts'
import { SCOPES, type Scope } from '../../src/domain/scopes.ts'
import type { RouteDef } from '../../src/http/route.ts'
import { ADMIN_TOKEN, type CallOptions, type Response, startTestApp, type Tenant } from '../helpers/app.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { fillPath, pathParams, routeKey, segmentBefore } from '../helpers/route-walk.ts'

/**
 * One security suite for every route the app registers, generated from the route table itself
 * (`createApp().routes`): a route added to the table is walked here without anyone remembering to, and a
 * route this suite cannot walk (an unknown parameter, a route that decides its scopes in the handler and
 * has no case below, an unauthenticated route not on the public list) fails it.
 *
 * Every API-key route, on ids that exist under client A:
 * - route parameters are validated before authentication (422 with no key, and with a key not granted);
 * - no key, a non-Bearer header, a key of the other environment, a revoked key: 401 invalid_api_key;
 * - an unknown client, a grant lacking the route's scopes, a caller outside the grant's IP allowlist,
 *   client B's key on client A's ids: 403 client_scope_denied;
 * - authorization comes before any lookup: a grant lacking the route's scopes gets the identical answer
 *   (status, type, title, detail) for an existing id and for a missing one, so a refusal never tells
 *   whether something exists;
 * - and, as the control that makes each refusal above mean something, A's own full key from inside the
 *   allowlist gets past authentication and authorization on the same request.
 * Every operator route: parameters before the token; no token, a wrong token, an API key: 401.
 */

const PROBLEMS = 'https://docs.irs.test/problems/'
const A = 'sec-a'
const B = 'sec-b'
const MISSING = 'sec-missing-1'
const INSIDE = '203.0.113.9'
const OUTSIDE = '198.51.100.7'

/** Routes that need no authentication at all. Anything else unauthenticated fails the suite. */
const PUBLIC_ROUTES = new Set(['GET /v1/openapi.json'])

const usd = (amount: string) => ({ amount, currency: 'USD' })
const customerBody = { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'sec/c/1' }
const receivableBody = {
  financialType: 'loan_balance',
  sourceRevision: 1,
  recoverableAmount: usd('10.00'),
  creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [{ externalCustomerId: 'sa-cust', role: 'primary' }],
  sourceReference: 'sec/r/1',
}
const event = (type: string, sourceRevision: number, reason: string, direction?: string) => ({
  type,
  amount: usd('1.00'),
  externalReceivableId: 'sa-recv',
  sourceRevision,
  effectiveAt: '2026-03-01T00:00:00Z',
  reason,
  sourceReference: `sec/e/${sourceRevision}`,
  ...(direction ? { direction } : {}),
})

/**
 * The resource under client A that each id parameter names, by the path segment before it. A new route
 * naming a new kind of resource needs its fixture here (and in `before`); until then the suite fails.
 */
const EXISTING: Record<string, string> = {
  customers: 'sa-cust',
  receivables: 'sa-recv',
  adjustments: 'sa-adj',
  'credit-notes': 'sa-cn',
  'write-offs': 'sa-wo',
  'payment-observations': 'sa-po',
  batches: 'sa-batch',
  'book-completions': 'sa-book',
  'balance-snapshots': 'sa-snap',
  'recovery-instructions': 'sa-instr',
  deliveries: 'sa-delivery',
  'payment-requests': 'sa-pr',
  'payment-reconciliations': 'sa-rec',
  refunds: 'sa-refund',
}

/**
 * Routes whose table entry says `scopes: []` decide their scopes in the handler, from the body or the
 * stored resource. Each must say here which scopes a grant lacks to be refused, and with which body.
 */
const DYNAMIC_SCOPES: Record<string, { lacking: Scope[]; body?: unknown }> = {
  // The feed shows the resource types the grant may read; with no read scope of any type it refuses.
  'GET /v1/clients/:clientCode/changes': {
    lacking: ['customers:read', 'receivables:read', 'payment_observations:read', 'payment_requests:read', 'financial_corrections:read'],
  },
  // A batch needs the write scope of every kind in its body (every kind is covered in batches.error.test.ts).
  'PUT /v1/clients/:clientCode/batches/:externalBatchId': {
    lacking: ['customers:write'],
    body: { records: [{ recordId: 'c', kind: 'customer', externalId: 'sa-new', body: customerBody }] },
  },
  // Reading a batch needs the write scope of every kind it holds: sa-batch holds a customer record.
  'GET /v1/clients/:clientCode/batches/:externalBatchId': { lacking: ['customers:write'] },
  // The batch list shows the batches whose every kind the grant may write; with no batch write scope at all it refuses.
  'GET /v1/clients/:clientCode/batches': {
    lacking: ['customers:write', 'receivables:write', 'payment_observations:write', 'financial_corrections:write'],
  },
}

// Webhook destinations resolve through a stub (a public address); no test here sends a notification.
const t = await startTestApp({}, { resolver: async () => [{ address: '93.184.215.14', family: 4 }] })
after(() => t.close())

const apiRoutes = t.app.routes.filter((r) => r.auth.kind === 'api_key')
const adminRoutes = t.app.routes.filter((r) => r.auth.kind === 'admin')

let a: Tenant
let b: Tenant
let allowlisted: Tenant
let revokedGrant: Tenant
let revokedKey: string
let otherEnvironmentKey: string
let storedForOtherEnvironmentKey: string
const lackingGrants = new Map<string, Tenant>()

async function must(res: Promise<Response>, status: number, what: string): Promise<Response> {
  const r = await res
  assert.equal(r.status, status, `${what}: ${r.body}`)
  return r
}

before(async () => {
  a = await t.tenant(A)
  b = await t.tenant(B)
  allowlisted = await t.tenant(A, { integrationId: 'int-sec-allow', ipAllowlist: ['203.0.113.0/24'] })
  // A second key of A's integration, revoked.
  const second = (await must(t.admin('POST', `/admin/v1/integrations/${a.integrationId}/api-keys`, {}), 201, 'key')).json
  await must(t.admin('POST', `/admin/v1/api-keys/${second.apiKeyId}/revoke`, {}), 200, 'revoke')
  revokedKey = second.apiKey
  // A real key of A's integration, issued for the production environment (this deployment is sandbox);
  // and one whose stored environment is production whatever its text says (the second of the two guards).
  otherEnvironmentKey = `irk_production_${'P'.repeat(40)}`
  storedForOtherEnvironmentKey = `irk_sandbox_${'Q'.repeat(40)}`
  for (const [i, key] of [otherEnvironmentKey, storedForOtherEnvironmentKey].entries()) {
    await t.store.query(
      `INSERT INTO api_keys (api_key_id, integration_id, environment, digest, created_at) VALUES ($1, $2, 'production', $3, now())`,
      [`ak_${String(i).repeat(24)}`, a.integrationId, digestSecret(key)],
    )
  }
  // An integration whose grant on A was revoked (its key itself is active).
  revokedGrant = await t.tenant(A, { integrationId: 'int-sec-revoked' })
  await must(t.admin('POST', `/admin/v1/integrations/${revokedGrant.integrationId}/grants/${A}/revoke`, {}), 200, 'revoke grant')

  // Client A's data: one resource for every id a route can name.
  const put = (path: string, body: unknown, status = 201) =>
    must(t.call('PUT', `/v1/clients/${A}${path}`, { key: a.apiKey, body }), status, path)
  await put('/customers/sa-cust', customerBody)
  await put('/receivables/sa-recv', receivableBody)
  await put('/adjustments/sa-adj', event('adjustment', 2, 'source_adjustment', 'increase'))
  await put('/credit-notes/sa-cn', event('credit_note', 3, 'contractual_credit'))
  await put('/write-offs/sa-wo', event('write_off', 4, 'approved_write_off'))
  await put('/payment-observations/sa-po', {
    type: 'payment',
    amount: usd('5.00'),
    allocations: [{ amount: usd('5.00'), externalReceivableId: 'sa-recv' }],
    effectiveAt: '2026-03-02T00:00:00Z',
    externalCustomerId: 'sa-cust',
    method: 'bank_transfer',
    sourceReference: 'sec/p/1',
  })
  await put('/batches/sa-batch', { records: [{ recordId: 'c', kind: 'customer', externalId: 'sa-cust-2', body: customerBody }] }, 202)
  await t.app.batchRunner.drain()
  await put('/book-completions/sa-book', { asOf: '2026-03-03T00:00:00Z', sourcePosition: 1, batches: ['sa-batch'] })
  await put('/balance-snapshots/sa-snap', {
    asOf: '2026-03-03T00:00:00Z',
    feedMode: 'transaction',
    sourcePosition: 1,
    balances: [{ externalReceivableId: 'sa-recv', recoverableAmount: usd('9.00'), sourceRevision: 5 }],
  })
  await put('/recovery-instructions/sa-instr', {
    scope: { type: 'receivable', externalReceivableId: 'sa-recv' },
    state: 'withdrawn',
    revision: 1,
    effectiveAt: '2026-03-03T00:00:00Z',
  })
  // A Payment request with a confirmed Payment (its receipt delivery reads 200), on a Receivable free of holds.
  await payableReceivable(t, a, 'sa-pay')
  await put('/payment-requests/sa-pr', { externalReceivableId: 'sa-pay', amount: usd('1.00') })
  await must(t.admin('POST', `/admin/v1/clients/${A}/payment-requests/sa-pr/simulate`, { outcome: 'confirmed' }), 201, 'simulate')
  // A reconciliation of that Payment: one receipt line that matches it.
  await put('/payment-reconciliations/sa-rec', {
    externalPaymentRequestId: 'sa-pr',
    lines: [{ externalReceiptLineId: 'sa-rl', externalReceivableId: 'sa-pay', amount: usd('1.00') }],
  })
  // A refund of that Payment (pending: no worker runs here).
  await put('/payment-requests/sa-pr/refunds/sa-refund', { amount: usd('0.50'), reason: 'requested_by_customer' })
  // A's webhook endpoint, and one delivery of A's first change under a known id.
  await put('/webhook-endpoint', { url: 'https://hooks.sec-a.com/irs' })
  // B's webhook endpoint, so that B's delivery log is a list (empty) like A's.
  await must(
    t.call('PUT', `/v1/clients/${B}/webhook-endpoint`, { key: b.apiKey, body: { url: 'https://hooks.sec-b.com/irs' } }),
    201,
    'B hook',
  )
  // A's receipt-posting route (its test receipt is never sent here: no dispatcher runs).
  await put('/receipt-route', { url: 'https://receipts.sec-a.com/post' })
  await t.store.query(
    `INSERT INTO webhook_deliveries (client_code, integration_id, delivery_id, seq, event_id, type, resource_type, resource_id,
                                     revision, occurred_at, status, created_at)
     SELECT client_code, $2, 'sa-delivery', seq, event_id, type, resource_type, resource_id, revision, occurred_at, 'delivered', now()
       FROM change_events WHERE client_code = $1 ORDER BY seq LIMIT 1`,
    [A, a.integrationId],
  )
})

function assertProblem(res: Response, status: number, code: string, what: string) {
  assert.equal(res.status, status, `${what}: ${res.body}`)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/, what)
  assert.equal(res.json.type, `${PROBLEMS}${code}`, what)
  assert.equal(res.json.status, status, what)
}

/** The scopes a grant lacks to be refused by this route. */
function lackingFor(route: RouteDef): Scope[] {
  const key = routeKey(route)
  const scopes = route.auth.kind === 'api_key' ? route.auth.scopes : []
  if (scopes.length > 0) return [...scopes]
  const dynamic = DYNAMIC_SCOPES[key]
  if (!dynamic) throw new Error(`${key} decides its scopes in the handler: add it to DYNAMIC_SCOPES`)
  return dynamic.lacking
}

/** A grant on client A holding every scope except the given ones (one integration per distinct set). */
async function lackingGrant(lacking: readonly Scope[]): Promise<Tenant> {
  const id = [...lacking].sort().join(',')
  let tenant = lackingGrants.get(id)
  if (!tenant) {
    tenant = await t.tenant(A, { integrationId: `int-sec-lack-${lackingGrants.size}`, scopes: SCOPES.filter((s) => !lacking.includes(s)) })
    lackingGrants.set(id, tenant)
  }
  return tenant
}

function paramValues(route: RouteDef, clientCode: string, which: 'existing' | 'missing'): Record<string, string> {
  const values: Record<string, string> = {}
  for (const p of pathParams(route.path)) {
    if (p === 'clientCode') {
      values[p] = clientCode
      continue
    }
    const existing = EXISTING[segmentBefore(route.path, p)]
    if (!existing) throw new Error(`${routeKey(route)}: no fixture for :${p}; add its resource to EXISTING`)
    values[p] = which === 'existing' ? existing : MISSING
  }
  return values
}

/** A request to the route; checks that happen before the body is read need no valid body, so `{}` will do. */
function request(route: RouteDef, values: Record<string, string>, opts: CallOptions = {}) {
  const dynamic = DYNAMIC_SCOPES[routeKey(route)]
  const body = route.body ? (dynamic?.body ?? {}) : undefined
  return t.call(route.method, fillPath(route.path, values), { ...(body !== undefined ? { body } : {}), ...opts })
}

/** A paged list: a GET whose query takes a `cursor`. */
const isList = (route: RouteDef) =>
  route.method === 'GET' && 'cursor' in ((route.query as { shape?: Record<string, unknown> } | undefined)?.shape ?? {})

const walked = { api: new Set<string>(), admin: new Set<string>() }

describe('every API-key route', () => {
  for (const route of apiRoutes) {
    const key = routeKey(route)
    test(key, async () => {
      const existing = paramValues(route, A, 'existing')
      const missing = paramValues(route, A, 'missing')

      // The control: A's own key, from inside an allowlist, gets past authentication and authorization.
      for (const [who, opts] of [
        ['full key', { key: a.apiKey }],
        ['allowlisted key from inside', { key: allowlisted.apiKey, remoteAddress: INSIDE }],
      ] as const) {
        const ok = await request(route, existing, opts)
        assert.ok(![401, 403, 405].includes(ok.status), `${who}: ${ok.body}`)
        assert.notEqual(ok.json?.type, `${PROBLEMS}route_not_found`, who)
      }
      // Every id names a resource that exists under A: every read of one answers 200 to A.
      if (route.method === 'GET') assert.equal((await request(route, existing, { key: a.apiKey })).status, 200, 'A reads its own data')

      // Route parameters are validated before authentication.
      for (const p of pathParams(route.path)) {
        const bad = { ...existing, [p]: 'bad.id' }
        assert.equal(route.params?.safeParse(existing).success, true, `${p}: the valid value must pass`)
        assert.equal(route.params?.safeParse(bad).success, false, `${p}: 'bad.id' must be invalid; choose another invalid value`)
        for (const [who, opts] of [
          ['no key', {}],
          ['a key without a grant for the client', { key: b.apiKey }],
        ] as const) {
          const res = await request(route, bad, opts)
          assertProblem(res, 422, 'validation_error', `:${p} with ${who}`)
          assert.deepEqual(
            res.json.errors.map((e: { pointer: string }) => e.pointer),
            [`/path/${p}`],
            `:${p} with ${who}`,
          )
        }
      }

      // 401 invalid_api_key.
      for (const [who, headers] of [
        ['no key', {}],
        ['a non-Bearer header', { authorization: `Basic ${Buffer.from(`x:${a.apiKey}`).toString('base64')}` }],
        ['the key of the other environment', { authorization: `Bearer ${otherEnvironmentKey}` }],
        ['a key stored for the other environment', { authorization: `Bearer ${storedForOtherEnvironmentKey}` }],
        ['a revoked key', { authorization: `Bearer ${revokedKey}` }],
        ['an unknown key', { authorization: `Bearer irk_sandbox_${'u'.repeat(40)}` }],
      ] as const) {
        assertProblem(await request(route, existing, { headers }), 401, 'invalid_api_key', who)
      }

      // 403 client_scope_denied.
      const lacking = await lackingGrant(lackingFor(route))
      const refusals: [string, Record<string, string>, CallOptions][] = [
        ['an unknown client', paramValues(route, 'sec-nobody', 'existing'), { key: a.apiKey }],
        ['a grant lacking the scopes', existing, { key: lacking.apiKey }],
        ['a revoked grant', existing, { key: revokedGrant.apiKey }],
        ['a caller outside the allowlist', existing, { key: allowlisted.apiKey, remoteAddress: OUTSIDE }],
        ["client B's key on client A's ids", existing, { key: b.apiKey }],
      ]
      for (const [who, values, opts] of refusals) assertProblem(await request(route, values, opts), 403, 'client_scope_denied', who)

      // Authorization before lookup: a refused grant cannot tell an existing id from a missing one.
      if (pathParams(route.path).length > 1) {
        const one = await request(route, existing, { key: lacking.apiKey })
        const other = await request(route, missing, { key: lacking.apiKey })
        const seen = (r: Response) => ({ status: r.status, type: r.json?.type, title: r.json?.title, detail: r.json?.detail })
        assertProblem(other, 403, 'client_scope_denied', 'a missing id with a grant lacking the scopes')
        assert.deepEqual(seen(other), seen(one), 'an existing and a missing id answer alike')
      }

      // Tenant isolation in the store: B's full key on its own client sees nothing of A's.
      if (route.method === 'GET' && pathParams(route.path).length > 1) {
        const res = await request(route, paramValues(route, B, 'existing'), { key: b.apiKey })
        assert.equal(res.status, 404, `B reading A's id under its own client: ${res.body}`)
      }
      // A list of A's holds A's data; the same list of B (which holds none) is empty, whatever A holds.
      if (isList(route) && pathParams(route.path).length === 1) {
        const own = await request(route, existing, { key: a.apiKey })
        assert.ok(own.json.data.length > 0, `A's list shows A's data: ${own.body}`)
        const res = await request(route, paramValues(route, B, 'existing'), { key: b.apiKey })
        assert.equal(res.status, 200, res.body)
        // The delivery log adds its endpoint's `lagging` (null: not lagging) beside the page.
        const empty = route.path.endsWith('/webhook-endpoint/deliveries')
          ? { data: [], nextCursor: null, lagging: null }
          : { data: [], nextCursor: null }
        assert.deepEqual(res.json, empty, `B's list under its own client`)
      }
      walked.api.add(key)
    })
  }
})

describe('every operator route', () => {
  const ADMIN_VALUES: Record<string, string> = {
    clientCode: 'sec-admin-c',
    integrationId: 'sec-admin-i',
    apiKeyId: `ak_${'a'.repeat(24)}`,
    externalPaymentRequestId: 'sec-admin-pr',
    externalReceivableId: 'sec-admin-r',
    externalCustomerId: 'sec-admin-cust',
  }
  const adminValues = (route: RouteDef) => {
    const values: Record<string, string> = {}
    for (const p of pathParams(route.path)) {
      const v = ADMIN_VALUES[p]
      if (!v) throw new Error(`${routeKey(route)}: no value for :${p}; add one to ADMIN_VALUES`)
      values[p] = v
    }
    return values
  }
  for (const route of adminRoutes) {
    const key = routeKey(route)
    test(key, async () => {
      const values = adminValues(route)
      const body = route.body ? {} : undefined
      const call = (v: Record<string, string>, headers: Record<string, string>) =>
        t.call(route.method, fillPath(route.path, v), { headers, ...(body !== undefined ? { body } : {}) })
      // The control: the operator token gets past authentication.
      assert.notEqual((await call(values, { authorization: `Bearer ${ADMIN_TOKEN}` })).status, 401, 'operator token')
      for (const p of pathParams(route.path)) {
        const bad = { ...values, [p]: 'bad.id' }
        assert.equal(route.params?.safeParse(values).success, true, `${p}: the valid value must pass`)
        assert.equal(route.params?.safeParse(bad).success, false, `${p}: 'bad.id' must be invalid`)
        const res = await call(bad, {})
        assertProblem(res, 422, 'validation_error', `:${p} with no token`)
        assert.deepEqual(
          res.json.errors.map((e: { pointer: string }) => e.pointer),
          [`/path/${p}`],
        )
      }
      for (const [who, headers] of [
        ['no token', {}],
        ['a wrong token', { authorization: `Bearer ${ADMIN_TOKEN}x` }],
        ['an API key', { authorization: `Bearer ${a.apiKey}` }],
        ['a non-Bearer header', { authorization: `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}` }],
      ] as const) {
        assertProblem(await call(values, headers), 401, 'invalid_admin_token', who)
      }
      walked.admin.add(key)
    })
  }
})

describe('coverage', () => {
  test('every route of the table was walked, and every unauthenticated route is meant to be public', () => {
    assert.ok(apiRoutes.length >= 30, `the table holds ${apiRoutes.length} API-key routes`)
    assert.deepEqual([...walked.api].sort(), apiRoutes.map(routeKey).sort())
    assert.deepEqual([...walked.admin].sort(), adminRoutes.map(routeKey).sort())
    const unauthenticated = t.app.routes.filter((r) => r.auth.kind === 'none').map(routeKey)
    assert.deepEqual(
      unauthenticated.filter((k) => !PUBLIC_ROUTES.has(k)),
      [],
    )
    assert.equal(apiRoutes.length + adminRoutes.length + unauthenticated.length, t.app.routes.length)
  })
})
