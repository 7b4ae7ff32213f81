import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { batchReceivable, usd } from '../../helpers/receivables.ts'

/** The change feed's read side (`GET /changes`): what an event carries, paging, scopes per resource type. */
let t: TestApp
let k: Tenant
const base = '/v1/clients/fin'
const customer = { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' }
const pointers = (res: Response) => res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer])

// Events of two resource types, more than a few pages of four.
before(async () => {
  t = await startTestApp()
  k = await t.tenant('fin')
  for (let i = 1; i <= 6; i++) {
    assert.equal((await t.call('PUT', `${base}/customers/cust-${i}`, { key: k.apiKey, body: customer })).status, 201)
    const receivable = { ...batchReceivable(`cust-${i}`), recoverableAmount: usd(`${i}0.00`) }
    assert.equal((await t.call('PUT', `${base}/receivables/r-${i}`, { key: k.apiKey, body: receivable })).status, 201)
  }
})
after(() => t.close())

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
})
