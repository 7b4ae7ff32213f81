import { smallerMinor as min, unacknowledgedMinor } from '../../domain/money-rules.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { findRequestOfProviderPayment } from './checkout-store.ts'
import type { ProviderRefunds } from './ports.ts'
import type { ProviderFact } from './provider.ts'
import {
  lockReinstatedReceivable,
  lockRequestOfPayment,
  markReversalReinstated,
  recordReinstated,
  restoreAllocation,
} from './reinstatement-store.ts'
import { lockPayment, matchedMinor } from './store.ts'
import { undeclaredShareMinor } from './take-back.ts'
import { insertTakeBack } from './take-back-store.ts'

/**
 * A dispute won after its funds were withdrawn (issue 32 item 4; docs/design/payment-providers.md; docs/decisions.md,
 * "A won dispute reinstates"): the provider gave the money back, so the reversal its withdrawal recorded is undone, once
 * per dispute, whichever of its events (closed won, funds reinstated, or a late withdrawal event read after the win)
 * comes first, however often, and whether the route or the sweep brings it (migration 0044:
 * provider_reversals.reinstated_at).
 *
 * The money goes back as the take-back rule took it, in reverse (payments/take-back.ts took unapplied money first):
 * - to the allocation first (at most what was taken back from it), then to unapplied money;
 * - of the allocation, what no matched receipt line acknowledges is owed by the Receivable again as confirmed money
 *   (`confirmedUnreconciledAmount` rises, `workingAmount` falls), as far as the Receivable's working amount still has
 *   room: the debtor may have paid that money again meanwhile, and the service never holds more than is owed. What
 *   does not fit moves from the Payment's allocation to its unapplied money;
 * - acknowledged money goes back to the Payment's undeclared share (and the Receivable's acknowledged-undeclared
 *   figure): the Source acknowledged it, so it stays out of the working amount until the Source declares again;
 * - refunds made at the provider while the dispute held the money (refunds/provider-side.ts recorded them only as far
 *   as the Payment held money; migration 0054) are paid from the money given back first, recorded as refunds with
 *   origin `provider`: the provider already gave that money to the debtor;
 * - unapplied money given back (either way) and not paying such a refund is refunded at once, as a confirmation's
 *   unapplied money is (a refund `reinstated-<dispute>` with reason `unapplied_funds`): money never rests unapplied
 *   without a refund under way.
 *
 * The Payment's `reversedAmount` falls by the reversal's amount, with a new revision, event `payment.reinstated` (and
 * `receivable.updated` when a Receivable amount moved) and a take-back record of kind `reinstatement`, which the
 * receipt of kind `reinstatement` reports (workers/receipt-dispatcher.ts). A dispute won with nothing withdrawn is
 * no fact at all (stripe/adapter.ts disputeFact); one won before its withdrawal was recorded leaves a reinstated
 * reversal of 0, so its late withdrawal event records nothing.
 */
export interface ReinstatementSplit {
  /** Back to the Payment's unapplied money (it had been taken from there). */
  unappliedMinor: bigint
  /** Back to the Payment's allocation: `unacknowledged + acknowledged` of it, `overflow` of which no longer fits. */
  allocatedMinor: bigint
  unacknowledgedMinor: bigint
  acknowledgedMinor: bigint
  overflowMinor: bigint
}

const atLeastZero = (a: bigint) => (a > 0n ? a : 0n)

/** Where `amountMinor` given back to a Payment goes (pure: the rule above). */
export function reinstatementSplit(
  amountMinor: bigint,
  p: {
    allocatedMinor: bigint
    takenBackUnappliedMinor: bigint
    takenBackAllocatedMinor: bigint
    matchedMinor: bigint
    /** The Receivable's working amount now. */
    workingMinor: bigint
  },
): ReinstatementSplit {
  const allocatedMinor = min(amountMinor, atLeastZero(p.takenBackAllocatedMinor))
  const unappliedMinor = min(amountMinor - allocatedMinor, atLeastZero(p.takenBackUnappliedMinor))
  const held = (takenBackAllocatedMinor: bigint) =>
    unacknowledgedMinor({ allocatedMinor: p.allocatedMinor, takenBackAllocatedMinor, matchedMinor: p.matchedMinor })
  const unacknowledged = held(p.takenBackAllocatedMinor - allocatedMinor) - held(p.takenBackAllocatedMinor)
  const fits = min(unacknowledged, atLeastZero(p.workingMinor))
  return {
    unappliedMinor,
    allocatedMinor,
    unacknowledgedMinor: fits,
    acknowledgedMinor: allocatedMinor - unacknowledged,
    overflowMinor: unacknowledged - fits,
  }
}

export type ReinstatementFact = Extract<ProviderFact, { kind: 'reinstatement' }>

/** What a reinstatement asks of the caller's refund rules (refunds/provider-side.ts through payments/ports.ts). */
export interface ReinstatementRefunds {
  /** The provider refunds waiting for money given back, recorded first; answers the amount recorded. */
  recordWithheld: ProviderRefunds['recordWithheldRefunds']
  /** A refund of money given back that the Payment cannot hold (unapplied), queued. */
  queueUnapplied: (
    uow: UnitOfWork,
    clientCode: string,
    r: { requestId: string; refundId: string; currency: string; amountMinor: bigint; now: string },
  ) => Promise<void>
}

/**
 * The reinstatement a provider's fact says, in the caller's transaction: what it did (`reinstated`), or why nothing
 * (`not_found`, `reinstatement_already_recorded`, `nothing_to_reinstate`).
 */
export async function reinstateFromProvider(
  uow: UnitOfWork,
  provider: string,
  clientCode: string,
  fact: ReinstatementFact,
  now: string,
  refunds: ReinstatementRefunds,
): Promise<string> {
  const { tx } = uow
  const requestId = await findRequestOfProviderPayment(tx, clientCode, provider, fact.providerPaymentId)
  if (!requestId || !(await lockRequestOfPayment(tx, clientCode, requestId))) return 'not_found'
  const payment = await lockPayment(tx, clientCode, requestId)
  if (payment?.status !== 'confirmed' || payment.currency !== fact.currency) return 'not_found'
  const reversed = await markReversalReinstated(tx, clientCode, { provider, reversalId: fact.reversalId, requestId, now })
  if (reversed === undefined) return 'reinstatement_already_recorded'
  const amountMinor = min(reversed, BigInt(payment.reversed_minor))
  if (amountMinor <= 0n) return 'nothing_to_reinstate'

  const receivableId = payment.external_receivable_id
  await lockIdentity(tx, clientCode, 'receivable', receivableId)
  const receivable = await lockReinstatedReceivable(tx, clientCode, receivableId)
  if (!receivable) throw new Error(`Receivable ${receivableId} of Payment request ${requestId} is missing`)
  const declarations = BigInt(receivable.declarations)
  const working =
    BigInt(receivable.source_amount_minor) -
    BigInt(receivable.confirmed_unreconciled_minor) -
    BigInt(receivable.acknowledged_undeclared_minor)
  const split = reinstatementSplit(amountMinor, {
    allocatedMinor: BigInt(payment.allocated_minor),
    takenBackUnappliedMinor: BigInt(payment.taken_back_unapplied_minor),
    takenBackAllocatedMinor: BigInt(payment.taken_back_allocated_minor),
    matchedMinor: await matchedMinor(tx, clientCode, requestId),
    workingMinor: working,
  })
  const share = undeclaredShareMinor(payment, declarations)
  const updated = await recordReinstated(tx, clientCode, requestId, {
    unappliedMinor: split.unappliedMinor,
    allocatedMinor: split.allocatedMinor,
    overflowMinor: split.overflowMinor,
    undeclared: { minor: share + split.acknowledgedMinor, asOf: declarations },
  })
  const revision = Number(updated.revision)
  const unappliedMinor = split.unappliedMinor + split.overflowMinor
  await insertTakeBack(tx, {
    clientCode,
    requestId,
    key: `reinstatement/${revision}`,
    kind: 'reinstatement',
    unappliedMinor,
    allocatedMinor: amountMinor - unappliedMinor,
    occurredAt: now,
  })
  if (split.unacknowledgedMinor > 0n || split.acknowledgedMinor > 0n) {
    const receivableRevision = await restoreAllocation(
      tx,
      clientCode,
      receivableId,
      { unacknowledgedMinor: split.unacknowledgedMinor, acknowledgedMinor: split.acknowledgedMinor },
      now,
    )
    uow.appendChange(clientCode, {
      type: 'receivable.updated',
      resourceType: 'receivable',
      resourceId: receivableId,
      revision: receivableRevision,
      occurredAt: now,
    })
  }
  uow.appendChange(clientCode, { type: 'payment.reinstated', resourceType: 'payment', resourceId: requestId, revision, occurredAt: now })
  // A refund made at the provider while the dispute held the money is paid from it first (the take-back rule takes
  // the unapplied money given back first); only the rest of the unapplied money is the service's to refund.
  const withheld = await refunds.recordWithheld(uow, clientCode, requestId, { amountMinor, reversalId: fact.reversalId }, now)
  const toRefund = unappliedMinor - min(withheld, unappliedMinor)
  if (toRefund > 0n) {
    await refunds.queueUnapplied(uow, clientCode, {
      requestId,
      refundId: `reinstated-${fact.reversalId}`.slice(0, 128),
      currency: payment.currency,
      amountMinor: toRefund,
      now,
    })
  }
  return 'reinstated'
}
