import { after, before, test } from 'node:test'
import type { Clock } from '../src/domain/time.ts'
import { startTestApp, type TestApp } from '../test/helpers/app.ts'
import { type CountingStore, countingStore } from '../test/helpers/counting-store.ts'
import { createTestDatabase, type TestDatabase } from '../test/helpers/store.ts'
let t: TestApp; let counting: CountingStore; let db: TestDatabase
const clock: Clock = { now: () => new Date('2026-11-20T08:00:00.000Z') }
before(async () => { db = await createTestDatabase(); counting = countingStore(db.store); t = await startTestApp({ BATCH_CHUNK_SIZE: '50' }, { clock, db: { ...db, store: counting } }) })
after(async () => { await t.close(); await db.drop() })
const usd = (amount: string) => ({ amount, currency: 'USD' })
test('x', async () => {
  const k = await t.tenant('count')
  const base = `/v1/clients/${k.clientCode}`
  const put = (p: string, b: unknown) => t.call('PUT', base + p, { key: k.apiKey, body: b })
  const show = async (name: string, f: () => Promise<unknown>) => { counting.reset(); await f(); console.log('==', name); for (const s of counting.outside) console.log('  OUT', s.slice(0, 300).replace(/\s+/g, ' ')); for (const s of counting.inTransactions) console.log('  TX ', s.slice(0, 300).replace(/\s+/g, ' ')) }
  const cust = (r: string) => ({ type: 'person', name: { firstName: 'P', lastName: 'Q' }, sourceReference: r })
  await show('customer create', () => put('/customers/c1', cust('a')))
  await show('customer replace', () => put('/customers/c1', cust('b')))
  const rcv = (rev: number, amt: string) => ({ financialType: 'loan_balance', sourceRevision: rev, recoverableAmount: usd(amt), creditUnion: { loanAccountReference: 'l', loanType: 'auto' }, dueDate: '2026-01-01', responsibleCustomers: [{ externalCustomerId: 'c1', role: 'primary' }], sourceReference: 'r' })
  await show('receivable create', () => put('/receivables/r1', rcv(1, '100.00')))
  await show('receivable replace', () => put('/receivables/r1', rcv(2, '90.00')))
})
