import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import fc from 'fast-check'
import { type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { engineName } from '../helpers/store.ts'

/**
 * Newest-first paging under writes (docs/decisions.md, "Lists"): the order is (creation time, identifier)
 * descending, both fixed when a row is made, so (1) any interleaving of creation times (ties included) and page
 * sizes pages through exactly the items in that order, and (2) a reader paging while 16 writers add items never
 * skips or repeats an item that existed when it started, and never shows one twice.
 */
let nowMs = Date.parse('2026-03-02T10:00:00.000Z')
const clock = { now: () => new Date(nowMs) }
let t: TestApp
let k: Tenant
const C = 'lpg'
const usd = (amount: string) => ({ amount, currency: 'USD' })

before(async () => {
  t = await startTestApp({}, { clock })
  k = await t.tenant(C)
  const ok = (r: Response, what: string) => assert.ok(r.status < 300, `${what}: ${r.status} ${r.body}`)
  ok(
    await t.call('PUT', `/v1/clients/${C}/customers/c-0`, {
      key: k.apiKey,
      body: { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: 'c/0' },
    }),
    'customer',
  )
  ok(
    await t.call('PUT', `/v1/clients/${C}/receivables/r-0`, {
      key: k.apiKey,
      body: {
        financialType: 'loan_balance',
        sourceRevision: 1,
        recoverableAmount: usd('10.00'),
        creditUnion: { loanAccountReference: 'l/0', loanType: 'auto' },
        dueDate: '2026-01-01',
        responsibleCustomers: [{ externalCustomerId: 'c-0', role: 'primary' }],
        sourceReference: 'r/0',
      },
    }),
    'receivable',
  )
})
after(() => t.close())

async function customer(id: string) {
  const res = await t.call('PUT', `/v1/clients/${C}/customers/${id}`, {
    key: k.apiKey,
    body: { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: `c/${id}` },
  })
  assert.ok(res.status < 300, res.body)
}

async function observe(id: string, customerId: string) {
  const res = await t.call('PUT', `/v1/clients/${C}/payment-observations/${id}`, {
    key: k.apiKey,
    body: {
      type: 'payment',
      amount: usd('1.00'),
      allocations: [{ amount: usd('1.00'), externalReceivableId: 'r-0' }],
      effectiveAt: '2026-03-01T00:00:00Z',
      externalCustomerId: customerId,
      method: 'cash',
      sourceReference: `po/${id}`,
    },
  })
  assert.equal(res.status, 201, res.body)
}

interface Item {
  externalEventId: string
  acceptedAt: string
}

/** Every page of a Customer's observations, `limit` at a time; `between` runs after each page. */
async function walk(customerId: string, limit: number, between: () => Promise<void> = async () => {}): Promise<Item[]> {
  const seen: Item[] = []
  let cursor: string | null = null
  for (;;) {
    const res: Response = await t.call(
      'GET',
      `/v1/clients/${C}/payment-observations?externalCustomerId=${customerId}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`,
      { key: k.apiKey },
    )
    assert.equal(res.status, 200, res.body)
    seen.push(...res.json.data)
    cursor = res.json.nextCursor
    if (cursor === null) return seen
    await between()
  }
}

const newestFirst = (x: Item, y: Item) =>
  x.acceptedAt !== y.acceptedAt ? (x.acceptedAt < y.acceptedAt ? 1 : -1) : x.externalEventId < y.externalEventId ? 1 : -1

test(`any creation times (ties included) and any page size page through every item once, newest first (${engineName})`, async () => {
  let run = 0
  await fc.assert(
    fc.asyncProperty(
      // Identifier suffixes in creation order (so identifiers and times are unrelated), each after a step of 0 to 2 ms.
      fc.uniqueArray(fc.integer({ min: 10, max: 99 }), { minLength: 0, maxLength: 9 }),
      fc.array(fc.constantFrom(0, 0, 1, 2), { minLength: 9, maxLength: 9 }),
      fc.integer({ min: 1, max: 4 }),
      async (suffixes, steps, limit) => {
        const cust = `cp-${++run}`
        await customer(cust)
        const made: Item[] = []
        for (const [i, n] of suffixes.entries()) {
          nowMs += steps[i] ?? 0
          const id = `po-${run}-${n}`
          await observe(id, cust)
          made.push({ externalEventId: id, acceptedAt: new Date(nowMs).toISOString() })
        }
        const seen = await walk(cust, limit)
        assert.deepEqual(
          seen.map((i) => [i.acceptedAt, i.externalEventId]),
          [...made].sort(newestFirst).map((i) => [i.acceptedAt, i.externalEventId]),
        )
        nowMs += 5
      },
    ),
    { numRuns: 25 },
  )
})

test(`a reader paging while 16 writers add items skips and repeats nothing (${engineName})`, async () => {
  const cust = 'cc'
  await customer(cust)
  const existing: string[] = []
  for (let i = 0; i < 40; i++) {
    nowMs += i % 3 === 0 ? 1 : 0
    const id = `pre-${String(i).padStart(2, '0')}`
    await observe(id, cust)
    existing.push(id)
  }
  for (let round = 0; round < 3; round++) {
    let writing = true
    const writers = Array.from({ length: 16 }, async (_, w) => {
      for (let i = 0; writing && i < 25; i++) {
        // Writers share the clock and move it on now and then: ties with the reader's cursor happen.
        if ((w + i) % 4 === 0) nowMs += 1
        await observe(`new-${round}-${String(w).padStart(2, '0')}-${String(i).padStart(2, '0')}`, cust)
      }
    })
    const seen = await walk(cust, 3, () => new Promise((resolve) => setImmediate(resolve)))
    writing = false
    await Promise.all(writers)
    const ids = seen.map((i) => i.externalEventId)
    assert.equal(new Set(ids).size, ids.length, `round ${round}: an item shown twice`)
    for (const id of existing) assert.ok(ids.includes(id), `round ${round}: ${id}, there before the reader started, was skipped`)
    // Each page continues strictly after the last: the whole walk is strictly newest first.
    assert.deepEqual(seen, [...seen].sort(newestFirst), `round ${round}: out of order`)
    // What the reader saw of the new items, it saw where they belong; the rest were created behind its cursor.
    existing.push(...(await walk(cust, 200)).map((i) => i.externalEventId).filter((id) => !existing.includes(id)))
  }
})
