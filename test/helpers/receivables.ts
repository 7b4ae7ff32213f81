/** Receivable request bodies shared by the tests of several files; each test states what it overrides. */

export const usd = (amount: string) => ({ amount, currency: 'USD' })

/** The brief's valid loan instalment for the Customer `cust-1`, every optional field set. */
export const instalmentReceivable = (overrides: Record<string, unknown> = {}) => ({
  financialType: 'loan_instalment',
  sourceRevision: 1,
  recoverableAmount: usd('100.00'),
  balanceBreakdown: { costs: usd('0.00'), fees: usd('5.00'), interest: usd('10.50'), principal: usd('84.50') },
  creditUnion: {
    loanAccountReference: 'loans/LN-77',
    loanType: 'auto',
    arrearsAmount: usd('50.00'),
    contractualInstalment: { amount: usd('25.00'), frequency: 'monthly' },
    defaultDate: '2026-01-31',
    totalOutstandingAmount: usd('900.00'),
  },
  dueDate: '2026-02-28',
  responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'primary' }],
  sourceReference: 'ledger/r/1',
  ...overrides,
})

/** A minimal loan balance of 10.00 USD owed by one Customer: the batch tests' record. */
export const batchReceivable = (customerId: string, sourceRevision = 1, extra: Record<string, unknown> = {}) => ({
  financialType: 'loan_balance',
  sourceRevision,
  recoverableAmount: usd('10.00'),
  creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [{ externalCustomerId: customerId, role: 'primary' }],
  sourceReference: 'r/1',
  ...extra,
})
