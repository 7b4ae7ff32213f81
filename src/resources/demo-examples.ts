/**
 * The sandbox demo's identifiers and request bodies, in one place: every family's OpenAPI examples use them and
 * src/seed.ts writes the demo from them, so every example can be sent as is to a freshly seeded demo client
 * (test/api/examples.test.ts does). They are data, shared by the families as the demo is: no family owns another's.
 */

const usd = (amount: string) => ({ amount, currency: 'USD' })

/**
 * The demo Customer (src/seed.ts writes exactly this Customer).
 * Contact details are fictional: example.com, and a 555-01xx telephone number.
 */
export const CUSTOMER_EXAMPLE_ID = 'cust-demo-1'
export const customerWriteExample = {
  type: 'person',
  name: { firstName: 'Ada', lastName: 'Example' },
  sourceReference: 'ledger/customers/demo-1',
  contacts: [
    {
      externalContactId: 'contact-demo-1',
      fullName: 'Ada Example',
      isCustomerSelf: true,
      isMain: true,
      address: { countryCode: 'US', line1: '100 Main Street', locality: 'Springfield', postalCode: '62701', region: 'IL', type: 'home' },
      email: { address: 'ada@example.com', type: 'personal' },
      phone: { number: '+12175550142', type: 'mobile' },
    },
  ],
} as const
/** The second demo Customer, a business, which the batch example creates. */
export const BATCH_CUSTOMER_EXAMPLE_ID = 'cust-demo-2'
export const batchCustomerWriteExample = {
  type: 'organization',
  name: { legalName: 'Harbor Marine Supply LLC' },
  sourceReference: 'ledger/customers/demo-2',
  contacts: [
    {
      externalContactId: 'contact-demo-2',
      fullName: 'Grace Example',
      isCustomerSelf: false,
      isMain: true,
      email: { address: 'accounts@harbor-marine.example.com', type: 'work' },
    },
  ],
} as const

/**
 * The demo's Receivable (src/seed.ts writes exactly this): an auto loan accelerated after default, owed by
 * the demo Customer. Every later example moves it on: sourceRevision 4, 5 and 6 are the corrections, 7 the
 * balance snapshot.
 */
export const RECEIVABLE_EXAMPLE_ID = 'rcv-demo-1'
export const receivableWriteExample = {
  financialType: 'accelerated_balance',
  sourceRevision: 3,
  recoverableAmount: usd('1250.00'),
  balanceBreakdown: { costs: usd('35.00'), fees: usd('40.00'), interest: usd('87.50'), principal: usd('1087.50') },
  creditUnion: {
    arrearsAmount: usd('412.50'),
    contractualInstalment: { amount: usd('137.50'), frequency: 'monthly' },
    defaultDate: '2026-01-15',
    loanAccountReference: 'ledger/loans/demo-1',
    loanType: 'auto',
    totalOutstandingAmount: usd('1250.00'),
  },
  dueDate: '2026-02-01',
  responsibleCustomers: [{ externalCustomerId: CUSTOMER_EXAMPLE_ID, role: 'primary' }],
  sourceReference: 'ledger/receivables/demo-1',
} as const

/** The second demo Receivable, a business line of credit, which the batch example creates. */
export const BATCH_RECEIVABLE_EXAMPLE_ID = 'rcv-demo-2'
export const batchReceivableWriteExample = {
  financialType: 'loan_balance',
  sourceRevision: 1,
  recoverableAmount: usd('4350.00'),
  creditUnion: { loanAccountReference: 'ledger/loans/demo-2', loanType: 'line_of_credit' },
  dueDate: '2026-02-15',
  responsibleCustomers: [{ externalCustomerId: BATCH_CUSTOMER_EXAMPLE_ID, role: 'primary' }],
  sourceReference: 'ledger/receivables/demo-2',
} as const

/** The demo's nightly export as one batch (src/resources/batches/schema.ts), which the book-completion example declares the whole book. */
export const BATCH_EXAMPLE_ID = 'batch-demo-1'

/** The demo's payment request, for the demo Receivable. */
export const PAYMENT_REQUEST_EXAMPLE_ID = 'payreq-demo-1'
