import { z } from 'zod'
import { HOLD_CATEGORIES } from '../../domain/holds.ts'
import { ExternalId, SourceReference } from '../../domain/identifiers.ts'
import { Money, MoneyOut, sumMinor, toMinor } from '../../domain/money.ts'
import { RestrictionOut, Restrictions } from '../../domain/restrictions.ts'
import { CalendarDate, Timestamp } from '../../domain/time.ts'
import { ClientParams, ListQuery, listResponse } from '../../http/common-schemas.ts'

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

// Zod 4's int() is a safe integer: it refuses anything above 9007199254740991 itself.
export const SafeInteger = z.number().int().min(0).meta({ id: 'SafeInteger' })

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

export const ReceivableWrite = z
  .strictObject({
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
  })
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
          message: `must sum exactly to recoverableAmount ${r.recoverableAmount.amount} (sums to ${sumMinor(parts)} minor units)`,
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
  .meta({ id: 'ReceivableWrite', description: 'A Receivable as sent by the Source. Importing never starts recovery.' })
export type ReceivableWrite = z.output<typeof ReceivableWrite>

export const ReceivableParams = ClientParams.extend({ externalReceivableId: ExternalId })
export const ReceivableListQuery = ListQuery.extend({ status: z.enum(RECEIVABLE_STATUSES).optional() })

export const FinancialPosition = z
  .object({
    sourceAmount: MoneyOut,
    workingAmount: MoneyOut,
    confirmedUnreconciledAmount: MoneyOut,
    receiptAcknowledgedAmount: MoneyOut,
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
  .meta({ id: 'Receivable' })
export type ReceivableResponse = z.output<typeof ReceivableResponse>

export const ReceivableList = listResponse(ReceivableResponse, 'ReceivableList')

export const PauseCommand = z.strictObject({ effectiveAt: Timestamp, reason: z.enum(PAUSE_REASONS) }).meta({ id: 'PauseCommand' })
export const ResumeCommand = z.strictObject({ effectiveAt: Timestamp }).meta({ id: 'ResumeCommand' })
export const CloseCommand = z.strictObject({ effectiveAt: Timestamp, reason: z.enum(CLOSE_REASONS) }).meta({ id: 'CloseCommand' })
export const ReopenCommand = z.strictObject({ effectiveAt: Timestamp }).meta({ id: 'ReopenCommand' })
