import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { routeKey } from '../../helpers/route-walk.ts'
import { engineName } from '../../helpers/store.ts'

/**
 * Issue 20 item 12: an action route that takes no body (rotate-secret, disable, retry) holds a body sent anyway to
 * the rules of every JSON body (valid JSON, JSON media type, 256 KiB), as the pause and resume commands and the
 * operator's action routes do, and then ignores it; its OpenAPI operation documents those answers.
 */
let t: TestApp
let a: Tenant
const path = '/v1/clients/wh-body/webhook-endpoint'

before(async () => {
  t = await startTestApp({}, { resolver: async () => [{ address: '93.184.215.14', family: 4 }] })
  a = await t.tenant('wh-body')
  const put = await t.call('PUT', path, { key: a.apiKey, body: { url: 'https://hooks.body.com/x' } })
  assert.equal(put.status, 201, put.body)
})
after(() => t.close())

describe(`action routes without a body (${engineName})`, () => {
  test('rotate-secret: malformed JSON is 400 malformed_json and rotates nothing; valid JSON, or no body, is ignored', async () => {
    const endpoint = async () =>
      t.store.query('SELECT secret_version, updated_at FROM webhook_endpoints WHERE client_code = $1', ['wh-body'])
    const audits = async () => t.store.query('SELECT action FROM audit_events WHERE client_code = $1 ORDER BY seq', ['wh-body'])
    const before = { endpoint: await endpoint(), audits: await audits() }
    for (const rawBody of ['{"reason": ', 'not json', '']) {
      const res = await t.call('POST', `${path}/rotate-secret`, { key: a.apiKey, rawBody, contentType: 'application/json' })
      assert.equal(res.status, 400, `${JSON.stringify(rawBody)}: ${res.body}`)
      assert.equal(problemCode(res), 'malformed_json')
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
    }
    assert.deepEqual({ endpoint: await endpoint(), audits: await audits() }, before)

    const withBody = await t.call('POST', `${path}/rotate-secret`, { key: a.apiKey, body: { reason: 'ignored', secretVersion: 99 } })
    assert.equal(withBody.status, 200, withBody.body)
    assert.equal(withBody.json.secretVersion, 2)
    const without = await t.call('POST', `${path}/rotate-secret`, { key: a.apiKey })
    assert.equal(without.status, 200, without.body)
    assert.equal(without.json.secretVersion, 3)
  })

  test('the OpenAPI documents 400 malformed_json, 413 and 415 on every route that reads a body, with a body schema or not', async () => {
    const doc = (await t.call('GET', '/v1/openapi.json')).json
    const bodyless = t.app.routes.filter((r) => r.public && r.method !== 'GET' && !r.body).map(routeKey)
    assert.deepEqual(bodyless.sort(), [
      'POST /v1/clients/:clientCode/customers/:externalCustomerId/erasure',
      'POST /v1/clients/:clientCode/webhook-endpoint/deliveries/:deliveryId/retry',
      'POST /v1/clients/:clientCode/webhook-endpoint/disable',
      'POST /v1/clients/:clientCode/webhook-endpoint/rotate-secret',
      'POST /v1/clients/:clientCode/webhook-endpoint/test',
    ])
    for (const route of t.app.routes.filter((r) => r.public && r.method !== 'GET')) {
      const op = doc.paths[route.path.replace(/:([A-Za-z]+)/g, '{$1}')][route.method.toLowerCase()]
      for (const [status, code] of [
        ['400', 'malformed_json'],
        ['413', 'request_too_large'],
        ['415', 'unsupported_media_type'],
      ] as const) {
        assert.ok(op.responses[status], `${routeKey(route)}: no ${status}`)
        assert.match(op.responses[status].description, new RegExp(`\`${code}\``), routeKey(route))
      }
    }
  })
})
