import type { Grant } from '../../access/grants.ts'
import { money } from '../../domain/money.ts'
import { unacknowledgedMinor } from '../../domain/money-rules.ts'
import { Problem } from '../../domain/problems.ts'
import type { Store } from '../../store/store.ts'
import type { PaymentStore } from '../payments/store.ts'
import type { receiptDeliveryState } from '../receipts/service.ts'
import type { PaymentRules } from './payment-rules.ts'
import type { ReceiptDelivery } from './schema.ts'
import { findPaymentRequest } from './store.ts'

export interface ReceiptDeliveryDeps {
  store: Store
  payments: Pick<PaymentStore, 'findPayment' | 'hasHeldReconciliation' | 'matchedMinor'>
  paymentRules: Pick<PaymentRules, 'paymentRequestNotFound'>
  /** The receipt route's capability and every delivery attempt of one request (receipts/service.ts). */
  receiptDeliveryState: typeof receiptDeliveryState
}

/**
 * The receipt-delivery read of one Payment request (`GET .../receipt-delivery`): who delivers its receipt, how the
 * delivery stands, and how much of the allocated money the Source acknowledged. Reads only.
 */
export function createReceiptDeliveryRead(deps: ReceiptDeliveryDeps) {
  const { store } = deps
  const { findPayment, hasHeldReconciliation, matchedMinor } = deps.payments
  return async function receiptDelivery(clientCode: string, grant: Grant, id: string): Promise<ReceiptDelivery> {
    const row = await findPaymentRequest(store, clientCode, id)
    if (!row) throw deps.paymentRules.paymentRequestNotFound(id)
    const payment = await findPayment(store, clientCode, id)
    if (payment?.status !== 'confirmed') {
      throw new Problem(
        'payment_not_confirmed',
        payment
          ? 'The Payment of this request failed; there is no receipt to deliver.'
          : 'No Payment of this request has been confirmed yet.',
      )
    }
    const allocated = BigInt(payment.allocated_minor)
    const matched = await matchedMinor(store, clientCode, id)
    // Allocated money a refund or reversal took back is not there to acknowledge (payments/take-back.ts).
    const unmatched = unacknowledgedMinor({
      allocatedMinor: allocated,
      takenBackAllocatedMinor: BigInt(payment.taken_back_allocated_minor),
      matchedMinor: matched,
    })
    const held = await hasHeldReconciliation(store, clientCode, id)
    const status = held ? 'held' : matched === 0n ? 'pending' : unmatched === 0n ? 'acknowledged' : 'partially_acknowledged'
    return {
      externalPaymentRequestId: id,
      deliveryOwner: grant.receiptDeliveryOwner,
      // The receipt route's capability as it stands and every delivery attempt (src/resources/receipts/service.ts).
      ...(await deps.receiptDeliveryState(store, grant, id, payment.decided_at)),
      acknowledgement: {
        status,
        allocatedAmount: money(allocated, payment.currency),
        matchedAmount: money(matched, payment.currency),
        unmatchedAmount: money(unmatched, payment.currency),
      },
    }
  }
}
