import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { canonicalDigest } from '../../../src/domain/canonical.ts'
import { startTestApp, type TestApp } from '../../helpers/app.ts'

/**
 * The audit trail (src/resources/audit/store.ts), read through the operator's `GET /admin/v1/audit-events`: one
 * event per operator write, keeping a digest of what changed and never a key, and a client's list holding the key
 * events of every integration that can reach it.
 */
let t: TestApp
before(async () => {
  t = await startTestApp()
})
after(() => t.close())

test('an event keeps the canonical digest of what changed: the same change in another key order has the same digest', async () => {
  assert.equal((await t.admin('PUT', '/admin/v1/clients/au-d', { name: 'Digest CU', collectionEnabled: true })).status, 201)
  assert.equal((await t.admin('PUT', '/admin/v1/clients/au-d', { collectionEnabled: true, name: 'Digest CU' })).status, 200)
  assert.equal((await t.admin('PUT', '/admin/v1/integrations/au-d-int', { name: 'Digest integration' })).status, 201)
  const key = await t.admin('POST', '/admin/v1/integrations/au-d-int/api-keys', {})
  assert.equal(key.status, 201)
  const events = (await t.admin('GET', '/admin/v1/audit-events?limit=200')).json.data.filter(
    (e: { targetId: string }) => e.targetId === 'au-d' || e.targetId === 'au-d-int' || e.targetId === key.json.apiKeyId,
  )
  assert.deepEqual(
    events.map((e: { action: string; actor: string; details: unknown }) => [e.action, e.actor, e.details]),
    [
      ['client.created', 'operator', { collectionEnabled: true }],
      ['client.updated', 'operator', { collectionEnabled: true }],
      ['integration.created', 'operator', {}],
      ['api_key.created', 'operator', events[3]?.details],
    ],
  )
  const digest = canonicalDigest({ name: 'Digest CU', collectionEnabled: true })
  assert.equal(events[0].changeDigest, digest)
  assert.equal(events[1].changeDigest, digest)
  assert.equal(events[2].changeDigest, canonicalDigest({ name: 'Digest integration' }))
  assert.ok(!JSON.stringify(events).includes(key.json.apiKey), 'the key itself is never in the trail')
})

test("a client's audit list holds the key events of every integration with a grant for it, active or revoked", async () => {
  for (const c of ['au-x', 'au-y']) assert.equal((await t.admin('PUT', `/admin/v1/clients/${c}`, {})).status, 201)
  for (const i of ['au-active', 'au-revoked', 'au-other'])
    assert.equal((await t.admin('PUT', `/admin/v1/integrations/${i}`, { name: i })).status, 201)
  // A key issued before its integration had any grant for au-x: still one that can reach au-x now.
  const early = (await t.admin('POST', '/admin/v1/integrations/au-active/api-keys', {})).json.apiKeyId
  assert.equal((await t.admin('PUT', '/admin/v1/integrations/au-active/grants/au-x', { scopes: ['customers:read'] })).status, 201)
  assert.equal((await t.admin('PUT', '/admin/v1/integrations/au-revoked/grants/au-x', { scopes: ['customers:read'] })).status, 201)
  assert.equal((await t.admin('PUT', '/admin/v1/integrations/au-other/grants/au-y', { scopes: ['customers:read'] })).status, 201)
  const revokedGrantKey = (await t.admin('POST', '/admin/v1/integrations/au-revoked/api-keys', {})).json.apiKeyId
  assert.equal((await t.admin('POST', '/admin/v1/integrations/au-revoked/grants/au-x/revoke', {})).status, 200)
  const otherKey = (await t.admin('POST', '/admin/v1/integrations/au-other/api-keys', {})).json.apiKeyId
  assert.equal((await t.admin('POST', `/admin/v1/api-keys/${early}/revoke`, {})).status, 200)
  assert.equal((await t.admin('POST', `/admin/v1/api-keys/${revokedGrantKey}/revoke`, {})).status, 200)
  assert.equal((await t.admin('POST', `/admin/v1/api-keys/${otherKey}/revoke`, {})).status, 200)

  const seen = (res: { json: { data: { action: string; clientCode: string | null; targetId: string }[] } }) =>
    res.json.data.map((e) => [e.action, e.clientCode, e.targetId])
  const x = await t.admin('GET', '/admin/v1/audit-events?clientCode=au-x&limit=200')
  assert.equal(x.status, 200)
  assert.deepEqual(seen(x), [
    ['client.created', 'au-x', 'au-x'],
    ['api_key.created', null, early],
    ['grant.created', 'au-x', 'au-active/au-x'],
    ['grant.created', 'au-x', 'au-revoked/au-x'],
    ['api_key.created', null, revokedGrantKey],
    ['grant.revoked', 'au-x', 'au-revoked/au-x'],
    ['api_key.revoked', null, early],
    ['api_key.revoked', null, revokedGrantKey],
  ])
  assert.deepEqual(seen(await t.admin('GET', '/admin/v1/audit-events?clientCode=au-y&limit=200')), [
    ['client.created', 'au-y', 'au-y'],
    ['grant.created', 'au-y', 'au-other/au-y'],
    ['api_key.created', null, otherKey],
    ['api_key.revoked', null, otherKey],
  ])
  // Pages of the filtered list follow its cursor without repeating or skipping an event.
  const p1 = await t.admin('GET', '/admin/v1/audit-events?clientCode=au-x&limit=3')
  const p2 = await t.admin('GET', `/admin/v1/audit-events?clientCode=au-x&limit=3&cursor=${p1.json.nextCursor}`)
  const p3 = await t.admin('GET', `/admin/v1/audit-events?clientCode=au-x&limit=3&cursor=${p2.json.nextCursor}`)
  assert.equal(p3.json.nextCursor, null)
  assert.deepEqual([...seen(p1), ...seen(p2), ...seen(p3)], seen(x))
})
