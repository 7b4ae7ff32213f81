import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { SCOPES, type Scope } from '../../src/domain/scopes.ts'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { engineName } from '../helpers/store.ts'

/**
 * The lists of docs/design/lists-and-notifications.md (issue 24 item 1), each against exact data on a controlled clock: newest first
 * by creation time (ties by identifier, descending), each item exactly what its GET answers, paging across pages,
 * every filter, bad cursors, limits and filters refused at their pointer, an empty list, and another client's rows
 * (with the very same identifiers) never shown.
 */
let nowMs = Date.parse('2026-03-02T10:00:00.000Z')
const clock = { now: () => new Date(nowMs) }
/** Advances the clock: each resource created after a tick is strictly newer. */
const tick = (ms = 1000) => {
  nowMs += ms
}

const A = 'lst-a'
const B = 'lst-b'
const EMPTY = 'lst-c'
let t: TestApp
let a: Tenant
let b: Tenant
let empty: Tenant

const usd = (amount: string) => ({ amount, currency: 'USD' })
async function must(res: Promise<Response>, status: number, what: string) {
  const r = await res
  assert.equal(r.status, status, `${what}: ${r.body}`)
  return r
}
const put = (k: Tenant, path: string, body: unknown, status = 201) =>
  must(t.call('PUT', `/v1/clients/${k.clientCode}${path}`, { key: k.apiKey, body }), status, path)

const revisions = new Map<string, number>()
/** A financial event on a Receivable, with the next Source revision of that Receivable (its PUT was revision 1). */
function event(family: 'adjustment' | 'credit_note' | 'write_off', receivableId: string, k: Tenant) {
  const key = `${k.clientCode}/${receivableId}`
  const revision = (revisions.get(key) ?? 1) + 1
  revisions.set(key, revision)
  const reason = { adjustment: 'source_adjustment', credit_note: 'contractual_credit', write_off: 'approved_write_off' }[family]
  return {
    type: family,
    amount: usd('1.00'),
    externalReceivableId: receivableId,
    sourceRevision: revision,
    effectiveAt: '2026-03-01T00:00:00Z',
    reason,
    sourceReference: `lst/${family}/${revision}`,
    ...(family === 'adjustment' ? { direction: 'increase' } : {}),
  }
}
const observation = (customerId: string, receivableId: string) => ({
  type: 'payment',
  amount: usd('2.00'),
  allocations: [{ amount: usd('2.00'), externalReceivableId: receivableId }],
  effectiveAt: '2026-03-01T00:00:00Z',
  externalCustomerId: customerId,
  method: 'bank_transfer',
  sourceReference: 'lst/po',
})
const customer = { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'lst/c' }

before(async () => {
  t = await startTestApp({}, { clock })
  a = await t.tenant(A)
  b = await t.tenant(B)
  empty = await t.tenant(EMPTY)

  // Client A. Receivables r1 and r2 (each with the authorized instruction ins-<id>), a second Customer.
  await payableReceivable(t, a, 'r1')
  tick()
  await payableReceivable(t, a, 'r2')
  tick()
  await put(a, '/customers/cust-2', customer)
  tick()
  // A third instruction, withdrawn; then a later revision of ins-r1, which must not move it in the list.
  await put(a, '/receivables/r3', {
    financialType: 'loan_balance',
    sourceRevision: 1,
    recoverableAmount: usd('50.00'),
    creditUnion: { loanAccountReference: 'l/3', loanType: 'auto' },
    dueDate: '2026-01-01',
    responsibleCustomers: [{ externalCustomerId: 'cust-2', role: 'primary' }],
    sourceReference: 'lst/r3',
  })
  tick()
  await put(a, '/recovery-instructions/ins-r3', {
    scope: { type: 'receivable', externalReceivableId: 'r3' },
    state: 'withdrawn',
    revision: 1,
    effectiveAt: '2026-03-01T00:00:00Z',
  })
  tick()
  await put(
    a,
    '/recovery-instructions/ins-r1',
    { scope: { type: 'receivable', externalReceivableId: 'r1' }, state: 'withdrawn', revision: 2, effectiveAt: '2026-03-01T00:00:00Z' },
    200,
  )
  await put(
    a,
    '/recovery-instructions/ins-r1',
    { scope: { type: 'receivable', externalReceivableId: 'r1' }, state: 'authorized', revision: 3, effectiveAt: '2026-03-01T00:00:00Z' },
    200,
  )
  tick()

  // Payment requests: pr-1 (r1), pr-2 (r2), pr-3 (r1), pr-4 (r1, expires unrecorded), pr-5 (r2, confirmed),
  // pr-6 (r1, canceled). pr-7 and pr-8 (r2) are created in the same millisecond: the identifier breaks the tie.
  const request = (id: string, receivableId: string, extra: Record<string, unknown> = {}) =>
    put(a, `/payment-requests/${id}`, { externalReceivableId: receivableId, amount: usd('1.00'), ...extra })
  await request('pr-1', 'r1')
  tick()
  await request('pr-2', 'r2')
  tick()
  await request('pr-3', 'r1')
  tick()
  await request('pr-4', 'r1', { expiresAt: new Date(nowMs + 5 * 60_000).toISOString() })
  tick()
  await request('pr-5', 'r2')
  await must(t.admin('POST', `/admin/v1/clients/${A}/payment-requests/pr-5/simulate`, { outcome: 'confirmed' }), 201, 'confirm pr-5')
  tick()
  await request('pr-6', 'r1')
  await must(t.call('POST', `/v1/clients/${A}/payment-requests/pr-6/cancel`, { key: a.apiKey, body: {} }), 200, 'cancel pr-6')
  tick()
  await request('pr-7', 'r2')
  await request('pr-8', 'r2')
  tick()

  // Financial events of each family.
  await put(a, '/adjustments/adj-1', event('adjustment', 'r1', a))
  tick()
  await put(a, '/credit-notes/cn-1', event('credit_note', 'r2', a))
  tick()
  await put(a, '/adjustments/adj-2', event('adjustment', 'r2', a))
  tick()
  await put(a, '/write-offs/wo-1', event('write_off', 'r1', a))
  tick()
  await put(a, '/adjustments/adj-3', event('adjustment', 'r1', a))
  tick()
  await put(a, '/credit-notes/cn-2', event('credit_note', 'r1', a))
  tick()
  await put(a, '/write-offs/wo-2', event('write_off', 'r2', a))
  tick()

  // Payment observations of two Customers.
  await put(a, '/payment-observations/po-1', observation('pay-cust', 'r1'))
  tick()
  await put(a, '/payment-observations/po-2', observation('cust-2', 'r3'))
  tick()
  await put(a, '/payment-observations/po-3', observation('pay-cust', 'r2'))
  tick()

  // Batches: bt-1 customers only (succeeded), bt-2 a customer and a receivable (succeeded), bt-3 an observation of
  // an unknown Customer (failed), bt-4 a Customer and an adjustment (partially succeeded).
  await put(a, '/batches/bt-1', { records: [{ recordId: 'c', kind: 'customer', externalId: 'cust-b1', body: customer }] }, 202)
  tick()
  await put(
    a,
    '/batches/bt-2',
    {
      records: [
        { recordId: 'c', kind: 'customer', externalId: 'cust-b2', body: customer },
        {
          recordId: 'r',
          kind: 'receivable',
          externalId: 'r-b2',
          dependsOn: ['c'],
          body: {
            financialType: 'loan_balance',
            sourceRevision: 1,
            recoverableAmount: usd('5.00'),
            creditUnion: { loanAccountReference: 'l/b2', loanType: 'auto' },
            dueDate: '2026-01-01',
            responsibleCustomers: [{ externalCustomerId: 'cust-b2', role: 'primary' }],
            sourceReference: 'lst/rb2',
          },
        },
      ],
    },
    202,
  )
  tick()
  await put(
    a,
    '/batches/bt-3',
    { records: [{ recordId: 'o', kind: 'payment_observation', externalId: 'po-b3', body: observation('nobody', 'r1') }] },
    202,
  )
  tick()
  await put(
    a,
    '/batches/bt-4',
    {
      records: [
        { recordId: 'c', kind: 'customer', externalId: 'cust-b4', body: customer },
        { recordId: 'e', kind: 'adjustment', externalId: 'adj-b4', body: { ...event('adjustment', 'nowhere', a) } },
      ],
    },
    202,
  )
  await t.app.batchRunner.drain()
  tick()

  // Reconciliations of pr-5's Payment (on r2): rec-1 matches part of it, rec-2 has a line on r1, which differs
  // (held); rec-3 matches more, then rec-2 is resolved (resolved, accepted before rec-3: it stays where it is).
  const reconcile = (id: string, receivableId: string, amount: string) =>
    put(a, `/payment-reconciliations/${id}`, {
      externalPaymentRequestId: 'pr-5',
      lines: [{ externalReceiptLineId: `line-${id}`, externalReceivableId: receivableId, amount: usd(amount) }],
    })
  await reconcile('rec-1', 'r2', '0.25')
  tick()
  await reconcile('rec-2', 'r1', '0.25')
  tick()
  await reconcile('rec-3', 'r2', '0.25')
  tick()
  await put(a, '/payment-reconciliations/rec-2/resolution', { basis: 'authorized_correction', reference: 'lst/fix' }, 200)
  tick()

  // Client B holds resources under the very same identifiers.
  await payableReceivable(t, b, 'r1')
  tick()
  await put(b, '/payment-requests/pr-1', { externalReceivableId: 'r1', amount: usd('1.00') })
  await put(b, '/adjustments/adj-1', event('adjustment', 'r1', b))
  await put(b, '/credit-notes/cn-1', event('credit_note', 'r1', b))
  await put(b, '/write-offs/wo-1', event('write_off', 'r1', b))
  await put(b, '/payment-observations/po-1', observation('pay-cust', 'r1'))
  await put(b, '/batches/bt-1', { records: [{ recordId: 'c', kind: 'customer', externalId: 'cust-b1', body: customer }] }, 202)
  await t.app.batchRunner.drain()
  tick()

  // pr-4's expiry passes; nothing has recorded it yet.
  tick(10 * 60_000)
})
after(() => t.close())

const list = (k: Tenant, segment: string, query = '') => t.call('GET', `/v1/clients/${k.clientCode}/${segment}${query}`, { key: k.apiKey })
const idOf: Record<string, string> = {
  'payment-requests': 'externalPaymentRequestId',
  'recovery-instructions': 'externalInstructionId',
  'payment-reconciliations': 'externalReconciliationId',
  adjustments: 'externalEventId',
  'credit-notes': 'externalEventId',
  'write-offs': 'externalEventId',
  'payment-observations': 'externalEventId',
  batches: 'externalBatchId',
}
const ids = (segment: string, res: Response) => res.json.data.map((item: Record<string, string>) => item[idOf[segment] as string])

/** Every item of the list, following nextCursor with `limit`; asserts each page's size and the last page's null cursor. */
async function walk(k: Tenant, segment: string, limit: number, filter = ''): Promise<string[]> {
  const seen: string[] = []
  let cursor: string | null = null
  for (let pages = 0; pages < 100; pages++) {
    const res: Response = await list(k, segment, `?limit=${limit}${filter}${cursor ? `&cursor=${cursor}` : ''}`)
    assert.equal(res.status, 200, res.body)
    seen.push(...ids(segment, res))
    cursor = res.json.nextCursor
    if (cursor === null) {
      assert.ok(res.json.data.length <= limit)
      return seen
    }
    assert.equal(res.json.data.length, limit, 'a page followed by another is full')
  }
  throw new Error('no last page')
}

function assertFieldError(res: Response, pointer: string, what: string) {
  assert.equal(res.status, 422, `${what}: ${res.body}`)
  assert.equal(problemCode(res), 'validation_error', what)
  assert.deepEqual(
    res.json.errors.map((e: { pointer: string }) => e.pointer),
    [pointer],
    what,
  )
}

interface ListCase {
  segment: string
  /** A's items, newest first. */
  all: string[]
  /** B's items (the same identifiers as some of A's), newest first. */
  ofB: string[]
  filters: { query: string; expected: string[] }[]
  /** Filter values refused, each at its pointer. */
  badFilters: { query: string; pointer: string }[]
}

const CASES: ListCase[] = [
  {
    segment: 'payment-requests',
    all: ['pr-8', 'pr-7', 'pr-6', 'pr-5', 'pr-4', 'pr-3', 'pr-2', 'pr-1'],
    ofB: ['pr-1'],
    filters: [
      { query: '&externalReceivableId=r1', expected: ['pr-6', 'pr-4', 'pr-3', 'pr-1'] },
      { query: '&externalReceivableId=r2', expected: ['pr-8', 'pr-7', 'pr-5', 'pr-2'] },
      { query: '&externalReceivableId=r3', expected: [] },
      { query: '&status=open', expected: ['pr-8', 'pr-7', 'pr-3', 'pr-2', 'pr-1'] },
      { query: '&status=expired', expected: ['pr-4'] },
      { query: '&status=confirmed', expected: ['pr-5'] },
      { query: '&status=canceled', expected: ['pr-6'] },
      { query: '&status=failed', expected: [] },
      { query: '&status=open&externalReceivableId=r1', expected: ['pr-3', 'pr-1'] },
    ],
    badFilters: [
      { query: '?status=paid', pointer: '/query/status' },
      { query: '?externalReceivableId=a.b', pointer: '/query/externalReceivableId' },
      { query: '?externalPaymentRequestId=pr-1', pointer: '/query/externalPaymentRequestId' },
    ],
  },
  {
    segment: 'recovery-instructions',
    all: ['ins-r3', 'ins-r2', 'ins-r1'],
    ofB: ['ins-r1'],
    filters: [
      { query: '&externalReceivableId=r1', expected: ['ins-r1'] },
      { query: '&externalReceivableId=r3', expected: ['ins-r3'] },
      { query: '&externalReceivableId=r-none', expected: [] },
    ],
    badFilters: [
      { query: `?externalReceivableId=${'x'.repeat(129)}`, pointer: '/query/externalReceivableId' },
      { query: '?status=authorized', pointer: '/query/status' },
    ],
  },
  {
    segment: 'payment-reconciliations',
    all: ['rec-3', 'rec-2', 'rec-1'],
    ofB: [],
    filters: [
      { query: '&externalPaymentRequestId=pr-5', expected: ['rec-3', 'rec-2', 'rec-1'] },
      { query: '&externalPaymentRequestId=pr-1', expected: [] },
      { query: '&status=matched', expected: ['rec-3', 'rec-1'] },
      { query: '&status=resolved', expected: ['rec-2'] },
      { query: '&status=held', expected: [] },
      { query: '&status=resolved&externalPaymentRequestId=pr-5', expected: ['rec-2'] },
    ],
    badFilters: [
      { query: '?status=open', pointer: '/query/status' },
      { query: '?externalPaymentRequestId=%00', pointer: '/query/externalPaymentRequestId' },
    ],
  },
  {
    segment: 'adjustments',
    all: ['adj-3', 'adj-2', 'adj-1'],
    ofB: ['adj-1'],
    filters: [
      { query: '&externalReceivableId=r1', expected: ['adj-3', 'adj-1'] },
      { query: '&externalReceivableId=r2', expected: ['adj-2'] },
    ],
    badFilters: [{ query: '?externalReceivableId=', pointer: '/query/externalReceivableId' }],
  },
  {
    segment: 'credit-notes',
    all: ['cn-2', 'cn-1'],
    ofB: ['cn-1'],
    filters: [
      { query: '&externalReceivableId=r1', expected: ['cn-2'] },
      { query: '&externalReceivableId=r3', expected: [] },
    ],
    badFilters: [{ query: '?externalReceivableId=a%20b', pointer: '/query/externalReceivableId' }],
  },
  {
    segment: 'write-offs',
    all: ['wo-2', 'wo-1'],
    ofB: ['wo-1'],
    filters: [
      { query: '&externalReceivableId=r1', expected: ['wo-1'] },
      { query: '&externalReceivableId=r2', expected: ['wo-2'] },
    ],
    badFilters: [{ query: '?externalCustomerId=pay-cust', pointer: '/query/externalCustomerId' }],
  },
  {
    segment: 'payment-observations',
    all: ['po-3', 'po-2', 'po-1'],
    ofB: ['po-1'],
    filters: [
      { query: '&externalCustomerId=pay-cust', expected: ['po-3', 'po-1'] },
      { query: '&externalCustomerId=cust-2', expected: ['po-2'] },
      { query: '&externalCustomerId=nobody', expected: [] },
    ],
    badFilters: [{ query: '?externalCustomerId=%ED%A0%80', pointer: '/query/externalCustomerId' }],
  },
  {
    segment: 'batches',
    all: ['bt-4', 'bt-3', 'bt-2', 'bt-1'],
    ofB: ['bt-1'],
    filters: [
      { query: '&status=succeeded', expected: ['bt-2', 'bt-1'] },
      { query: '&status=failed', expected: ['bt-3'] },
      { query: '&status=partially_succeeded', expected: ['bt-4'] },
      { query: '&status=queued', expected: [] },
    ],
    badFilters: [{ query: '?status=done', pointer: '/query/status' }],
  },
]

/** The GET of one item of a list. */
const getItem = (k: Tenant, segment: string, id: string) => t.call('GET', `/v1/clients/${k.clientCode}/${segment}/${id}`, { key: k.apiKey })

describe(`the lists of docs/design/lists-and-notifications.md (${engineName})`, () => {
  test('a Payment request past its expiresAt is listed expired, its expiry recorded as the GET records it', async () => {
    const stored = async () =>
      (
        await t.store.query<{ status: string }>(
          `SELECT status FROM payment_requests WHERE client_code = $1 AND external_payment_request_id = 'pr-4'`,
          [A],
        )
      )[0]?.status
    // Unrecorded, it is already not open: ?status=open leaves it out (and, not listing it, records nothing).
    const open = await list(a, 'payment-requests', '?status=open&externalReceivableId=r1')
    assert.deepEqual(ids('payment-requests', open), ['pr-3', 'pr-1'])
    assert.equal(await stored(), 'open')
    // ?status=expired lists it, expired, and records its expiry.
    const listed = await list(a, 'payment-requests', '?status=expired')
    assert.deepEqual(
      listed.json.data.map((r: { externalPaymentRequestId: string; status: string }) => [r.externalPaymentRequestId, r.status]),
      [['pr-4', 'expired']],
    )
    assert.equal(await stored(), 'expired')
    const res = await list(a, 'payment-requests', '?externalReceivableId=r1')
    assert.equal(res.status, 200, res.body)
    const pr4 = res.json.data.find((r: { externalPaymentRequestId: string }) => r.externalPaymentRequestId === 'pr-4')
    assert.equal(pr4.status, 'expired')
    assert.equal(pr4.revision, 2)
    assert.equal(pr4.updatedAt, new Date(nowMs).toISOString())
    const feed = await t.call('GET', `/v1/clients/${A}/changes?limit=200`, { key: a.apiKey })
    const expired = feed.json.data.filter((e: { type: string }) => e.type === 'payment_request.expired')
    assert.deepEqual(
      expired.map((e: { resource: { id: string }; revision: number }) => [e.resource.id, e.revision]),
      [['pr-4', 2]],
    )
  })

  for (const c of CASES) {
    describe(`GET /v1/clients/{clientCode}/${c.segment}`, () => {
      test('newest first, each item exactly as its GET answers it', async () => {
        const res = await list(a, c.segment)
        assert.equal(res.status, 200, res.body)
        assert.deepEqual(ids(c.segment, res), c.all)
        assert.equal(res.json.nextCursor, null)
        for (const item of res.json.data) {
          const one = await getItem(a, c.segment, item[idOf[c.segment] as string])
          assert.equal(one.status, 200, one.body)
          assert.deepEqual(item, one.json)
        }
      })

      test('pages of every size from 1 give every item once, in order', async () => {
        for (const limit of [1, 2, 3]) assert.deepEqual(await walk(a, c.segment, limit), c.all, `limit ${limit}`)
        assert.deepEqual(await walk(a, c.segment, 200), c.all)
      })

      test('every filter, alone and while paging', async () => {
        for (const f of c.filters) {
          const res = await list(a, c.segment, `?limit=50${f.query}`)
          assert.equal(res.status, 200, `${f.query}: ${res.body}`)
          assert.deepEqual(ids(c.segment, res), f.expected, f.query)
          assert.deepEqual(await walk(a, c.segment, 1, f.query), f.expected, `${f.query}, one at a time`)
        }
      })

      test('a bad cursor, limit or filter is 422 at its pointer', async () => {
        const bad: [string, string][] = [
          ['?cursor=bad', '/query/cursor'],
          ['?cursor=', '/query/cursor'],
          ['?limit=0', '/query/limit'],
          ['?limit=201', '/query/limit'],
          ['?limit=1.5', '/query/limit'],
          ['?limit=ten', '/query/limit'],
          ['?unknown=1', '/query/unknown'],
          ...c.badFilters.map((f): [string, string] => [f.query, f.pointer]),
        ]
        for (const [query, pointer] of bad) assertFieldError(await list(a, c.segment, query), pointer, query)
        // Another list's cursor (an identifier-order list's) is not this list's.
        const customers = await t.call('GET', `/v1/clients/${A}/customers?limit=1`, { key: a.apiKey })
        assertFieldError(await list(a, c.segment, `?cursor=${customers.json.nextCursor}`), '/query/cursor', "the customers list's cursor")
      })

      test("an empty list; another client's rows, under the same identifiers, are never shown", async () => {
        assert.deepEqual((await list(empty, c.segment)).json, { data: [], nextCursor: null })
        const ofB = await list(b, c.segment)
        assert.equal(ofB.status, 200, ofB.body)
        assert.deepEqual(ids(c.segment, ofB), c.ofB)
        for (const item of ofB.json.data) assert.deepEqual(item, (await getItem(b, c.segment, item[idOf[c.segment] as string])).json)
        // A's list was already checked to be exactly A's items; B's items differ from A's of the same id.
        for (const id of c.ofB) assert.notDeepEqual((await getItem(a, c.segment, id)).json, (await getItem(b, c.segment, id)).json)
      })
    })
  }

  test("a revision (the Source's, or the service's suspension) does not move a recovery instruction: the list orders by creation", async () => {
    const res = await list(a, 'recovery-instructions')
    const r1 = res.json.data.find((i: { externalInstructionId: string }) => i.externalInstructionId === 'ins-r1')
    // Revisions 2 and 3 by the Source, 4 the suspension rec-2's held line on r1 made.
    assert.deepEqual([r1.revision, r1.state], [4, 'suspended'])
    assert.deepEqual(ids('recovery-instructions', res), ['ins-r3', 'ins-r2', 'ins-r1'])
  })

  describe('batches: a grant sees the batches whose every record kind it may write', () => {
    const grantOf = async (integrationId: string, scopes: Scope[]) => t.tenant(A, { integrationId, scopes })
    test('all kinds: every batch', async () => {
      assert.deepEqual(await walk(a, 'batches', 1), ['bt-4', 'bt-3', 'bt-2', 'bt-1'])
    })
    test('without receivables:write: not bt-2 (a receivable record), nothing of it in a page or a cursor', async () => {
      const k = await grantOf(
        'int-lst-norecv',
        SCOPES.filter((s) => s !== 'receivables:write'),
      )
      assert.deepEqual(await walk(k, 'batches', 1), ['bt-4', 'bt-3', 'bt-1'])
      assert.deepEqual(await walk(k, 'batches', 2, '&status=succeeded'), ['bt-1'])
      // Its GET refuses bt-2 as the list leaves it out.
      assert.equal((await getItem(k, 'batches', 'bt-2')).status, 403)
    })
    test('customers:write only: the customer-only batch', async () => {
      const k = await grantOf('int-lst-cust', ['customers:write', 'customers:read'])
      assert.deepEqual(await walk(k, 'batches', 1), ['bt-1'])
      const res = await list(k, 'batches')
      assert.deepEqual(res.json.data[0], (await getItem(a, 'batches', 'bt-1')).json)
    })
    test('financial_corrections:write and payment_observations:write: bt-3 only (bt-4 holds a customer record)', async () => {
      const k = await grantOf('int-lst-fin', ['financial_corrections:write', 'payment_observations:write'])
      assert.deepEqual(await walk(k, 'batches', 1), ['bt-3'])
    })
    test('no batch write scope at all: 403 client_scope_denied, as the GET of an unknown batch answers', async () => {
      const k = await grantOf(
        'int-lst-none',
        SCOPES.filter((s) => !s.endsWith(':write')),
      )
      const res = await list(k, 'batches')
      assert.equal(res.status, 403, res.body)
      assert.equal(problemCode(res), 'client_scope_denied')
    })
  })
})
