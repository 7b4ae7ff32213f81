import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { z } from 'zod'
import { mixedBatch } from '../../bench/scenarios.ts'
import { loadActiveGrant } from '../../src/access/store.ts'
import { MAX_BATCH_CHUNK_SIZE } from '../../src/config.ts'
import type { Clock } from '../../src/domain/time.ts'
import { executeWrite, type WriteOperation } from '../../src/resources/operations.ts'
import { FailedAfterCommitError } from '../../src/store/store.ts'
import { createBatchRunner } from '../../src/workers/batch-runner.ts'
import { type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { type CountingStore, countingStore } from '../helpers/counting-store.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * The write path as one unit of work (issue 11): which writes are Source writes (they move lastReceivedAt),
 * that a response which does not fit its schema rolls the write back in every family on PGlite and, on PostgreSQL
 * (COMMIT sent with the render), is reported as saved, and how many statements
 * each write runs (a counting store; a change in these numbers is a change of the write path: update
 * docs/performance.md with it).
 */

let nowMs = Date.parse('2026-11-20T08:00:00.000Z')
const clock: Clock = { now: () => new Date(nowMs) }
/** Moves the clock on and returns the new time, ISO. */
const tick = (ms = 1000) => {
  nowMs += ms
  return new Date(nowMs).toISOString()
}

let t: TestApp
let counting: CountingStore
let db: TestDatabase

before(async () => {
  db = await createTestDatabase()
  counting = countingStore(db.store)
  t = await startTestApp({ BATCH_CHUNK_SIZE: '50' }, { clock, db: { ...db, store: counting } })
})
after(async () => {
  await t.close()
  // Closes the store and, on PostgreSQL, drops this file's database.
  await db.drop()
})

const usd = (amount: string) => ({ amount, currency: 'USD' })
const customer = (n = 1, extra: Record<string, unknown> = {}) => ({
  type: 'person',
  name: { firstName: 'Pat', lastName: `Payer${n}` },
  sourceReference: `cust/${n}`,
  ...extra,
})
const receivable = (customerId: string, sourceRevision = 1, extra: Record<string, unknown> = {}) => ({
  financialType: 'loan_balance',
  sourceRevision,
  recoverableAmount: usd('100.00'),
  creditUnion: { loanAccountReference: 'loan/1', loanType: 'auto' },
  dueDate: '2026-01-01',
  responsibleCustomers: [{ externalCustomerId: customerId, role: 'primary' }],
  sourceReference: 'rcv/1',
  ...extra,
})

/** A payment of 5.00 by Customer c1, allocated whole to Receivable r1. */
const observation = () => ({
  type: 'payment',
  amount: usd('5.00'),
  externalCustomerId: 'c1',
  allocations: [{ externalReceivableId: 'r1', amount: usd('5.00') }],
  effectiveAt: '2026-11-20T00:00:00Z',
  method: 'payroll_deduction',
  sourceReference: 'po/1',
})

function api(k: Tenant) {
  const base = `/v1/clients/${k.clientCode}`
  const ok = async (p: Promise<Response>, status?: number) => {
    const res = await p
    assert.ok(status === undefined ? res.status < 300 : res.status === status, `${res.status} ${res.body}`)
    return res.json
  }
  return {
    base,
    ok,
    put: (path: string, body: unknown) => t.call('PUT', `${base}${path}`, { key: k.apiKey, body }),
    post: (path: string, body: unknown) => t.call('POST', `${base}${path}`, { key: k.apiKey, body }),
    patch: (path: string, body: unknown) => t.call('PATCH', `${base}${path}`, { key: k.apiKey, body }),
    get: (path: string) => t.call('GET', `${base}${path}`, { key: k.apiKey }),
    lastReceivedAt: async () =>
      (await ok(t.call('GET', `${base}/source-freshness`, { key: k.apiKey }), 200)).lastReceivedAt as string | null,
    /** Every change-feed event of the client, as `type id @revision`. */
    async feed(): Promise<string[]> {
      const rows = await t.store.query<{ type: string; resource_id: string; revision: string }>(
        'SELECT type, resource_id, revision FROM change_events WHERE client_code = $1 ORDER BY seq',
        [k.clientCode],
      )
      return rows.map((r) => `${r.type} ${r.resource_id} @${r.revision}`)
    },
  }
}

describe('Source writes move lastReceivedAt (GET /source-freshness); a payment request does not', () => {
  test('Customer PUT and PATCH, Receivable PUT, each lifecycle command, a recovery instruction PUT', async () => {
    const k = await t.tenant('fresh-w')
    const c = api(k)
    const expectTouched = async (what: string, write: () => Promise<unknown>) => {
      const at = tick(60_000)
      await write()
      assert.equal(await c.lastReceivedAt(), at, `${what} moves lastReceivedAt`)
    }
    await expectTouched('Customer PUT', () => c.ok(c.put('/customers/c1', customer())))
    await expectTouched('Customer PATCH', () => c.ok(c.patch('/customers/c1', { sourceReference: 'cust/1b' }), 200))
    await expectTouched('Receivable PUT', () => c.ok(c.put('/receivables/r1', receivable('c1')), 201))
    const commands = { pause: 'hardship_review', resume: undefined, close: 'paid_in_full', reopen: undefined }
    for (const [command, reason] of Object.entries(commands))
      await expectTouched(command, () =>
        c.ok(c.post(`/receivables/r1/${command}`, { effectiveAt: '2026-11-20T00:00:00Z', ...(reason ? { reason } : {}) }), 200),
      )
    await expectTouched('recovery instruction PUT', () =>
      c.ok(
        c.put('/recovery-instructions/i1', {
          scope: { type: 'receivable', externalReceivableId: 'r1' },
          state: 'withdrawn',
          revision: 1,
          effectiveAt: '2026-11-20T00:00:00Z',
        }),
        201,
      ),
    )
    await expectTouched('adjustment', () =>
      c.ok(
        c.put('/adjustments/e1', {
          type: 'adjustment',
          direction: 'increase',
          amount: usd('1.00'),
          externalReceivableId: 'r1',
          sourceRevision: 2,
          effectiveAt: '2026-11-20T00:00:00Z',
          reason: 'billing_correction',
          sourceReference: 'adj/1',
        }),
        201,
      ),
    )
    // A refused write is not heard: nothing moves.
    const before = await c.lastReceivedAt()
    tick(60_000)
    await c.ok(c.post('/receivables/r1/reopen', { effectiveAt: '2026-11-20T00:00:00Z' }), 409)
    assert.equal(await c.lastReceivedAt(), before)
  })

  test('a payment request is not a Source write (docs/decisions.md, Payments)', async () => {
    const k = await t.tenant('fresh-p')
    const c = api(k)
    await payableReceivable(t, k, 'pr-r')
    const before = await c.lastReceivedAt()
    tick(60_000)
    await c.ok(c.put('/payment-requests/pr1', { externalReceivableId: 'pr-r', amount: usd('10.00') }), 201)
    assert.equal(await c.lastReceivedAt(), before)
  })

  test('a Customer PATCH that makes a stale client fresh flips it: every Receivable gets a new revision and an event', async () => {
    const k = await t.tenant('fresh-flip')
    const c = api(k)
    await c.ok(c.put('/customers/c1', customer()), 201)
    await c.ok(c.put('/receivables/r1', receivable('c1')), 201)
    await c.ok(c.put('/receivables/r2', receivable('c1')), 201)
    tick(49 * 3600_000)
    await t.app.services.freshness.sweep(t.store)
    await t.app.clientFanout.runUntilIdle()
    const stale = await c.ok(c.get('/receivables/r1'), 200)
    assert.ok(stale.recovery.holds.includes('source_stale'), JSON.stringify(stale.recovery))
    const feedBefore = (await c.feed()).length
    tick()
    await c.ok(c.patch('/customers/c1', { sourceReference: 'cust/again' }), 200)
    // The PATCH recorded one client fact; the Receivables follow in the background.
    assert.deepEqual((await c.feed()).slice(feedBefore), ['customer.updated c1 @2'])
    await t.app.clientFanout.runUntilIdle()
    const fresh = await c.ok(c.get('/receivables/r1'), 200)
    assert.equal(fresh.recovery.holds.includes('source_stale'), false)
    assert.equal(fresh.revision, stale.revision + 1)
    assert.deepEqual((await c.feed()).slice(feedBefore), ['customer.updated c1 @2', 'receivable.updated r1 @3', 'receivable.updated r2 @3'])
  })
})

/** A response schema nothing fits: the write must roll back whole. */
const Misfit = z.object({ neverPresent: z.literal('x') })
const misfit = (op: WriteOperation): WriteOperation => ({ ...op, response: Misfit })

describe('a response that does not fit its schema: rolled back on PGlite, saved and said so on PostgreSQL, in every family; each Source write is heard', () => {
  async function expectRolledBack(
    k: Tenant,
    op: WriteOperation,
    id: string,
    body: unknown,
    unchanged: () => Promise<unknown>,
  ): Promise<void> {
    const c = api(k)
    const grant = await loadActiveGrant(t.store, k.integrationId, k.clientCode)
    assert.ok(grant)
    const before = { state: await unchanged(), feed: await c.feed(), heard: await c.lastReceivedAt() }
    if (onPostgres) {
      // COMMIT left with the render (docs/decisions.md, "A write in two round trips"): the misfit is found after it,
      // and the write stands; it is reported as saved, never as "nothing was saved".
      const at = tick(60_000)
      const failed = await executeWrite({ store: t.store, clock }, misfit(op), { clientCode: k.clientCode, grant, id }, body).then(
        () => null,
        (err: unknown) => err,
      )
      assert.ok(failed instanceof FailedAfterCommitError, `${op.kind}: ${String(failed)}`)
      assert.ok(failed.cause instanceof z.ZodError, `${op.kind}: ${String(failed.cause)}`)
      assert.notDeepEqual(await unchanged(), before.state, `${op.kind}: saved`)
      assert.equal(await c.lastReceivedAt(), op.source ? at : before.heard, `${op.kind}: a Source write moves lastReceivedAt`)
      return
    }
    tick(60_000)
    await assert.rejects(executeWrite({ store: t.store, clock }, misfit(op), { clientCode: k.clientCode, grant, id }, body), z.ZodError)
    assert.deepEqual(
      { state: await unchanged(), feed: await c.feed(), heard: await c.lastReceivedAt() },
      before,
      `${op.kind}: nothing saved`,
    )
    // The same write with its own schema commits: the misfit alone rolled it back. A Source write is heard then.
    const at = tick(60_000)
    await executeWrite({ store: t.store, clock }, op, { clientCode: k.clientCode, grant, id }, body)
    assert.notDeepEqual(await unchanged(), before.state, `${op.kind} commits with its own schema`)
    assert.equal(await c.lastReceivedAt(), op.source ? at : before.heard, `${op.kind}: a Source write moves lastReceivedAt`)
  }

  test('customers, receivables, lifecycle commands, financial events, payment observations, recovery, book, snapshots', async () => {
    const k = await t.tenant('misfit')
    const c = api(k)
    const s = t.app.services
    const status = (path: string) => async () => {
      const res = await c.get(path)
      return res.status === 200 ? res.json : res.status
    }
    await expectRolledBack(k, s.customers.putOperation, 'c1', customer(), status('/customers/c1'))
    await expectRolledBack(k, s.customers.patchOperation, 'c1', { sourceReference: 'cust/p' }, status('/customers/c1'))
    await expectRolledBack(k, s.receivables.put, 'r1', receivable('c1'), status('/receivables/r1'))
    await expectRolledBack(
      k,
      s.receivables.commands.pause,
      'r1',
      { effectiveAt: '2026-11-20T00:00:00Z', reason: 'hardship_review' },
      status('/receivables/r1'),
    )
    await expectRolledBack(
      k,
      s.financialEvents.operations.credit_note,
      'cn1',
      {
        type: 'credit_note',
        amount: usd('1.00'),
        externalReceivableId: 'r1',
        sourceRevision: 5,
        effectiveAt: '2026-11-20T00:00:00Z',
        reason: 'contractual_credit',
        sourceReference: 'cn/1',
      },
      status('/credit-notes/cn1'),
    )
    await expectRolledBack(k, s.paymentObservations.put, 'po1', observation(), status('/payment-observations/po1'))
    await expectRolledBack(
      k,
      s.recovery.putOperation,
      'i1',
      { scope: { type: 'receivable', externalReceivableId: 'r1' }, state: 'withdrawn', revision: 1, effectiveAt: '2026-11-20T00:00:00Z' },
      status('/recovery-instructions/i1'),
    )
    await expectRolledBack(
      k,
      s.snapshots.putOperation,
      's1',
      {
        asOf: '2026-11-20T00:00:00Z',
        feedMode: 'transaction',
        sourcePosition: 10,
        balances: [{ externalReceivableId: 'r1', recoverableAmount: usd('50.00'), sourceRevision: 9 }],
      },
      status('/balance-snapshots/s1'),
    )
    // A declaration needs a finished batch.
    await c.ok(c.put('/batches/b1', { records: [{ recordId: 'x', kind: 'customer', externalId: 'c9', body: customer(9) }] }), 202)
    await t.app.batchRunner.drain()
    await expectRolledBack(
      k,
      s.book.declareOperation,
      'd1',
      { asOf: '2026-11-20T00:00:00Z', sourcePosition: 1, batches: ['b1'] },
      status('/book-completions/d1'),
    )
  })

  test('payment requests, reconciliations and their resolution', async () => {
    const k = await t.tenant('misfit-pay')
    const c = api(k)
    const s = t.app.services
    const status = (path: string) => async () => {
      const res = await c.get(path)
      return res.status === 200 ? res.json : res.status
    }
    await payableReceivable(t, k, 'pr-r')
    await expectRolledBack(
      k,
      s.paymentRequests.putOperation,
      'pr1',
      { externalReceivableId: 'pr-r', amount: usd('10.00') },
      status('/payment-requests/pr1'),
    )
    await c.ok(t.admin('POST', `/admin/v1/clients/${k.clientCode}/payment-requests/pr1/simulate`, { outcome: 'confirmed' }), 201)
    const line = (id: string, amount: string) => ({ externalReceiptLineId: id, externalReceivableId: 'pr-r', amount: usd(amount) })
    await expectRolledBack(
      k,
      s.reconciliations.putOperation,
      'rec1',
      { externalPaymentRequestId: 'pr1', lines: [line('l1', '11.00')] },
      status('/payment-reconciliations/rec1'),
    )
    await expectRolledBack(
      k,
      s.reconciliations.resolveOperation,
      'rec1',
      { basis: 'authorized_correction', reference: 'fix/1' },
      status('/payment-reconciliations/rec1'),
    )
  })
})

describe('statements per write (counting store): a regression shows here', () => {
  /** Statements in transactions (BEGIN and COMMIT included) that one call runs. */
  async function statements(call: () => Promise<{ status: number; body: string }>, status: number): Promise<number> {
    counting.reset()
    const res = await call()
    assert.equal(res.status, status, res.body)
    // Outside the transaction only the request gate runs (on PGlite the key lookup, its limits being in memory;
    // in sandbox also the client's clock read): on PostgreSQL the slot is freed inside the write's transaction.
    // On PostgreSQL the gate of a key admitted before leaves ahead of the write's BEGIN, in its first round trip; the
    // key's first request (the Customer's create) meets it alone, before anything of its body is read.
    const gate = (sql: string) => (/request_gate|FROM api_keys k/.test(sql) ? 'gate' : sql)
    assert.deepEqual(
      {
        outside: counting.outside.filter((sql) => !/sandbox_clocks/.test(sql)).map(gate),
        ahead: counting.ahead.map(gate),
      },
      onPostgres && current !== 'customerCreate' ? { outside: [], ahead: ['gate'] } : { outside: ['gate'], ahead: [] },
      current,
    )
    trips[current] = counting.roundTrips
    return counting.inTransactions.length
  }
  /** Round trips of each counted write's transaction, by the name its statement count is recorded under. */
  const trips: Record<string, number> = {}
  let current = ''
  // PGlite runs one transaction at a time, so identity locks (one statement each on PostgreSQL) are skipped.
  const expect = (pg: number, pglite: number) => (onPostgres ? pg : pglite)

  test('Customer PUT, Receivable create / replace / replace with a restriction change, a payment request, a batch', async (tc) => {
    const k = await t.tenant('count')
    const c = api(k)
    const counts: Record<string, number> = {}
    current = 'customerCreate'
    counts.customerCreate = await statements(() => c.put('/customers/c1', customer()), 201)
    current = 'customerReplace'
    counts.customerReplace = await statements(() => c.put('/customers/c1', customer(1, { sourceReference: 'cust/1b' })), 200)
    current = 'receivableCreate'
    counts.receivableCreate = await statements(() => c.put('/receivables/r1', receivable('c1')), 201)
    current = 'receivableReplace'
    counts.receivableReplace = await statements(
      () => c.put('/receivables/r1', receivable('c1', 2, { recoverableAmount: usd('90.00') })),
      200,
    )
    current = 'receivableReplaceRestriction'
    counts.receivableReplaceRestriction = await statements(
      () => c.put('/receivables/r1', receivable('c1', 3, { restrictions: [{ type: 'hardship' }] })),
      200,
    )
    await payableReceivable(t, k, 'pay-r')
    // A recovery instruction's next revision (withdrawn): its holds change, so its Receivable gets a revision too.
    await c.ok(c.put('/customers/c2', customer()), 201)
    await c.ok(c.put('/receivables/ri-r', receivable('c2')), 201)
    const instruction = (state: string, revision: number) =>
      c.put('/recovery-instructions/ins-count', {
        scope: { type: 'receivable', externalReceivableId: 'ri-r' },
        state,
        revision,
        effectiveAt: '2026-01-01T00:00:00Z',
      })
    await c.ok(instruction('authorized', 1), 201)
    current = 'recoveryInstruction'
    counts.recoveryInstruction = await statements(() => instruction('withdrawn', 2), 200)
    current = 'paymentRequest'
    counts.paymentRequest = await statements(
      () => c.put('/payment-requests/pr1', { externalReceivableId: 'pay-r', amount: usd('10.00') }),
      201,
    )
    // A Customer of one Receivable (r1) raises a restriction: its holds change (the per-record rules).
    current = 'customerReplaceRestriction'
    counts.customerReplaceRestriction = await statements(
      () => c.put('/customers/c1', customer(1, { sourceReference: 'cust/1b', restrictions: [{ type: 'hardship' }] })),
      200,
    )
    // An adjustment of r1 (at source revision 3): one read (the event and its Receivable), one write (the event
    // and the Receivable's new source amount); 10/8 when they were two reads and two writes.
    current = 'adjustment'
    counts.adjustment = await statements(
      () =>
        c.put('/adjustments/e-count', {
          type: 'adjustment',
          direction: 'increase',
          amount: usd('1.00'),
          externalReceivableId: 'r1',
          sourceRevision: 4,
          effectiveAt: '2026-11-20T00:00:00Z',
          reason: 'billing_correction',
          sourceReference: 'adj/count',
        }),
      201,
    )
    const batch = async (id: string, n: number) => {
      const records = Array.from({ length: n }, (_, i) => ({
        recordId: `r${i}`,
        kind: 'receivable',
        externalId: `${id}-${i}`,
        body: receivable('c1'),
      }))
      await c.ok(c.put(`/batches/${id}`, { records }), 202)
      counting.reset()
      await t.app.batchRunner.drain()
      return counting.inTransactions.length
    }
    const ten = await batch('b10', 10)
    const twenty = await batch('b20', 20)
    counts.batchPerRecord = (twenty - ten) / 10
    // The benchmark's batch (bench/scenarios.ts): 40 Customers, 40 Receivables depending on them, 20 adjustments,
    // run in chunks of 50 (this app's BATCH_CHUNK_SIZE); every statement of the run, the completing one included.
    await c.ok(c.put('/batches/mixed', mixedBatch('m')), 202)
    counting.reset()
    await t.app.batchRunner.drain()
    // Not counted: the runner's periodic check for grown tables between chunks (src/store/statistics.ts), which
    // runs only when 10 s have passed since the last (a slow, loaded machine): not a statement of the batch.
    const betweenChunks = (sql: string) => /pg_stat_user_tables|^ANALYZE/.test(sql)
    counts.mixedBatch100 = counting.inTransactions.length + counting.outside.filter((sql) => !betweenChunks(sql)).length
    const mixed = await c.ok(c.get('/batches/mixed'), 200)
    assert.deepEqual(mixed.counts, { total: 100, pending: 0, succeeded: 100, failed: 0, dependencyFailed: 0 })
    // The same batch in one chunk of 100 (MAX_BATCH_CHUNK_SIZE), by a runner of its own (no sandbox clock).
    await c.ok(c.put('/batches/mixed-whole', mixedBatch('w')), 202)
    const whole = createBatchRunner({ store: counting, clock, operations: t.app.operations, chunkSize: MAX_BATCH_CHUNK_SIZE })
    counting.reset()
    await whole.drain()
    counts.mixedBatch100OneChunk = counting.inTransactions.length + counting.outside.length
    trips.mixedBatch100OneChunk = counting.roundTrips
    const mixedWhole = await c.ok(c.get('/batches/mixed-whole'), 200)
    assert.deepEqual(mixedWhole.counts, { total: 100, pending: 0, succeeded: 100, failed: 0, dependencyFailed: 0 })
    tc.diagnostic(`${onPostgres ? 'postgres' : 'pglite'} statements: ${JSON.stringify(counts)}`)
    tc.diagnostic(`${onPostgres ? 'postgres' : 'pglite'} round trips: ${JSON.stringify(trips)}`)
    // Before issue 11 (PostgreSQL / PGlite): 6/5, 8/7, 7/6, 12/11, 18/17, 10/8, 3/2 (docs/performance.md).
    // Before the set-based write path a batch ran 3/2 statements per Receivable record, and the 100 mixed records
    // 383/283 statements; set-based, more records in a wave add none, and the 100 mixed records take 32/30 (the
    // last chunk completes the batch).
    // On PostgreSQL each synchronous write counts one statement more than before issue 12's last step: the
    // request's slot release, which was a statement of its own after COMMIT, is now the transaction's last one
    // (the request as a whole runs no more statements than before).
    // A Source write's flush counts one statement more since issue 36: first the savepoint its optimistic flush was
    // sent behind, now the statement of the stale-to-fresh flip's fact, sent after the touch and writing only when it
    // flipped (src/resources/unit-of-work.ts, flushWith), in the same round trip; a payment request touches no Source.
    // Since issue 37, on PostgreSQL, one statement more per write in sandbox: the slot release names one bucket per
    // statement (the key's and the sandbox client's; one in production), in the same round trip (src/store/gate-store.ts
    // releaseSlots); and one more per batch run on both stores: the read-only search for clients with a claimable batch
    // before the claim that names the client (src/resources/batches/store.ts). Since 2026-11-29 a flush that appends
    // Receivable events sends one statement more, in the same round trip: the feed append (now prepared) and the
    // update that brings those Receivables up to the client's last fact (unprepared) are two (src/resources/feed/store.ts).
    assert.deepEqual(counts, {
      customerCreate: expect(9, 6),
      customerReplace: expect(10, 7),
      receivableCreate: expect(11, 8),
      receivableReplace: expect(12, 9),
      receivableReplaceRestriction: expect(16, 13),
      // 8/6 before the per-client sandbox clock: a payment request now reads its client's clock in its transaction;
      // and writes its page token's row in page_tokens (the lookup by token names its client first, docs/scaling.md).
      paymentRequest: expect(12, 8),
      recoveryInstruction: expect(18, 14),
      customerReplaceRestriction: expect(18, 14),
      adjustment: expect(11, 8),
      batchPerRecord: 0,
      // 28/26 plus, in sandbox only, one read of the client's sandbox clock per chunk (two chunks of 50); 34/32
      // before an event's reads and writes became one statement each (two fewer per wave of events, two waves here);
      // plus one flush statement per chunk (issue 36: the flip's fact, before it a savepoint).
      mixedBatch100: expect(35, 33),
      // One chunk of a whole batch, one transaction instead of two: claim, BEGIN, lease, grant, (identity locks,)
      // savepoint, three waves (Customers 1, Receivables 1, adjustments 2), outcomes, completion, the flush (touch,
      // the flip's fact, feed), COMMIT, and the claim that finds nothing left.
      mixedBatch100OneChunk: expect(19, 18),
    })
    // Round trips of each synchronous write's transaction, BEGIN's and COMMIT's included (issue 36): before it, one per
    // statement (the counts above less one). On PostgreSQL the request gate leaves ahead of BEGIN, in the first (but for
    // the key's first request, whose gate is a round trip of its own before it).
    // The set-based create on PostgreSQL: [BEGIN, identity locks, insert-or-read], [flush, render, slot release,
    // COMMIT]; a replace adds the update between the two; PGlite sends COMMIT after the answer is checked (one more:
    // there is no wire to save); the per-record rules (a restriction change, a payment request) still send most of
    // their statements one by one; a payment request sends its reads together, then its writes with the flush.
    assert.deepEqual(trips, {
      customerCreate: expect(2, 3),
      customerReplace: expect(3, 4),
      receivableCreate: expect(2, 3),
      receivableReplace: expect(3, 4),
      // [BEGIN, lock, read], [update, restrictions read], [restrictions delete and insert], [the instruction's
      // suspension (sent ahead), flush, render, release, COMMIT]: 7 before issue 36's third pass.
      receivableReplaceRestriction: expect(4, 5),
      // [BEGIN, both identity locks, the request's read, the Receivable's catch-up and locked read], [the page
      // token's and the request's rows (sent ahead), the flush, the slot release, COMMIT]: 8 before issue 36's third pass.
      paymentRequest: expect(2, 3),
      // [BEGIN, both identity locks, the instruction, its Receivable, the one governing it, the holds before], [the
      // instruction's new revision (sent ahead), the holds after], [the Receivable's revision], [flush, render,
      // release, COMMIT]: 10 before issue 36's third pass.
      recoveryInstruction: expect(4, 5),
      // 11 before the third pass: the locks with the holds before, the restrictions' delete and insert, the
      // suspension with the holds after, each one round trip now.
      customerReplaceRestriction: expect(8, 9),
      // Its identity locks and its read in one round trip (4 before the third pass), its write, then the flush.
      adjustment: expect(3, 4),
      // The chunk's transaction: [BEGIN, lease, grant], [savepoint, identity locks], one per wave's statements (three
      // waves, the adjustments' two), [outcomes, completion], [flush, COMMIT]; its claim and the claim that finds
      // nothing left are outside it. 10 before issue 36's third pass (the lease, the grant and the savepoint alone).
      mixedBatch100OneChunk: expect(8, 9),
    })
  })

  test('round trips of every other write route (issue 36: the reads in one, the writes with the flush)', async () => {
    const k = await t.tenant('trips')
    const c = api(k)
    const trips: Record<string, [number, number]> = {}
    /** The status and the round trips of one write's transaction. */
    const measure = async (name: string, call: () => Promise<Response>) => {
      counting.reset()
      const res = await call()
      assert.ok(res.status < 300, `${name}: ${res.status} ${res.body}`)
      trips[name] = [res.status, counting.roundTrips]
    }
    await c.ok(c.put('/customers/c1', customer()), 201)
    await c.ok(c.put('/receivables/r1', receivable('c1')), 201)
    await measure('customer PATCH', () => c.patch('/customers/c1', { sourceReference: 'cust/p' }))
    await measure('receivable pause', () =>
      c.post('/receivables/r1/pause', { effectiveAt: '2026-11-20T00:00:00Z', reason: 'hardship_review' }),
    )
    await measure('credit note', () =>
      c.put('/credit-notes/cn1', {
        type: 'credit_note',
        amount: usd('1.00'),
        externalReceivableId: 'r1',
        sourceRevision: 2,
        effectiveAt: '2026-11-20T00:00:00Z',
        reason: 'contractual_credit',
        sourceReference: 'cn/1',
      }),
    )
    await measure('payment observation', () => c.put('/payment-observations/po1', observation()))
    await measure('balance snapshot', () =>
      c.put('/balance-snapshots/s1', {
        asOf: '2026-11-20T00:00:00Z',
        feedMode: 'transaction',
        sourcePosition: 10,
        balances: [{ externalReceivableId: 'r1', recoverableAmount: usd('50.00'), sourceRevision: 9 }],
      }),
    )
    await measure('batch PUT', () =>
      c.put('/batches/b1', { records: [{ recordId: 'x', kind: 'customer', externalId: 'c9', body: customer(9) }] }),
    )
    await t.app.batchRunner.drain()
    await measure('book declaration', () =>
      c.put('/book-completions/d1', { asOf: '2026-11-20T00:00:00Z', sourcePosition: 11, batches: ['b1'] }),
    )
    await payableReceivable(t, k, 'pay-r')
    await c.ok(c.put('/payment-requests/pr1', { externalReceivableId: 'pay-r', amount: usd('10.00') }), 201)
    await measure('payment request cancel', () => c.post('/payment-requests/pr1/cancel', { reason: 'asked' }))
    await c.ok(c.put('/payment-requests/pr2', { externalReceivableId: 'pay-r', amount: usd('10.00') }), 201)
    await c.ok(t.admin('POST', `/admin/v1/clients/${k.clientCode}/payment-requests/pr2/simulate`, { outcome: 'confirmed' }), 201)
    const line = (id: string, amount: string) => ({ externalReceiptLineId: id, externalReceivableId: 'pay-r', amount: usd(amount) })
    await measure('reconciliation, matched', () =>
      c.put('/payment-reconciliations/rec1', { externalPaymentRequestId: 'pr2', lines: [line('l1', '4.00')] }),
    )
    await measure('reconciliation, held', () =>
      c.put('/payment-reconciliations/rec2', { externalPaymentRequestId: 'pr2', lines: [line('l2', '9.00')] }),
    )
    await measure('reconciliation resolution', () =>
      c.put('/payment-reconciliations/rec2/resolution', { basis: 'authorized_correction', reference: 'fix/1' }),
    )
    await measure('refund', () => c.put('/payment-requests/pr2/refunds/rf1', { amount: usd('1.00'), reason: 'requested_by_customer' }))
    // Before issue 36's third pass, on PostgreSQL: PATCH 5, pause 3, credit note 4, observation 6, snapshot 8, batch 4,
    // declaration 10, cancel 3, reconciliation 15 to 17, refund 5. A held reconciliation and its resolution take their
    // Receivables' identity locks (sorted, known only from the first answers) with their holds before, then their
    // writes, then the holds after, then the Receivables' new revisions (a resolution reads its reconciliation
    // before it knows which request to lock). PGlite counts one more: COMMIT follows the answer there.
    assert.deepEqual(trips, {
      'customer PATCH': [200, expect(3, 4)],
      'receivable pause': [200, expect(3, 4)],
      'credit note': [201, expect(3, 4)],
      'payment observation': [201, expect(2, 3)],
      'balance snapshot': [201, expect(3, 4)],
      'batch PUT': [202, expect(2, 3)],
      'book declaration': [201, expect(3, 4)],
      'payment request cancel': [200, expect(2, 3)],
      'reconciliation, matched': [201, expect(4, 4)],
      'reconciliation, held': [201, expect(6, 7)],
      'reconciliation resolution': [200, expect(6, 7)],
      refund: [201, expect(3, 4)],
    })
  })
})
