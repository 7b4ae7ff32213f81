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
