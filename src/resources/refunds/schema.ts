import { z } from 'zod'
import { ExternalId } from '../../domain/identifiers.ts'
import { Money, MoneyOut, toMinor } from '../../domain/money.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, listResponse } from '../../http/common-schemas.ts'
import { PAYMENT_REQUEST_EXAMPLE_ID } from '../demo-examples.ts'

/** The reasons an Integration may give; `unapplied_funds` is the service's own (money a confirmation could not allocate). */
export const REFUND_REASONS = ['requested_by_customer', 'duplicate', 'fraudulent', 'other'] as const
export const REFUND_REASONS_OUT = [...REFUND_REASONS, 'unapplied_funds'] as const
export const REFUND_STATUSES = ['pending', 'succeeded', 'failed'] as const

export const REFUND_EXAMPLE_ID = 'refund-demo-1'
export const RefundListParams = ClientParams.extend({ externalPaymentRequestId: ExternalId })
export const RefundParams = RefundListParams.extend({ externalRefundId: ExternalId })

const writeExample = { amount: { amount: '40.00', currency: 'USD' }, reason: 'requested_by_customer' } as const

export const RefundWrite = z
  .strictObject({
    amount: Money,
    reason: z.enum(REFUND_REASONS),
  })
  .superRefine((body, ctx) => {
    if (toMinor(body.amount.amount) === 0n) ctx.addIssue({ code: 'custom', path: ['amount', 'amount'], message: 'must be above zero' })
  })
  .meta({
    id: 'RefundWrite',
    description:
      "A refund of the Payment request's confirmed Payment, in its currency. Refunds (pending and succeeded) and reversals of one Payment together never exceed its amount. It takes back unapplied money first, then allocated money.",
    examples: [writeExample],
  })
export type RefundWrite = z.output<typeof RefundWrite>

const pendingExample = {
  externalRefundId: REFUND_EXAMPLE_ID,
  externalPaymentRequestId: PAYMENT_REQUEST_EXAMPLE_ID,
  ...writeExample,
  status: 'pending',
  origin: 'service',
  createdAt: '2026-02-12T10:00:00.120Z',
}

export const RefundResponse = z
  .object({
    externalRefundId: z.string(),
    externalPaymentRequestId: z.string(),
    amount: MoneyOut,
    reason: z.enum(REFUND_REASONS_OUT).describe('unapplied_funds: the service refunds money a confirmation could not allocate.'),
    status: z
      .enum(REFUND_STATUSES)
      .describe(
        'pending until the provider decides; succeeded and failed are final. Only a succeeded refund moves balances (the working amount rises by the allocated money it took back).',
      ),
    origin: z
      .enum(['service', 'provider'])
      .describe(
        "service: asked for through this API (or the service's own refund of unapplied money); provider: made at the payment provider itself (a refund in the Stripe Dashboard), recorded because every cent the provider moves is. A provider refund's externalRefundId is the provider's refund id; when the provider refunded money a dispute or a pending refund held, the part recorded once that money came back within reach is `<provider refund id>-<the dispute or refund that brought it back>`.",
      ),
    createdAt: Timestamp,
    decidedAt: Timestamp.optional().describe('When the provider decided; absent while pending.'),
  })
  .meta({
    id: 'Refund',
    description: 'A refund of a confirmed Payment through its provider.',
    examples: [pendingExample, { ...pendingExample, status: 'succeeded', decidedAt: '2026-02-12T10:00:01.480Z' }],
  })
export type RefundResponse = z.output<typeof RefundResponse>

export const RefundList = listResponse(RefundResponse, 'RefundList')
