import assert from 'node:assert/strict'
import type { Response, Tenant, TestApp } from './app.ts'
import { payableReceivable } from './payments.ts'

/** Fixtures shared by the reconciliation suites: a confirmed Payment on a hold-free Receivable, and calls. */
export const usd = (amount: string) => ({ amount, currency: 'USD' })

export function calls(t: TestApp, tenant: Tenant) {
  const base = `/v1/clients/${tenant.clientCode}`
  return {
    put: (id: string, body: unknown, key = tenant.apiKey) => t.call('PUT', `${base}/payment-reconciliations/${id}`, { key, body }),
    get: (id: string, key = tenant.apiKey) => t.call('GET', `${base}/payment-reconciliations/${id}`, { key }),
    resolve: (id: string, body: unknown, key = tenant.apiKey) =>
      t.call('PUT', `${base}/payment-reconciliations/${id}/resolution`, { key, body }),
    receivable: (id: string) => t.call('GET', `${base}/receivables/${id}`, { key: tenant.apiKey }),
    instruction: (id: string) => t.call('GET', `${base}/recovery-instructions/${id}`, { key: tenant.apiKey }),
    request: (id: string, body: unknown) => t.call('PUT', `${base}/payment-requests/${id}`, { key: tenant.apiKey, body }),
    simulate: (id: string, outcome: 'confirmed' | 'failed') =>
      t.admin('POST', `/admin/v1/clients/${tenant.clientCode}/payment-requests/${id}/simulate`, { outcome }),
    /** Every change-feed event of the client, oldest first, as `type resourceType/id @revision`. */
    async feed(): Promise<string[]> {
      const out: string[] = []
      let after = ''
      for (;;) {
        const res = await t.call('GET', `${base}/changes?limit=200${after ? `&after=${after}` : ''}`, { key: tenant.apiKey })
        assert.equal(res.status, 200, res.body)
        for (const e of res.json.data) out.push(`${e.type} ${e.resource.type}/${e.resource.id} @${e.revision}`)
        if (!res.json.hasMore) return out
        after = res.json.nextCursor
      }
    },
  }
}

export function expectStatus(res: Response, status: number) {
  assert.equal(res.status, status, res.body)
  return res
}

/**
 * A hold-free Receivable `receivableId` (source `amount`, an authorized instruction `ins-<receivableId>`) and a
 * Payment request `requestId` for `pay` on it, confirmed by the sandbox provider.
 */
export async function confirmedPayment(
  t: TestApp,
  tenant: Tenant,
  receivableId: string,
  requestId: string,
  opts: { amount?: string; pay?: string; existingReceivable?: boolean } = {},
) {
  if (!opts.existingReceivable) await payableReceivable(t, tenant, receivableId, { amount: opts.amount ?? '100.00' })
  const c = calls(t, tenant)
  expectStatus(await c.request(requestId, { externalReceivableId: receivableId, amount: usd(opts.pay ?? '60.00') }), 201)
  const confirmed = expectStatus(await c.simulate(requestId, 'confirmed'), 201)
  return confirmed
}

export const line = (externalReceiptLineId: string, externalReceivableId: string, amount: string) => ({
  externalReceiptLineId,
  externalReceivableId,
  amount: usd(amount),
})
