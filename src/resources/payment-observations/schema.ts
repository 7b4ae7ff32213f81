import { z } from 'zod'
import { ExternalId, SourceReference } from '../../domain/identifiers.ts'
import { describeMoney, Money, MoneyOut, sumMinor, toMinor } from '../../domain/money.ts'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, ListQuery, listResponse } from '../../http/common-schemas.ts'
import { CUSTOMER_EXAMPLE_ID, RECEIVABLE_EXAMPLE_ID } from '../demo-examples.ts'

/** Decided here (docs/decisions.md): what a Source can observe, and how the money moved. */
export const OBSERVATION_TYPES = ['payment', 'refund', 'reversal'] as const
export const PAYMENT_METHODS = ['bank_transfer', 'card', 'direct_debit', 'cash', 'cheque', 'payroll_deduction', 'other'] as const
export const MAX_ALLOCATIONS = 100

/** A payroll deduction from the demo Customer, allocated in full to the demo Receivable. */
export const PAYMENT_OBSERVATION_EXAMPLE_ID = 'pay-demo-1'
const paymentObservationWriteExample = {
  type: 'payment',
  amount: { amount: '150.00', currency: 'USD' },
  allocations: [{ amount: { amount: '150.00', currency: 'USD' }, externalReceivableId: RECEIVABLE_EXAMPLE_ID }],
  effectiveAt: '2026-02-10T12:00:00Z',
  externalCustomerId: CUSTOMER_EXAMPLE_ID,
  method: 'payroll_deduction',
  sourceReference: 'ledger/payments/demo-1',
} as const

const Allocation = z.strictObject({ amount: Money, externalReceivableId: ExternalId }).meta({ id: 'PaymentAllocation' })

export const PaymentObservationWrite = z
  .strictObject({
    type: z.enum(OBSERVATION_TYPES),
    amount: Money,
    allocations: z.array(Allocation).max(MAX_ALLOCATIONS),
    effectiveAt: Timestamp,
    externalCustomerId: ExternalId,
    method: z.enum(PAYMENT_METHODS),
    sourceReference: SourceReference,
    reversesExternalEventId: ExternalId.optional().describe(
      'For a refund or reversal: the payment observation it undoes. Required for a reversal.',
    ),
  })
  .superRefine((o, ctx) => {
    const currency = o.amount.currency
    const seen = new Set<string>()
    o.allocations.forEach((a, i) => {
      if (a.amount.currency !== currency) {
        ctx.addIssue({
          code: 'custom',
          path: ['allocations', i, 'amount', 'currency'],
          message: `must be ${currency}, the observation's currency`,
        })
      }
      if (seen.has(a.externalReceivableId)) {
        ctx.addIssue({ code: 'custom', path: ['allocations', i, 'externalReceivableId'], message: 'is allocated twice' })
      }
      seen.add(a.externalReceivableId)
    })
    const allocated = sumMinor(o.allocations.map((a) => a.amount))
    if (o.allocations.every((a) => a.amount.currency === currency) && allocated > toMinor(o.amount.amount)) {
      ctx.addIssue({
        code: 'custom',
        path: ['allocations'],
        message: `must not allocate more than the amount: the allocations sum to ${describeMoney(allocated, currency)} but amount is ${describeMoney(toMinor(o.amount.amount), currency)}`,
      })
    }
    if (o.type === 'reversal' && !o.reversesExternalEventId) {
      ctx.addIssue({ code: 'custom', path: ['reversesExternalEventId'], message: 'is required for a reversal' })
    }
    if (o.type === 'payment' && o.reversesExternalEventId) {
      ctx.addIssue({ code: 'custom', path: ['reversesExternalEventId'], message: 'applies only to a refund or reversal' })
    }
  })
  .meta({
    id: 'PaymentObservationWrite',
    description: 'Immutable evidence of an external payment, refund or reversal. It never moves the financial position.',
    examples: [paymentObservationWriteExample],
  })
export type PaymentObservationWrite = z.output<typeof PaymentObservationWrite>

export const PaymentObservationParams = ClientParams.extend({ externalEventId: ExternalId })

export const PaymentObservationResponse = z
  .object({
    externalEventId: z.string(),
    type: z.enum(OBSERVATION_TYPES),
    amount: MoneyOut,
    allocations: z.array(z.object({ amount: MoneyOut, externalReceivableId: z.string() })),
    unappliedAmount: MoneyOut,
    effectiveAt: z.string(),
    externalCustomerId: z.string(),
    method: z.enum(PAYMENT_METHODS),
    sourceReference: z.string(),
    reversesExternalEventId: z.string().optional(),
    acceptedAt: Timestamp,
  })
  .meta({
    id: 'PaymentObservation',
    examples: [
      {
        externalEventId: PAYMENT_OBSERVATION_EXAMPLE_ID,
        ...paymentObservationWriteExample,
        unappliedAmount: { amount: '0.00', currency: 'USD' },
        acceptedAt: '2026-02-10T12:00:04.530Z',
      },
    ],
  })

export const PaymentObservationListQuery = ListQuery.extend({
  externalCustomerId: ExternalId.optional().describe('Only the observations of this Customer.'),
})
export const PaymentObservationList = listResponse(PaymentObservationResponse, 'PaymentObservationList')
