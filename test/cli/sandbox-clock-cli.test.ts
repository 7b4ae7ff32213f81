import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import type net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.ts'
import { engineName } from '../helpers/store.ts'

/*
 * The `inbound clock ...` and `inbound client reset` verbs run as child processes against the real app (sandbox,
 * and production for the refusal) listening on a loopback port. The base clock is fixed, so output is exact.
 */
const run = promisify(execFile)
const NOW = '2026-03-02T10:00:00.000Z'
let sandbox: TestApp
let production: TestApp
let sandboxUrl: string
let productionUrl: string
let apiKey: string

async function cli(url: string, args: string[]) {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'src/cli/inbound.ts', ...args], {
      env: { ...process.env, INBOUND_URL: url, ADMIN_TOKEN },
    })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

async function listen(app: TestApp): Promise<string> {
  await app.app.app.listen({ host: '127.0.0.1', port: 0 })
  return `http://127.0.0.1:${(app.app.app.server.address() as net.AddressInfo).port}`
}

before(async () => {
  const clock = { now: () => new Date(NOW) }
  sandbox = await startTestApp({}, { clock })
  production = await startTestApp({ SERVICE_ENVIRONMENT: 'production' }, { clock })
  sandboxUrl = await listen(sandbox)
  productionUrl = await listen(production)
  apiKey = (await sandbox.tenant('cli-clock')).apiKey
  await production.tenant('cli-clock')
})
after(async () => {
  await sandbox.close()
  await production.close()
})

describe(`inbound clock and client reset (${engineName})`, () => {
  test('show, advance by and to, refused backwards, reset', async () => {
    assert.deepEqual(await cli(sandboxUrl, ['clock', 'show', 'cli-clock']), {
      code: 0,
      stdout: `clientCode  cli-clock\nmode        real_time\nnow         ${NOW}\nupdatedAt   -\n`,
      stderr: '',
    })
    assert.deepEqual(await cli(sandboxUrl, ['clock', 'advance', 'cli-clock', '--by', 'P3D']), {
      code: 0,
      stdout: `clientCode  cli-clock\nmode        frozen\nnow         2026-03-05T10:00:00.000Z\nupdatedAt   ${NOW}\n`,
      stderr: '',
    })
    const to = await cli(sandboxUrl, ['clock', 'advance', 'cli-clock', '--to', '2026-04-01T00:00:00Z', '--json'])
    assert.equal(to.code, 0, to.stderr)
    assert.deepEqual(JSON.parse(to.stdout), { clientCode: 'cli-clock', mode: 'frozen', now: '2026-04-01T00:00:00.000Z', updatedAt: NOW })
    const back = await cli(sandboxUrl, ['clock', 'advance', 'cli-clock', '--to', '2026-03-01T00:00:00Z'])
    assert.equal(back.code, 1)
    assert.equal(back.stdout, '')
    assert.equal(
      back.stderr,
      'error: Sandbox clock cannot go backwards (409): The clock of client cli-clock shows 2026-04-01T00:00:00.000Z; it cannot go back to 2026-03-01T00:00:00.000Z. Advance to 2026-04-01T00:00:00.000Z or later, or reset it to real time.\n',
    )
    const reset = await cli(sandboxUrl, ['clock', 'reset', 'cli-clock'])
    assert.deepEqual(reset, {
      code: 0,
      stdout: `clientCode  cli-clock\nmode        real_time\nnow         ${NOW}\nupdatedAt   -\n`,
      stderr: '',
    })
  })

  test('usage errors: both or neither of --by and --to; client reset without --yes deletes nothing', async () => {
    for (const args of [
      ['clock', 'advance', 'cli-clock'],
      ['clock', 'advance', 'cli-clock', '--by', 'P1D', '--to', '2026-04-01T00:00:00Z'],
      ['clock', 'show'],
      ['client', 'reset', 'cli-clock'],
    ]) {
      const res = await cli(sandboxUrl, args)
      assert.equal(res.code, 2, `${args.join(' ')}: ${res.stderr}`)
      assert.equal(res.stdout, '')
      assert.match(res.stderr, /^usage: /)
    }
    const r = await sandbox.call('PUT', '/v1/clients/cli-clock/customers/c-1', {
      key: apiKey,
      body: { type: 'person', name: { firstName: 'A', lastName: 'B' }, sourceReference: 'cli/c/1' },
    })
    assert.equal(r.status, 201, r.body)
    const reset = await cli(sandboxUrl, ['client', 'reset', 'cli-clock', '--yes'])
    assert.equal(reset.code, 0, reset.stderr)
    const lines = reset.stdout.split('\n')
    assert.equal(lines[0], `client cli-clock reset at ${NOW}`)
    assert.ok(lines.includes(`  ${'customers'.padEnd(34)} 1 deleted`), reset.stdout)
    assert.ok(lines.includes(`  ${'change_events'.padEnd(34)} 1 deleted`), reset.stdout)
    const again = await cli(sandboxUrl, ['client', 'reset', 'cli-clock', '--yes'])
    assert.deepEqual(again, { code: 0, stdout: `client cli-clock reset at ${NOW}\n  (nothing to delete)\n`, stderr: '' })
  })

  test('production: every verb is refused by the service (404 route_not_found), exit 1', async () => {
    for (const args of [
      ['clock', 'show', 'cli-clock'],
      ['clock', 'advance', 'cli-clock', '--by', 'P1D'],
      ['clock', 'reset', 'cli-clock'],
      ['client', 'reset', 'cli-clock', '--yes'],
    ]) {
      const res = await cli(productionUrl, args)
      assert.equal(res.code, 1, `${args.join(' ')}: ${res.stderr}`)
      assert.equal(res.stdout, '')
      assert.match(res.stderr, /^error: Route not found \(404\): No route (GET|POST) \/admin\/v1\/clients\/cli-clock\/sandbox-/)
    }
  })
})
