import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { payableReceivable } from '../helpers/payments.ts'

/** A feed append wakes only the delivery channels it concerns: a customer's change is no receipt's business. */
let t: TestApp
const woken: string[] = []
before(async () => {
  t = await startTestApp()
  t.app.webhookDispatcher.wake = () => void woken.push('webhooks')
  t.app.receiptDispatcher.wake = () => void woken.push('receipts')
})
after(() => t.close())

test("a customer's change wakes the webhook channel only; a confirmed Payment wakes both", async () => {
  const tn = await t.tenant('dw-wake')
  woken.length = 0
  const res = await t.call('PUT', '/v1/clients/dw-wake/customers/c-1', {
    key: tn.apiKey,
    body: { type: 'person', name: { firstName: 'Ada', lastName: 'L' }, sourceReference: 'dw/c/1' },
  })
  assert.equal(res.status, 201, res.body)
  assert.deepEqual(woken, ['webhooks'])
  const receivable = await payableReceivable(t, tn, 'rcv-wake')
  const pr = await t.call('PUT', '/v1/clients/dw-wake/payment-requests/pr-wake', {
    key: tn.apiKey,
    body: { externalReceivableId: receivable, amount: { amount: '10.00', currency: 'USD' } },
  })
  assert.equal(pr.status, 201, pr.body)
  woken.length = 0
  const sim = await t.admin('POST', '/admin/v1/clients/dw-wake/payment-requests/pr-wake/simulate', { outcome: 'confirmed' })
  assert.equal(sim.status, 201, sim.body)
  assert.deepEqual(woken, ['webhooks', 'receipts'])
})
