import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { runRetention } from '../../../src/resources/retention/service.ts'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'

/** Retention (src/resources/retention/service.ts): change events older than 30 days are purged, and a cursor into them expires. */
let t: TestApp
const customer = { type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' }
const page = (tenant: Tenant, client: string, q = '') => t.call('GET', `/v1/clients/${client}/changes${q}`, { key: tenant.apiKey })

before(async () => {
  t = await startTestApp()
})
after(() => t.close())

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

test('a second run purges nothing more: retention is idempotent', async () => {
  const before = await t.store.query<{ n: string }>(`SELECT count(*)::text AS n FROM change_events WHERE client_code = 'fin-old'`)
  await runRetention(t.store)
  const after = await t.store.query<{ n: string }>(`SELECT count(*)::text AS n FROM change_events WHERE client_code = 'fin-old'`)
  assert.deepEqual(after, before)
  assert.deepEqual(before, [{ n: '1' }])
})
