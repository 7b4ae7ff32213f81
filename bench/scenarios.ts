/** Request bodies the benchmark sends; each factory makes a body that really writes. */
export const customerBody = (n: number) => ({
  type: 'person',
  name: { firstName: 'Ada', lastName: `Bench${n}` },
  sourceReference: `ledger/customers/${n}`,
})

export const receivableBody = (customerId: string, sourceRevision: number) => ({
  financialType: 'loan_instalment',
  sourceRevision,
  recoverableAmount: { amount: '100.00', currency: 'USD' },
  balanceBreakdown: {
    costs: { amount: '0.00', currency: 'USD' },
    fees: { amount: '5.00', currency: 'USD' },
    interest: { amount: '10.50', currency: 'USD' },
    principal: { amount: '84.50', currency: 'USD' },
  },
  creditUnion: { loanAccountReference: 'loans/LN-77', loanType: 'auto' },
  dueDate: '2026-02-28',
  responsibleCustomers: [{ externalCustomerId: customerId, role: 'primary' }],
  sourceReference: 'ledger/r/1',
})

/** 100 mixed records: customers, their receivables, and adjustments of those receivables. */
export function mixedBatch(prefix: string) {
  const records: unknown[] = []
  for (let i = 0; i < 40; i++) records.push({ recordId: `c${i}`, kind: 'customer', externalId: `${prefix}-c${i}`, body: customerBody(i) })
  for (let i = 0; i < 40; i++) {
    records.push({
      recordId: `r${i}`,
      kind: 'receivable',
      externalId: `${prefix}-r${i}`,
      dependsOn: [`c${i}`],
      body: receivableBody(`${prefix}-c${i}`, 1),
    })
  }
  for (let i = 0; i < 20; i++) {
    records.push({
      recordId: `a${i}`,
      kind: 'adjustment',
      externalId: `${prefix}-a${i}`,
      dependsOn: [`r${i}`],
      body: {
        type: 'adjustment',
        amount: { amount: '1.00', currency: 'USD' },
        externalReceivableId: `${prefix}-r${i}`,
        sourceRevision: 2,
        effectiveAt: '2026-03-01T00:00:00Z',
        reason: 'source_adjustment',
        sourceReference: 'ledger/e/1',
        direction: 'increase',
      },
    })
  }
  return { records }
}
