import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

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
const pointers = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])

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

describe('complete-book declarations', () => {
  test('covered, omitted and held; released when the Source writes or closes the Receivable', async () => {
    const k = await tenant('book')
    const c = (m: 'PUT' | 'GET' | 'POST', p: string, body?: unknown) =>
      t.call(m, `/v1/clients/book${p}`, { key: k.apiKey, ...(body ? { body } : {}) })
    for (const id of ['a', 'b', 'c', 'd', 'e']) assert.equal((await c('PUT', `/receivables/${id}`, receivable())).status, 201)
    assert.equal((await c('POST', '/receivables/e/close', { effectiveAt: '2026-01-01T00:00:00Z', reason: 'settled' })).status, 200)
    const rec = (id: string, extra = {}) => ({ recordId: id, kind: 'receivable', externalId: id, body: { ...receivable(2), ...extra } })
    assert.equal(
      (
        await c('PUT', '/batches/b1', {
          records: [
            rec('a'),
            { ...rec('zz'), body: { ...receivable(2), responsibleCustomers: [{ externalCustomerId: 'ghost', role: 'primary' }] } },
          ],
        })
      ).status,
      202,
    )
    assert.equal(
      (await c('PUT', '/batches/b2', { records: [rec('a', { sourceReference: 'again' }), { ...rec('b'), recordId: 'b' }] })).status,
      202,
    )
    const early = await c('PUT', '/book-completions/d1', { asOf: '2026-11-22T00:00:00Z', sourcePosition: 10, batches: ['b1', 'b2'] })
    assert.equal(early.status, 409)
    assert.equal(problemCode(early), 'batches_not_finished')
    await t.app.batchRunner.drain()
    const before = (await c('GET', '/receivables/c')).json.revision
    const declared = await c('PUT', '/book-completions/d1', { asOf: '2026-11-22T00:00:00Z', sourcePosition: 10, batches: ['b1', 'b2'] })
    assert.equal(declared.status, 201, declared.body)
    assert.deepEqual(declared.json, {
      externalCompletionId: 'd1',
      acceptedAt: '2026-11-22T12:00:00.000Z',
      asOf: '2026-11-22T00:00:00Z',
      batches: ['b1', 'b2'],
      coveredReceivableCount: 2,
      omissions: [
        { externalReceivableId: 'c', flaggedAt: '2026-11-22T12:00:00.000Z', state: 'held' },
        { externalReceivableId: 'd', flaggedAt: '2026-11-22T12:00:00.000Z', state: 'held' },
      ],
      omissionsTruncated: false,
      omittedReceivableCount: 2,
      scope: 'all_receivables',
      sourcePosition: 10,
    })
    const held = (await c('GET', '/receivables/c')).json
    assert.equal(held.revision, before + 1)
    assert.ok(held.recovery.holds.includes('other_protection'))
    assert.equal(
      (await c('PUT', '/book-completions/d1', { asOf: '2026-11-22T00:00:00Z', sourcePosition: 10, batches: ['b1', 'b2'] })).status,
      200,
    )
    assert.equal(
      problemCode(await c('PUT', '/book-completions/d1', { asOf: '2026-11-22T00:00:00Z', sourcePosition: 11, batches: ['b1'] })),
      'book_completion_conflict',
    )
    for (const pos of [10, 9]) {
      assert.equal(
        problemCode(await c('PUT', '/book-completions/d2', { asOf: '2026-11-22T00:00:00Z', sourcePosition: pos, batches: ['b1'] })),
        'stale_source_position',
      )
    }
    // Released by an identical re-write of c, and by closing d.
    assert.equal((await c('PUT', '/receivables/c', receivable())).status, 200)
    assert.ok(!(await c('GET', '/receivables/c')).json.recovery.holds.includes('other_protection'))
    assert.equal((await c('POST', '/receivables/d/close', { effectiveAt: '2026-01-02T00:00:00Z', reason: 'settled' })).status, 200)
    const after = await c('GET', '/book-completions/d1')
    assert.deepEqual(
      after.json.omissions.map((o: { state: string }) => o.state),
      ['released', 'released'],
    )
    assert.equal(problemCode(await c('GET', '/book-completions/nothing')), 'financial_event_not_found')
  })

  test('bad declarations', async () => {
    const k = await tenant('book2')
    const put = (body: unknown) => t.call('PUT', '/v1/clients/book2/book-completions/x', { key: k.apiKey, body })
    const base = { asOf: '2026-11-22T00:00:00Z', sourcePosition: 1 }
    assert.deepEqual(pointers(await put({ ...base, batches: ['ghost'] })), [['unknown_reference', '/batches/0']])
    assert.deepEqual(pointers(await put({ ...base, batches: [] })), [['too_small', '/batches']])
    assert.deepEqual(pointers(await put({ ...base, batches: Array.from({ length: 51 }, (_, i) => `b${i}`) })), [['too_big', '/batches']])
    assert.deepEqual(pointers(await put({ ...base, batches: ['a', 'a'] })), [['custom', '/batches/1']])
    assert.deepEqual(pointers(await put({ ...base, batches: ['a'], asOf: '2026-11-22' })), [['invalid_format', '/asOf']])
  })

  test('more than 100 omissions: 100 listed, truncated, exact count', async () => {
    const k = await tenant('book3')
    for (let i = 0; i < 105; i++)
      await t.call('PUT', `/v1/clients/book3/receivables/o-${String(i).padStart(3, '0')}`, { key: k.apiKey, body: receivable() })
    await t.call('PUT', '/v1/clients/book3/batches/b', {
      key: k.apiKey,
      body: { records: ['o-000', 'o-001'].map((id) => ({ recordId: id, kind: 'receivable', externalId: id, body: receivable(2) })) },
    })
    await t.app.batchRunner.drain()
    const res = await t.call('PUT', '/v1/clients/book3/book-completions/big', {
      key: k.apiKey,
      body: { asOf: '2026-11-22T00:00:00Z', sourcePosition: 1, batches: ['b'] },
    })
    assert.equal(res.status, 201)
    assert.deepEqual(
      [res.json.omissions.length, res.json.omissionsTruncated, res.json.omittedReceivableCount, res.json.coveredReceivableCount],
      [100, true, 103, 2],
    )
  })
})

describe('balance snapshots', () => {
  test('applied, stale and unknown outcomes; ordered; immutable', async () => {
    const k = await tenant('snap')
    const c = (m: 'PUT' | 'GET', p: string, body?: unknown) =>
      t.call(m, `/v1/clients/snap${p}`, { key: k.apiKey, ...(body ? { body } : {}) })
    for (const id of ['a', 'b']) await c('PUT', `/receivables/${id}`, receivable(5))
    const body = {
      asOf: '2026-11-21T00:00:00Z',
      feedMode: 'transaction',
      sourcePosition: 100,
      balances: [
        { externalReceivableId: 'a', recoverableAmount: usd('7.5'), sourceRevision: 6 },
        { externalReceivableId: 'b', recoverableAmount: usd('1.00'), sourceRevision: 5 },
        { externalReceivableId: 'ghost', recoverableAmount: usd('1.00'), sourceRevision: 1 },
      ],
    }
    const res = await c('PUT', '/balance-snapshots/s1', body)
    assert.equal(res.status, 201, res.body)
    assert.deepEqual(
      res.json.balances.map((b: { outcome: string }) => b.outcome),
      ['applied', 'stale', 'unknown_receivable'],
    )
    assert.deepEqual(res.json.balances[0].recoverableAmount, usd('7.50'))
    const a = (await c('GET', '/receivables/a')).json
    assert.deepEqual([a.financialPosition.sourceAmount.amount, a.sourceRevision, a.revision], ['7.50', 6, 2])
    const b = (await c('GET', '/receivables/b')).json
    assert.deepEqual([b.financialPosition.sourceAmount.amount, b.revision], ['10.00', 1])
    assert.deepEqual((await c('GET', '/balance-snapshots/s1')).json, res.json)
    assert.equal((await c('PUT', '/balance-snapshots/s1', body)).status, 200)
    assert.equal((await c('GET', '/receivables/a')).json.revision, 2)
    assert.equal(problemCode(await c('PUT', '/balance-snapshots/s1', { ...body, asOf: '2026-11-22T00:00:00Z' })), 'snapshot_conflict')
    for (const pos of [100, 99])
      assert.equal(problemCode(await c('PUT', '/balance-snapshots/s2', { ...body, sourcePosition: pos })), 'snapshot_out_of_order')
    assert.equal(
      problemCode(await c('PUT', '/balance-snapshots/s3', { ...body, sourcePosition: 101, feedMode: 'snapshot_only' })),
      'feed_mode_mismatch',
    )
    assert.deepEqual(
      pointers(
        await c('PUT', '/balance-snapshots/s4', {
          ...body,
          sourcePosition: 102,
          balances: [{ externalReceivableId: 'a', recoverableAmount: { amount: '1', currency: 'EUR' }, sourceRevision: 9 }],
        }),
      ),
      [['custom', '/balances/0/recoverableAmount/currency']],
    )
    assert.deepEqual(pointers(await c('PUT', '/balance-snapshots/s4', { ...body, balances: [body.balances[0], body.balances[0]] })), [
      ['custom', '/balances/1/externalReceivableId'],
    ])
    assert.deepEqual(
      pointers(
        await c('PUT', '/balance-snapshots/s4', {
          ...body,
          balances: Array.from({ length: 101 }, (_, i) => ({
            externalReceivableId: `r${i}`,
            recoverableAmount: usd('1'),
            sourceRevision: 1,
          })),
        }),
      ),
      [['too_big', '/balances']],
    )
    assert.equal(problemCode(await c('GET', '/balance-snapshots/none')), 'financial_event_not_found')
  })

  test('a snapshot_only connection sends snapshot_only snapshots', async () => {
    const k = await tenant('snap2', { feedMode: 'snapshot_only' })
    await t.call('PUT', '/v1/clients/snap2/receivables/a', { key: k.apiKey, body: receivable() })
    const body = {
      asOf: '2026-11-21T00:00:00Z',
      sourcePosition: 1,
      balances: [{ externalReceivableId: 'a', recoverableAmount: usd('1'), sourceRevision: 2 }],
    }
    assert.equal(
      problemCode(
        await t.call('PUT', '/v1/clients/snap2/balance-snapshots/x', { key: k.apiKey, body: { ...body, feedMode: 'transaction' } }),
      ),
      'feed_mode_mismatch',
    )
    assert.equal(
      (await t.call('PUT', '/v1/clients/snap2/balance-snapshots/x', { key: k.apiKey, body: { ...body, feedMode: 'snapshot_only' } }))
        .status,
      201,
    )
  })
})

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
