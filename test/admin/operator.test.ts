import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import type net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { ADMIN_TOKEN, problemCode, startTestApp, type TestApp } from '../helpers/app.ts'

const run = promisify(execFile)
let t: TestApp
let url: string
before(async () => {
  t = await startTestApp()
  await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  url = `http://127.0.0.1:${(t.app.app.server.address() as net.AddressInfo).port}`
})
after(() => t.close())

describe('operator API', () => {
  test('201 then 200, validation, 404s, and a wrong token', async () => {
    const c1 = await t.admin('PUT', '/admin/v1/clients/op-c', { name: 'Op CU' })
    assert.equal(c1.status, 201)
    assert.deepEqual([c1.json.clientCode, c1.json.name, c1.json.collectionEnabled], ['op-c', 'Op CU', false])
    assert.equal((await t.admin('PUT', '/admin/v1/clients/op-c', { collectionEnabled: true })).json.collectionEnabled, true)
    assert.equal((await t.admin('PUT', '/admin/v1/integrations/op-i', { name: 'Ledger' })).status, 201)
    assert.equal((await t.admin('PUT', '/admin/v1/integrations/op-i', { name: 'Ledger 2' })).status, 200)
    const g = await t.admin('PUT', '/admin/v1/integrations/op-i/grants/op-c', { scopes: ['customers:read'], ipAllowlist: ['10.0.0.0/8'] })
    assert.equal(g.status, 201)
    assert.deepEqual(
      [g.json.status, g.json.recoveryEntryMode, g.json.feedMode, g.json.industryProfile, g.json.receiptDeliveryOwner],
      ['active', 'explicit_instruction', 'transaction', 'credit_union', 'partner'],
    )
    const bad = await t.admin('PUT', '/admin/v1/integrations/op-i/grants/op-c', {
      scopes: ['everything'],
      ipAllowlist: ['10.0.0.0/33'],
      extra: 1,
    })
    assert.deepEqual(
      bad.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer]),
      [
        ['invalid_value', '/scopes/0'],
        ['custom', '/ipAllowlist/0'],
        ['unrecognized_keys', '/extra'],
      ],
    )
    assert.equal(problemCode(await t.admin('POST', '/admin/v1/integrations/ghost/api-keys', {})), 'integration_not_found')
    assert.equal(
      problemCode(await t.admin('PUT', '/admin/v1/integrations/op-i/grants/ghost', { scopes: ['customers:read'] })),
      'client_not_found',
    )
    assert.equal(problemCode(await t.admin('POST', `/admin/v1/api-keys/ak_${'x'.repeat(24)}/revoke`, {})), 'api_key_not_found')
    assert.equal(problemCode(await t.admin('POST', '/admin/v1/integrations/op-i/grants/nobody/revoke', {})), 'grant_not_found')
    const wrong = await t.call('PUT', '/admin/v1/clients/x', { body: {}, headers: { authorization: 'Bearer not-the-token-0000000000' } })
    assert.equal(wrong.status, 401)
    assert.equal(problemCode(wrong), 'invalid_admin_token')
    assert.equal(problemCode(await t.call('GET', '/admin/v1/audit-events')), 'invalid_admin_token')
  })

  test('keys are shown once and stored only as a SHA-256 digest; revocation is immediate and idempotent', async () => {
    const key = await t.admin('POST', '/admin/v1/integrations/op-i/api-keys', {})
    assert.equal(key.status, 201)
    assert.match(key.json.apiKey, /^irk_sandbox_[A-Za-z0-9]{40}$/)
    const rows = await t.store.query<Record<string, unknown>>('SELECT * FROM api_keys WHERE api_key_id = $1', [key.json.apiKeyId])
    assert.ok(!JSON.stringify(rows).includes(key.json.apiKey))
    assert.match(String(rows[0]?.digest), /^[0-9a-f]{64}$/)
    const r1 = await t.admin('POST', `/admin/v1/api-keys/${key.json.apiKeyId}/revoke`, {})
    const r2 = await t.admin('POST', `/admin/v1/api-keys/${key.json.apiKeyId}/revoke`)
    assert.equal(r1.status, 200)
    assert.equal(r2.status, 200)
    assert.deepEqual(r2.json, r1.json)
  })

  test('every operator write is audited, with a digest and never a key or token', async () => {
    const list = await t.admin('GET', '/admin/v1/audit-events?clientCode=op-c&limit=200')
    const actions = list.json.data.map((e: { action: string }) => e.action)
    // op-i holds a grant for op-c: the key it was issued (and revoked, twice, recorded once) is op-c's concern too.
    assert.deepEqual(actions, ['client.created', 'client.updated', 'grant.created', 'api_key.created', 'api_key.revoked'])
    const all = await t.admin('GET', '/admin/v1/audit-events?limit=200')
    const text = JSON.stringify(all.json)
    assert.ok(!/irk_(sandbox|production)_/.test(text))
    assert.ok(!text.includes(ADMIN_TOKEN))
    assert.ok(all.json.data.every((e: { changeDigest: string }) => /^[0-9a-f]{64}$/.test(e.changeDigest)))
    assert.ok(all.json.data.some((e: { action: string }) => e.action === 'api_key.revoked'))
    const first = await t.admin('GET', '/admin/v1/audit-events?limit=2')
    const second = await t.admin('GET', `/admin/v1/audit-events?limit=2&cursor=${first.json.nextCursor}`)
    assert.deepEqual(
      [...first.json.data, ...second.json.data].map((e: { auditEventId: string }) => e.auditEventId),
      all.json.data.slice(0, 4).map((e: { auditEventId: string }) => e.auditEventId),
    )
  })

  test('revoking a revoked key answers 200 with the key as it is, and changes and records nothing', async () => {
    const key = await t.admin('POST', '/admin/v1/integrations/op-i/api-keys', {})
    const first = await t.admin('POST', `/admin/v1/api-keys/${key.json.apiKeyId}/revoke`, {})
    assert.equal(first.status, 200)
    const stored = async () => t.store.query('SELECT * FROM api_keys WHERE api_key_id = $1', [key.json.apiKeyId])
    const auditCount = async () =>
      Number(
        (await t.store.query<{ n: string }>('SELECT count(*) AS n FROM operator_audit_events WHERE target_id = $1', [key.json.apiKeyId]))[0]
          ?.n,
      )
    const before = { row: await stored(), audit: await auditCount() }
    assert.equal(before.audit, 2)
    for (const body of [{}, undefined]) {
      const again = await t.admin('POST', `/admin/v1/api-keys/${key.json.apiKeyId}/revoke`, body)
      assert.equal(again.status, 200, again.body)
      assert.deepEqual(again.json, first.json)
    }
    assert.deepEqual({ row: await stored(), audit: await auditCount() }, before)
    const events = await t.store.query<{ action: string }>('SELECT action FROM operator_audit_events WHERE target_id = $1 ORDER BY seq', [
      key.json.apiKeyId,
    ])
    assert.deepEqual(
      events.map((e) => e.action),
      ['api_key.created', 'api_key.revoked'],
    )
  })

  test('revoking a revoked grant answers 200 with the grant as it is, and changes and records nothing', async () => {
    assert.equal((await t.admin('PUT', '/admin/v1/integrations/op-i/grants/op-g', { scopes: ['customers:read'] })).status, 404)
    assert.equal((await t.admin('PUT', '/admin/v1/clients/op-g', { name: 'Grant Repeat' })).status, 201)
    assert.equal((await t.admin('PUT', '/admin/v1/integrations/op-i/grants/op-g', { scopes: ['customers:read'] })).status, 201)
    const first = await t.admin('POST', '/admin/v1/integrations/op-i/grants/op-g/revoke', {})
    assert.equal(first.status, 200)
    assert.equal(first.json.status, 'revoked')
    const stored = async () => t.store.query("SELECT * FROM grants WHERE client_code = 'op-g' AND integration_id = 'op-i'")
    const events = async () =>
      (await t.store.query<{ action: string }>("SELECT action FROM audit_events WHERE target_id = 'op-i/op-g' ORDER BY seq")).map(
        (e) => e.action,
      )
    const before = { row: await stored(), events: await events() }
    assert.deepEqual(before.events, ['grant.created', 'grant.revoked'])
    for (const body of [{}, undefined]) {
      const again = await t.admin('POST', '/admin/v1/integrations/op-i/grants/op-g/revoke', body)
      assert.equal(again.status, 200, again.body)
      assert.deepEqual(again.json, first.json)
    }
    assert.deepEqual({ row: await stored(), events: await events() }, before)
  })
})

describe('the inbound CLI', () => {
  const cli = async (args: string[], env: Record<string, string> = { ADMIN_TOKEN }) => {
    try {
      const { stdout, stderr } = await run(process.execPath, ['bin/inbound.js', '--url', url, ...args], { env: { ...process.env, ...env } })
      return { code: 0, stdout, stderr }
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string }
      return { code: e.code, stdout: e.stdout, stderr: e.stderr }
    }
  }

  test('wraps the operator API with readable output and --json', async () => {
    const client = await cli(['client', 'put', 'cli-c', '--name', 'CLI CU'])
    assert.equal(client.code, 0, client.stderr)
    assert.match(client.stdout, /^clientCode\s+cli-c$/m)
    assert.match(client.stdout, /^collectionEnabled\s+false$/m)
    assert.equal((await cli(['integration', 'put', 'cli-i', '--name', 'Ledger'])).code, 0)
    const grant = await cli(['grant', 'put', 'cli-i', 'cli-c', '--scopes', 'customers:read,customers:write'])
    assert.match(grant.stdout, /^scopes\s+customers:read, customers:write$/m)
    const key = await cli(['key', 'create', 'cli-i', '--json'])
    const parsed = JSON.parse(key.stdout)
    assert.match(parsed.apiKey, /^irk_sandbox_/)
    const use = await t.call('PUT', '/v1/clients/cli-c/customers/c-1', {
      key: parsed.apiKey,
      body: { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: 'r/1' },
    })
    assert.equal(use.status, 201)
    const audit = await cli(['audit', 'list', '--client', 'cli-c'])
    assert.match(audit.stdout, /^occurredAt\s+action\s+clientCode\s+targetType\s+targetId$/m)
    assert.match(audit.stdout, /grant\.created\s+cli-c\s+grant\s+cli-i\/cli-c/)
    assert.equal((await cli(['key', 'revoke', parsed.apiKeyId])).code, 0)
    assert.equal((await t.call('GET', '/v1/clients/cli-c/customers/c-1', { key: parsed.apiKey })).status, 401)
  })

  test('a refused request exits 1 with the problem; a usage error exits 2', async () => {
    const refused = await cli(['grant', 'put', 'cli-i', 'cli-c', '--scopes', 'everything'])
    assert.equal(refused.code, 1)
    assert.match(refused.stderr, /^error: Validation error \(422\): /m)
    assert.match(refused.stderr, /^ {2}\/scopes\/0: /m)
    const wrongToken = await cli(['client', 'put', 'x'], { ADMIN_TOKEN: 'wrong-token-000000000000000' })
    assert.equal(wrongToken.code, 1)
    assert.match(wrongToken.stderr, /Invalid operator token \(401\)/)
    const usage = await cli(['frobnicate'])
    assert.equal(usage.code, 2)
    assert.match(usage.stderr, /^usage: unknown command: frobnicate/m)
    assert.equal((await cli(['integration', 'put', 'x'])).code, 2)
    const help = await cli(['--help'])
    assert.match(help.stdout, /^inbound - operate the Inbound Receivables Service/)
  })
})
