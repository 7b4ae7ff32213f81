import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { ADMIN_TOKEN } from '../helpers/app.ts'
import { http, type ServiceProcess, startService } from '../helpers/service-process.ts'
import { createTestDatabase, engineName, type TestDatabase } from '../helpers/store.ts'
import { generateStripeKey } from '../helpers/stripe-stand-in.ts'

/*
 * `inbound provider set|show|remove` as child processes against the real service (src/main.ts) at LOG_LEVEL=trace:
 * the secrets go from files, stdin or the environment to the service, never through argv, and no line the service
 * logs holds one.
 */
const run = promisify(execFile)
let db: TestDatabase | undefined
let dir: string
let service: ServiceProcess

const secretKey = generateStripeKey('sk_test')
const webhookSecret = `whsec_${generateStripeKey('sk_test').slice(8)}`
const otherKey = generateStripeKey('rk_test')
const otherWebhookSecret = `whsec_${generateStripeKey('sk_test').slice(8)}`
const hintOf = (key: string) => `${key.slice(0, 8)}...${key.slice(-4)}`

interface Ran {
  code: number
  stdout: string
  stderr: string
}

async function cli(args: string[], env: Record<string, string> = {}): Promise<Ran> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'src/cli/inbound.ts', ...args], {
      env: { ...process.env, INBOUND_URL: service.url, ADMIN_TOKEN, STRIPE_SECRET_KEY: '', STRIPE_WEBHOOK_SECRET: '', ...env },
    })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

/** The CLI with `input` on its stdin. */
function cliWithStdin(args: string[], input: string): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/inbound.ts', ...args], {
      env: { ...process.env, INBOUND_URL: service.url, ADMIN_TOKEN, STRIPE_SECRET_KEY: '', STRIPE_WEBHOOK_SECRET: '' },
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => {
      stdout += d
    })
    child.stderr.on('data', (d) => {
      stderr += d
    })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }))
    child.stdin.end(input)
  })
}

const file = (name: string, content: string) => {
  const p = join(dir, name)
  writeFileSync(p, content)
  return p
}

const EVENTS =
  'checkout.session.completed, checkout.session.async_payment_succeeded, checkout.session.async_payment_failed, checkout.session.expired, refund.created, refund.updated, refund.failed, charge.dispute.created, charge.dispute.funds_withdrawn, charge.dispute.closed, charge.dispute.funds_reinstated'

before(async () => {
  dir = mkdtempSync(join(os.tmpdir(), 'irs-provider-cli-'))
  if (process.env.DATABASE_URL) db = await createTestDatabase()
  service = await startService({
    LOG_LEVEL: 'trace',
    PUBLIC_BASE_URL: 'https://irs.example.test',
    ...(db?.url ? { DATABASE_URL: db.url } : { DATA_DIR: join(dir, 'data') }),
  })
  const res = await http(service.url, 'PUT', '/admin/v1/clients/cli-pp', { token: ADMIN_TOKEN, body: { name: 'CLI CU' } })
  assert.equal(res.status, 201)
})
after(async () => {
  await service?.kill('SIGTERM')
  await db?.drop()
  rmSync(dir, { recursive: true, force: true })
})

describe(`inbound provider (${engineName})`, () => {
  test('set from files: the configuration without its secrets, and what to enter in Stripe', async () => {
    const res = await cli([
      'provider',
      'set',
      'cli-pp',
      '--secret-key-file',
      file('key', `${secretKey}\n`),
      '--webhook-secret-file',
      file('whsec', webhookSecret),
    ])
    assert.equal(res.stderr, '')
    assert.equal(res.code, 0)
    const lines = res.stdout.split('\n')
    assert.deepEqual(lines.slice(0, 5), [
      'provider       stripe',
      'mode           test',
      `secretKeyHint  ${hintOf(secretKey)}`,
      'webhookUrl     https://irs.example.test/providers/stripe/webhooks/cli-pp',
      `events         ${EVENTS}`,
    ])
    assert.match(lines[5] as string, /^createdAt {6}\d{4}-\d\d-\d\dT/)
    assert.deepEqual(lines.slice(7), [
      '',
      "In Stripe's dashboard (Developers, Webhooks), the endpoint whose signing secret this is must send to",
      'webhookUrl and select the events listed.',
      '',
    ])
  })

  test('show, as text and --json', async () => {
    const text = await cli(['provider', 'show', 'cli-pp'])
    assert.deepEqual([text.code, text.stderr, text.stdout.split('\n')[2]], [0, '', `secretKeyHint  ${hintOf(secretKey)}`])
    const json = await cli(['provider', 'show', 'cli-pp', '--json'])
    const { createdAt: _c, updatedAt: _u, ...rest } = JSON.parse(json.stdout)
    assert.deepEqual(rest, {
      provider: 'stripe',
      mode: 'test',
      secretKeyHint: hintOf(secretKey),
      webhookUrl: 'https://irs.example.test/providers/stripe/webhooks/cli-pp',
      events: EVENTS.split(', '),
    })
  })

  test('set with the key on stdin (-), and from the environment', async () => {
    const piped = await cliWithStdin(
      ['provider', 'set', 'cli-pp', '--secret-key-file', '-', '--webhook-secret-file', file('whsec2', otherWebhookSecret), '--json'],
      otherKey,
    )
    assert.deepEqual([piped.code, piped.stderr, JSON.parse(piped.stdout).secretKeyHint], [0, '', hintOf(otherKey)])
    const fromEnv = await cli(['provider', 'set', 'cli-pp', '--json'], {
      STRIPE_SECRET_KEY: secretKey,
      STRIPE_WEBHOOK_SECRET: webhookSecret,
    })
    assert.deepEqual([fromEnv.code, fromEnv.stderr, JSON.parse(fromEnv.stdout).secretKeyHint], [0, '', hintOf(secretKey)])
  })

  test("the service's refusals are printed at their pointer, exit 1; usage errors exit 2", async () => {
    const live = generateStripeKey('sk_live')
    const refused = await cli([
      'provider',
      'set',
      'cli-pp',
      '--secret-key-file',
      file('live', live),
      '--webhook-secret-file',
      file('w3', webhookSecret),
    ])
    assert.equal(refused.code, 1)
    assert.equal(refused.stdout, '')
    assert.match(refused.stderr, /^error: Validation error \(422\): /)
    assert.ok(
      refused.stderr.endsWith('  /secretKey: must be a test key (sk_test_… or rk_test_…): a sandbox never takes live payments\n'),
      refused.stderr,
    )
    assert.ok(!refused.stderr.includes(live), 'the key is not echoed')

    const missing = await cli(['provider', 'set', 'cli-pp', '--secret-key-file', file('k4', secretKey)])
    assert.equal(missing.code, 2)
    assert.match(missing.stderr, /^usage: missing --webhook-secret-file F \(or the environment variable STRIPE_WEBHOOK_SECRET\)\n/)
    const unreadable = await cli([
      'provider',
      'set',
      'cli-pp',
      '--secret-key-file',
      join(dir, 'nope'),
      '--webhook-secret-file',
      file('w5', webhookSecret),
    ])
    assert.equal(unreadable.code, 2)
    assert.match(unreadable.stderr, /^usage: --secret-key-file: cannot read .*nope \(ENOENT\)\n/)
    const bothStdin = await cli(['provider', 'set', 'cli-pp', '--secret-key-file', '-', '--webhook-secret-file', '-'])
    assert.equal(bothStdin.code, 2)
    assert.match(bothStdin.stderr, /^usage: only one of --secret-key-file and --webhook-secret-file can be - \(stdin\)\n/)
    const unknown = await cli(['provider', 'show', 'cli-nobody'])
    assert.deepEqual([unknown.code, unknown.stderr], [1, 'error: Client not found (404): No client cli-nobody.\n'])
    // A secret given on the command line is no option at all.
    const argv = await cli(['provider', 'set', 'cli-pp', '--secret-key', secretKey])
    assert.equal(argv.code, 2)
    assert.match(argv.stderr, /^usage: Unknown option '--secret-key'/)
  })

  test('remove, then show and remove answer 404', async () => {
    const removed = await cli(['provider', 'remove', 'cli-pp'])
    assert.deepEqual(removed, { code: 0, stdout: 'payment provider of cli-pp removed\n', stderr: '' })
    const shown = await cli(['provider', 'show', 'cli-pp'])
    assert.deepEqual(
      [shown.code, shown.stderr],
      [1, 'error: Payment provider not found (404): Client cli-pp has no payment provider configured.\n'],
    )
    const again = await cli(['provider', 'remove', 'cli-pp', '--json'])
    assert.equal(again.code, 1)
  })

  test('the usage text lists the provider commands', async () => {
    const help = await cli(['--help'])
    assert.equal(help.code, 0)
    for (const line of [
      '  provider set <clientCode> --secret-key-file F --webhook-secret-file F',
      "  provider show <clientCode>                 the client's payment provider (never its secrets)",
      '  provider remove <clientCode> [--force]     delete it (sandbox: the sandbox provider again); refused',
      '  provider sync <clientCode>                 catch up with the provider now: its events after the last',
    ])
      assert.ok(help.stdout.includes(`${line}\n`), line)
  })

  test('no line the service logged (at trace) holds a secret', async () => {
    const out = service.output()
    assert.ok(out.includes('/admin/v1/clients/cli-pp/payment-provider'), 'the requests were logged')
    for (const secret of [secretKey, webhookSecret, otherKey, otherWebhookSecret]) assert.ok(!out.includes(secret), 'a secret was logged')
  })
})
