import assert from 'node:assert/strict'
import type { Tenant, TestApp } from './app.ts'

/**
 * A Receivable with no hold at all, so Payment requests may be created for it: the client has collection
 * enabled, the Source has just written (fresh), and an authorized recovery instruction governs it.
 * Returns the Receivable's id; the Customer `pay-cust` is created once per client.
 */
export async function payableReceivable(
  t: TestApp,
  tenant: Tenant,
  id: string,
  opts: { amount?: string; currency?: string } = {},
): Promise<string> {
  const client = tenant.clientCode
  const money = { amount: opts.amount ?? '100.00', currency: opts.currency ?? 'USD' }
  const ok = (res: { status: number; body: string }, what: string) => assert.ok(res.status < 300, `${what}: ${res.status} ${res.body}`)
  ok(await t.admin('PUT', `/admin/v1/clients/${client}`, { collectionEnabled: true }), 'enable collection')
  // The client's existing Receivables reach the toggle in the background.
  await t.app.clientFanout.runUntilIdle()
  ok(
    await t.call('PUT', `/v1/clients/${client}/customers/pay-cust`, {
      key: tenant.apiKey,
      body: { type: 'person', name: { firstName: 'Pat', lastName: 'Payer' }, sourceReference: 'cust/pay' },
    }),
    'customer',
  )
  ok(
    await t.call('PUT', `/v1/clients/${client}/receivables/${id}`, {
      key: tenant.apiKey,
      body: {
        financialType: 'loan_balance',
        sourceRevision: 1,
        recoverableAmount: money,
        creditUnion: { loanAccountReference: `loan/${id}`, loanType: 'auto' },
        dueDate: '2026-01-01',
        responsibleCustomers: [{ externalCustomerId: 'pay-cust', role: 'primary' }],
        sourceReference: `rcv/${id}`,
      },
    }),
    'receivable',
  )
  ok(
    await t.call('PUT', `/v1/clients/${client}/recovery-instructions/ins-${id}`, {
      key: tenant.apiKey,
      body: {
        scope: { type: 'receivable', externalReceivableId: id },
        state: 'authorized',
        revision: 1,
        effectiveAt: '2026-01-01T00:00:00Z',
      },
    }),
    'instruction',
  )
  const read = await t.call('GET', `/v1/clients/${client}/receivables/${id}`, { key: tenant.apiKey })
  assert.deepEqual(read.json.recovery, { held: false, holds: [] }, `receivable ${id} should be free of holds: ${read.body}`)
  return id
}

/** The creditor name and Content-Security-Policy every hosted-page test expects. */
export const CREDITOR = 'Lakeside Credit Union'
export const PAGE_CSP = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

export interface PageRequest {
  tenant: Tenant
  client: string
  receivableId: string
  requestId: string
  hostedUrl: URL
}

/**
 * A client named CREDITOR with one payable Receivable and the Payment request `pr-<client>` for 30.00 USD on it
 * (body overrides its fields): the hosted page's usual starting point.
 */
export async function pageRequest(app: TestApp, client: string, body: Record<string, unknown> = {}): Promise<PageRequest> {
  const tenant = await app.tenant(client)
  assert.equal((await app.admin('PUT', `/admin/v1/clients/${client}`, { name: CREDITOR })).status, 200)
  const receivableId = await payableReceivable(app, tenant, `rcv-${client}`)
  const requestId = `pr-${client}`
  const put = () =>
    app.call('PUT', `/v1/clients/${client}/payment-requests/${requestId}`, {
      key: tenant.apiKey,
      body: {
        externalReceivableId: receivableId,
        amount: { amount: '30.00', currency: 'USD' },
        description: 'February instalment',
        expiresAt: '2026-11-30T12:00:00Z',
        ...body,
      },
    })
  let res = await put()
  if (res.status === 409 && String(res.json?.type).endsWith('/payment_provider_not_configured')) {
    // Production makes no request for a client without a provider: this one is made while a (live-looking) provider
    // is configured, which is removed again, so the page shows a client without one.
    const provider = { provider: 'stripe', secretKey: 'sk_live_pagerequest0123456789ab', webhookSecret: 'whsec_pagerequest0123456789' }
    assert.equal((await app.admin('PUT', `/admin/v1/clients/${client}/payment-provider`, provider)).status, 201)
    res = await put()
    assert.equal((await app.admin('DELETE', `/admin/v1/clients/${client}/payment-provider`)).status, 204)
  }
  assert.equal(res.status, 201, res.body)
  return { tenant, client, receivableId, requestId, hostedUrl: new URL(res.json.hostedUrl) }
}
