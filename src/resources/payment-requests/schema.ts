import { z } from 'zod'
import { refuseUnsafeDisplayText } from '../../domain/display-text.ts'
import { detectSensitive, ExternalId } from '../../domain/identifiers.ts'
import { Money, MoneyOut, toMinor } from '../../domain/money.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, ListQuery, listResponse } from '../../http/common-schemas.ts'
import { PAYMENT_REQUEST_EXAMPLE_ID, RECEIVABLE_EXAMPLE_ID } from '../demo-examples.ts'
import { ReceiptCapability, ReceiptDeliveryAttempt } from '../receipts/schema.ts'

export const PAYMENT_REQUEST_STATUSES = ['open', 'confirmed', 'failed', 'expired', 'canceled'] as const
/** requested: the integrator canceled it; balance_changed: at pay time its amount no longer fit (docs/design/money.md). */
export const CANCEL_REASONS = ['requested', 'balance_changed'] as const
export const PAYMENT_OUTCOMES = ['confirmed', 'failed'] as const
export const ACKNOWLEDGEMENT_STATUSES = ['pending', 'partially_acknowledged', 'acknowledged', 'held'] as const
export const DELIVERY_OWNERS = ['partner', 'service'] as const

/** Text shown to the debtor on the hosted page: opaque like a source reference, never personal or account data. */
export const PaymentRequestDescription = z
  .string()
  .min(1)
  .max(200)
  .superRefine(refuseUnsafeDisplayText)
  .superRefine((value, ctx) => {
    const kind = detectSensitive(value)
    if (kind) {
      ctx.addIssue({
        code: 'custom',
        message: `is shown to the debtor and must hold no personal or account data: it looks like ${kind.replace(/_/g, ' ')}`,
        params: { fieldCode: 'sensitive_source_reference' },
      })
    }
  })
  .meta({
    id: 'PaymentRequestDescription',
    description:
      'Shown to the debtor on the hosted page, 1 to 200 characters; checked like a sourceReference (no personal or account data). No control characters (C0, DEL, C1), bidirectional controls (U+202A..U+202E, U+2066..U+2069) or line and paragraph separators (U+2028, U+2029).',
    examples: ['February instalment'],
  })

const requestWriteExample = {
  externalReceivableId: RECEIVABLE_EXAMPLE_ID,
  amount: { amount: '150.00', currency: 'USD' },
  description: 'February instalment',
} as const

export const PaymentRequestWrite = z
  .strictObject({
    externalReceivableId: ExternalId,
    amount: Money,
    expiresAt: Timestamp.optional().describe(
      'When the hosted page stops taking payment. Default 7 days after creation; at least 5 minutes and at most 30 days ahead.',
    ),
    description: PaymentRequestDescription.optional(),
  })
  .superRefine((body, ctx) => {
    if (toMinor(body.amount.amount) === 0n) ctx.addIssue({ code: 'custom', path: ['amount', 'amount'], message: 'must be above zero' })
  })
  .meta({
    id: 'PaymentRequestWrite',
    description:
      "A fixed amount in the Receivable's currency, above zero and not above its workingAmount less the amounts of its other open requests (open requests reserve what they ask; 422 at /amount/amount otherwise, the detail giving both figures). Refused with 409 recovery_held while the Receivable has any hold.",
    examples: [requestWriteExample],
  })
export type PaymentRequestWrite = z.output<typeof PaymentRequestWrite>

export const PaymentRequestParams = ClientParams.extend({ externalPaymentRequestId: ExternalId })

export const PaymentOut = z
  .object({
    status: z.enum(PAYMENT_OUTCOMES),
    amount: MoneyOut,
    allocatedAmount: MoneyOut.describe("Moved to the Receivable's confirmedUnreconciledAmount (at most its workingAmount then)."),
    unappliedAmount: MoneyOut.describe(
      'Paid but covered by no allocation; in no balance. Refunded automatically (a refund with reason unapplied_funds).',
    ),
    refundedAmount: MoneyOut.describe('Given back by succeeded refunds (unapplied money first, then allocated).'),
    reversedAmount: MoneyOut.describe('Taken back by the provider (a chargeback lost, a debit returned): the effect of a refund.'),
    provider: z.string(),
    providerPaymentId: z.string(),
    decidedAt: Timestamp,
  })
  .meta({
    id: 'Payment',
    description: "The provider's decision on a Payment request.",
    examples: [
      {
        status: 'confirmed',
        amount: { amount: '150.00', currency: 'USD' },
        allocatedAmount: { amount: '150.00', currency: 'USD' },
        unappliedAmount: { amount: '0.00', currency: 'USD' },
        refundedAmount: { amount: '0.00', currency: 'USD' },
        reversedAmount: { amount: '0.00', currency: 'USD' },
        provider: 'sandbox',
        providerPaymentId: 'sbx_5d0c0b1f2e7a4c43a9f1d5b2c8e6a710',
        decidedAt: '2026-02-11T09:04:12.031Z',
      },
    ],
  })

const EXAMPLE_URL = 'https://receivables.example.com/pay/hT2lS0c4y8m0bQm1m5f7WJ3Qh0bZ8KcXk3s9d2YVn6E'
const openExample = {
  externalPaymentRequestId: PAYMENT_REQUEST_EXAMPLE_ID,
  ...requestWriteExample,
  expiresAt: '2026-02-18T09:00:00.412Z',
  status: 'open',
  hostedUrl: EXAMPLE_URL,
  revision: 1,
  createdAt: '2026-02-11T09:00:00.412Z',
  updatedAt: '2026-02-11T09:00:00.412Z',
  payment: null,
}

export const PaymentRequestResponse = z
  .object({
    externalPaymentRequestId: z.string(),
    externalReceivableId: z.string(),
    amount: MoneyOut,
    description: z.string().optional(),
    expiresAt: Timestamp,
    status: z.enum(PAYMENT_REQUEST_STATUSES),
    cancelReason: z
      .enum(CANCEL_REASONS)
      .optional()
      .describe(
        'Present exactly when status is canceled: requested (the cancel command) or balance_changed (when the debtor came to pay, the amount no longer fit the working amount less the open requests made before it; nothing was charged).',
      ),
    cancellationNote: z.string().optional().describe('The reason given with the cancel command, as given; absent when none was given.'),
    hostedUrl: z.string().describe('The hosted payment page; its last segment is an unguessable token that opens only this page.'),
    revision: z.number().int().min(1),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    payment: PaymentOut.nullable().describe('null until the provider decides.'),
  })
  .meta({
    id: 'PaymentRequest',
    description:
      'open until the provider confirms or fails it, expiresAt passes, or it is canceled; confirmed, failed, expired and canceled are final.',
    examples: [
      openExample,
      {
        ...openExample,
        status: 'canceled',
        cancelReason: 'requested',
        cancellationNote: 'Replaced by a request for the full balance',
        revision: 2,
        updatedAt: '2026-02-11T10:30:00.000Z',
      },
      {
        ...openExample,
        status: 'confirmed',
        revision: 2,
        updatedAt: '2026-02-11T09:04:12.031Z',
        payment: {
          status: 'confirmed',
          amount: { amount: '150.00', currency: 'USD' },
          allocatedAmount: { amount: '150.00', currency: 'USD' },
          unappliedAmount: { amount: '0.00', currency: 'USD' },
          refundedAmount: { amount: '0.00', currency: 'USD' },
          reversedAmount: { amount: '0.00', currency: 'USD' },
          provider: 'sandbox',
          providerPaymentId: 'sbx_5d0c0b1f2e7a4c43a9f1d5b2c8e6a710',
          decidedAt: '2026-02-11T09:04:12.031Z',
        },
      },
    ],
  })
export type PaymentRequestResponse = z.output<typeof PaymentRequestResponse>

export const PaymentRequestCancel = z
  .strictObject({
    reason: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe("The integrator's reason, 1 to 200 characters; kept and returned as cancellationNote. Not shown to the debtor."),
  })
  .meta({
    id: 'PaymentRequestCancel',
    description: 'The body may be empty or absent.',
    examples: [{ reason: 'Replaced by a request for the full balance' }, {}],
  })
export type PaymentRequestCancel = z.output<typeof PaymentRequestCancel>

export const SimulateOutcome = z
  .strictObject({
    outcome: z.enum([...PAYMENT_OUTCOMES, 'reversed']),
    amount: Money.optional().describe(
      'Only with outcome reversed: how much the provider took back; default what remains of the Payment after its refunds (pending or succeeded) and reversals.',
    ),
  })
  .superRefine((body, ctx) => {
    if (body.amount === undefined) return
    if (body.outcome !== 'reversed') ctx.addIssue({ code: 'custom', path: ['amount'], message: 'is taken only with outcome reversed' })
    else if (toMinor(body.amount.amount) === 0n) ctx.addIssue({ code: 'custom', path: ['amount', 'amount'], message: 'must be above zero' })
  })
  .meta({
    id: 'SimulatePaymentOutcome',
    description:
      'confirmed or failed: the provider decides an open request. reversed: the provider takes confirmed money back (a chargeback lost, a debit returned), with the effect of a refund.',
    examples: [{ outcome: 'confirmed' }, { outcome: 'reversed', amount: { amount: '25.00', currency: 'USD' } }],
  })
export type SimulateOutcome = z.output<typeof SimulateOutcome>

export const ReceiptDelivery = z
  .object({
    externalPaymentRequestId: z.string(),
    deliveryOwner: z.enum(DELIVERY_OWNERS),
    capability: ReceiptCapability,
    waitingFor: z
      .enum(['route_verification'])
      .nullable()
      .describe(
        "`route_verification`: this Payment's receipts are held until the Source confirms the receipt route (`POST .../receipt-route/confirm`), then delivered; null: nothing is held back for the route (see `capability` and `deliveryAttempts`).",
      ),
    deliveryAttempts: z.array(ReceiptDeliveryAttempt),
    acknowledgement: z.object({
      status: z.enum(ACKNOWLEDGEMENT_STATUSES),
      allocatedAmount: MoneyOut,
      matchedAmount: MoneyOut,
      unmatchedAmount: MoneyOut,
    }),
  })
  .meta({
    id: 'ReceiptDelivery',
    description:
      'Delivery (who delivers the receipt, and whether the service can) and acknowledgement (receipt lines matched by reconciliations) are independent facts.',
    examples: [
      {
        externalPaymentRequestId: PAYMENT_REQUEST_EXAMPLE_ID,
        deliveryOwner: 'service',
        capability: {
          state: 'disabled',
          disabledReason: 'no_verified_route',
          unverifiedRoutes: [{ route: 'vendor_receipt_posting', missingProof: 'source_posting_confirmation' }],
        },
        waitingFor: 'route_verification',
        deliveryAttempts: [],
        acknowledgement: {
          status: 'pending',
          allocatedAmount: { amount: '150.00', currency: 'USD' },
          matchedAmount: { amount: '0.00', currency: 'USD' },
          unmatchedAmount: { amount: '150.00', currency: 'USD' },
        },
      },
    ],
  })
export type ReceiptDelivery = z.output<typeof ReceiptDelivery>

export const PaymentRequestListQuery = ListQuery.extend({
  externalReceivableId: ExternalId.optional().describe('Only the Payment requests of this Receivable.'),
  status: z
    .enum(PAYMENT_REQUEST_STATUSES)
    .optional()
    .describe('Only the Payment requests in this status; a request whose expiresAt has passed is expired, never open.'),
})
export type PaymentRequestListQuery = z.output<typeof PaymentRequestListQuery>
export const PaymentRequestList = listResponse(PaymentRequestResponse, 'PaymentRequestList')
