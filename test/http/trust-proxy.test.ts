import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { ConfigError, loadConfig } from '../../src/config.ts'
import { problemCode, startTestApp, type TestApp } from '../helpers/app.ts'
import { startService } from '../helpers/service-process.ts'
import { createTestDatabase, onPostgres } from '../helpers/store.ts'

/**
 * TRUST_PROXY decides which address the IP allowlist sees: the connection's by default; behind trusted proxies,
 * the client address they forwarded, never an address a client wrote itself.
 */
const apps: TestApp[] = []
after(async () => {
  for (const a of apps.reverse()) await a.close()
})

async function app(env: Record<string, string>) {
  const t = await startTestApp(env)
  apps.push(t)
  // A grant that admits only 203.0.113.0/24.
  const k = await t.tenant('allow', { ipAllowlist: ['203.0.113.0/24'] })
  const get = (remoteAddress: string, forwardedFor?: string) =>
    t.call('GET', '/v1/clients/allow/customers/none', {
      key: k.apiKey,
      remoteAddress,
      ...(forwardedFor ? { headers: { 'x-forwarded-for': forwardedFor } } : {}),
    })
  return { t, get }
}

describe('TRUST_PROXY: the configuration', () => {
  test('unset, empty or 0 is off; a whole number is a hop count; otherwise addresses and CIDR ranges', () => {
    assert.equal(loadConfig({}).trustProxy, false)
    assert.equal(loadConfig({ TRUST_PROXY: '' }).trustProxy, false)
    assert.equal(loadConfig({ TRUST_PROXY: '0' }).trustProxy, false)
    assert.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2)
    assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 192.168.1.10,::1' }).trustProxy, ['10.0.0.0/8', '192.168.1.10', '::1'])
  })

  test('"true" (believe anyone) and anything that is not an address is refused, naming the variable and the fix', () => {
    for (const value of ['true', '10.0.0.0/33', 'proxy.internal', '10.0.0.1,']) {
      assert.throws(
        () => loadConfig({ TRUST_PROXY: value }),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError, value)
          assert.equal(err.problems.length, 1, value)
          assert.equal(err.problems[0]?.variable, 'TRUST_PROXY')
          assert.match(err.problems[0]?.fix ?? '', /number of proxies/)
          return true
        },
      )
    }
  })
})

describe('TRUST_PROXY: the address the IP allowlist sees', () => {
  test('off (the default): X-Forwarded-For is ignored, the connection address decides', async () => {
    const { get } = await app({})
    const forged = await get('127.0.0.1', '203.0.113.7')
    assert.equal(forged.status, 403)
    assert.equal(problemCode(forged), 'client_scope_denied')
    assert.equal((await get('203.0.113.9')).status, 404)
  })

  test('a hop count of 1: the address the proxy appended is believed, nothing a client wrote before it', async () => {
    const { get } = await app({ TRUST_PROXY: '1' })
    assert.equal((await get('10.0.0.2', '203.0.113.7')).status, 404)
    assert.equal((await get('10.0.0.2', '198.51.100.1')).status, 403)
    // A client outside the allowlist that writes an allowed address itself: the proxy appends the real one.
    const forged = await get('10.0.0.2', '203.0.113.7, 198.51.100.1')
    assert.equal(forged.status, 403)
    assert.equal(problemCode(forged), 'client_scope_denied')
  })

  test('a list of proxies: their X-Forwarded-For is believed; a connection from elsewhere is judged by its own address', async () => {
    const { get } = await app({ TRUST_PROXY: '10.0.0.0/8' })
    assert.equal((await get('10.1.2.3', '203.0.113.7')).status, 404)
    // Followed back through trusted proxies only.
    assert.equal((await get('10.1.2.3', '203.0.113.7, 10.9.9.9')).status, 404)
    assert.equal((await get('10.1.2.3', '203.0.113.7, 198.51.100.1')).status, 403)
    // Not from a trusted proxy: the header is ignored.
    assert.equal((await get('198.51.100.1', '203.0.113.7')).status, 403)
  })
})

describe('TRUST_PROXY: the address the logs see', () => {
  test('the request log line names the forwarded client only when the proxy is trusted', { timeout: 240_000 }, async () => {
    const db = onPostgres ? await createTestDatabase() : null
    try {
      for (const trust of ['', '1']) {
        const dir = mkdtempSync(join(os.tmpdir(), 'irs-trust-proxy-'))
        const service = await startService({
          LOG_LEVEL: 'info',
          TRUST_PROXY: trust,
          ...(db?.url ? { DATABASE_URL: db.url } : { DATA_DIR: dir }),
        })
        try {
          await fetch(`${service.url}/v1/clients/nobody/customers/none`, { headers: { 'x-forwarded-for': '203.0.113.7' } })
          const logged = () =>
            service
              .output()
              .split('\n')
              .filter((l) => l.includes('/v1/clients/nobody/customers/none') && l.includes('"remoteAddress"'))
          // The log line reaches this process through a pipe: wait for it (bounded).
          for (let i = 0; i < 200 && logged().length === 0; i++) await new Promise((r) => setTimeout(r, 25))
          const lines = logged()
          assert.ok(lines.length > 0, service.output())
          const addresses = lines.map((l) => JSON.parse(l).req?.remoteAddress)
          assert.deepEqual(new Set(addresses), new Set([trust ? '203.0.113.7' : '127.0.0.1']), trust)
        } finally {
          await service.kill('SIGTERM')
          rmSync(dir, { recursive: true, force: true })
        }
      }
    } finally {
      await db?.drop()
    }
  })
})
