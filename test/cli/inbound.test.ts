import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import type net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { ADMIN_TOKEN, type Response, startTestApp, type TestApp } from '../helpers/app.ts'

/*
 * The `inbound` CLI run as a child process (`node --import tsx src/cli/inbound.ts`) against the real app
 * listening on a loopback port. The clock is fixed, so every line of readable output is known exactly.
 */

const run = promisify(execFile)
const NOW = '2026-03-02T10:00:00.000Z'
let t: TestApp
let url: string
// biome-ignore lint/suspicious/noExplicitAny: API answers are compared whole
const keys: any[] = []

function must(res: Response, status: number): Response {
  assert.equal(res.status, status, res.body)
  return res
}

async function cli(args: string[], env: Record<string, string> = { ADMIN_TOKEN }) {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'src/cli/inbound.ts', ...args], {
      env: { ...process.env, INBOUND_URL: url, ...env },
    })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

/** A command that must succeed: exit 0, nothing on stderr; its stdout. */
async function ok(args: string[]): Promise<string> {
  const res = await cli(args)
  assert.deepEqual([res.code, res.stderr], [0, ''], `inbound ${args.join(' ')}: ${res.stderr}`)
  return res.stdout
}

/** Lines as the CLI prints them: columns padded to the widest cell, two spaces apart, no trailing blanks. */
function table(rows: string[][]): string {
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)))
  const lines = rows.map((r) =>
    r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd(),
  )
  return `${lines.join('\n')}\n`
}

before(async () => {
  t = await startTestApp({}, { clock: { now: () => new Date(NOW) } })
  await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  url = `http://127.0.0.1:${(t.app.app.server.address() as net.AddressInfo).port}`
  must(await t.admin('PUT', '/admin/v1/clients/acme-cu', { name: 'Acme CU', collectionEnabled: true }), 201)
  must(await t.admin('PUT', '/admin/v1/clients/beta-cu', {}), 201)
  must(await t.admin('PUT', '/admin/v1/integrations/ledger', { name: 'Core ledger' }), 201)
  must(await t.admin('PUT', '/admin/v1/integrations/crm', { name: 'CRM' }), 201)
  must(
    await t.admin('PUT', '/admin/v1/integrations/ledger/grants/acme-cu', {
      scopes: ['receivables:write', 'customers:write'],
      ipAllowlist: ['203.0.113.0/24', '2001:db8::/32'],
    }),
    201,
  )
  must(await t.admin('PUT', '/admin/v1/integrations/ledger/grants/beta-cu', { scopes: ['customers:read'] }), 201)
  must(await t.admin('PUT', '/admin/v1/integrations/crm/grants/acme-cu', { scopes: ['customers:read'] }), 201)
  must(await t.admin('POST', '/admin/v1/integrations/crm/grants/acme-cu/revoke', {}), 200)
  for (let i = 0; i < 2; i++) keys.push(must(await t.admin('POST', '/admin/v1/integrations/ledger/api-keys', {}), 201).json)
  must(await t.admin('POST', `/admin/v1/api-keys/${keys[0].apiKeyId}/revoke`, {}), 200)
})
after(() => t.close())

describe('inbound: reading back', () => {
  test('--version prints the version of package.json, without a token or a service', async () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }
    const res = await cli(['--version'], { ADMIN_TOKEN: '', INBOUND_URL: 'http://127.0.0.1:1' })
    assert.deepEqual(res, { code: 0, stdout: `inbound ${version}\n`, stderr: '' })
  })

  test('client list and show', async () => {
    const list = await ok(['client', 'list'])
    assert.equal(
      list,
      table([
        ['clientCode', 'name', 'collectionEnabled', 'createdAt'],
        ['acme-cu', 'Acme CU', 'true', NOW],
        ['beta-cu', '-', 'false', NOW],
      ]),
    )
    const show = await ok(['client', 'show', 'acme-cu'])
    assert.equal(
      show,
      table([
        ['clientCode', 'acme-cu'],
        ['name', 'Acme CU'],
        ['collectionEnabled', 'true'],
        ['createdAt', NOW],
        ['updatedAt', NOW],
      ]),
    )
    const json = await ok(['client', 'list', '--json'])
    assert.deepEqual(JSON.parse(json), must(await t.admin('GET', '/admin/v1/clients'), 200).json)
  })

  test('integration list and show; a page ends with how to get the next one; --all follows every cursor', async () => {
    const page = await ok(['integration', 'list', '--limit', '1'])
    const api = must(await t.admin('GET', '/admin/v1/integrations?limit=1'), 200).json
    assert.equal(
      page,
      `${table([
        ['integrationId', 'name', 'createdAt'],
        ['crm', 'CRM', NOW],
      ])}more: --cursor ${api.nextCursor}\n`,
    )
    const next = await ok(['integration', 'list', '--limit', '1', '--cursor', api.nextCursor])
    assert.equal(
      next,
      table([
        ['integrationId', 'name', 'createdAt'],
        ['ledger', 'Core ledger', NOW],
      ]),
    )
    const all = await ok(['integration', 'list', '--limit', '1', '--all', '--json'])
    assert.deepEqual(JSON.parse(all), {
      data: must(await t.admin('GET', '/admin/v1/integrations'), 200).json.data,
      nextCursor: null,
    })
    const show = await ok(['integration', 'show', 'ledger'])
    assert.equal(
      show,
      table([
        ['integrationId', 'ledger'],
        ['name', 'Core ledger'],
        ['createdAt', NOW],
        ['updatedAt', NOW],
      ]),
    )
  })

  test('grant list by integration or by client, and show', async () => {
    const header = ['integrationId', 'clientCode', 'status', 'ipAllowlist', 'updatedAt', 'scopes']
    const byIntegration = await ok(['grant', 'list', '--integration', 'ledger'])
    assert.equal(
      byIntegration,
      table([
        header,
        ['ledger', 'acme-cu', 'active', '203.0.113.0/24,2001:db8::/32', NOW, 'customers:write,receivables:write'],
        ['ledger', 'beta-cu', 'active', 'any', NOW, 'customers:read'],
      ]),
    )
    const byClient = await ok(['grant', 'list', '--client', 'acme-cu'])
    assert.equal(
      byClient,
      table([
        header,
        ['crm', 'acme-cu', 'revoked', 'any', NOW, 'customers:read'],
        ['ledger', 'acme-cu', 'active', '203.0.113.0/24,2001:db8::/32', NOW, 'customers:write,receivables:write'],
      ]),
    )
    const show = await ok(['grant', 'show', 'ledger', 'beta-cu'])
    assert.equal(
      show,
      table([
        ['integrationId', 'ledger'],
        ['clientCode', 'beta-cu'],
        ['scopes', 'customers:read'],
        ['ipAllowlist', 'any address'],
        ['status', 'active'],
        ['recoveryEntryMode', 'explicit_instruction'],
        ['feedMode', 'transaction'],
        ['industryProfile', 'credit_union'],
        ['receiptDeliveryOwner', 'partner'],
        ['createdAt', NOW],
        ['updatedAt', NOW],
      ]),
    )
    const neither = await cli(['grant', 'list'])
    assert.equal(neither.code, 2)
    assert.match(neither.stderr, /^usage: grant list takes one of --integration I or --client C$/m)
    assert.equal((await cli(['grant', 'list', '--client', 'acme-cu', '--integration', 'ledger'])).code, 2)
  })

  test('key list and show: a hint, never the key', async () => {
    const ordered = must(await t.admin('GET', '/admin/v1/integrations/ledger/api-keys'), 200).json.data
    const list = await ok(['key', 'list', 'ledger'])
    assert.equal(
      list,
      table([
        ['apiKeyId', 'hint', 'status', 'createdAt', 'expiresAt', 'lastUsedAt', 'revokedAt', 'name'],
        // biome-ignore lint/suspicious/noExplicitAny: API rows
        ...ordered.map((k: any) => [
          k.apiKeyId,
          k.hint,
          k.revokedAt ? 'revoked' : 'active',
          NOW,
          '-',
          '-',
          k.revokedAt ? NOW : '-',
          'Unnamed key',
        ]),
      ]),
    )
    for (const k of keys) {
      assert.ok(list.includes(`irk_sandbox_…${k.apiKey.slice(-4)}`))
      assert.ok(!list.includes(k.apiKey))
    }
    const show = await ok(['key', 'show', keys[0].apiKeyId])
    assert.equal(
      show,
      table([
        ['apiKeyId', keys[0].apiKeyId],
        ['integrationId', 'ledger'],
        ['environment', 'sandbox'],
        ['name', 'Unnamed key'],
        ['hint', `irk_sandbox_…${keys[0].apiKey.slice(-4)}`],
        ['status', 'revoked'],
        ['createdAt', NOW],
        ['expiresAt', '-'],
        ['lastUsedAt', '-'],
        ['revokedAt', NOW],
      ]),
    )
    const json = await ok(['key', 'show', keys[1].apiKeyId, '--json'])
    assert.deepEqual(JSON.parse(json), must(await t.admin('GET', `/admin/v1/api-keys/${keys[1].apiKeyId}`), 200).json)
    assert.ok(!json.includes(keys[1].apiKey))
  })

  test('an empty list says so; unknown ones exit 1 with the problem; a missing argument exits 2', async () => {
    const empty = await ok(['key', 'list', 'crm'])
    assert.equal(empty, 'apiKeyId  hint  status  createdAt  expiresAt  lastUsedAt  revokedAt  name\n(none)\n')
    assert.deepEqual(await cli(['client', 'show', 'ghost']), {
      code: 1,
      stdout: '',
      stderr: 'error: Client not found (404): No client ghost.\n',
    })
    const noKey = await cli(['key', 'show', `ak_${'x'.repeat(24)}`])
    assert.deepEqual([noKey.code, noKey.stderr], [1, `error: API key not found (404): No API key ak_${'x'.repeat(24)}.\n`])
    const badLimit = await cli(['client', 'list', '--limit', '500'])
    assert.equal(badLimit.code, 1)
    assert.match(badLimit.stderr, /^error: Validation error \(422\): /)
    assert.match(badLimit.stderr, /^ {2}\/query\/limit: /m)
    assert.equal(badLimit.stderr.split('\n').length, 3, badLimit.stderr)
    assert.match(badLimit.stderr, /^error: Validation error \(422\): 1 field refused:\n {2}\/query\/limit: \S/)
    // A refused scope: the valid scopes are printed once, under the field that named the wrong one.
    const badScope = await cli(['grant', 'put', 'ledger', 'acme-cu', '--scopes', 'customers:read,customers:wirte'])
    assert.equal(badScope.code, 1)
    const lines = badScope.stderr.split('\n')
    assert.deepEqual([lines[0], lines.length, lines[2]], ['error: Validation error (422): 1 field refused:', 3, ''])
    assert.match(lines[1] ?? '', /^ {2}\/scopes\/1: .*"customers:read"/)
    assert.equal(badScope.stderr.split('receivables:write').length, 2, badScope.stderr)
    const missing = await cli(['key', 'list'])
    assert.equal(missing.code, 2)
    assert.match(missing.stderr, /^usage: missing integrationId$/m)
    const help = await cli(['--help'])
    for (const line of [
      'client list',
      'client show <clientCode>',
      'integration list',
      'grant list --integration I | --client C',
      'key list <integrationId>',
      '--version',
    ])
      assert.ok(help.stdout.includes(line), line)
  })
})

describe('inbound: issuing and rotating keys', () => {
  test('key create --name --expires-at, and key rotate --grace-period: each new key shown once, the old one ending', async () => {
    must(await t.admin('PUT', '/admin/v1/integrations/rotating', { name: 'Rotating' }), 201)
    const created = await ok(['key', 'create', 'rotating', '--name', 'Ledger, production', '--expires-at', '2026-09-01T00:00:00Z'])
    const [, apiKeyId] = /^apiKeyId\s+(ak_\w+)$/m.exec(created) ?? []
    const [, apiKey] = /^apiKey\s+(irk_sandbox_\w+)$/m.exec(created) ?? []
    assert.equal(
      created,
      `${table([
        ['apiKeyId', String(apiKeyId)],
        ['apiKey', String(apiKey)],
        ['integrationId', 'rotating'],
        ['environment', 'sandbox'],
        ['name', 'Ledger, production'],
        ['createdAt', NOW],
        ['expiresAt', '2026-09-01T00:00:00.000Z'],
      ])}\nThe key is shown this once; only its digest is stored.\n`,
    )
    const rotated = await ok(['key', 'rotate', String(apiKeyId), '--grace-period', '7d'])
    const [, newId] = /^apiKeyId\s+(ak_\w+)$/m.exec(rotated) ?? []
    const [, newKey] = /^apiKey\s+(irk_sandbox_\w+)$/m.exec(rotated) ?? []
    assert.notEqual(newId, apiKeyId)
    assert.equal(
      rotated,
      `${table([
        ['apiKeyId', String(newId)],
        ['apiKey', String(newKey)],
        ['integrationId', 'rotating'],
        ['environment', 'sandbox'],
        ['name', 'Ledger, production'],
        ['createdAt', NOW],
        ['expiresAt', '-'],
      ])}\nThe key is shown this once; only its digest is stored.\nThe old key ${apiKeyId} (irk_sandbox_…${String(apiKey).slice(-4)}) stops working at 2026-03-09T10:00:00.000Z.\n`,
    )
    const json = JSON.parse(await ok(['key', 'rotate', String(newId), '--grace-period', '90', '--name', 'Next', '--json']))
    assert.deepEqual([json.name, json.rotated.apiKeyId, json.rotated.expiresAt], ['Next', newId, '2026-03-02T10:01:30.000Z'])
    // Bad input: the CLI's own usage errors exit 2; the service's refusals exit 1 with the pointer.
    const noGrace = await cli(['key', 'rotate', String(newId)])
    assert.equal(noGrace.code, 2)
    assert.match(noGrace.stderr, /^usage: missing --grace-period$/m)
    const badGrace = await cli(['key', 'rotate', String(newId), '--grace-period', 'a week'])
    assert.equal(badGrace.code, 2)
    assert.match(badGrace.stderr, /^usage: --grace-period takes seconds, or a number with s, m, h or d/m)
    const tooLong = await cli(['key', 'rotate', String(newId), '--grace-period', '31d'])
    assert.equal(tooLong.code, 1)
    assert.match(tooLong.stderr, /^ {2}\/gracePeriodSeconds: /m)
    const past = await cli(['key', 'create', 'rotating', '--expires-at', '2026-03-01T00:00:00Z'])
    assert.equal(past.code, 1)
    assert.match(past.stderr, /^ {2}\/expiresAt: must be in the future/m)
    const help = (await cli(['--help'])).stdout
    assert.ok(help.includes('key create <integrationId> [--name N] [--expires-at T]'))
    assert.ok(help.includes('key rotate <apiKeyId> --grace-period P [--name N] [--expires-at T]'))
  })
})

describe('inbound: branding', () => {
  test('branding set replaces the branding, branding show reads it; a refused colour exits 1 with the pointer', async () => {
    must(await t.admin('PUT', '/admin/v1/clients/gamma-cu', {}), 201)
    const set = await ok([
      'branding',
      'set',
      'gamma-cu',
      '--display-name',
      'Gamma Credit Union',
      '--accent-color',
      '#0F5132',
      '--support-email',
      'help@gamma-cu.example',
      '--support-phone',
      '+1 555 010 0199',
      '--support-url',
      'https://gamma-cu.example/help',
      '--locale',
      'fr-ca',
    ])
    const expected = table([
      ['clientCode', 'gamma-cu'],
      ['displayName', 'Gamma Credit Union'],
      ['accentColor', '#0f5132'],
      ['supportEmail', 'help@gamma-cu.example'],
      ['supportPhone', '+1 555 010 0199'],
      ['supportUrl', 'https://gamma-cu.example/help'],
      ['locale', 'fr-CA'],
      ['updatedAt', NOW],
    ])
    assert.equal(set, expected)
    assert.equal(await ok(['branding', 'show', 'gamma-cu']), expected)
    const pale = await cli(['branding', 'set', 'gamma-cu', '--accent-color', '#ffcc00'])
    assert.equal(pale.code, 1)
    assert.match(pale.stderr, /^ {2}\/accentColor: has a contrast of 1\.51:1 against white/m)
    assert.equal(await ok(['branding', 'show', 'gamma-cu']), expected)
    // Replaced as a whole: options left out are removed.
    const only = JSON.parse(await ok(['branding', 'set', 'gamma-cu', '--locale', 'en-US', '--json']))
    assert.deepEqual([only.locale, only.displayName, only.supportEmail], ['en-US', null, null])
    assert.ok((await cli(['--help'])).stdout.includes('branding set <clientCode> [--display-name N] [--accent-color #rrggbb]'))
  })
})

describe('inbound: the audit trail', () => {
  test("audit list --client C: the client's events and the key events of every integration with a grant for C, active or revoked", async () => {
    // crm's grant for acme-cu is revoked; a key it is issued now is still one that could reach acme-cu.
    const crmKey = must(await t.admin('POST', '/admin/v1/integrations/crm/api-keys', {}), 201).json
    const acme = await ok(['audit', 'list', '--client', 'acme-cu'])
    assert.equal(
      acme,
      table([
        ['occurredAt', 'action', 'clientCode', 'targetType', 'targetId'],
        [NOW, 'client.created', 'acme-cu', 'client', 'acme-cu'],
        [NOW, 'grant.created', 'acme-cu', 'grant', 'ledger/acme-cu'],
        [NOW, 'grant.created', 'acme-cu', 'grant', 'crm/acme-cu'],
        [NOW, 'grant.revoked', 'acme-cu', 'grant', 'crm/acme-cu'],
        [NOW, 'api_key.created', '-', 'api_key', keys[0].apiKeyId],
        [NOW, 'api_key.created', '-', 'api_key', keys[1].apiKeyId],
        [NOW, 'api_key.revoked', '-', 'api_key', keys[0].apiKeyId],
        [NOW, 'api_key.created', '-', 'api_key', crmKey.apiKeyId],
      ]),
    )
    // beta-cu: only ledger holds a grant for it, so crm's key is not beta-cu's concern.
    const beta = await ok(['audit', 'list', '--client', 'beta-cu'])
    assert.equal(
      beta,
      table([
        ['occurredAt', 'action', 'clientCode', 'targetType', 'targetId'],
        [NOW, 'client.created', 'beta-cu', 'client', 'beta-cu'],
        [NOW, 'grant.created', 'beta-cu', 'grant', 'ledger/beta-cu'],
        [NOW, 'api_key.created', '-', 'api_key', keys[0].apiKeyId],
        [NOW, 'api_key.created', '-', 'api_key', keys[1].apiKeyId],
        [NOW, 'api_key.revoked', '-', 'api_key', keys[0].apiKeyId],
      ]),
    )
    // Revoking keys[0] again answers it as it is and adds no event.
    const again = await cli(['key', 'revoke', keys[0].apiKeyId, '--json'])
    assert.equal(again.code, 0, again.stderr)
    assert.deepEqual(JSON.parse(again.stdout), must(await t.admin('GET', `/admin/v1/api-keys/${keys[0].apiKeyId}`), 200).json)
    assert.equal(await ok(['audit', 'list', '--client', 'beta-cu']), beta)
  })
})
