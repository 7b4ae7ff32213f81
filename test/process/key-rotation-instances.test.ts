import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { keyId } from '../../src/domain/key-ring.ts'
import { sign } from '../../src/resources/webhooks/secrets.ts'
import { ADMIN_TOKEN } from '../helpers/app.ts'
import { http, type ServiceProcess, seedTenant, startService } from '../helpers/service-process.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../helpers/store.ts'
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * Issue 33 item 9: rotating WEBHOOK_SECRET_KEY while several instances share one PostgreSQL. Two real service
 * processes (src/main.ts) go through the rollout docs/operations.md describes ("Rotating WEBHOOK_SECRET_KEY"), one
 * restart at a time: no start re-encrypts anything (before, the first instance restarted with the new key moved
 * every secret out of the other's reach), each instance signs a notification with the endpoint's secret at every
 * step, the operator's rewrap moves the secrets once both hold the new key, and an instance started with a key
 * that opens nothing says so in /readyz (200) and in one log line, and changes nothing.
 */
const skip = onPostgres ? false : 'needs PostgreSQL: set DATABASE_URL (two processes cannot share the embedded PGlite store)'
const K1 = '4a'.repeat(32)
const K2 = '5b'.repeat(32)
const K3 = '6c'.repeat(32)
const idOf = (hex: string) => keyId(Buffer.from(hex, 'hex'))
const CLIENT = 'rot-inst'

describe('a rolling key rotation across two instances', { skip, timeout: 600_000 }, () => {
  let db: TestDatabase
  let rx: Receiver
  let apiKey: string
  let secret: string
  const running: Record<'a' | 'b', ServiceProcess | undefined> = { a: undefined, b: undefined }

  /** Instance `name` (stopped first if running) with this key ring. */
  async function restart(name: 'a' | 'b', current: string, previous: string[] = []): Promise<ServiceProcess> {
    await running[name]?.kill('SIGTERM')
    const env: Record<string, string> = {
      DATABASE_URL: db.url as string,
      WEBHOOK_SECRET_KEY: current,
      WEBHOOK_DEV_ALLOW_LOOPBACK: '1',
      // Only a commit's wake-up runs a dispatcher within the test: a ping is sent by the instance it was posted to.
      WEBHOOK_INTERVAL_MS: '600000',
    }
    if (previous.length > 0) env.WEBHOOK_SECRET_KEY_PREVIOUS = previous.join(',')
    running[name] = await startService(env)
    return running[name] as ServiceProcess
  }
  const instance = (name: 'a' | 'b') => running[name] as ServiceProcess

  const storedKeyId = async () => {
    const rows = await db.store.query<{ c: string }>('SELECT secret_ciphertext AS c FROM webhook_endpoints WHERE client_code = $1', [
      CLIENT,
    ])
    return rows[0]?.c.split('.')[1]
  }

  /** A test notification posted to `name`, sent by its dispatcher, signed with the endpoint's secret; the endpoint stays enabled. */
  async function pingThrough(name: 'a' | 'b') {
    const n = rx.received.length
    const res = await http(instance(name).url, 'POST', `/v1/clients/${CLIENT}/webhook-endpoint/test`, { token: apiKey, body: {} })
    assert.equal(res.status, 202, `${name}: ${JSON.stringify(res.json)}`)
    await rx.until(() => rx.received.length > n, 60_000)
    const got = rx.received[n]
    assert.ok(got)
    const parts = String(got.headers['service-signature']).split(',')
    const ts = Number((parts[0] as string).slice(2))
    assert.deepEqual(parts.slice(1), [`v1=${sign(secret, ts, got.rawBody)}`], `${name} signs with the endpoint's secret`)
    const view = await http(instance(name).url, 'GET', `/v1/clients/${CLIENT}/webhook-endpoint`, { token: apiKey })
    assert.deepEqual([view.json.status, view.json.disabledReason], ['enabled', null])
  }

  const readyz = async (url: string) => http(url, 'GET', '/readyz')

  before(async () => {
    db = await createTestDatabase()
    rx = await startReceiver()
  })
  after(async () => {
    for (const p of Object.values(running)) await p?.kill('SIGTERM')
    await rx?.close()
    await db?.drop()
  })

  test('both on K1: an endpoint whose secret is under K1', async () => {
    await restart('a', K1)
    await restart('b', K1)
    apiKey = await seedTenant(instance('a').url, CLIENT, ['webhooks:manage'])
    const put = await http(instance('a').url, 'PUT', `/v1/clients/${CLIENT}/webhook-endpoint`, {
      token: apiKey,
      body: { url: `${rx.url}/rot` },
    })
    assert.equal(put.status, 201, JSON.stringify(put.json))
    secret = put.json.signingSecret
    assert.equal(await storedKeyId(), idOf(K1))
    await pingThrough('a')
    await pingThrough('b')
  })

  test('b restarted with K2 current (K1 previous) while a holds only K1: nothing moves, a still opens every secret', async () => {
    await restart('b', K2, [K1])
    assert.equal(await storedKeyId(), idOf(K1), 'no instance re-encrypts at start')
    for (const name of ['a', 'b'] as const) assert.deepEqual((await readyz(instance(name).url)).json, { status: 'ready' }, name)
    await pingThrough('a')
    await pingThrough('b')
  })

  test('a restarted likewise, then the operator rewraps: every secret under K2, both instances still sign', async () => {
    await restart('a', K2, [K1])
    assert.equal(await storedKeyId(), idOf(K1))
    const rewrap = await http(instance('a').url, 'POST', '/admin/v1/secrets/rewrap', { token: ADMIN_TOKEN, body: {} })
    assert.deepEqual([rewrap.status, rewrap.json], [200, { rewrapped: 1, undecryptable: 0 }])
    assert.equal(await storedKeyId(), idOf(K2))
    await pingThrough('a')
    await pingThrough('b')
  })

  test('K1 retired, one instance at a time: both plain in /readyz and still signing', async () => {
    await restart('a', K2)
    await restart('b', K2)
    for (const name of ['a', 'b'] as const) assert.deepEqual((await readyz(instance(name).url)).json, { status: 'ready' }, name)
    await pingThrough('a')
    await pingThrough('b')
  })

  test('a third instance started with a key that opens nothing: /readyz 200 degraded, one log line, nothing changed', async () => {
    const stray = await startService({ DATABASE_URL: db.url as string, WEBHOOK_SECRET_KEY: K3, WEBHOOK_INTERVAL_MS: '600000' })
    try {
      const ready = await readyz(stray.url)
      assert.equal(ready.status, 200)
      assert.equal(ready.json.status, 'ready')
      assert.deepEqual(
        ready.json.degraded.map((d: { code: string; count: number }) => [d.code, d.count]),
        [['unreadable_secrets', 1]],
      )
      const lines = stray
        .output()
        .split('\n')
        .filter((l) => l.includes('holds no key that opens'))
      assert.equal(lines.length, 1, stray.output())
      assert.equal(JSON.parse(lines[0] as string).unreadable, 1)
      assert.equal(await storedKeyId(), idOf(K2))
    } finally {
      await stray.kill('SIGTERM')
    }
    assert.deepEqual((await readyz(instance('a').url)).json, { status: 'ready' })
    await pingThrough('a')
    await pingThrough('b')
  })
})
