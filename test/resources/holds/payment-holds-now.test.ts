import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'

/**
 * A client-wide hold stops recovery at once, not when the background fan-out reaches the Receivable: a Payment
 * request, or a sandbox payment, brings its Receivable up to the client's last fact in its own transaction first
 * (src/resources/holds/client-facts-store.ts, catchUpReceivable). The fan-out is never run in this file.
 */
let t: TestApp
let tenant: Tenant
const CLIENT = 'holdsnow'

before(async () => {
  t = await startTestApp()
  tenant = await t.tenant(CLIENT)
})
after(() => t.close())

const receivable = async (id: string) => (await t.call('GET', `/v1/clients/${CLIENT}/receivables/${id}`, { key: tenant.apiKey })).json
const requestPayment = (id: string, receivableId: string) =>
  t.call('PUT', `/v1/clients/${CLIENT}/payment-requests/${id}`, {
    key: tenant.apiKey,
    body: { externalReceivableId: receivableId, amount: { amount: '10.00', currency: 'USD' }, description: 'Instalment' },
  })

describe('collection disabled: recovery stops in the next request', () => {
  test('a Payment request is refused with the new hold, and the Receivable shows it at a new revision', async () => {
    const id = await payableReceivable(t, tenant, 'hn-1')
    const before = await receivable(id)
    assert.equal((await t.admin('PUT', `/admin/v1/clients/${CLIENT}`, { collectionEnabled: false })).status, 200)
    // The fan-out has not run: the read still shows the revision it had.
    assert.equal((await receivable(id)).revision, before.revision)
    const res = await requestPayment('pr-hn-1', id)
    assert.equal(res.status, 409)
    assert.equal(problemCode(res), 'recovery_held')
    assert.deepEqual(res.json.holds, ['collection_not_enabled'])
    // The refusal rolled the catch-up back with it: the read is as before, and the fan-out will bring it.
    assert.equal((await receivable(id)).revision, before.revision)
    await t.app.clientFanout.runUntilIdle()
    const after = await receivable(id)
    assert.equal(after.revision, before.revision + 1)
    assert.deepEqual(after.recovery, { held: true, holds: ['collection_not_enabled'] })
  })

  test('a sandbox payment of an open request is refused too, and nothing is paid', async () => {
    assert.equal((await t.admin('PUT', `/admin/v1/clients/${CLIENT}`, { collectionEnabled: true })).status, 200)
    const id = await payableReceivable(t, tenant, 'hn-2')
    assert.equal((await requestPayment('pr-hn-2', id)).status, 201)
    assert.equal((await t.admin('PUT', `/admin/v1/clients/${CLIENT}`, { collectionEnabled: false })).status, 200)
    const res = await t.admin('POST', `/admin/v1/clients/${CLIENT}/payment-requests/pr-hn-2/simulate`, { outcome: 'confirmed' })
    assert.equal(res.status, 409)
    assert.equal(problemCode(res), 'recovery_held')
    const request = await t.call('GET', `/v1/clients/${CLIENT}/payment-requests/pr-hn-2`, { key: tenant.apiKey })
    assert.equal(request.json.status, 'open')
  })

  test('with no pending client-wide change, a Payment request gives the Receivable no new revision', async () => {
    assert.equal((await t.admin('PUT', `/admin/v1/clients/${CLIENT}`, { collectionEnabled: true })).status, 200)
    const id = await payableReceivable(t, tenant, 'hn-3')
    const before = await receivable(id)
    assert.equal((await requestPayment('pr-hn-3', id)).status, 201)
    assert.equal((await receivable(id)).revision, before.revision)
  })
})
