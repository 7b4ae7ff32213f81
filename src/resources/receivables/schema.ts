import { z } from 'zod'
import { HOLD_CATEGORIES } from '../../domain/holds.ts'
import { ExternalId, SourceReference } from '../../domain/identifiers.ts'
import { describeMoney, Money, MoneyOut, sumMinor, toMinor } from '../../domain/money.ts'
import { RestrictionOut, Restrictions } from '../../domain/restrictions.ts'
import { CalendarDate, Timestamp } from '../../domain/time.ts'
import { ClientParams, ListQuery, listResponse, SafeInteger } from '../../http/common-schemas.ts'
import { RECEIVABLE_EXAMPLE_ID, receivableWriteExample } from '../demo-examples.ts'

export const FINANCIAL_TYPES = ['loan_instalment', 'accelerated_balance', 'loan_balance'] as const
export const RESPONSIBLE_ROLES = ['primary', 'co_borrower', 'guarantor'] as const
export const LOAN_TYPES = [
  'personal',
  'auto',
  'mortgage',
  'home_equity',
  'credit_card',
  'line_of_credit',
  'student',
  'business',
  'other',
] as const
export const FREQUENCIES = ['weekly', 'fortnightly', 'monthly', 'quarterly', 'annually'] as const
export const RECEIVABLE_STATUSES = ['active', 'paused', 'closed'] as const
export const PAUSE_REASONS = ['source_request', 'hardship_review', 'dispute_review', 'other'] as const
export const CLOSE_REASONS = ['paid_in_full', 'settled', 'written_off', 'transferred', 'source_closed', 'other'] as const

/** The credit-union industry context: at most three monetary assertions, one per type (the object's keys). */
export const CreditUnionContext = z
  .strictObject({
    arrearsAmount: Money.optional(),
    contractualInstalment: z.strictObject({ amount: Money, frequency: z.enum(FREQUENCIES) }).optional(),
    defaultDate: CalendarDate.optional(),
    loanAccountReference: SourceReference,
    loanType: z.enum(LOAN_TYPES),
    totalOutstandingAmount: Money.optional(),
  })
  .meta({ id: 'CreditUnionContext' })

const BalanceBreakdown = z
  .strictObject({ costs: Money, fees: Money, interest: Money, principal: Money })
  .meta({ id: 'BalanceBreakdown', description: 'All four parts or none; they sum exactly to recoverableAmount.' })

const ResponsibleCustomer = z
  .strictObject({ externalCustomerId: ExternalId, role: z.enum(RESPONSIBLE_ROLES) })
  .meta({ id: 'ResponsibleCustomer' })

type MoneyHolder = {
  recoverableAmount: Money
  balanceBreakdown?: Record<string, Money> | undefined
  creditUnion?:
    | {
        arrearsAmount?: Money | undefined
        contractualInstalment?: { amount: Money } | undefined
        totalOutstandingAmount?: Money | undefined
      }
    | undefined
}

/** Every Money in the body, with its path: one currency per Receivable. */
function moneyFields(r: MoneyHolder): [Money, (string | number)[]][] {
  const out: [Money, (string | number)[]][] = [[r.recoverableAmount, ['recoverableAmount']]]
  for (const [k, m] of Object.entries(r.balanceBreakdown ?? {})) out.push([m, ['balanceBreakdown', k]])
  const cu = r.creditUnion
  if (cu?.arrearsAmount) out.push([cu.arrearsAmount, ['creditUnion', 'arrearsAmount']])
  if (cu?.contractualInstalment) out.push([cu.contractualInstalment.amount, ['creditUnion', 'contractualInstalment', 'amount']])
  if (cu?.totalOutstandingAmount) out.push([cu.totalOutstandingAmount, ['creditUnion', 'totalOutstandingAmount']])
  return out
}

const receivableFields = {
  financialType: z.enum(FINANCIAL_TYPES),
  sourceRevision: SafeInteger,
  recoverableAmount: Money,
  balanceBreakdown: BalanceBreakdown.optional(),
  creditUnion: CreditUnionContext.optional().describe(
    "Required: the industry context of the grant's profile (credit_union). Missing answers 422 profile_mismatch.",
  ),
  dueDate: CalendarDate,
  responsibleCustomers: z.array(ResponsibleCustomer).min(1).max(8),
  sourceReference: SourceReference,
  restrictions: Restrictions.optional(),
}

/**
 * The published `required` list: every field Zod requires, and `creditUnion`. The grant's industry profile
 * (credit_union, today's only one) requires its context; the service checks it after parsing so that a
 * missing context answers the contract's 422 `profile_mismatch` rather than a generic `validation_error`.
 * The document still lists it as required, because for every grant the service has, it is.
 */
const RECEIVABLE_REQUIRED = Object.entries(receivableFields)
  .filter(([name, schema]) => name === 'creditUnion' || !(schema instanceof z.ZodOptional))
  .map(([name]) => name)

const usd = (amount: string) => ({ amount, currency: 'USD' })

export const ReceivableWrite = z
  .strictObject(receivableFields)
  .superRefine((r, ctx) => {
    const currency = r.recoverableAmount.currency
    for (const [m, path] of moneyFields(r)) {
      if (m.currency !== currency) {
        ctx.addIssue({ code: 'custom', path: [...path, 'currency'], message: `must be ${currency}: a Receivable has one currency` })
      }
    }
    if (r.balanceBreakdown) {
      const parts = Object.values(r.balanceBreakdown)
      if (parts.every((p) => p.currency === currency) && sumMinor(parts) !== toMinor(r.recoverableAmount.amount)) {
        ctx.addIssue({
          code: 'custom',
          path: ['balanceBreakdown'],
          message: `must sum exactly to recoverableAmount: the breakdown sums to ${describeMoney(sumMinor(parts), currency)} but recoverableAmount is ${describeMoney(toMinor(r.recoverableAmount.amount), currency)}`,
        })
      }
    }
    const seen = new Set<string>()
    r.responsibleCustomers.forEach((c, i) => {
      if (seen.has(c.externalCustomerId)) {
        ctx.addIssue({ code: 'custom', path: ['responsibleCustomers', i, 'externalCustomerId'], message: 'is listed twice' })
      }
      seen.add(c.externalCustomerId)
    })
    const primaries = r.responsibleCustomers.filter((c) => c.role === 'primary').length
    if (r.responsibleCustomers.length > 0 && primaries !== 1) {
      ctx.addIssue({ code: 'custom', path: ['responsibleCustomers'], message: `must have exactly one primary (found ${primaries})` })
    }
  })
  .meta({
    id: 'ReceivableWrite',
    description:
      "A Receivable as sent by the Source. Importing never starts recovery. `creditUnion` is required by the grant's industry profile (credit_union); without it the service answers 422 `profile_mismatch`.",
    required: RECEIVABLE_REQUIRED,
    examples: [receivableWriteExample],
  })
export type ReceivableWrite = z.output<typeof ReceivableWrite>

export const ReceivableParams = ClientParams.extend({ externalReceivableId: ExternalId })
export const ReceivableListQuery = ListQuery.extend({ status: z.enum(RECEIVABLE_STATUSES).optional() })

export const FinancialPosition = z
  .object({
    sourceAmount: MoneyOut,
    workingAmount: MoneyOut.describe(
      'What may still be collected: sourceAmount less confirmedUnreconciledAmount, less what matched receipt lines acknowledged since the Source last declared the balance (a Receivable PUT with a higher sourceRevision, or an applied balance-snapshot entry); never below zero. Reconciling a Payment never raises it; the open Payment requests of the Receivable together never ask for more.',
    ),
    confirmedUnreconciledAmount: MoneyOut.describe('Allocated from confirmed Payments and not yet acknowledged by a matched receipt line.'),
    receiptAcknowledgedAmount: MoneyOut.describe('Everything matched receipt lines have acknowledged, cumulative.'),
  })
  .meta({ id: 'FinancialPosition' })

export const RecoveryState = z.object({ held: z.boolean(), holds: z.array(z.enum(HOLD_CATEGORIES)) }).meta({ id: 'RecoveryHolds' })

export const ReceivableResponse = z
  .object({
    externalReceivableId: z.string(),
    financialType: z.enum(FINANCIAL_TYPES),
    sourceRevision: z.number().int(),
    recoverableAmount: MoneyOut,
    balanceBreakdown: z.object({ costs: MoneyOut, fees: MoneyOut, interest: MoneyOut, principal: MoneyOut }).optional(),
    creditUnion: z
      .object({
        arrearsAmount: MoneyOut.optional(),
        contractualInstalment: z.object({ amount: MoneyOut, frequency: z.enum(FREQUENCIES) }).optional(),
        defaultDate: z.string().optional(),
        loanAccountReference: z.string(),
        loanType: z.enum(LOAN_TYPES),
        totalOutstandingAmount: MoneyOut.optional(),
      })
      .optional(),
    dueDate: z.string(),
    responsibleCustomers: z.array(z.object({ externalCustomerId: z.string(), role: z.enum(RESPONSIBLE_ROLES) })),
    sourceReference: z.string(),
    restrictions: z.array(RestrictionOut),
    status: z.enum(RECEIVABLE_STATUSES),
    revision: z.number().int(),
    updatedAt: Timestamp,
    financialPosition: FinancialPosition,
    recovery: RecoveryState,
  })
  .meta({
    id: 'Receivable',
    description:
      "The Source's representation as written, with the service's state: status, revision, the financial position (sourceAmount moves with corrections and snapshots; the representation's recoverableAmount only with a PUT) and the recovery holds.",
    examples: [
      {
        externalReceivableId: RECEIVABLE_EXAMPLE_ID,
        ...receivableWriteExample,
        restrictions: [],
        status: 'active',
        revision: 1,
        updatedAt: '2026-01-31T09:30:00.112Z',
        financialPosition: {
          sourceAmount: usd('1250.00'),
          workingAmount: usd('1250.00'),
          confirmedUnreconciledAmount: usd('0.00'),
          receiptAcknowledgedAmount: usd('0.00'),
        },
        recovery: { held: true, holds: ['recovery_not_authorized', 'collection_not_enabled'] },
      },
    ],
  })
export type ReceivableResponse = z.output<typeof ReceivableResponse>

export const ReceivableList = listResponse(ReceivableResponse, 'ReceivableList')

/** The demo Receivable's lifecycle: a hardship pause, resumed; closed when paid, reopened when the last payment bounced. */
export const PauseCommand = z
  .strictObject({ effectiveAt: Timestamp, reason: z.enum(PAUSE_REASONS) })
  .meta({ id: 'PauseCommand', examples: [{ effectiveAt: '2026-02-12T09:00:00Z', reason: 'hardship_review' }] })
export const ResumeCommand = z
  .strictObject({ effectiveAt: Timestamp })
  .meta({ id: 'ResumeCommand', examples: [{ effectiveAt: '2026-03-12T09:00:00Z' }] })
export const CloseCommand = z
  .strictObject({ effectiveAt: Timestamp, reason: z.enum(CLOSE_REASONS) })
  .meta({ id: 'CloseCommand', examples: [{ effectiveAt: '2026-04-30T17:00:00Z', reason: 'paid_in_full' }] })
export const ReopenCommand = z
  .strictObject({ effectiveAt: Timestamp })
  .meta({ id: 'ReopenCommand', examples: [{ effectiveAt: '2026-05-04T09:00:00Z' }] })
