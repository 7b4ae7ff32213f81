import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { instalmentReceivable as receivable, usd } from '../../helpers/receivables.ts'

/** A clock the test moves by hand, so every `updatedAt` is an exact value. */
let nowMs = Date.parse('2026-03-01T09:00:00.000Z')
const clock = { now: () => new Date(nowMs) }
const tick = (): string => {
  nowMs += 1000
  return new Date(nowMs).toISOString()
}

const CLIENT = 'rcv-happy'
const base = `/v1/clients/${CLIENT}`
let t: TestApp
let k: Tenant

const customerBody = (lastName: string) => ({
  type: 'person',
  name: { firstName: 'Ada', lastName },
  sourceReference: `ledger/c/${lastName}`,
})

/** The brief's valid Receivable, as the Source sends it. */

const position = (source: string, currency = 'USD') => ({
  sourceAmount: { amount: source, currency },
  workingAmount: { amount: source, currency },
  confirmedUnreconciledAmount: { amount: '0.00', currency },
  receiptAcknowledgedAmount: { amount: '0.00', currency },
})
const NEW_HOLDS = { held: true, holds: ['recovery_not_authorized', 'collection_not_enabled'] }

const put = (id: string, body: unknown, key = k.apiKey, client = CLIENT) =>
  t.call('PUT', `/v1/clients/${client}/receivables/${id}`, { key, body })
const get = (id: string) => t.call('GET', `${base}/receivables/${id}`, { key: k.apiKey })
const errors = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])
const events = async (id: string, client = CLIENT) =>
  (
    await t.store.query<{ type: string; revision: number; resource_type: string }>(
      'SELECT type, revision::int AS revision, resource_type FROM change_events WHERE client_code = $1 AND resource_id = $2 ORDER BY seq',
      [client, id],
    )
  ).map((e) => [e.resource_type, e.type, Number(e.revision)])

/** The same JSON with every object's keys in reverse order. */
function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys)
  if (value === null || typeof value !== 'object') return value
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([key, v]) => [key, reverseKeys(v)]),
  )
}

before(async () => {
  t = await startTestApp({}, { clock })
  k = await t.tenant(CLIENT)
  for (const id of ['cust-1', 'cust-2']) {
    tick()
    const res = await t.call('PUT', `${base}/customers/${id}`, { key: k.apiKey, body: customerBody(id) })
    assert.equal(res.status, 201, res.body)
  }
})
after(() => t.close())

describe('PUT create', () => {
  test('201 with the representation, status active, revision 1, financial position and both holds', async () => {
    const client = await t.admin('PUT', `/admin/v1/clients/${CLIENT}`, { name: CLIENT })
    assert.equal(client.json.collectionEnabled, false, 'collection is disabled unless the operator enables it')

    const at = tick()
    const res = await put('r-create', receivable())
    assert.equal(res.status, 201, res.body)
    assert.match(String(res.headers['content-type']), /^application\/json/)
    const expected = {
      ...receivable(),
      externalReceivableId: 'r-create',
      restrictions: [],
      status: 'active',
      revision: 1,
      updatedAt: at,
      financialPosition: position('100.00'),
      recovery: NEW_HOLDS,
    }
    assert.deepEqual(res.json, expected)
    tick()
    const read = await get('r-create')
    assert.equal(read.status, 200)
    assert.deepEqual(read.json, expected)
    assert.deepEqual(await events('r-create'), [['receivable', 'receivable.created', 1]])
  })

  test('amounts are stored and shown normalized; the financial position follows recoverableAmount', async () => {
    tick()
    const res = await put(
      'r-normalized',
      receivable({
        recoverableAmount: usd('1234.5'),
        balanceBreakdown: { costs: usd('0'), fees: usd('4.5'), interest: usd('30'), principal: usd('1200') },
        creditUnion: { loanAccountReference: 'loans/LN-78', loanType: 'personal', arrearsAmount: usd('7') },
      }),
    )
    assert.equal(res.status, 201, res.body)
    assert.deepEqual(res.json.recoverableAmount, usd('1234.50'))
    assert.deepEqual(res.json.balanceBreakdown, {
      costs: usd('0.00'),
      fees: usd('4.50'),
      interest: usd('30.00'),
      principal: usd('1200.00'),
    })
    assert.deepEqual(res.json.creditUnion, { loanAccountReference: 'loans/LN-78', loanType: 'personal', arrearsAmount: usd('7.00') })
    assert.deepEqual(res.json.financialPosition, position('1234.50'))
  })

  test('optional parts may be left out: no breakdown, a context with only its required fields', async () => {
    tick()
    const body = receivable({
      financialType: 'loan_balance',
      recoverableAmount: { amount: '0.01', currency: 'EUR' },
      creditUnion: { loanAccountReference: 'loans/LN-79', loanType: 'other' },
      responsibleCustomers: [
        { externalCustomerId: 'cust-2', role: 'guarantor' },
        { externalCustomerId: 'cust-1', role: 'primary' },
      ],
    })
    delete (body as Record<string, unknown>).balanceBreakdown
    const res = await put('r-minimal', body)
    assert.equal(res.status, 201, res.body)
    assert.equal('balanceBreakdown' in res.json, false)
    assert.deepEqual(res.json.creditUnion, { loanAccountReference: 'loans/LN-79', loanType: 'other' })
    assert.deepEqual(res.json.responsibleCustomers, body.responsibleCustomers, 'order as sent')
    assert.deepEqual(res.json.financialPosition, position('0.01', 'EUR'))
  })

  test('with collection enabled for the client, only recovery_not_authorized holds a new Receivable', async () => {
    const other = await t.tenant('rcv-happy-enabled')
    assert.equal((await t.admin('PUT', '/admin/v1/clients/rcv-happy-enabled', { collectionEnabled: true })).status, 200)
    await t.call('PUT', '/v1/clients/rcv-happy-enabled/customers/cust-1', { key: other.apiKey, body: customerBody('x') })
    const res = await put('r-1', receivable(), other.apiKey, 'rcv-happy-enabled')
    assert.equal(res.status, 201, res.body)
    assert.deepEqual(res.json.recovery, { held: true, holds: ['recovery_not_authorized'] })
  })
})

describe('PUT replace, identical retry and stale source revisions', () => {
  const id = 'r-replace'
  let created: Response
  let replaced: Response
  const replacement = receivable({
    sourceRevision: 2,
    financialType: 'accelerated_balance',
    recoverableAmount: usd('80.25'),
    balanceBreakdown: { costs: usd('0.25'), fees: usd('5.00'), interest: usd('0.00'), principal: usd('75.00') },
    responsibleCustomers: [
      { externalCustomerId: 'cust-1', role: 'primary' },
      { externalCustomerId: 'cust-2', role: 'co_borrower' },
    ],
    dueDate: '2026-03-31',
    sourceReference: 'ledger/r/1b',
  })

  before(async () => {
    tick()
    created = await put(id, receivable())
    assert.equal(created.status, 201, created.body)
  })

  test('a higher sourceRevision replaces: 200, revision 2, new amount and representation', async () => {
    const at = tick()
    replaced = await put(id, replacement)
    assert.equal(replaced.status, 200, replaced.body)
    assert.deepEqual(replaced.json, {
      ...replacement,
      externalReceivableId: id,
      restrictions: [],
      status: 'active',
      revision: 2,
      updatedAt: at,
      financialPosition: position('80.25'),
      recovery: NEW_HOLDS,
    })
    assert.deepEqual((await get(id)).json, replaced.json)
  })

  test('an identical retry answers 200 with the same revision and changes nothing', async () => {
    tick()
    const retry = await put(id, replacement)
    assert.equal(retry.status, 200, retry.body)
    assert.deepEqual(retry.json, replaced.json, 'same revision, same updatedAt')
  })

  test('key order and amount spelling do not count: keys reversed, "80.25" as is, "5" for "5.00", "0" for "0.00"', async () => {
    tick()
    const respelled = {
      ...replacement,
      balanceBreakdown: { costs: usd('0.25'), fees: usd('5'), interest: usd('0'), principal: usd('75.0') },
    }
    const retry = await put(id, reverseKeys(respelled))
    assert.equal(retry.status, 200, retry.body)
    assert.deepEqual(retry.json, replaced.json)
  })

  test("an identical retry of the created version with '100' for '100.00' is 200 with revision 1", async () => {
    tick()
    const body = receivable({ recoverableAmount: { currency: 'USD', amount: '100' } })
    const res = await put('r-replace-first', receivable())
    assert.equal(res.status, 201)
    tick()
    const retry = await put('r-replace-first', reverseKeys(body))
    assert.equal(retry.status, 200, retry.body)
    assert.deepEqual(retry.json, res.json)
    assert.deepEqual(await events('r-replace-first'), [['receivable', 'receivable.created', 1]])
  })

  test('the same sourceRevision with a different body is 409 stale_source_revision, and nothing changes', async () => {
    tick()
    for (const body of [
      { ...replacement, sourceReference: 'ledger/r/other' },
      { ...replacement, recoverableAmount: usd('80.26'), balanceBreakdown: undefined },
      { ...replacement, responsibleCustomers: [{ externalCustomerId: 'cust-1', role: 'primary' }] },
    ]) {
      const res = await put(id, body)
      assert.equal(res.status, 409, res.body)
      assert.equal(res.json.type, 'https://docs.irs.test/problems/stale_source_revision')
      assert.equal(res.json.status, 409)
      assert.equal(res.json.currentSourceRevision, 2)
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
    }
    assert.deepEqual((await get(id)).json, replaced.json)
  })

  test('a lower sourceRevision is 409 stale_source_revision, even with the body that was once current', async () => {
    tick()
    for (const body of [receivable(), receivable({ sourceRevision: 0, recoverableAmount: usd('1.00'), balanceBreakdown: undefined })]) {
      const res = await put(id, body)
      assert.equal(res.status, 409, res.body)
      assert.equal(problemCode(res), 'stale_source_revision')
      assert.equal(res.json.currentSourceRevision, 2)
    }
    assert.deepEqual((await get(id)).json, replaced.json)
  })

  test('changing the currency on replace is 422 custom at /recoverableAmount/currency, and nothing changes', async () => {
    tick()
    const eur = (amount: string) => ({ amount, currency: 'EUR' })
    const res = await put(
      id,
      receivable({
        sourceRevision: 3,
        recoverableAmount: eur('80.25'),
        balanceBreakdown: { costs: eur('0.25'), fees: eur('5.00'), interest: eur('0.00'), principal: eur('75.00') },
        creditUnion: { loanAccountReference: 'loans/LN-77', loanType: 'auto', arrearsAmount: eur('1.00') },
      }),
    )
    assert.equal(res.status, 422, res.body)
    assert.equal(problemCode(res), 'validation_error')
    assert.deepEqual(errors(res), [['custom', '/recoverableAmount/currency']])
    assert.deepEqual((await get(id)).json, replaced.json)
  })

  test('the change feed holds receivable.created rev 1 then receivable.updated rev 2, nothing for retries or refusals', async () => {
    assert.deepEqual(await events(id), [
      ['receivable', 'receivable.created', 1],
      ['receivable', 'receivable.updated', 2],
    ])
  })

  test('a third replace moves to revision 3 and appends one more event', async () => {
    const at = tick()
    const res = await put(id, { ...replacement, sourceRevision: 9007199254740991, recoverableAmount: usd('80.25') })
    assert.equal(res.status, 200, res.body)
    assert.equal(res.json.revision, 3)
    assert.equal(res.json.sourceRevision, 9007199254740991)
    assert.equal(res.json.updatedAt, at)
    assert.deepEqual(await events(id), [
      ['receivable', 'receivable.created', 1],
      ['receivable', 'receivable.updated', 2],
      ['receivable', 'receivable.updated', 3],
    ])
  })
})

describe('GET', () => {
  test('an unknown Receivable is 404 receivable_not_found', async () => {
    const res = await get('r-nobody')
    assert.equal(res.status, 404)
    assert.equal(res.json.type, 'https://docs.irs.test/problems/receivable_not_found')
    assert.equal(res.json.status, 404)
  })

  test("another client's Receivable is not visible under this client", async () => {
    const other = await t.tenant('rcv-happy-other')
    const res = await t.call('GET', '/v1/clients/rcv-happy-other/receivables/r-create', { key: other.apiKey })
    assert.equal(res.status, 404)
    assert.equal(problemCode(res), 'receivable_not_found')
  })
})

describe('list', () => {
  const LIST = 'rcv-happy-list'
  let lk: Tenant
  const ids = ['r-d', 'r-a', 'r-g', 'r-c', 'r-f', 'r-b', 'r-e']
  const list = (query: string) => t.call('GET', `/v1/clients/${LIST}/receivables${query}`, { key: lk.apiKey })

  /** Follows nextCursor to the end; every page within the limit. */
  async function collect(query: string, limit: number, between?: (page: number) => Promise<void>) {
    const seen: { externalReceivableId: string; status: string }[] = []
    let cursor: string | null = null
    let page = 0
    do {
      const res: Response = await list(`?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)
      assert.equal(res.status, 200, res.body)
      assert.deepEqual(Object.keys(res.json).sort(), ['data', 'nextCursor'])
      assert.ok(res.json.data.length <= limit)
      seen.push(...res.json.data)
      cursor = res.json.nextCursor
      if (cursor !== null) assert.equal(res.json.data.length, limit, 'only the last page is short')
      page++
      if (between) await between(page)
    } while (cursor)
    return seen
  }

  before(async () => {
    lk = await t.tenant(LIST)
    await t.call('PUT', `/v1/clients/${LIST}/customers/cust-1`, { key: lk.apiKey, body: customerBody('l') })
    for (const id of ids) {
      tick()
      assert.equal((await put(id, receivable(), lk.apiKey, LIST)).status, 201)
    }
    const cmd = (id: string, c: string, reason: string) =>
      t.call('POST', `/v1/clients/${LIST}/receivables/${id}/${c}`, {
        key: lk.apiKey,
        body: { effectiveAt: '2026-03-01T00:00:00Z', reason },
      })
    assert.equal((await cmd('r-b', 'pause', 'source_request')).status, 200)
    assert.equal((await cmd('r-f', 'pause', 'hardship_review')).status, 200)
    assert.equal((await cmd('r-d', 'close', 'paid_in_full')).status, 200)
  })

  test("an empty client lists nothing; another client's key lists nothing either (403)", async () => {
    const res = await t.call('GET', `/v1/clients/${LIST}/receivables`, { key: (await t.tenant('rcv-happy-empty')).apiKey })
    assert.equal(res.status, 403, 'a key for another client is refused')
    assert.equal(problemCode(res), 'client_scope_denied')
    const empty = await t.tenant('rcv-happy-empty2')
    const own = await t.call('GET', '/v1/clients/rcv-happy-empty2/receivables', { key: empty.apiKey })
    assert.deepEqual(own.json, { data: [], nextCursor: null })
  })

  test('the default page holds every Receivable in identifier order, each as GET shows it', async () => {
    const res = await list('')
    assert.equal(res.status, 200)
    assert.equal(res.json.nextCursor, null)
    assert.deepEqual(
      res.json.data.map((r: { externalReceivableId: string }) => r.externalReceivableId),
      [...ids].sort(),
    )
    for (const item of res.json.data) {
      const one = await t.call('GET', `/v1/clients/${LIST}/receivables/${item.externalReceivableId}`, { key: lk.apiKey })
      assert.deepEqual(item, one.json)
    }
  })

  test('cursor paging returns each Receivable exactly once, at every page size', async () => {
    for (const limit of [1, 2, 3, 6, 7, 8, 200]) {
      const seen = await collect('', limit)
      assert.deepEqual(
        seen.map((r) => r.externalReceivableId),
        [...ids].sort(),
        `limit ${limit}`,
      )
    }
  })

  test('?status= filters, with paging', async () => {
    const byStatus = async (status: string, limit: number) =>
      (await collect(`&status=${status}`, limit)).map((r) => {
        assert.equal(r.status, status)
        return r.externalReceivableId
      })
    for (const limit of [1, 2, 50]) {
      assert.deepEqual(await byStatus('active', limit), ['r-a', 'r-c', 'r-e', 'r-g'])
      assert.deepEqual(await byStatus('paused', limit), ['r-b', 'r-f'])
      assert.deepEqual(await byStatus('closed', limit), ['r-d'])
    }
  })

  test('Receivables written while paging: none repeated, none of the existing ones skipped', async () => {
    const seen = await collect('', 2, async (page) => {
      if (page !== 1) return
      tick()
      assert.equal((await put('r-0', receivable(), lk.apiKey, LIST)).status, 201)
      assert.equal((await put('r-z', receivable(), lk.apiKey, LIST)).status, 201)
      // A replace of one already listed does not list it again.
      assert.equal((await put('r-a', receivable({ sourceRevision: 2 }), lk.apiKey, LIST)).status, 200)
    })
    const listed = seen.map((r) => r.externalReceivableId)
    assert.equal(new Set(listed).size, listed.length, 'no Receivable twice')
    for (const id of [...ids, 'r-z']) assert.ok(listed.includes(id), id)
  })

  test('bad query parameters are 422 at /query/...', async () => {
    const cases: [string, [string, string][]][] = [
      ['?status=open', [['invalid_value', '/query/status']]],
      ['?status=ACTIVE', [['invalid_value', '/query/status']]],
      ['?limit=0', [['too_small', '/query/limit']]],
      ['?limit=201', [['too_big', '/query/limit']]],
      ['?limit=1.5', [['invalid_type', '/query/limit']]],
      ['?cursor=not*a*cursor', [['invalid_format', '/query/cursor']]],
      ['?cursor=abc', [['invalid_format', '/query/cursor']]],
      ['?sort=desc', [['unrecognized_keys', '/query/sort']]],
    ]
    for (const [query, expected] of cases) {
      const res = await list(query)
      assert.equal(res.status, 422, `${query}: ${res.body}`)
      assert.equal(problemCode(res), 'validation_error')
      assert.deepEqual(errors(res), expected, query)
    }
  })
})
