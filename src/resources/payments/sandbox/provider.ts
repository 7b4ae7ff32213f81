import { createHash } from 'node:crypto'
import type { PaymentProvider, ProviderFact } from '../provider.ts'

/**
 * The sandbox provider (docs/design/payment-provider-seam.md): in sandbox, what a client without a real provider pays
 * through. No money moves and nothing is outside the service: its checkout page is the hosted page's own test form,
 * which settles at once (`settle`) with the outcome the debtor (or the operator's `simulate`) picks; it sends no
 * events, so it has none to read, verify or list; a refund is decided at once.
 */
export const SANDBOX_PROVIDER = 'sandbox'

/** The sandbox's test trigger (as card test numbers are): a refund whose amount ends in .13 fails. */
export const SANDBOX_FAILING_REFUND_CENTS = 13n

const digestOf = (text: string) => createHash('sha256').update(text).digest('hex')
const NOTHING_HERE: ProviderFact = { kind: 'none', why: 'the sandbox settles at once from the page, with no session' }

/**
 * Its payment id is derived from the request, so a second confirmation of one request names the same Payment; its
 * refund id from the refund's idempotency key, so a refund asked again is the same refund.
 */
export function createSandboxProvider(): PaymentProvider {
  return {
    name: SANDBOX_PROVIDER,
    // A session here is the page itself: it lives as long as its request.
    sessionLifetime: { minSeconds: 0, maxSeconds: Number.MAX_SAFE_INTEGER },
    checkoutOrigins: [],
    settle(request, outcome) {
      return {
        provider: SANDBOX_PROVIDER,
        providerPaymentId: `sbx_${digestOf(`${request.clientCode}/${request.externalPaymentRequestId}`).slice(0, 32)}`,
        outcome,
        amountMinor: request.amountMinor,
        currency: request.currency,
      }
    },
    async startCheckout(start) {
      // The test form is on the page the debtor is sent back to: that page is the sandbox's checkout.
      return {
        sessionId: `sbx_cs_${digestOf(start.idempotencyKey).slice(0, 29)}`,
        url: start.cancelUrl,
        expiresAt: start.expiresAt.toISOString(),
      }
    },
    async readCheckout() {
      return NOTHING_HERE
    },
    async closeCheckout() {},
    readEvent() {
      return { id: '', type: '', objectId: '', ignored: 'the sandbox sends no events' }
    },
    async factOf() {
      return NOTHING_HERE
    },
    async *eventPages() {},
    async refund(request) {
      const providerRefundId = `sbx_re_${digestOf(request.idempotencyKey).slice(0, 29)}`
      // Amounts are in minor units of two-decimal currencies here, as every sandbox amount is.
      if (request.amountMinor % 100n === SANDBOX_FAILING_REFUND_CENTS) {
        return { providerRefundId, status: 'failed', failureReason: 'sandbox_declined: a refund amount ending in .13 fails' }
      }
      return { providerRefundId, status: 'succeeded' }
    },
    async returnPayment() {
      // Sandbox money is not real: there is nothing to give back.
    },
  }
}
