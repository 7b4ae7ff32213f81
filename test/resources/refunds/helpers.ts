import assert from 'node:assert/strict'
import type { Tenant, TestApp } from '../../helpers/app.ts'
import { confirmedPayment, expectStatus, calls as reconciliationCalls, usd } from '../../helpers/reconciliations.ts'

/** Fixtures and calls shared by the refund suites (test/resources/refunds/, test/workers/refund-worker.test.ts). */
export { confirmedPayment, expectStatus, usd }

export function refundCalls(t: TestApp, tenant: Tenant) {
  const base = `/v1/clients/${tenant.clientCode}`
  const c = reconciliationCalls(t, tenant)
  return {
    ...c,
    refund: (requestId: string, refundId: string, body: unknown, key = tenant.apiKey) =>
      t.call('PUT', `${base}/payment-requests/${requestId}/refunds/${refundId}`, { key, body }),
    getRefund: (requestId: string, refundId: string, key = tenant.apiKey) =>
      t.call('GET', `${base}/payment-requests/${requestId}/refunds/${refundId}`, { key }),
    listRefunds: (requestId: string, query = '', key = tenant.apiKey) =>
      t.call('GET', `${base}/payment-requests/${requestId}/refunds${query}`, { key }),
    paymentRequest: (requestId: string) => t.call('GET', `${base}/payment-requests/${requestId}`, { key: tenant.apiKey }),
    reverse: (requestId: string, amount?: string | { amount: string; currency: string }) =>
      t.admin('POST', `/admin/v1/clients/${tenant.clientCode}/payment-requests/${requestId}/simulate`, {
        outcome: 'reversed',
        ...(amount === undefined ? {} : { amount: typeof amount === 'string' ? usd(amount) : amount }),
      }),
    /** The Receivable's financial position as four amounts: source, working, confirmed-unreconciled, acknowledged. */
    async position(receivableId: string): Promise<[string, string, string, string]> {
      const r = expectStatus(await c.receivable(receivableId), 200).json.financialPosition
      return [r.sourceAmount.amount, r.workingAmount.amount, r.confirmedUnreconciledAmount.amount, r.receiptAcknowledgedAmount.amount]
    },
    async revision(receivableId: string): Promise<number> {
      return expectStatus(await c.receivable(receivableId), 200).json.revision
    },
    /** The Payment's amounts: [amount, allocated, unapplied, refunded, reversed]. */
    async payment(requestId: string): Promise<[string, string, string, string, string]> {
      const p = expectStatus(await t.call('GET', `${base}/payment-requests/${requestId}`, { key: tenant.apiKey }), 200).json.payment
      assert.ok(p, 'the request has a Payment')
      return [p.amount.amount, p.allocatedAmount.amount, p.unappliedAmount.amount, p.refundedAmount.amount, p.reversedAmount.amount]
    },
  }
}

/** The money-back events of a feed (refund.*, payment.reversed, receivable.updated), in order. */
export const moneyBack = (feed: string[]) => feed.filter((e) => /^(refund\.|payment\.reversed|receivable\.updated)/.test(e))
