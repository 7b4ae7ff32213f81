import { z } from 'zod'
import { ExternalId, SourceReference } from '../../domain/identifiers.ts'
import { Money, MoneyOut, toMinor } from '../../domain/money.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, ListQuery, listResponse } from '../../http/common-schemas.ts'
import { PAYMENT_REQUEST_EXAMPLE_ID, RECEIVABLE_EXAMPLE_ID } from '../demo-examples.ts'

export const RECONCILIATION_STATUSES = ['matched', 'held', 'resolved'] as const
export type ReconciliationStatus = (typeof RECONCILIATION_STATUSES)[number]
export const LINE_STATES = ['matched', 'differs'] as const
export type LineState = (typeof LINE_STATES)[number]
export const RESOLUTION_BASES = ['matching_evidence', 'authorized_correction'] as const

/**
 * The demo reconciliation: the demo Payment request (payreq-demo-1, 150.00 USD, confirmed and allocated in full
 * to the demo Receivable) acknowledged by two Source receipt lines; the second names more than the allocation
 * leaves (100.00 + 75.00 > 150.00), so it differs and the reconciliation is held until resolved.
 */
const EXAMPLE = {
  id: 'rec-demo-1',
  requestId: PAYMENT_REQUEST_EXAMPLE_ID,
  receivableId: RECEIVABLE_EXAMPLE_ID,
  acceptedAt: '2026-02-12T10:00:00.412Z',
  resolvedAt: '2026-02-13T15:00:00.208Z',
}
const usd = (amount: string) => ({ amount, currency: 'USD' })

const writeExample = {
  externalPaymentRequestId: EXAMPLE.requestId,
  lines: [
    { externalReceiptLineId: 'rl-demo-1', externalReceivableId: EXAMPLE.receivableId, amount: usd('100.00') },
    { externalReceiptLineId: 'rl-demo-2', externalReceivableId: EXAMPLE.receivableId, amount: usd('75.00') },
  ],
}

export const ReceiptLineWrite = z
  .strictObject({
    externalReceiptLineId: ExternalId.describe('The Source receipt line; acknowledges money once per Payment.'),
    externalReceivableId: ExternalId,
    amount: Money,
  })
  .meta({ id: 'ReceiptLineWrite', examples: [writeExample.lines[0]] })

export const ReconciliationWrite = z
  .strictObject({
    externalPaymentRequestId: ExternalId,
    lines: z.array(ReceiptLineWrite).min(1).max(100),
  })
  .superRefine((body, ctx) => {
    const seen = new Set<string>()
    for (const [i, line] of body.lines.entries()) {
      if (seen.has(line.externalReceiptLineId)) {
        ctx.addIssue({
          code: 'custom',
          message: `receipt line ${line.externalReceiptLineId} appears more than once in this reconciliation`,
          path: ['lines', i, 'externalReceiptLineId'],
        })
      }
      seen.add(line.externalReceiptLineId)
      // A receipt line acknowledges money: a zero line acknowledges nothing.
      if (toMinor(line.amount.amount) === 0n) {
        ctx.addIssue({ code: 'custom', message: 'must be above zero', path: ['lines', i, 'amount', 'amount'] })
      }
    }
  })
  .meta({
    id: 'PaymentReconciliationWrite',
    description:
      'Source receipt lines for one confirmed Payment, judged in order: a line matches when it names the Receivable the Payment allocated to and the matched total of every reconciliation of the Payment stays within the allocation; otherwise it differs and the reconciliation is held.',
    examples: [writeExample],
  })
export type ReconciliationWrite = z.output<typeof ReconciliationWrite>

export const ResolutionWrite = z
  .strictObject({
    basis: z.enum(RESOLUTION_BASES),
    reference: SourceReference.describe(
      'The Source reference of the matching evidence or of the authorized correction; 1 to 200 characters.',
    ),
  })
  .meta({
    id: 'ReconciliationResolutionWrite',
    examples: [{ basis: 'authorized_correction', reference: 'ledger/receipts/corrections/demo-1' }],
  })
export type ResolutionWrite = z.output<typeof ResolutionWrite>

const Allocation = z
  .object({
    externalReceivableId: z.string(),
    allocatedAmount: MoneyOut,
    matchedAmount: MoneyOut,
    unmatchedAmount: MoneyOut,
  })
  .meta({
    id: 'ReconciliationAllocation',
    description:
      "The Payment's allocation to a Receivable, with what matched receipt lines of every reconciliation of the Payment acknowledged.",
  })

const ReceiptLine = z
  .object({
    externalReceiptLineId: z.string(),
    externalReceivableId: z.string(),
    amount: MoneyOut,
    state: z.enum(LINE_STATES),
  })
  .meta({ id: 'ReceiptLine' })

const Resolution = z
  .object({ basis: z.enum(RESOLUTION_BASES), reference: z.string(), resolvedAt: Timestamp })
  .meta({ id: 'ReconciliationResolution' })

const responseExample = {
  externalReconciliationId: EXAMPLE.id,
  externalPaymentRequestId: EXAMPLE.requestId,
  acceptedAt: EXAMPLE.acceptedAt,
  revision: 2,
  status: 'resolved',
  paymentAmount: usd('150.00'),
  allocations: [
    {
      externalReceivableId: EXAMPLE.receivableId,
      allocatedAmount: usd('150.00'),
      matchedAmount: usd('100.00'),
      unmatchedAmount: usd('50.00'),
    },
  ],
  lines: [
    { ...writeExample.lines[0], state: 'matched' },
    { ...writeExample.lines[1], state: 'differs' },
  ],
  unappliedAmount: usd('0.00'),
  unmatchedAmount: usd('50.00'),
  resolution: { basis: 'authorized_correction', reference: 'ledger/receipts/corrections/demo-1', resolvedAt: EXAMPLE.resolvedAt },
}

export const ReconciliationResponse = z
  .object({
    externalReconciliationId: z.string(),
    externalPaymentRequestId: z.string(),
    acceptedAt: Timestamp,
    revision: z.number().int().min(1),
    status: z.enum(RECONCILIATION_STATUSES),
    paymentAmount: MoneyOut,
    allocations: z.array(Allocation),
    lines: z.array(ReceiptLine),
    unappliedAmount: MoneyOut,
    unmatchedAmount: MoneyOut,
    resolution: Resolution.nullable().describe('How a held reconciliation was resolved; null until then (and always for a matched one).'),
  })
  .meta({ id: 'PaymentReconciliation', examples: [responseExample] })
export type ReconciliationResponse = z.output<typeof ReconciliationResponse>

export const ReconciliationParams = ClientParams.extend({ externalReconciliationId: ExternalId })

export const ReconciliationListQuery = ListQuery.extend({
  externalPaymentRequestId: ExternalId.optional().describe('Only the reconciliations of this Payment request.'),
  status: z.enum(RECONCILIATION_STATUSES).optional().describe('Only the reconciliations in this status.'),
})
export const ReconciliationList = listResponse(ReconciliationResponse, 'PaymentReconciliationList')
export type ReconciliationListQuery = z.output<typeof ReconciliationListQuery>
