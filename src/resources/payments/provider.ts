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

export interface PaymentProvider {
  name: string
  /** May the hosted page offer a form that settles the request directly (the sandbox's "Pay" buttons)? */
  offersSandboxForm: boolean
  settle(request: SettleRequest, outcome: 'confirmed' | 'failed'): ProviderOutcome
}

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
  }
}

/** Production has no provider configured yet: the page says so, and nothing can be settled. */
export const unconfiguredProvider: PaymentProvider = {
  name: 'none',
  offersSandboxForm: false,
  settle() {
    throw new Error('no payment provider is configured for this deployment')
  },
}

export function providerFor(environment: Environment): PaymentProvider {
  return environment === 'sandbox' ? createSandboxProvider() : unconfiguredProvider
}
