import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

/** Source freshness and its `source_stale` hold, on a controlled clock. */
const usd = (amount: string) => ({ amount, currency: 'USD' })
const customer = { type: 'person', name: { firstName: 'Ada', lastName: 'L' }, sourceReference: 'ref/1' }
const receivable = (sourceRevision = 1, amount = '10.00') => ({
  financialType: 'loan_balance',
  sourceRevision,
  recoverableAmount: usd(amount),
  creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'primary' }],
  sourceReference: 'r/1',
})

let now = new Date('2026-11-22T12:00:00.000Z')
const clock = { now: () => now }
let t: TestApp
before(async () => {
  t = await startTestApp({}, { clock })
})
after(() => t.close())

async function tenant(code: string, grant: Record<string, unknown> = {}): Promise<Tenant> {
  const k = await t.tenant(code, { grant })
  assert.equal((await t.call('PUT', `/v1/clients/${code}/customers/cust-1`, { key: k.apiKey, body: customer })).status, 201)
  return k
}

describe('source freshness', () => {
  test('stale before anything, fresh after a write, stale again past the threshold, with the source_stale hold', async () => {
    const k = await t.tenant('fresh')
    const get = () => t.call('GET', '/v1/clients/fresh/source-freshness', { key: k.apiKey })
    assert.deepEqual((await get()).json, {
      state: 'stale',
      feedMode: 'transaction',
      lastReceivedAt: null,
      lastSnapshotAt: null,
      lastSourcePosition: null,
      staleAfterSeconds: 172800,
    })
    now = new Date('2026-11-23T00:00:00.000Z')
    await t.call('PUT', '/v1/clients/fresh/customers/cust-1', { key: k.apiKey, body: customer })
    await t.call('PUT', '/v1/clients/fresh/receivables/r', { key: k.apiKey, body: receivable() })
    assert.deepEqual((await get()).json, {
      state: 'fresh',
      feedMode: 'transaction',
      lastReceivedAt: '2026-11-23T00:00:00.000Z',
      lastSnapshotAt: null,
      lastSourcePosition: null,
      staleAfterSeconds: 172800,
    })
    const receivableNow = async () => (await t.call('GET', '/v1/clients/fresh/receivables/r', { key: k.apiKey })).json
    assert.deepEqual([(await receivableNow()).revision, (await receivableNow()).recovery.holds.includes('source_stale')], [1, false])
    now = new Date('2026-11-25T00:00:01.000Z')
    assert.equal((await get()).json.state, 'stale')
    // The hold follows the recorded state, which the sweeper flips in a transaction with a new revision.
    assert.ok((await t.app.services.freshness.sweep(t.store)) >= 1)
    assert.equal(await t.app.services.freshness.sweep(t.store), 0)
    // The flip is one client fact; until the background fan-out reaches the Receivable, it reads as its revision 1.
    const notYet = await receivableNow()
    assert.deepEqual([notYet.revision, notYet.recovery.holds.includes('source_stale')], [1, false])
    await t.app.clientFanout.runUntilIdle()
    const stale = await receivableNow()
    assert.deepEqual([stale.revision, stale.recovery.holds.includes('source_stale')], [2, true])
    const feed = async () =>
      (
        await t.store.query<{ revision: string }>(
          `SELECT revision::text FROM change_events WHERE client_code = 'fresh' AND resource_id = 'r' ORDER BY seq`,
        )
      ).map((e) => Number(e.revision))
    assert.deepEqual(await feed(), [1, 2])
    // A Source write makes it fresh again in its own transaction: the hold goes, with one more revision.
    await t.call('PUT', '/v1/clients/fresh/customers/cust-1', { key: k.apiKey, body: customer })
    const pending = await receivableNow()
    assert.deepEqual([pending.revision, pending.recovery.holds.includes('source_stale')], [2, true])
    await t.app.clientFanout.runUntilIdle()
    const freshAgain = await receivableNow()
    assert.deepEqual([freshAgain.revision, freshAgain.recovery.holds.includes('source_stale')], [3, false])
    assert.deepEqual(await feed(), [1, 2, 3])
    now = new Date('2026-11-27T00:00:02.000Z')
    await t.app.services.freshness.sweep(t.store)
    // A batch record counts as hearing from the Source.
    await t.call('PUT', '/v1/clients/fresh/batches/b', {
      key: k.apiKey,
      body: { records: [{ recordId: 'c', kind: 'customer', externalId: 'c2', body: customer }] },
    })
    await t.app.batchRunner.drain()
    assert.equal((await get()).json.lastReceivedAt, '2026-11-27T00:00:02.000Z')
  })

  test('the first write after a stale flip answers exactly what it committed (no source_stale in its response)', async () => {
    now = new Date('2026-12-10T00:00:00.000Z')
    const k = await tenant('fresh3')
    const c = (m: 'PUT' | 'GET', p: string, body?: unknown) =>
      t.call(m, `/v1/clients/fresh3${p}`, { key: k.apiKey, ...(body ? { body } : {}) })
    assert.equal((await c('PUT', '/receivables/r', receivable(1))).status, 201)
    now = new Date('2026-12-12T00:00:01.000Z')
    // Other clients of this file go stale at this time too; the Receivable's own hold is what counts.
    await t.app.services.freshness.sweep(t.store)
    await t.app.clientFanout.runUntilIdle()
    assert.equal((await c('GET', '/receivables/r')).json.recovery.holds.includes('source_stale'), true)
    // The write flips the client fresh in its own transaction; its response must already show that.
    const written = await c('PUT', '/receivables/r', receivable(3, '11.00'))
    assert.equal(written.status, 200)
    assert.equal(written.json.recovery.holds.includes('source_stale'), false)
    const read = await c('GET', '/receivables/r')
    assert.deepEqual(written.json, read.json)
    // The write's revision already includes the flip: the background fan-out gives it no second one.
    await t.app.clientFanout.runUntilIdle()
    assert.deepEqual((await c('GET', '/receivables/r')).json, read.json)
    // An identical retry answers the same committed state.
    const retry = await c('PUT', '/receivables/r', receivable(3, '11.00'))
    assert.deepEqual([retry.status, retry.json], [200, read.json])
  })

  test('a snapshot_only connection is judged by its last snapshot', async () => {
    now = new Date('2026-12-01T00:00:00.000Z')
    const k = await t.tenant('fresh2', { grant: { feedMode: 'snapshot_only' } })
    await t.call('PUT', '/v1/clients/fresh2/customers/cust-1', { key: k.apiKey, body: customer })
    const get = () => t.call('GET', '/v1/clients/fresh2/source-freshness', { key: k.apiKey })
    assert.deepEqual([(await get()).json.state, (await get()).json.staleAfterSeconds], ['stale', 93600])
    await t.call('PUT', '/v1/clients/fresh2/balance-snapshots/s', {
      key: k.apiKey,
      body: {
        asOf: '2026-11-30T00:00:00Z',
        feedMode: 'snapshot_only',
        sourcePosition: 42,
        balances: [{ externalReceivableId: 'none', recoverableAmount: usd('1'), sourceRevision: 1 }],
      },
    })
    assert.deepEqual((await get()).json, {
      state: 'fresh',
      feedMode: 'snapshot_only',
      lastReceivedAt: '2026-12-01T00:00:00.000Z',
      lastSnapshotAt: '2026-12-01T00:00:00.000Z',
      lastSourcePosition: 42,
      staleAfterSeconds: 93600,
    })
  })
})
