import { type BatchRecord, createClient } from '../../packages/sdk/src/index.ts'

/**
 * Type-level checks of the SDK, run by `npx tsc --noEmit` (not a test file: nothing here executes). Each
 * `@ts-expect-error` must meet an error, so a regression in the generated or derived types fails typecheck.
 */

const irs = createClient({ baseUrl: 'http://x', apiKey: 'k', clientCode: 'demo' })
export async function probe() {
  const r = await irs.GET('/v1/clients/{clientCode}/receivables/{externalReceivableId}', {
    params: { path: { externalReceivableId: 'a' } },
  })
  const s: string = r.financialPosition.workingAmount.amount
  const f = await irs.GET('/v1/clients/{clientCode}/source-freshness')
  await irs.GET('/v1/clients/{clientCode}/receivables/{externalReceivableId}', {
    // @ts-expect-error clientCode is not a parameter: the client is bound to one
    params: { path: { clientCode: 'x', externalReceivableId: 'a' } },
  })
  // @ts-expect-error missing path param
  await irs.GET('/v1/clients/{clientCode}/receivables/{externalReceivableId}')
  // @ts-expect-error unknown path
  await irs.GET('/v1/clients/{clientCode}/nope')
  const b = await irs.PUT('/v1/clients/{clientCode}/batches/{externalBatchId}', {
    params: { path: { externalBatchId: 'b' } },
    body: { records: [] },
  })
  const st: 'queued' | 'running' | 'succeeded' | 'partially_succeeded' | 'failed' = b.status
  // @ts-expect-error body required
  await irs.PUT('/v1/clients/{clientCode}/batches/{externalBatchId}', { params: { path: { externalBatchId: 'b' } } })
  return [s, f, st]
}

const receivableBody = {
  financialType: 'loan_balance' as const,
  sourceRevision: 1,
  recoverableAmount: { amount: '10.00', currency: 'USD' },
  creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' as const },
  dueDate: '2026-04-01',
  responsibleCustomers: [{ externalCustomerId: 'c', role: 'primary' as const }],
  sourceReference: 'r/1',
}
const { dueDate: _omitted, ...receivableWithoutDueDate } = receivableBody

/** Batch records are typed by `kind`: a record's body is the complete body of that kind's synchronous PUT. */
export async function batchRecords() {
  const path = { externalBatchId: 'b' }
  await irs.PUT('/v1/clients/{clientCode}/batches/{externalBatchId}', {
    params: { path },
    body: { records: [{ recordId: 'r', kind: 'receivable', externalId: 'x', body: receivableBody }] },
  })
  await irs.PUT('/v1/clients/{clientCode}/batches/{externalBatchId}', {
    params: { path },
    // @ts-expect-error an incomplete Receivable (no dueDate) in a batch does not compile
    body: { records: [{ recordId: 'r', kind: 'receivable', externalId: 'x', body: receivableWithoutDueDate }] },
  })
  await irs.PUT('/v1/clients/{clientCode}/batches/{externalBatchId}', {
    params: { path },
    // @ts-expect-error a Receivable body under kind customer does not compile
    body: { records: [{ recordId: 'r', kind: 'customer', externalId: 'x', body: receivableBody }] },
  })
  // A retry names the earlier batch instead of records, never both.
  await irs.PUT('/v1/clients/{clientCode}/batches/{externalBatchId}', { params: { path }, body: { retryOf: 'earlier' } })
  await irs.retryBatch('b-2', 'b')
  // @ts-expect-error records and retryOf together do not compile
  await irs.runBatch('b', { retryOf: 'b', records: [] })
  // @ts-expect-error the batch helper takes the same typed records
  await irs.runBatch('b', { records: [{ recordId: 'r', kind: 'receivable', externalId: 'x', body: { sourceRevision: 1 } }] })
  const record: BatchRecord = {
    recordId: 'c',
    kind: 'customer',
    externalId: 'c',
    body: { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: 's' },
  }
  if (record.kind === 'customer') {
    const type: 'person' | 'organization' = record.body.type
    return type
  }
  return null
}

/** A list's answer is its page and an async iterable over every item of the list. */
export async function lists() {
  const page = await irs.GET('/v1/clients/{clientCode}/customers', { params: { query: { limit: 10 } } })
  const cursor: string | null = page.nextCursor
  for await (const customer of page) {
    const id: string = customer.externalCustomerId
    // @ts-expect-error items are Customers, not pages
    customer.nextCursor
    return [cursor, id]
  }
  const one = await irs.GET('/v1/clients/{clientCode}/customers/{externalCustomerId}', { params: { path: { externalCustomerId: 'c' } } })
  // @ts-expect-error a single resource is not iterable
  for await (const x of one) void x
  return [cursor]
}

/** The SDK README's list example, as written there. */
export async function readmeLists() {
  const page = await irs.GET('/v1/clients/{clientCode}/receivables', { params: { query: { status: 'active', limit: 200 } } })
  const n: number = page.data.length
  for await (const receivable of page) return [n, page.nextCursor, receivable.externalReceivableId]
  return [n]
}
