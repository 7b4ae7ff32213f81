import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { startTestApp, type Tenant, type TestApp } from './helpers/app.ts'

let t: TestApp
let tenant: Tenant
before(async () => {
  t = await startTestApp()
  tenant = await t.tenant('smoke')
})
after(() => t.close())

test('a Customer PUT creates (201), reads back and an identical retry answers 200 with the same revision', async () => {
  const body = { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' }
  const created = await t.call('PUT', '/v1/clients/smoke/customers/c-1', { key: tenant.apiKey, body })
  assert.equal(created.status, 201)
  assert.equal(created.json.revision, 1)
  const retry = await t.call('PUT', '/v1/clients/smoke/customers/c-1', { key: tenant.apiKey, body })
  assert.equal(retry.status, 200)
  assert.equal(retry.json.revision, 1)
  const got = await t.call('GET', '/v1/clients/smoke/customers/c-1', { key: tenant.apiKey })
  assert.deepEqual(got.json, {
    ...body,
    externalCustomerId: 'c-1',
    contacts: [],
    restrictions: [],
    revision: 1,
    updatedAt: created.json.updatedAt,
  })
})
