import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'

/**
 * Scopes and tenant isolation of the Payment request routes (the route-table walk in
 * test/api/security.test.ts covers authentication and the generic refusals of every route), the
 * operator-only simulate, and the hosted page's capability token.
 */
const A = 'pr-sec-a'
const B = 'pr-sec-b'
const usd = (amount: string) => ({ amount, currency: 'USD' })

let t: TestApp
let a: Tenant
let b: Tenant
let readOnly: Tenant
let writeOnly: Tenant
let receivablesOnly: Tenant

const path = (client: string, id: string, rest = '') => `/v1/clients/${client}/payment-requests/${id}${rest}`
const body = { externalReceivableId: 'r-sec', amount: usd('10.00') }

function assertProblem(res: Response, status: number, code: string, what = '') {
  assert.equal(res.status, status, `${what}: ${res.body}`)
  assert.equal(problemCode(res), code, what)
}

before(async () => {
  t = await startTestApp()
  a = await t.tenant(A)
  b = await t.tenant(B)
  readOnly = await t.tenant(A, { integrationId: 'int-pr-sec-read', scopes: ['payment_requests:read'] })
  writeOnly = await t.tenant(A, { integrationId: 'int-pr-sec-write', scopes: ['payment_requests:write'] })
  receivablesOnly = await t.tenant(A, { integrationId: 'int-pr-sec-rcv', scopes: ['receivables:read', 'receivables:write'] })
  await payableReceivable(t, a, 'r-sec')
  await payableReceivable(t, b, 'r-sec')
  assert.equal((await t.call('PUT', path(A, 'pr-sec'), { key: a.apiKey, body })).status, 201)
  assert.equal((await t.admin('POST', `/admin/v1/clients/${A}/payment-requests/pr-sec/simulate`, { outcome: 'confirmed' })).status, 201)
})
after(() => t.close())

describe('scopes', () => {
  test('PUT needs payment_requests:write; GET and receipt-delivery need payment_requests:read', async () => {
    assertProblem(await t.call('PUT', path(A, 'pr-sec-2'), { key: readOnly.apiKey, body }), 403, 'client_scope_denied', 'read-only PUT')
    assertProblem(
      await t.call('PUT', path(A, 'pr-sec-2'), { key: receivablesOnly.apiKey, body }),
      403,
      'client_scope_denied',
      'receivables PUT',
    )
    assert.equal((await t.call('PUT', path(A, 'pr-sec-2'), { key: writeOnly.apiKey, body })).status, 201)
    for (const rest of ['', '/receipt-delivery']) {
      assertProblem(
        await t.call('GET', path(A, 'pr-sec', rest), { key: writeOnly.apiKey }),
        403,
        'client_scope_denied',
        `write-only GET ${rest}`,
      )
      assertProblem(
        await t.call('GET', path(A, 'pr-sec', rest), { key: receivablesOnly.apiKey }),
        403,
        'client_scope_denied',
        `GET ${rest}`,
      )
      assert.equal((await t.call('GET', path(A, 'pr-sec', rest), { key: readOnly.apiKey })).status, 200)
    }
    // A refused grant cannot tell an existing request from a missing one.
    const existing = await t.call('GET', path(A, 'pr-sec'), { key: writeOnly.apiKey })
    const missing = await t.call('GET', path(A, 'pr-sec-none'), { key: writeOnly.apiKey })
    assert.deepEqual([missing.status, missing.json.detail], [existing.status, existing.json.detail])
  })

  test('the change feed shows Payment request and Payment events only to payment_requests:read', async () => {
    const types = async (key: string) =>
      new Set(
        (await t.call('GET', `/v1/clients/${A}/changes?limit=200`, { key })).json.data.map(
          (e: { resource: { type: string } }) => e.resource.type,
        ),
      )
    const withRead = await types(readOnly.apiKey)
    assert.deepEqual([...withRead].sort(), ['payment', 'payment_request'])
    const without = await types(receivablesOnly.apiKey)
    assert.equal(without.has('payment_request') || without.has('payment'), false)
    assert.equal(without.has('receivable'), true)
  })
})

describe('tenant isolation', () => {
  test("another client's key is refused on A's requests; under its own client it finds nothing of A's", async () => {
    for (const [method, rest] of [
      ['GET', ''],
      ['GET', '/receipt-delivery'],
      ['PUT', ''],
    ] as const) {
      assertProblem(
        await t.call(method, path(A, 'pr-sec', rest), { key: b.apiKey, ...(method === 'PUT' ? { body } : {}) }),
        403,
        'client_scope_denied',
        `${method} ${rest}`,
      )
    }
    assertProblem(await t.call('GET', path(B, 'pr-sec'), { key: b.apiKey }), 404, 'payment_request_not_found')
    assertProblem(await t.call('GET', path(B, 'pr-sec', '/receipt-delivery'), { key: b.apiKey }), 404, 'payment_request_not_found')
    // B may use the same id for its own request: identities are per client.
    const own = await t.call('PUT', path(B, 'pr-sec'), { key: b.apiKey, body: { ...body, amount: usd('3.00') } })
    assert.equal(own.status, 201, own.body)
    assert.equal((await t.call('GET', path(A, 'pr-sec'), { key: a.apiKey })).json.amount.amount, '10.00')
    // The operator's simulate is keyed by client too: B's request is not A's.
    assertProblem(
      await t.admin('POST', `/admin/v1/clients/${B}/payment-requests/pr-sec-2/simulate`, { outcome: 'confirmed' }),
      404,
      'payment_request_not_found',
    )
  })
})

describe('the operator route and the page token', () => {
  test('simulate takes only the operator token, never an API key', async () => {
    const url = `/admin/v1/clients/${A}/payment-requests/pr-sec-2/simulate`
    for (const authorization of [undefined, `Bearer ${a.apiKey}`, 'Bearer wrong-operator-token-0123456789']) {
      const res = await t.call('POST', url, { body: { outcome: 'confirmed' }, ...(authorization ? { headers: { authorization } } : {}) })
      assertProblem(res, 401, 'invalid_admin_token', String(authorization))
    }
    assert.equal((await t.call('GET', path(A, 'pr-sec-2'), { key: a.apiKey })).json.status, 'open')
  })

  test('the hosted page is found by its token alone, never by client code or request id', async () => {
    const svc = t.app.services.paymentRequests
    const url: string = (await t.call('GET', path(A, 'pr-sec-2'), { key: a.apiKey })).json.hostedUrl
    const token = url.slice('http://irs.test/pay/'.length)
    assert.match(token, /^[A-Za-z0-9_-]{43}$/)
    assert.equal(Buffer.from(token, 'base64url').length, 32, '256 random bits')
    assert.ok(await svc.pageView(token))
    for (const guess of ['pr-sec-2', `${A}/pr-sec-2`, `${A}:pr-sec-2`, '', token.toLowerCase(), token.slice(0, 42)]) {
      if (guess === token) continue
      assert.equal(await svc.pageView(guess), undefined, guess)
      await assert.rejects(svc.settleFromPage(guess, 'confirmed'), { code: 'payment_request_not_found' })
    }
    // The view carries nothing about the Customer, the Receivable or its balance.
    assert.deepEqual(Object.keys((await svc.pageView(token)) ?? {}).sort(), [
      'amount',
      // The creditor's branding (its name, colour, support contact and locale): nothing of the debtor's.
      'branding',
      // Why a canceled request was canceled (requested or balance_changed), never the integrator's note.
      'cancelReason',
      // The provider's payment id once confirmed (null before): the debtor's confirmation number.
      'confirmationNumber',
      'creditorName',
      'decidedAt',
      'description',
      'expiresAt',
      // Whether refunds gave the whole Payment back (the page says refunded): no amount, nothing of the debtor's.
      'refundedInFull',
      'sandboxForm',
      'state',
    ])
  })
})
