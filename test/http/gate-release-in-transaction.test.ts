import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { z } from 'zod'
import { digestSecret } from '../../src/access/keys.ts'
import { systemClock } from '../../src/domain/time.ts'
import { createGate, type Gate, type GateOutcome } from '../../src/http/limits.ts'
import { defineRoute } from '../../src/http/route.ts'
import { buildServer } from '../../src/http/server.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { countingStore } from '../helpers/counting-store.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { createTestDatabase, onPostgres } from '../helpers/store.ts'

/**
 * Issue 12: "A request that has a transaction releases its slot in that transaction". On PostgreSQL the slot
 * row is deleted by the write's own transaction, so it is free exactly when the write commits; a rollback
 * keeps it held until the ordinary release. The embedded store's gate keeps slots in memory (no releaseIn).
 */
let t: TestApp
let tenant: Tenant
let gate: Gate

before(async () => {
  t = await startTestApp()
  tenant = await t.tenant('slotc')
  gate = createGate(t.store, { perMinute: 1000, concurrency: 1, clock: systemClock })
})
after(() => t.close())

const enter = () => gate.enter({ digest: digestSecret(tenant.apiKey), environment: 'sandbox', clientCode: tenant.clientCode })

function refusal(o: GateOutcome): string | null {
  assert.ok(o.caller, 'the key is known')
  return 'refused' in o ? o.refused : null
}

function admitted(o: GateOutcome) {
  assert.ok(o.caller, 'the key is known')
  assert.equal(o.refused, null)
  assert.ok(o.lease)
  return o.lease
}

/** Requests holding slots (in sandbox a request holds one per bucket: its key's and its client's). */
async function heldSlots(): Promise<number> {
  if (!onPostgres) return -1
  const rows = await t.store.query<{ n: number }>(`SELECT count(DISTINCT holder)::int AS n FROM inflight_requests`)
  return rows[0]?.n ?? 0
}

describe('a write frees its concurrency slot inside its transaction', {
  skip: !onPostgres && 'the embedded gate keeps slots in memory',
}, () => {
  test('committed: the slot is free at commit, and the later release does nothing', async () => {
    const lease = admitted(await enter())
    assert.equal(refusal(await enter()), 'concurrency', 'the slot is held')
    let committed: (() => void) | undefined
    await t.store.transaction(async (tx) => {
      committed = await (lease.releaseIn as NonNullable<typeof lease.releaseIn>)(tx)
    })
    committed?.()
    assert.equal(await heldSlots(), 0, 'no slot row left after the commit')
    const next = admitted(await enter())
    // The first request's release, run when its response is sent, must not free the second request's slot.
    await lease.release()
    assert.equal(await heldSlots(), 1, 'the second request still holds its slot')
    assert.equal(refusal(await enter()), 'concurrency')
    await next.release()
    assert.equal(await heldSlots(), 0)
  })

  test('rolled back: the slot stays held until the ordinary release frees it', async () => {
    const lease = admitted(await enter())
    await assert.rejects(
      t.store.transaction(async (tx) => {
        await (lease.releaseIn as NonNullable<typeof lease.releaseIn>)(tx)
        throw new Error('the write failed')
      }),
      /the write failed/,
    )
    assert.equal(await heldSlots(), 1)
    assert.equal(refusal(await enter()), 'concurrency', 'the rolled-back release freed nothing')
    await lease.release()
    assert.equal(await heldSlots(), 0)
    admitted(await enter()).release()
  })
})

describe('the embedded store: slots in memory', { skip: onPostgres && 'PostgreSQL keeps slots in the store' }, () => {
  test('no release inside a transaction; the release frees the slot', async () => {
    const lease = admitted(await enter())
    assert.equal(lease.releaseIn, undefined)
    assert.equal(refusal(await enter()), 'concurrency')
    await lease.release()
    await admitted(await enter()).release()
  })
})

describe('a real PUT frees its slot in its transaction (PostgreSQL)', { skip: !onPostgres && 'PostgreSQL only' }, () => {
  test('the release is the last statement before COMMIT, none follows it, and no slot is left', async () => {
    const db = await createTestDatabase()
    const counting = countingStore(db.store)
    const c = await startTestApp({ CONCURRENCY_PER_KEY: '1' }, { db: { ...db, store: counting } })
    try {
      const k = await c.tenant('slotput')
      counting.reset()
      const res = await c.call('PUT', '/v1/clients/slotput/customers/slot-1', {
        key: k.apiKey,
        body: { type: 'person', name: { firstName: 'Ada', lastName: 'Slot' }, sourceReference: 'ledger/1' },
      })
      assert.equal(res.status, 201)
      const tx = counting.inTransactions
      assert.equal(tx.at(-1), 'COMMIT')
      assert.match(tx.at(-2) as string, /^DELETE FROM inflight_requests/)
      assert.equal(counting.outside.filter((sql) => /inflight_requests/.test(sql) && !/request_gate/.test(sql)).length, 0)
      const held = await db.store.query<{ n: number }>('SELECT count(*)::int AS n FROM inflight_requests')
      assert.equal(held[0]?.n, 0)
    } finally {
      await c.close()
      await db.drop()
    }
  })
})

describe('a route declared oneRead that runs a second statement', () => {
  test('answers 503 (a programming error a test finds), and its slot is still freed', async () => {
    const db = await createTestDatabase()
    const c = await startTestApp({ CONCURRENCY_PER_KEY: '1' }, { db })
    const app = buildServer(
      {
        db: db.store,
        config: { environment: 'sandbox', docsUrl: 'https://docs.irs.test', logLevel: 'silent' },
        gate: createGate(db.store, { perMinute: 1000, concurrency: 1, clock: systemClock }),
        adminTokenDigest: '00',
      },
      [
        defineRoute({
          method: 'GET',
          path: '/v1/clients/:clientCode/probe',
          operationId: 'probeTwoReads',
          summary: 'probe',
          tags: [],
          auth: { kind: 'api_key', scopes: [] },
          params: z.object({ clientCode: z.string() }),
          responses: { 200: { schema: z.object({ n: z.number() }), description: '' } },
          problems: [],
          public: false,
          oneRead: async (reads) => {
            await reads.query('SELECT 1 AS n')
            await reads.query('SELECT 2 AS n')
            return 2
          },
          handler: async ({ read }) => ({ status: 200, body: { n: read } }),
        }),
      ],
    )
    try {
      const k = await c.tenant('tworeads')
      const get = () => app.inject({ method: 'GET', url: '/v1/clients/tworeads/probe', headers: { authorization: `Bearer ${k.apiKey}` } })
      const first = await get()
      assert.equal(first.statusCode, 503)
      assert.equal((await get()).statusCode, 503, 'not 429: the slot was freed')
    } finally {
      await app.close()
      await c.close()
      await db.drop()
    }
  })
})

describe('every request with a transaction frees its slot in it (PostgreSQL)', { skip: !onPostgres && 'PostgreSQL only' }, () => {
  test('a batch PUT, the webhook endpoint PUT and secret rotation, a Payment request GET', async () => {
    const db = await createTestDatabase()
    const counting = countingStore(db.store)
    const resolver = async () => [{ address: '93.184.215.14', family: 4 as const }]
    const c = await startTestApp({ CONCURRENCY_PER_KEY: '1' }, { db: { ...db, store: counting }, resolver })
    try {
      const k = await c.tenant('slotall')
      await payableReceivable(c, k, 'slot-r1')
      const requests: [string, string, unknown, number][] = [
        [
          'PUT',
          '/v1/clients/slotall/batches/b-1',
          { records: [{ recordId: 'c', kind: 'customer', externalId: 'bc-1', body: CUSTOMER }] },
          202,
        ],
        ['PUT', '/v1/clients/slotall/webhook-endpoint', { url: 'https://hooks.acme.com/irs' }, 201],
        ['POST', '/v1/clients/slotall/webhook-endpoint/rotate-secret', undefined, 200],
        [
          'PUT',
          '/v1/clients/slotall/payment-requests/pr-1',
          { externalReceivableId: 'slot-r1', amount: { amount: '10.00', currency: 'USD' }, description: 'x' },
          201,
        ],
        ['GET', '/v1/clients/slotall/payment-requests/pr-1', undefined, 200],
      ]
      for (const [method, path, body, status] of requests) {
        counting.reset()
        const res = await c.call(method as 'PUT', path, { key: k.apiKey, ...(body === undefined ? {} : { body }) })
        assert.equal(res.status, status, `${method} ${path}: ${res.body}`)
        const tx = counting.inTransactions
        assert.equal(tx.at(-1), 'COMMIT', path)
        assert.match(tx.at(-2) as string, /^DELETE FROM inflight_requests/, path)
        assert.deepEqual(
          counting.outside.filter((sql) => /inflight_requests/.test(sql) && !/request_gate/.test(sql)),
          [],
          `${method} ${path}: no release of its own`,
        )
        const held = await db.store.query<{ n: number }>('SELECT count(*)::int AS n FROM inflight_requests')
        assert.equal(held[0]?.n, 0, path)
      }
    } finally {
      await c.close()
      await db.drop()
    }
  })
})

const CUSTOMER = { type: 'person', name: { firstName: 'Ada', lastName: 'Batch' }, sourceReference: 'ledger/b/1' }
