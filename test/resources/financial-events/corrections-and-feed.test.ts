import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { runRetention } from '../../../src/resources/retention/service.ts'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { createTestDatabase, onPostgres } from '../../helpers/store.ts'

let t: TestApp
let k: Tenant
const base = '/v1/clients/fin'
const usd = (amount: string) => ({ amount, currency: 'USD' })
const customer = { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' }
const receivable = (sourceRevision = 1, amount = '100.00') => ({
  financialType: 'loan_balance',
  sourceRevision,
  recoverableAmount: usd(amount),
  creditUnion: { loanAccountReference: 'loans/LN-77', loanType: 'auto' },
  dueDate: '2026-02-28',
  responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'primary' }],
  sourceReference: 'ledger/r/1',
})
const pointers = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])

before(async () => {
  t = await startTestApp()
  k = await t.tenant('fin')
  assert.equal((await t.call('PUT', `${base}/customers/cust-1`, { key: k.apiKey, body: customer })).status, 201)
})
after(() => t.close())

const call = (method: 'PUT' | 'GET', path: string, body?: unknown) =>
  t.call(method, `${base}${path}`, { key: k.apiKey, ...(body ? { body } : {}) })
const position = async (id: string) => (await call('GET', `/receivables/${id}`)).json

describe('financial corrections', () => {
  const event = (type: string, sourceRevision: number, amount: string, extra: Record<string, unknown> = {}) => ({
    type,
    amount: usd(amount),
    externalReceivableId: 'r-fin',
    sourceRevision,
    effectiveAt: '2026-03-01T10:00:00Z',
    reason: type === 'write_off' ? 'approved_write_off' : 'billing_correction',
    sourceReference: 'ledger/e/1',
    ...(type === 'adjustment' ? { direction: 'increase' } : {}),
    ...extra,
  })

  test('each family moves the source amount by its signed amount and the source revision; retries are exact', async () => {
    assert.equal((await call('PUT', '/receivables/r-fin', receivable())).status, 201)
    const adj = await call('PUT', '/adjustments/e-1', event('adjustment', 2, '10.00', { staffNote: 'called the member' }))
    assert.equal(adj.status, 201, adj.body)
    assert.deepEqual(Object.keys(adj.json).sort(), [
      'acceptedAt',
      'amount',
      'direction',
      'effectiveAt',
      'externalEventId',
      'externalReceivableId',
      'reason',
      'sourceReference',
      'sourceRevision',
      'type',
    ])
    assert.ok(!adj.body.includes('called the member'))
    let r = await position('r-fin')
    assert.deepEqual([r.financialPosition.sourceAmount.amount, r.sourceRevision, r.revision], ['110.00', 2, 2])
    const retry = await call('PUT', '/adjustments/e-1', event('adjustment', 2, '10', { staffNote: 'called the member' }))
    assert.equal(retry.status, 200)
    assert.equal(retry.json.acceptedAt, adj.json.acceptedAt)
    assert.equal((await position('r-fin')).financialPosition.sourceAmount.amount, '110.00')
    const get = await call('GET', '/adjustments/e-1')
    assert.deepEqual(get.json, adj.json)

    assert.equal((await call('PUT', '/credit-notes/e-2', event('credit_note', 3, '30.00', { reason: 'contractual_credit' }))).status, 201)
    assert.equal((await call('PUT', '/write-offs/e-3', event('write_off', 4, '20.00'))).status, 201)
    assert.equal((await call('PUT', '/adjustments/e-4', event('adjustment', 5, '0.01', { direction: 'decrease' }))).status, 201)
    r = await position('r-fin')
    assert.deepEqual([r.financialPosition.sourceAmount.amount, r.sourceRevision, r.revision], ['59.99', 5, 5])
    const feed = await t.store.query<{ type: string; revision: string }>(
      `SELECT type, revision::text FROM change_events WHERE client_code = 'fin' AND resource_id = 'r-fin' ORDER BY seq`,
    )
    assert.deepEqual(
      feed.map((e) => Number(e.revision)),
      [1, 2, 3, 4, 5],
    )
  })

  test('conflicts, stale revisions, wrong families and reasons, and nothing moves on a refusal', async () => {
    const before = await position('r-fin')
    const changed = await call('PUT', '/adjustments/e-1', event('adjustment', 2, '11.00'))
    assert.equal(changed.status, 409)
    assert.equal(problemCode(changed), 'financial_event_conflict')
    for (const rev of [5, 4]) {
      const stale = await call('PUT', '/credit-notes/e-stale', event('credit_note', rev, '1.00'))
      assert.equal(problemCode(stale), 'stale_source_revision')
      assert.equal(stale.json.currentSourceRevision, 5)
    }
    assert.deepEqual(pointers(await call('PUT', '/adjustments/e-x', event('credit_note', 6, '1.00'))), [
      ['invalid_value', '/type'],
      ['invalid_value', '/direction'],
    ])
    assert.deepEqual(pointers(await call('PUT', '/credit-notes/e-x', event('adjustment', 6, '1.00', { direction: undefined }))), [
      ['invalid_value', '/type'],
    ])
    assert.deepEqual(pointers(await call('PUT', '/credit-notes/e-x', event('credit_note', 6, '1.00', { reason: 'approved_write_off' }))), [
      ['invalid_value', '/reason'],
    ])
    const { direction: _d, ...noDirection } = event('adjustment', 6, '1.00')
    assert.deepEqual(pointers(await call('PUT', '/adjustments/e-x', noDirection)), [['invalid_value', '/direction']])
    assert.deepEqual(pointers(await call('PUT', '/credit-notes/e-x', event('credit_note', 6, '1.00', { direction: 'decrease' }))), [
      ['unrecognized_keys', '/direction'],
    ])
    assert.deepEqual(pointers(await call('PUT', '/write-offs/e-x', event('write_off', 6, '60.00'))), [['custom', '/amount/amount']])
    assert.deepEqual(pointers(await call('PUT', '/write-offs/e-x', event('write_off', 6, '1.00', { externalReceivableId: 'ghost' }))), [
      ['unknown_reference', '/externalReceivableId'],
    ])
    assert.deepEqual(
      pointers(await call('PUT', '/write-offs/e-x', event('write_off', 6, '1.00', { amount: { amount: '1.00', currency: 'EUR' } }))),
      [['custom', '/amount/currency']],
    )
    assert.deepEqual(await position('r-fin'), before)
    assert.equal(problemCode(await call('GET', '/credit-notes/e-1')), 'financial_event_not_found')
    assert.equal(problemCode(await call('GET', '/write-offs/nothing')), 'financial_event_not_found')
  })

  test('a snapshot_only connection gets 409 feed_mode_mismatch for every family', async () => {
    const snap = await t.tenant('fin', { integrationId: 'int-snap', grant: { feedMode: 'snapshot_only' } })
    for (const [path, type] of [
      ['/adjustments/s-1', 'adjustment'],
      ['/credit-notes/s-1', 'credit_note'],
      ['/write-offs/s-1', 'write_off'],
    ] as const) {
      const res = await t.call('PUT', `${base}${path}`, { key: snap.apiKey, body: event(type, 9, '1.00') })
      assert.equal(res.status, 409)
      assert.equal(problemCode(res), 'feed_mode_mismatch')
    }
  })
})

describe('payment observations', () => {
  const observation = (extra: Record<string, unknown> = {}) => ({
    type: 'payment',
    amount: usd('50.00'),
    allocations: [{ amount: usd('30.00'), externalReceivableId: 'r-obs' }],
    effectiveAt: '2026-03-02T09:00:00Z',
    externalCustomerId: 'cust-1',
    method: 'bank_transfer',
    sourceReference: 'bank/stmt/1',
    ...extra,
  })
  test('evidence only: unapplied remainder kept apart, the financial position never moves', async () => {
    assert.equal((await call('PUT', '/receivables/r-obs', receivable())).status, 201)
    const before = await position('r-obs')
    const res = await call('PUT', '/payment-observations/p-1', observation())
    assert.equal(res.status, 201, res.body)
    assert.deepEqual(res.json.unappliedAmount, usd('20.00'))
    assert.deepEqual((await position('r-obs')).financialPosition, before.financialPosition)
    assert.equal((await position('r-obs')).revision, before.revision)
    assert.equal((await call('PUT', '/payment-observations/p-1', observation())).status, 200)
    assert.equal(
      problemCode(await call('PUT', '/payment-observations/p-1', observation({ method: 'card' }))),
      'payment_observation_conflict',
    )
    assert.deepEqual((await call('GET', '/payment-observations/p-1')).json, res.json)
    assert.equal(
      (await call('PUT', '/payment-observations/p-2', observation({ type: 'refund', reversesExternalEventId: 'p-1', allocations: [] })))
        .status,
      201,
    )
  })
  test('bad observations', async () => {
    const cases: [Record<string, unknown>, [string, string][]][] = [
      [observation({ allocations: [{ amount: usd('60.00'), externalReceivableId: 'r-obs' }] }), [['custom', '/allocations']]],
      [observation({ externalCustomerId: 'ghost' }), [['unknown_reference', '/externalCustomerId']]],
      [
        observation({ allocations: [{ amount: usd('1.00'), externalReceivableId: 'ghost' }] }),
        [['unknown_reference', '/allocations/0/externalReceivableId']],
      ],
      [
        observation({
          allocations: [
            { amount: usd('1.00'), externalReceivableId: 'r-obs' },
            { amount: usd('1.00'), externalReceivableId: 'r-obs' },
          ],
        }),
        [['custom', '/allocations/1/externalReceivableId']],
      ],
      [
        observation({ allocations: [{ amount: { amount: '1.00', currency: 'EUR' }, externalReceivableId: 'r-obs' }] }),
        [['custom', '/allocations/0/amount/currency']],
      ],
      [observation({ type: 'reversal' }), [['custom', '/reversesExternalEventId']]],
      [observation({ type: 'refund', reversesExternalEventId: 'ghost' }), [['unknown_reference', '/reversesExternalEventId']]],
      [observation({ method: 'barter' }), [['invalid_value', '/method']]],
    ]
    for (const [body, expected] of cases) assert.deepEqual(pointers(await call('PUT', '/payment-observations/p-bad', body)), expected)
    assert.equal(problemCode(await call('GET', '/payment-observations/p-bad')), 'payment_observation_not_found')
  })
})

describe('the change feed', () => {
  const page = (tenant: Tenant, client: string, q = '') => t.call('GET', `/v1/clients/${client}/changes${q}`, { key: tenant.apiKey })
  test('events carry identity and revision only, and paging sees each exactly once in order', async () => {
    const all: string[] = []
    let after = ''
    for (let i = 0; i < 50; i++) {
      const res = await page(k, 'fin', `?limit=4${after ? `&after=${after}` : ''}`)
      assert.equal(res.status, 200)
      for (const e of res.json.data) {
        assert.deepEqual(Object.keys(e).sort(), ['eventId', 'occurredAt', 'resource', 'revision', 'type'])
        assert.deepEqual(Object.keys(e.resource).sort(), ['id', 'type'])
        all.push(e.eventId)
      }
      assert.equal(typeof res.json.nextCursor, 'string')
      after = res.json.nextCursor
      if (!res.json.hasMore) break
    }
    const expected = await t.store.query<{ event_id: string }>(`SELECT event_id FROM change_events WHERE client_code = 'fin' ORDER BY seq`)
    assert.deepEqual(
      all,
      expected.map((e) => e.event_id),
    )
    const empty = await page(k, 'fin', `?after=${after}`)
    assert.deepEqual(empty.json.data, [])
    assert.equal(empty.json.nextCursor, after)
    assert.ok(!JSON.stringify(empty.json).includes('Lovelace'))
  })

  test('a reader sees only the resource types its scopes can read', async () => {
    const c = await t.tenant('fin', { integrationId: 'int-custread', scopes: ['customers:read'] })
    const res = await page(c, 'fin', '?limit=200')
    assert.ok(res.json.data.length > 0)
    assert.deepEqual([...new Set(res.json.data.map((e: { resource: { type: string } }) => e.resource.type))], ['customer'])
    const none = await t.tenant('fin', { integrationId: 'int-noread', scopes: ['customers:write'] })
    assert.equal(problemCode(await page(none, 'fin')), 'client_scope_denied')
    assert.deepEqual(pointers(await page(k, 'fin', '?after=%24%24')), [['invalid_format', '/query/after']])
    // docs/design/routes.md: list limits are 1..200; nothing is capped silently.
    assert.deepEqual(pointers(await page(k, 'fin', '?limit=201')), [['too_big', '/query/limit']])
    assert.deepEqual(pointers(await page(k, 'fin', '?limit=0')), [['too_small', '/query/limit']])
    assert.equal((await page(k, 'fin', '?limit=200')).status, 200)
  })

  test('events past retention are purged and an older cursor answers 410 cursor_expired', async () => {
    const c = await t.tenant('fin-old')
    for (const id of ['a', 'b', 'c']) await t.call('PUT', `/v1/clients/fin-old/customers/${id}`, { key: c.apiKey, body: customer })
    const first = await page(c, 'fin-old', '?limit=1')
    await t.store.query(
      `UPDATE change_events SET occurred_at = now() - interval '40 days' WHERE client_code = 'fin-old' AND resource_id IN ('a', 'b')`,
    )
    await runRetention(t.store)
    const expired = await page(c, 'fin-old', `?after=${first.json.nextCursor}`)
    assert.equal(expired.status, 410)
    assert.equal(problemCode(expired), 'cursor_expired')
    const fresh = await page(c, 'fin-old')
    assert.deepEqual(
      fresh.json.data.map((e: { resource: { id: string } }) => e.resource.id),
      ['c'],
    )
  })
})

describe('feed paging is stable under concurrent writers', () => {
  test('a reader following nextCursor sees every committed event exactly once, in commit order', {
    skip: onPostgres ? false : 'needs PostgreSQL (set DATABASE_URL)',
  }, async () => {
    const db = await createTestDatabase()
    const w = await startTestApp({}, { db })
    try {
      const tn = await w.tenant('feedrace')
      const writers = Array.from({ length: 4 }, (_, wi) =>
        (async () => {
          for (let i = 0; i < 30; i++) {
            const res = await w.call('PUT', `/v1/clients/feedrace/customers/w${wi}-${i}`, { key: tn.apiKey, body: customer })
            assert.equal(res.status, 201)
          }
        })(),
      )
      let done = false
      const allWritten = Promise.all(writers).then(() => {
        done = true
      })
      const seen: string[] = []
      let after = ''
      for (let rounds = 0; rounds < 10_000; rounds++) {
        const finished = done
        const res = await w.call('GET', `/v1/clients/feedrace/changes?limit=7${after ? `&after=${after}` : ''}`, { key: tn.apiKey })
        seen.push(...res.json.data.map((e: { eventId: string }) => e.eventId))
        after = res.json.nextCursor
        if (finished && !res.json.hasMore) break
      }
      await allWritten
      const committed = await db.store.query<{ event_id: string }>(
        `SELECT event_id FROM change_events WHERE client_code = 'feedrace' ORDER BY seq`,
      )
      assert.equal(committed.length, 120)
      assert.deepEqual(
        seen,
        committed.map((e) => e.event_id),
      )
    } finally {
      await w.app.app.close()
      await db.drop()
    }
  })
})
