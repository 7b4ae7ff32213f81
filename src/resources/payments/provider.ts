import { createHash } from 'node:crypto'
import type { Environment } from '../../config.ts'

/**
 * The payment provider behind the hosted page: who decides whether the debtor paid. Everything else (the
 * Payment row, the allocation, the feed) is the service's and goes through `recordOutcome`
 * (payment-requests/payment-rules.ts), whatever the provider; a real adapter implements this interface and nothing more.
 */
export interface SettleRequest {
  clientCode: string
  externalPaymentRequestId: string
  amountMinor: bigint
  currency: string
}

/** What a provider reports about one Payment request: the Payment it made (or refused), by its own id. */
export interface ProviderOutcome {
  provider: string
  providerPaymentId: string
  outcome: 'confirmed' | 'failed'
  amountMinor: bigint
  currency: string
}

/** A refund the service asks the provider to make, of a Payment the provider made (its `providerPaymentId`). */
export interface RefundRequest {
  clientCode: string
  externalPaymentRequestId: string
  externalRefundId: string
  provider: string
  providerPaymentId: string
  amountMinor: bigint
  currency: string
  /**
   * The provider's idempotency key, derived from the refund's identity: asked again after a crash (a claim
   * retaken), the provider answers with the refund it already made, never a second one.
   */
  idempotencyKey: string
}

/**
 * What the provider said about a refund: `succeeded` or `failed` (decided now), or `pending` (decided later: a
 * real provider tells by an event, which records the decision as the refund worker records an immediate one,
 * refunds/store.ts decideRefund). Money moves only on `succeeded`.
 */
export interface ProviderRefund {
  providerRefundId: string
  status: 'succeeded' | 'pending' | 'failed'
  /** Why it failed (status failed), in the provider's words. */
  failureReason?: string
}

export interface PaymentProvider {
  name: string
  /** May the hosted page offer a form that settles the request directly (the sandbox's "Pay" buttons)? */
  offersSandboxForm: boolean
  settle(request: SettleRequest, outcome: 'confirmed' | 'failed'): ProviderOutcome
  /**
   * Asks for a refund. Called by the refund worker outside any transaction (a network call holds no
   * connection); a throw is a transient failure, retried later under the same idempotency key.
   */
  refund(request: RefundRequest): Promise<ProviderRefund>
}

/** The sandbox's test trigger (as card test numbers are): a refund whose amount ends in .13 fails. */
export const SANDBOX_FAILING_REFUND_CENTS = 13n

/**
 * The sandbox provider: settles at once with the outcome asked for, for the full amount. Its payment id is
 * derived from the request, so a second confirmation of one request names the same Payment.
 */
export function createSandboxProvider(): PaymentProvider {
  return {
    name: 'sandbox',
    offersSandboxForm: true,
    settle(request, outcome) {
      const digest = createHash('sha256').update(`${request.clientCode}/${request.externalPaymentRequestId}`).digest('hex')
      return {
        provider: 'sandbox',
        providerPaymentId: `sbx_${digest.slice(0, 32)}`,
        outcome,
        amountMinor: request.amountMinor,
        currency: request.currency,
      }
    },
    async refund(request) {
      const digest = createHash('sha256').update(request.idempotencyKey).digest('hex')
      const providerRefundId = `sbx_re_${digest.slice(0, 29)}`
      // Amounts are in minor units of two-decimal currencies here, as every sandbox amount is.
      if (request.amountMinor % 100n === SANDBOX_FAILING_REFUND_CENTS) {
        return { providerRefundId, status: 'failed', failureReason: 'sandbox_declined: a refund amount ending in .13 fails' }
      }
      return { providerRefundId, status: 'succeeded' }
    },
  }
}

/** Production has no provider configured yet: the page says so, and nothing can be settled. */
export const unconfiguredProvider: PaymentProvider = {
  name: 'none',
  offersSandboxForm: false,
  settle() {
    throw new Error('no payment provider is configured for this deployment')
  },
  refund() {
    return Promise.reject(new Error('no payment provider is configured for this deployment'))
  },
}

export function providerFor(environment: Environment): PaymentProvider {
  return environment === 'sandbox' ? createSandboxProvider() : unconfiguredProvider
}
