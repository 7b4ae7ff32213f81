import { type BrandingFields, brandingFields } from '../../domain/branding.ts'
import { holdsFromRow } from '../../domain/holds.ts'
import { money } from '../../domain/money.ts'
import { Problem } from '../../domain/problems.ts'
import type { Clock } from '../../domain/time.ts'
import type { Store } from '../../store/store.ts'
import type { Checkout, CheckoutAnswer } from '../payments/checkout.ts'
import type { PaymentProvider } from '../payments/provider.ts'
import type { PaymentRules } from './payment-rules.ts'
import { findPageRow, type PageRow } from './store.ts'

/** What the hosted page (page.ts) may show: nothing about the Customer, no money beyond the amount asked. */
export interface HostedPageView {
  state: 'payable' | 'confirmed' | 'failed' | 'expired' | 'held' | 'canceled'
  /** Why, when state is 'canceled'; null otherwise. */
  cancelReason: 'requested' | 'balance_changed' | null
  /** clients.name, or the clientCode when the client has no name */
  creditorName: string
  description: string | null
  amount: { amount: string; currency: string }
  expiresAt: string
  /** when the provider decided (confirmed/failed), else null */
  decidedAt: string | null
  /** true when state is 'payable' and the provider offers the sandbox form */
  sandboxForm: boolean
  /** The client's branding (display name, accent colour, support contact, locale), each field null when not set. */
  branding: BrandingFields
  /** The provider's id of the confirmed Payment, shown to the debtor as the confirmation number; else null. */
  confirmationNumber: string | null
  /**
   * Present only when state is 'payable' and the client pays through a real provider (payments/checkout.ts): `pay`
   * (the Pay button sends the debtor to the provider), `pay_again` (the same, after a bank debit that failed),
   * `processing` (a payment is under way: the debtor came back from the provider's page, or a bank debit is being
   * collected; no button), `too_late` (it expires too soon to start a payment online).
   */
  providerCheckout?: 'pay' | 'pay_again' | 'processing' | 'too_late'
  /** When state is 'confirmed' and refunds gave all of it back: the page says it was refunded, not received. */
  refundedInFull: boolean
}

export interface HostedPageDeps {
  store: Store
  clock: Clock
  /** The provider with a test form (the sandbox's, in sandbox): absent, the page offers no test form. */
  sandboxProvider?: PaymentProvider
  paymentRules: Pick<PaymentRules, 'confirmationOf' | 'payability'>
  /** Paying through a client's real provider (payments/checkout.ts); absent, no client pays at a provider. */
  checkout?: Pick<Checkout, 'pay' | 'minTimeLeftMs'>
  /** The key mode a real provider must have here (test in sandbox, live in production); another is not offered. */
  checkoutMode?: 'test' | 'live'
  /**
   * The page's read-back (payments/provider-sync.ts readBackPage): asks the provider about the request's open or
   * processing attempt, at most once per 5 s per attempt; true when it asked (the page reads its row again).
   */
  readBack?: (clientCode: string, requestId: string) => Promise<boolean>
  /** The sandbox settlement of one request (the service's confirmOperation, under its lock). */
  settle: (row: PageRow, outcome: 'confirmed' | 'failed') => Promise<void>
}

/**
 * The hosted page's three operations, by its token only (docs/design/payment-provider-seam.md):
 * - `pageView`: what the page shows; one read, no transaction, and for an attempt open or processing at the
 *   provider, what the provider says now (the read-back), settled as its event would be;
 * - `pay`: the Pay button of a client with a real provider: a checkout started (or resumed) at that provider;
 * - `settleFromPage`: the sandbox's test form (confirmed or failed), through the sandbox provider's `settle`.
 * Pay and settlement are separate: a client with a real provider has no test form, and a test form starts no checkout.
 */
export function createHostedPage(deps: HostedPageDeps) {
  const { store, clock, sandboxProvider, checkout } = deps
  const { confirmationOf, payability } = deps.paymentRules
  const paysAtProvider = (row: PageRow) => row.provider_mode !== null && checkout !== undefined

  /** The client's time for the page: its sandbox clock's instant when stopped, else now (always in production). */
  const nowOf = (row: PageRow): number => (row.frozen_at !== null ? Date.parse(row.frozen_at) : clock.now().getTime())

  /**
   * What the page offers a payable request of a client with a real provider: processing while a bank debit is being
   * collected, or when the debtor came back from the provider's page of the latest attempt (`?checkout=<session>`)
   * before its event arrived; too late within the provider's least time left before the request's expiry; else Pay.
   */
  function providerCheckoutOf(row: PageRow, returnedFrom: string | undefined): NonNullable<HostedPageView['providerCheckout']> {
    if (row.checkout_status === 'processing' || row.checkout_status === 'complete') return 'processing'
    if (returnedFrom !== undefined && returnedFrom === row.checkout_session_id && row.checkout_status === 'open') return 'processing'
    // Not this deployment's mode (a database copied between environments): the Pay button, whose POST refuses.
    if (deps.checkoutMode !== undefined && row.provider_mode !== deps.checkoutMode) return 'pay'
    if (Date.parse(row.expires_at) - nowOf(row) < (checkout?.minTimeLeftMs(row.provider_name ?? '') ?? 0)) return 'too_late'
    return row.checkout_status === 'failed' ? 'pay_again' : 'pay'
  }

  function pageViewOf(row: PageRow, returnedFrom?: string): HostedPageView {
    const state = payability(row, holdsFromRow(row), nowOf(row)).state
    const offer = state === 'payable' && paysAtProvider(row) ? providerCheckoutOf(row, returnedFrom) : undefined
    return {
      state,
      cancelReason: state === 'canceled' ? row.cancel_reason : null,
      creditorName: row.creditor_name,
      description: row.description,
      amount: money(BigInt(row.amount_minor), row.currency),
      expiresAt: row.expires_at,
      decidedAt: row.decided_at,
      sandboxForm: state === 'payable' && sandboxProvider?.settle !== undefined && row.provider_mode === null,
      branding: brandingFields(row.branding),
      confirmationNumber: state === 'confirmed' ? row.provider_payment_id : null,
      refundedInFull: state === 'confirmed' && row.refunded_minor !== null && BigInt(row.refunded_minor) >= BigInt(row.amount_minor),
      ...(offer ? { providerCheckout: offer } : {}),
    }
  }

  return {
    /**
     * The hosted page's view, by its token only; undefined for an unknown token. One statement, no transaction
     * (findPageRow): a flood of page reads costs the store one indexed read each, and holds no lock. Whether the
     * request may be paid now is payability(), the decision the page's POST and the operator's simulate make.
     */
    async pageView(token: string, opts: { returnedFrom?: string } = {}): Promise<HostedPageView | undefined> {
      let row = await findPageRow(store, token)
      // An attempt open or processing at the provider: what it says now, settled as its event would (read-back).
      if (
        row?.status === 'open' &&
        row.provider_mode !== null &&
        deps.readBack &&
        (row.checkout_status === 'open' || row.checkout_status === 'processing')
      ) {
        const asked = await deps.readBack(row.client_code, row.external_payment_request_id).catch(() => false)
        if (asked) row = await findPageRow(store, token)
      }
      return row && pageViewOf(row, opts.returnedFrom)
    },

    /**
     * The page's Pay button: a checkout at the client's real provider (payments/checkout.ts), answered with where
     * the debtor goes. A client without one is sent back to the page, which offers what it has (nothing started).
     * Throws the page's refusals (payment_request_not_found, recovery_held, payment_request_state_conflict).
     */
    async pay(token: string): Promise<CheckoutAnswer> {
      const row = await findPageRow(store, token)
      if (!row) throw new Problem('payment_request_not_found', 'No Payment request at this address.')
      if (!checkout || !paysAtProvider(row)) return { redirect: `/pay/${token}` }
      return checkout.pay(token, row)
    },

    /**
     * The hosted page's sandbox form. Throws a Problem: payment_request_not_found (unknown token),
     * recovery_held, payment_request_state_conflict; route_not_found when no provider offers a form.
     * A request the page read finds not payable now is refused from that read alone, with no transaction; a
     * payable one is confirmed by the service's confirmOperation, which judges it again under its lock. Both judge
     * with one rule: confirmationOf(payability(...)). A client with a real provider has no test form: back to the page.
     */
    async settleFromPage(token: string, outcome: 'confirmed' | 'failed'): Promise<CheckoutAnswer | undefined> {
      const row = await findPageRow(store, token)
      if (row && paysAtProvider(row)) return { redirect: `/pay/${token}` }
      if (!sandboxProvider?.settle) throw new Problem('route_not_found', 'No payment provider form is offered by this deployment.')
      if (!row) throw new Problem('payment_request_not_found', 'No Payment request at this address.')
      // The same outcome again is no refusal: the Payment it asks for exists (post/redirect/get shows it).
      if (confirmationOf(payability(row, holdsFromRow(row), nowOf(row)), outcome) === 'already') return undefined
      // A request the pay-time check cancels (balance_changed) is no refusal either: the cancel commits, and the
      // page (post/redirect/get) says the balance changed and nothing was charged.
      await deps.settle(row, outcome)
      return undefined
    },
  }
}

export type HostedPage = ReturnType<typeof createHostedPage>
