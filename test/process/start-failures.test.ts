import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { stripVTControlCharacters } from 'node:util'
import { ADMIN_TOKEN } from '../helpers/app.ts'
import { freePort, http, type SpawnedProcess, spawnProcess } from '../helpers/service-process.ts'
import { createTestDatabase, engineName, onPostgres } from '../helpers/store.ts'

/**
 * Issues 8.9, 15.3 and 15.8: a start that fails says why in one line, with no stack trace and no secret;
 * credentials shown once are generated only once the port is bound, and are printed (shownOnce lines), never logged.
 */
const dirs: string[] = []
const children: SpawnedProcess[] = []
after(async () => {
  for (const c of children) await c.kill()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'irs-start-'))
  dirs.push(d)
  return d
}

function service(env: Record<string, string | undefined>): SpawnedProcess {
  const proc = spawnProcess(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    DATABASE_URL: undefined,
    ADMIN_TOKEN: undefined,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    ...env,
  })
  children.push(proc)
  return proc
}

const noStackTrace = (out: string) => assert.ok(!/^\s+at /m.test(out), out)

describe('a start that fails', () => {
  test('several invalid variables: exit 1, one line listing each variable with its fix, no stack trace, no value', {
    timeout: 300_000,
  }, async () => {
    const proc = service({
      DATA_DIR: tempDir(),
      ADMIN_TOKEN: 'tooShortSecretX',
      PORT: 'eighty',
      SERVICE_ENVIRONMENT: 'prod',
      BATCH_CHUNK_SIZE: '0',
    })
    const { code } = await proc.exited
    assert.equal(code, 1)
    const out = proc.output()
    noStackTrace(out)
    assert.ok(!out.includes('tooShortSecretX'), 'a configured value (perhaps a secret) is never printed')
    const lines = out.trim().split('\n')
    assert.equal(lines.length, 1, out)
    const line = JSON.parse(lines[0] as string)
    assert.equal(line.level, 60)
    assert.equal(
      line.msg,
      [
        'Invalid configuration; the service did not start:',
        '  PORT: Invalid input: expected number, received NaN. Fix: set PORT to a whole number from 0 to 65535, or unset it for 8080.',
        '  SERVICE_ENVIRONMENT: Invalid option: expected one of "sandbox"|"production". Fix: set SERVICE_ENVIRONMENT to sandbox or production.',
        '  ADMIN_TOKEN: is shorter than 24 characters. Fix: set ADMIN_TOKEN to a random string of at least 24 characters (for example the output of `openssl rand -hex 24`); it may be unset only in sandbox, where one is generated at first start and printed once.',
        '  BATCH_CHUNK_SIZE: Too small: expected number to be >=1. Fix: set BATCH_CHUNK_SIZE to a whole number from 1 to 100, or unset it for 100.',
      ].join('\n'),
    )
  })

  test('port taken: one clear line, exit 1, no credentials anywhere; the next start on a free port shows them, and they work', {
    timeout: 600_000,
  }, async () => {
    const dataDir = tempDir()
    const port = await freePort()
    const squatter = net.createServer()
    await new Promise<void>((resolve) => squatter.listen(port, '127.0.0.1', () => resolve()))
    let first: SpawnedProcess
    try {
      first = service({ DATA_DIR: dataDir, PORT: String(port), SEED_DEMO: '1' })
      assert.equal((await first.exited).code, 1)
    } finally {
      await new Promise((resolve) => squatter.close(resolve))
    }
    const out = first.output()
    noStackTrace(out)
    const lines = out.trim().split('\n')
    assert.equal(lines.length, 1, out)
    assert.equal(
      JSON.parse(lines[0] as string).msg,
      `cannot listen on 127.0.0.1:${port}: the port is already in use; stop what uses it or set PORT`,
    )
    assert.deepEqual(readdirSync(dataDir).sort(), ['pglite'], 'no credentials file, and the DATA_DIR lock released')

    const second = service({ DATA_DIR: dataDir, PORT: String(port), SEED_DEMO: '1' })
    const url = `http://127.0.0.1:${port}`
    await second.waitReady(url)
    await second.waitForOutput(/Try: curl/)
    assert.deepEqual(readdirSync(dataDir).sort(), ['inbound.lock', 'pglite'], 'credentials are written to no file')
    // Printed on stdout, one JSON line each in the log's shape, marked shownOnce, never through the logger.
    const printed = second
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string; shownOnce?: boolean })
    const shown = printed.filter((l) => l.shownOnce === true).map((l) => l.msg)
    assert.equal(shown.length, 3)
    assert.ok(printed.every((l) => l.shownOnce === true || l.level !== undefined))
    const token = /^Operator token \(shown once; set ADMIN_TOKEN to choose your own\): (adm_[0-9A-Za-z]{40})$/.exec(shown[0] as string)?.[1]
    const key = /^Sandbox demo seeded: client "demo", API key \(shown once\): (irk_sandbox_\w+)$/.exec(shown[1] as string)?.[1]
    assert.ok(token && key, shown.join('\n'))
    assert.equal(shown[2], `Try: curl -H "Authorization: Bearer ${key}" ${url}/v1/clients/demo/customers/cust-demo-1`)
    // Only those lines carry them: no logger line does.
    const carrying = printed.filter((l) => JSON.stringify(l).includes(token) || JSON.stringify(l).includes(key))
    assert.ok(
      carrying.every((l) => l.shownOnce === true),
      second.output(),
    )
    // And they work.
    assert.equal((await http(url, 'PUT', '/admin/v1/clients/after-port', { token, body: { name: 'After' } })).status, 201)
    assert.equal((await http(url, 'GET', '/v1/clients/demo/customers/cust-demo-1', { token: key })).status, 200)
  })
})

/**
 * Issue 20.11: in production stdout is a log collector's pipe, so nothing secret may be generated there to be shown
 * once: no ADMIN_TOKEN refuses the start, and no demo (with its API key) is ever seeded.
 */
describe('production never prints a secret', () => {
  test('without ADMIN_TOKEN: exit 1, one line saying how to set it', { timeout: 300_000 }, async () => {
    const proc = service({ DATA_DIR: tempDir(), SERVICE_ENVIRONMENT: 'production', WEBHOOK_SECRET_KEY: 'ab'.repeat(32), SEED_DEMO: '1' })
    assert.equal((await proc.exited).code, 1)
    const out = proc.output()
    noStackTrace(out)
    const lines = out.trim().split('\n')
    assert.equal(lines.length, 1, out)
    assert.equal(
      JSON.parse(lines[0] as string).msg,
      [
        'Invalid configuration; the service did not start:',
        '  ADMIN_TOKEN: is required when SERVICE_ENVIRONMENT=production (a generated token would be printed into the logs). Fix: set ADMIN_TOKEN to a random string of at least 24 characters (for example the output of `openssl rand -hex 24`); it may be unset only in sandbox, where one is generated at first start and printed once.',
      ].join('\n'),
    )
  })

  test(`with ADMIN_TOKEN and SEED_DEMO=1 (${engineName}): nothing seeded, nothing shown once, no token or key printed`, {
    timeout: 300_000,
  }, async () => {
    const db = onPostgres ? await createTestDatabase() : undefined
    try {
      const dataDir = tempDir()
      const port = await freePort()
      const url = `http://127.0.0.1:${port}`
      const proc = service({
        DATA_DIR: dataDir,
        DATABASE_URL: db?.url,
        PORT: String(port),
        SERVICE_ENVIRONMENT: 'production',
        ADMIN_TOKEN,
        WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
        SEED_DEMO: '1',
      })
      await proc.waitReady(url)
      await proc.waitForOutput(/Inbound Receivables Service listening on .* \(\w+ store, production\)/)
      assert.equal((await http(url, 'GET', '/admin/v1/clients/demo', { token: ADMIN_TOKEN })).status, 404)
      assert.equal((await http(url, 'GET', '/admin/v1/clients', { token: ADMIN_TOKEN })).json.data.length, 0)
      proc.child.kill('SIGTERM')
      assert.equal((await proc.exited).code, 0)
      const out = proc.output()
      const printed = out
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg: string; shownOnce?: boolean })
      assert.deepEqual(
        printed.filter((l) => l.shownOnce !== undefined),
        [],
      )
      assert.equal(/adm_|irk_|shown once|Try: curl/.test(out), false, out)
      assert.ok(!out.includes(ADMIN_TOKEN))
    } finally {
      await db?.drop()
    }
  })
})

const hasScript = existsSync('/usr/bin/script')

describe('in a terminal', () => {
  test('log lines are pretty, the credentials are printed there and written nowhere, and Ctrl-C stops it', {
    skip: hasScript ? false : 'needs script(1) to give the service a terminal',
    timeout: 300_000,
  }, async () => {
    const dataDir = tempDir()
    const port = await freePort()
    // script(1) runs the service on a pseudo-terminal and copies what it prints to its own stdout. It starts
    // the command through $SHELL; `exec` makes the service the terminal's only foreground process, whatever that
    // shell is (dash, unlike bash, would otherwise stay as a parent that Ctrl-C kills, exiting 130).
    const child = spawn('script', ['-qfec', `exec ${process.execPath} --import tsx src/main.ts`, '/dev/null'], {
      env: {
        ...withoutDatabaseUrl(),
        SHELL: '/bin/sh',
        HOST: '127.0.0.1',
        PORT: String(port),
        DATA_DIR: dataDir,
        SEED_DEMO: '1',
        LOG_LEVEL: 'info',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout.on('data', (d) => {
      out += d.toString()
    })
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    try {
      const deadline = Date.now() + 240_000
      while (!/Try: curl/.test(out)) {
        if (child.exitCode !== null || Date.now() > deadline) throw new Error(`no credentials printed:\n${out}`)
        await new Promise((r) => setTimeout(r, 50))
      }
      const plain = stripVTControlCharacters(out).replace(/\r/g, '')
      assert.match(plain, /INFO.*: Inbound Receivables Service listening on http:\/\/127\.0\.0\.1:\d+ \(pglite store, sandbox\)/)
      assert.match(plain, /\nOperator token \(shown once; set ADMIN_TOKEN to choose your own\): adm_[0-9A-Za-z]{40}\n/)
      assert.match(plain, /\nSandbox demo seeded: client "demo", API key \(shown once\): irk_sandbox_\w+\n/)
      assert.ok(!plain.includes('{"level"'), 'no JSON lines in a terminal')
      assert.deepEqual(readdirSync(dataDir).sort(), ['inbound.lock', 'pglite'], 'credentials are written to no file')
      child.stdin.write('\x03')
      assert.equal(await exited, 0)
      assert.match(stripVTControlCharacters(out), /INFO.*: stopped/)
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL')
    }
  })
})

function withoutDatabaseUrl(): NodeJS.ProcessEnv {
  const env = { ...process.env }
  delete env.DATABASE_URL
  delete env.ADMIN_TOKEN
  return env
}
