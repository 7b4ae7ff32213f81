import { smallerMinor as min, unacknowledgedMinor } from '../../domain/money-rules.ts'
import { lockIdentity } from '../../store/locks.ts'
import type { UnitOfWork } from '../unit-of-work.ts'
import { lockPayment, lockTakeBackReceivable, matchedMinor, type PaymentRow, recordTakenBack, releaseAllocation } from './store.ts'
import { insertTakeBack } from './take-back-store.ts'

/**
 * The balance effect of money taken back from a confirmed Payment (docs/design/money.md, "Effect of a refund or
 * reversal"; docs/decisions.md, "Refunds and reversals" and "Money taken back per Payment"), one rule for a refund's
 * success and a reversal:
 *
 * - unapplied money goes first (it is in no balance), then allocated money;
 * - of the allocated money, what no matched receipt line acknowledged goes first: it leaves the Receivable's
 *   confirmed_unreconciled_minor; then acknowledged money this Payment holds undeclared (its share of the
 *   Receivable's acknowledged_undeclared_minor: acknowledged after the Source last declared the balance), which
 *   leaves both the share and the Receivable's figure; the rest was acknowledged and has since been declared by the
 *   Source, so it stays out of the working amount until the Source declares again (the service may under-collect,
 *   never over-collect). Another Payment's undeclared money never stands in for this one's declared money;
 * - a Receivable amount that moves gets a new revision and its `receivable.updated` event.
 *
 * Unacknowledged allocated money still held is `allocated - matched - takenBackAllocated` (never below zero):
 * since unacknowledged money is taken back first, any acknowledged money taken back means none is left. A
 * reconciliation caps what it matches by the same figure (reconciliations/service.ts), under the same Payment row
 * lock, so a refund and a reconciliation of one Payment never both count one amount.
 *
 * A Payment's share counts only while the Receivable's `declarations` count is the one it was written at
 * (`undeclaredShareMinor`): a declaration clears every share of its Receivable by counting one more (migration 0023).
 *
 * Locks, in this order: the Payment row, then the Receivable's identity and row (the order of reconciliations and
 * confirmations too). The caller checked that `amountMinor` fits (refunds and reversals together never exceed the
 * Payment's amount; the table's CHECKs stand behind it).
 */
export interface TakenBack {
  payment: PaymentRow
  unappliedMinor: bigint
  allocatedMinor: bigint
  /** The Receivable's new revision, when an amount of it moved. */
  receivableRevision: number | null
}

export interface TakeBackSplit {
  unappliedMinor: bigint
  unacknowledgedMinor: bigint
  acknowledgedUndeclaredMinor: bigint
  acknowledgedDeclaredMinor: bigint
}

const atLeastZero = (a: bigint) => (a > 0n ? a : 0n)

/**
 * A Payment's share of its Receivable's acknowledged-undeclared money: its figure while it was written at the
 * Receivable's current count of declarations, zero once the Source declared the balance again.
 */
export function undeclaredShareMinor(
  payment: Pick<PaymentRow, 'acknowledged_undeclared_minor' | 'undeclared_as_of'>,
  receivableDeclarations: bigint,
): bigint {
  return BigInt(payment.undeclared_as_of) === receivableDeclarations ? BigInt(payment.acknowledged_undeclared_minor) : 0n
}

/** Where `amountMinor` taken back from a Payment comes from (pure: the rule above). */
export function takeBackSplit(
  amountMinor: bigint,
  p: {
    unappliedMinor: bigint
    allocatedMinor: bigint
    takenBackUnappliedMinor: bigint
    takenBackAllocatedMinor: bigint
    matchedMinor: bigint
    /** This Payment's undeclared share (`undeclaredShareMinor`). */
    acknowledgedUndeclaredMinor: bigint
  },
): TakeBackSplit {
  const unappliedMinor = min(amountMinor, atLeastZero(p.unappliedMinor - p.takenBackUnappliedMinor))
  const fromAllocated = amountMinor - unappliedMinor
  const unacknowledged = min(fromAllocated, unacknowledgedMinor(p))
  const acknowledged = fromAllocated - unacknowledged
  const acknowledgedUndeclaredMinor = min(acknowledged, atLeastZero(p.acknowledgedUndeclaredMinor))
  return {
    unappliedMinor,
    unacknowledgedMinor: unacknowledged,
    acknowledgedUndeclaredMinor,
    acknowledgedDeclaredMinor: acknowledged - acknowledgedUndeclaredMinor,
  }
}

export async function takeBack(
  uow: UnitOfWork,
  clientCode: string,
  requestId: string,
  kind: 'refund' | 'reversal',
  amountMinor: bigint,
  now: string,
  /** A refund's id: the take-back record is keyed by it (a reversal's by the Payment's new revision). */
  refundId?: string,
): Promise<TakenBack> {
  const { tx } = uow
  const payment = await lockPayment(tx, clientCode, requestId)
  if (payment?.status !== 'confirmed') throw new Error(`Payment request ${requestId} has no confirmed Payment to take money back from`)
  const receivableId = payment.external_receivable_id
  await lockIdentity(tx, clientCode, 'receivable', receivableId)
  const receivable = await lockTakeBackReceivable(tx, clientCode, receivableId)
  if (!receivable) throw new Error(`Receivable ${receivableId} of Payment request ${requestId} is missing`)
  const declarations = BigInt(receivable.declarations)
  const share = undeclaredShareMinor(payment, declarations)
  const split = takeBackSplit(amountMinor, {
    unappliedMinor: BigInt(payment.unapplied_minor),
    allocatedMinor: BigInt(payment.allocated_minor),
    takenBackUnappliedMinor: BigInt(payment.taken_back_unapplied_minor),
    takenBackAllocatedMinor: BigInt(payment.taken_back_allocated_minor),
    matchedMinor: await matchedMinor(tx, clientCode, requestId),
    acknowledgedUndeclaredMinor: share,
  })
  const allocatedMinor = amountMinor - split.unappliedMinor
  const updated = await recordTakenBack(tx, clientCode, requestId, {
    kind,
    unappliedMinor: split.unappliedMinor,
    allocatedMinor,
    undeclared: { minor: share - split.acknowledgedUndeclaredMinor, asOf: declarations },
  })
  if (kind === 'refund' && refundId === undefined) throw new Error(`A refund of Payment request ${requestId} was taken back without its id`)
  // What this one take-back was, for its receipt (the Payment keeps only running totals).
  await insertTakeBack(tx, {
    clientCode,
    requestId,
    key: kind === 'refund' ? `refund/${refundId}` : `reversal/${updated.revision}`,
    kind,
    unappliedMinor: split.unappliedMinor,
    allocatedMinor,
    occurredAt: now,
  })
  let receivableRevision: number | null = null
  if (split.unacknowledgedMinor > 0n || split.acknowledgedUndeclaredMinor > 0n) {
    receivableRevision = await releaseAllocation(
      tx,
      clientCode,
      receivableId,
      { unacknowledgedMinor: split.unacknowledgedMinor, acknowledgedMinor: split.acknowledgedUndeclaredMinor },
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
  return { payment: updated, unappliedMinor: split.unappliedMinor, allocatedMinor, receivableRevision }
}
