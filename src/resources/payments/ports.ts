import type { UnitOfWork } from '../unit-of-work.ts'
import type { ProviderFact, ProviderRefund } from './provider.ts'

/**
 * What the provider side (checkout.ts, provider-events.ts) asks of the families that own requests and refunds
 * (docs/design/payment-provider-seam.md): declared here, implemented there (payment-requests/provider-side.ts,
 * refunds/provider-side.ts), filled in src/app.ts. So payments/ imports neither family: they import payments/.
 * Every method runs inside the caller's unit of work and takes its locks in the order the rules keep: the request,
 * then its Receivable or Payment, then the attempt.
 */
export interface ProviderRequests {
  /**
   * Pay: the request row-locked, its expiry recorded first when due. Null when the page should just show it (its
   * Payment is confirmed); throws the page's refusals (expired, canceled, failed: payment_request_state_conflict).
   */
  lockToPay(uow: UnitOfWork, clientCode: string, requestId: string, now: string, nowMs: number): Promise<RequestToPay | null>
  /** The request row-locked before one of its attempts changes; false when there is no such request. */
  lock(uow: UnitOfWork, clientCode: string, requestId: string): Promise<boolean>
  /**
   * Money the provider took, recorded through the one confirmation rule whatever the holds (the pay-time check ran
   * before the debtor paid). `taken: false`: the request cannot take it (expired or canceled meanwhile, paid
   * through another session, another amount or currency), and nothing was recorded.
   */
  recordPaid(
    uow: UnitOfWork,
    provider: string,
    clientCode: string,
    fact: Extract<ProviderFact, { kind: 'paid' }>,
    now: string,
  ): Promise<{ taken: false } | { taken: true; created: boolean; unappliedMinor: bigint }>
  /** Money the provider took back from the request's Payment (a dispute lost, funds withdrawn). */
  recordReversal(
    uow: UnitOfWork,
    clientCode: string,
    requestId: string,
    amount: { amountMinor: bigint; currency: string },
    now: string,
  ): Promise<void>
}

/** A request locked to pay: its expiry, and the pay-time check still to run. */
export interface RequestToPay {
  expiresAt: string
  /**
   * The pay-time check, as every confirmation makes it: a hold refuses (409 recovery_held); an amount that no longer
   * fits cancels the request (`balance_changed`) and answers false; true when it may be paid.
   */
  payTimeCheck(): Promise<boolean>
}

export interface ProviderRefunds {
  /** The provider decided a refund the service asked for; false when it was decided already. */
  recordDecision(
    uow: UnitOfWork,
    refund: { clientCode: string; requestId: string; refundId: string },
    decision: ProviderRefund & { status: 'succeeded' | 'failed' },
    now: string,
  ): Promise<boolean>
  /**
   * A refund made at the provider (its Dashboard) of the request's Payment, recorded with origin `provider` and
   * decided succeeded, once per provider refund id. Answers the effect (`provider_refund_recorded`, `not_found`,
   * `refund_already_recorded`, `nothing_to_refund`). What the Payment no longer held (a dispute's withdrawal holds it)
   * waits for `recordWithheldRefunds`.
   */
  recordProviderRefund(
    uow: UnitOfWork,
    provider: string,
    clientCode: string,
    requestId: string,
    fact: Extract<ProviderFact, { kind: 'provider_refund' }>,
    now: string,
  ): Promise<string>
  /**
   * Money a won dispute gave back (`givenBack.amountMinor`, by its reversal `reversalId`) first records the provider
   * refunds that were waiting for it, as refunds of the request's Payment with origin `provider`: the provider already
   * refunded that money. Answers the amount recorded.
   */
  recordWithheldRefunds(
    uow: UnitOfWork,
    clientCode: string,
    requestId: string,
    givenBack: { amountMinor: bigint; reversalId: string },
    now: string,
  ): Promise<bigint>
  /**
   * Money a reinstatement gave back that its Payment cannot hold (payments/reinstatement.ts): a refund of unapplied
   * funds queued at once, as a confirmation's unapplied money is.
   */
  queueUnappliedRefund(
    uow: UnitOfWork,
    clientCode: string,
    r: { requestId: string; refundId: string; currency: string; amountMinor: bigint; now: string },
  ): Promise<void>
  /** What remains of the request's confirmed Payment after its refunds and reversals, row-locked; null without one. */
  lockRemaining(uow: UnitOfWork, clientCode: string, requestId: string): Promise<{ remainingMinor: bigint } | null>
}
