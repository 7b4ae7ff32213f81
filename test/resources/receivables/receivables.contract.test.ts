import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { instalmentReceivable as receivable, usd } from '../../helpers/receivables.ts'

let t: TestApp
let k: Tenant
before(async () => {
  t = await startTestApp()
  k = await t.tenant('rcv')
  for (const id of ['cust-1', 'cust-2']) {
    await t.call('PUT', `/v1/clients/rcv/customers/${id}`, {
      key: k.apiKey,
      body: { type: 'person', name: { firstName: 'A', lastName: id }, sourceReference: 'ref/1' },
    })
  }
})
after(() => t.close())

const base = '/v1/clients/rcv'
const put = (id: string, body: unknown) => t.call('PUT', `${base}/receivables/${id}`, { key: k.apiKey, body })
const get = (id: string) => t.call('GET', `${base}/receivables/${id}`, { key: k.apiKey })
const pointers = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])
const feed = (id: string) =>
  t.store.query<{ type: string; revision: string }>(
    `SELECT type, revision::text FROM change_events WHERE client_code = 'rcv' AND resource_id = $1 ORDER BY seq`,
    [id],
  )

describe('Receivable PUT and read-back', () => {
  test('create 201 with status, revision, financial position and holds; importing never starts recovery', async () => {
    const res = await put('r-1', receivable())
    assert.equal(res.status, 201, res.body)
    assert.equal(res.json.status, 'active')
    assert.equal(res.json.revision, 1)
    assert.deepEqual(res.json.financialPosition, {
      sourceAmount: usd('100.00'),
      workingAmount: usd('100.00'),
      confirmedUnreconciledAmount: usd('0.00'),
      receiptAcknowledgedAmount: usd('0.00'),
    })
    assert.deepEqual(res.json.recovery, { held: true, holds: ['recovery_not_authorized', 'collection_not_enabled'] })
    assert.deepEqual((await get('r-1')).json, res.json)
  })

  test('identical retry 200 (amount written "100" and keys reordered), higher revision replaces, stale revisions 409', async () => {
    await put('r-2', receivable())
    const { recoverableAmount: _r, ...rest } = receivable()
    const retry = await put('r-2', { recoverableAmount: { currency: 'USD', amount: '100' }, ...rest })
    assert.equal(retry.status, 200)
    assert.equal(retry.json.revision, 1)
    const newer = await put('r-2', receivable({ sourceRevision: 2, recoverableAmount: usd('80.00'), balanceBreakdown: undefined }))
    assert.equal(newer.status, 200)
    assert.equal(newer.json.revision, 2)
    assert.equal(newer.json.financialPosition.sourceAmount.amount, '80.00')
    for (const body of [receivable({ sourceRevision: 2 }), receivable({ sourceRevision: 1 })]) {
      const res = await put('r-2', body)
      assert.equal(res.status, 409)
      assert.equal(problemCode(res), 'stale_source_revision')
      assert.equal(res.json.currentSourceRevision, 2)
    }
    const eur = await put(
      'r-2',
      receivable({
        sourceRevision: 3,
        balanceBreakdown: undefined,
        recoverableAmount: { amount: '1.00', currency: 'EUR' },
        creditUnion: { loanAccountReference: 'l/1', loanType: 'auto' },
      }),
    )
    assert.deepEqual(pointers(eur), [['custom', '/recoverableAmount/currency']])
    assert.deepEqual(await feed('r-2'), [
      { type: 'receivable.created', revision: '1' },
      { type: 'receivable.updated', revision: '2' },
    ])
  })

  test('list with a status filter and cursor paging', async () => {
    const c = await t.tenant('rcv-list')
    await t.call('PUT', '/v1/clients/rcv-list/customers/cust-1', {
      key: c.apiKey,
      body: { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: 'r/1' },
    })
    for (const id of ['a', 'b', 'c', 'd', 'e']) {
      assert.equal((await t.call('PUT', `/v1/clients/rcv-list/receivables/${id}`, { key: c.apiKey, body: receivable() })).status, 201)
    }
    await t.call('POST', '/v1/clients/rcv-list/receivables/b/pause', {
      key: c.apiKey,
      body: { effectiveAt: '2026-03-01T00:00:00Z', reason: 'other' },
    })
    await t.call('POST', '/v1/clients/rcv-list/receivables/d/close', {
      key: c.apiKey,
      body: { effectiveAt: '2026-03-01T00:00:00Z', reason: 'settled' },
    })
    const ids = async (q: string) => {
      const out: string[] = []
      let cursor: string | null = null
      do {
        const res = await t.call('GET', `/v1/clients/rcv-list/receivables?limit=2${q}${cursor ? `&cursor=${cursor}` : ''}`, {
          key: c.apiKey,
        })
        assert.equal(res.status, 200)
        out.push(...res.json.data.map((r: { externalReceivableId: string }) => r.externalReceivableId))
        cursor = res.json.nextCursor
      } while (cursor)
      return out
    }
    assert.deepEqual(await ids(''), ['a', 'b', 'c', 'd', 'e'])
    assert.deepEqual(await ids('&status=active'), ['a', 'c', 'e'])
    assert.deepEqual(await ids('&status=paused'), ['b'])
    assert.deepEqual(await ids('&status=closed'), ['d'])
    const bad = await t.call('GET', '/v1/clients/rcv-list/receivables?status=gone', { key: c.apiKey })
    assert.deepEqual(pointers(bad), [['invalid_value', '/query/status']])
    assert.equal(problemCode(await get('nope')), 'receivable_not_found')
  })
})

describe('field rules', () => {
  const cases: [string, Record<string, unknown>, [string, string][]][] = [
    ['unknown financial type', receivable({ financialType: 'mortgage' }), [['invalid_value', '/financialType']]],
    [
      'breakdown with three parts',
      receivable({ balanceBreakdown: { costs: usd('0'), fees: usd('5'), interest: usd('95') } }),
      [['invalid_type', '/balanceBreakdown/principal']],
    ],
    [
      'breakdown not summing',
      receivable({ balanceBreakdown: { costs: usd('0'), fees: usd('5'), interest: usd('10.50'), principal: usd('84.49') } }),
      [['custom', '/balanceBreakdown']],
    ],
    [
      'mixed currency',
      receivable({
        balanceBreakdown: { costs: { amount: '0', currency: 'EUR' }, fees: usd('5'), interest: usd('10.50'), principal: usd('84.50') },
      }),
      [['custom', '/balanceBreakdown/costs/currency']],
    ],
    ['no responsible customer', receivable({ responsibleCustomers: [] }), [['too_small', '/responsibleCustomers']]],
    [
      'nine responsible customers',
      receivable({
        responsibleCustomers: Array.from({ length: 9 }, (_, i) => ({ externalCustomerId: `c${i}`, role: i ? 'guarantor' : 'primary' })),
      }),
      [['too_big', '/responsibleCustomers']],
    ],
    [
      'duplicate customer',
      receivable({
        responsibleCustomers: [
          { externalCustomerId: 'cust-1', role: 'primary' },
          { externalCustomerId: 'cust-1', role: 'guarantor' },
        ],
      }),
      [['custom', '/responsibleCustomers/1/externalCustomerId']],
    ],
    [
      'two primaries',
      receivable({
        responsibleCustomers: [
          { externalCustomerId: 'cust-1', role: 'primary' },
          { externalCustomerId: 'cust-2', role: 'primary' },
        ],
      }),
      [['custom', '/responsibleCustomers']],
    ],
    [
      'no primary',
      receivable({ responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'guarantor' }] }),
      [['custom', '/responsibleCustomers']],
    ],
    [
      'unknown customer',
      receivable({ responsibleCustomers: [{ externalCustomerId: 'ghost', role: 'primary' }] }),
      [['unknown_reference', '/responsibleCustomers/0/externalCustomerId']],
    ],
    ['source revision above safe integer', receivable({ sourceRevision: 9007199254740992 }), [['too_big', '/sourceRevision']]],
    ['negative source revision', receivable({ sourceRevision: -1 }), [['too_small', '/sourceRevision']]],
    ['fractional source revision', receivable({ sourceRevision: 1.5 }), [['invalid_type', '/sourceRevision']]],
    ['30 February', receivable({ dueDate: '2026-02-30' }), [['invalid_format', '/dueDate']]],
    ['29 February 2025', receivable({ dueDate: '2025-02-29' }), [['invalid_format', '/dueDate']]],
    [
      'a fourth assertion in the context',
      receivable({ creditUnion: { ...receivable().creditUnion, collateralValue: usd('1') } }),
      [['unrecognized_keys', '/creditUnion/collateralValue']],
    ],
    [
      'card number as loan account reference',
      receivable({ creditUnion: { ...receivable().creditUnion, loanAccountReference: '4111111111111111' } }),
      [['sensitive_source_reference', '/creditUnion/loanAccountReference']],
    ],
    [
      'three decimals',
      receivable({ recoverableAmount: usd('1.005'), balanceBreakdown: undefined }),
      [['invalid_format', '/recoverableAmount/amount']],
    ],
    [
      'negative amount',
      receivable({ recoverableAmount: usd('-1.00'), balanceBreakdown: undefined }),
      [['invalid_format', '/recoverableAmount/amount']],
    ],
  ]
  for (const [what, body, expected] of cases) {
    test(`${what}: 422 exactly`, async () => {
      const res = await put('r-rules', body)
      assert.equal(res.status, 422, res.body)
      assert.equal(problemCode(res), 'validation_error')
      assert.deepEqual(pointers(res), expected)
    })
  }
  test('a missing industry context is a profile_mismatch; 29 February 2024 is a date', async () => {
    const { creditUnion: _c, ...noContext } = receivable()
    const res = await put('r-rules', noContext)
    assert.equal(res.status, 422)
    assert.equal(problemCode(res), 'profile_mismatch')
    assert.deepEqual(pointers(res), [['profile_mismatch', '/creditUnion']])
    assert.equal((await put('r-leap', receivable({ dueDate: '2024-02-29' }))).status, 201)
  })
})

describe('lifecycle', () => {
  const cmd = (id: string, c: string, extra: Record<string, unknown> = {}) =>
    t.call('POST', `${base}/receivables/${id}/${c}`, { key: k.apiKey, body: { effectiveAt: '2026-03-01T00:00:00Z', ...extra } })
  test('pause, resume, close, reopen and every refused transition', async () => {
    await put('r-life', receivable())
    const table: [string, Record<string, unknown>, number, string][] = [
      ['resume', {}, 409, 'active'],
      ['reopen', {}, 409, 'active'],
      ['pause', { reason: 'source_request' }, 200, 'paused'],
      ['pause', { reason: 'source_request' }, 409, 'paused'],
      ['reopen', {}, 409, 'paused'],
      ['resume', {}, 200, 'active'],
      ['pause', { reason: 'hardship_review' }, 200, 'paused'],
      ['close', { reason: 'settled' }, 200, 'closed'],
      ['close', { reason: 'settled' }, 409, 'closed'],
      ['pause', { reason: 'other' }, 409, 'closed'],
      ['resume', {}, 409, 'closed'],
      ['reopen', {}, 200, 'active'],
      ['close', { reason: 'paid_in_full' }, 200, 'closed'],
      ['reopen', {}, 200, 'active'],
    ]
    let revision = 1
    for (const [c, extra, status, after] of table) {
      const res = await cmd('r-life', c, extra)
      assert.equal(res.status, status, `${c} -> ${res.body}`)
      if (status === 409) {
        assert.equal(problemCode(res), 'receivable_state_conflict')
      } else {
        revision++
        assert.equal(res.json.revision, revision)
        assert.ok(res.json.financialPosition)
      }
      assert.equal((await get('r-life')).json.status, after)
    }
    const reopened = await get('r-life')
    assert.ok(reopened.json.recovery.holds.includes('recovery_not_authorized'), 'reopen never resumes recovery')
    assert.equal((await feed('r-life')).length, revision)
  })
  test('paused and closed Receivables carry other_protection; bad commands are refused', async () => {
    await put('r-life2', receivable())
    assert.ok((await cmd('r-life2', 'pause', { reason: 'other' })).json.recovery.holds.includes('other_protection'))
    assert.equal(problemCode(await cmd('nobody', 'pause', { reason: 'other' })), 'receivable_not_found')
    assert.deepEqual(pointers(await cmd('r-life2', 'close', { reason: 'because' })), [['invalid_value', '/reason']])
    assert.deepEqual(pointers(await cmd('r-life2', 'resume', { effectiveAt: '2026-13-01T00:00:00Z' })), [
      ['invalid_format', '/effectiveAt'],
    ])
    assert.equal((await t.call('POST', `${base}/receivables/r-life2/resume`, { key: k.apiKey })).status, 415)
  })
})
