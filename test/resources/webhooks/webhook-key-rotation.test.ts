import assert from 'node:assert/strict'
import { createCipheriv, randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { keyId } from '../../../src/domain/key-ring.ts'
import { sign } from '../../../src/resources/webhooks/secrets.ts'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { createTestDatabase, engineName, type TestDatabase } from '../../helpers/store.ts'
import { type Received, type Receiver, startReceiver } from '../../helpers/webhook-receiver.ts'

/**
 * Changing the key that encrypts secrets at rest (issue 20 item 2), as an operator does it: one store, the service
 * started again with each new configuration. A sandbox key stored by the service, then WEBHOOK_SECRET_KEY K1 (the
 * stored key opens what it encrypted, by itself), then K2 with WEBHOOK_SECRET_KEY_PREVIOUS=K1 (deliveries go on,
 * signed with the same secrets, now stored under K2), then K3 with K2 forgotten: the endpoints are disabled
 * `signing_secret_unreadable`, the delivery log says why, and a new secret (rotate-secret, or disable + PUT)
 * brings them back.
 */
const K1 = '11'.repeat(32)
const K2 = '22'.repeat(32)
const K3 = '33'.repeat(32)
const idOf = (hex: string) => keyId(Buffer.from(hex, 'hex'))

let db: TestDatabase
let rx: Receiver
let t: TestApp | undefined
const tenants: Record<string, Tenant> = {}
const secrets: Record<string, string> = {}

/** Starts the service again on the same store (the previous instance stopped first). */
async function restart(env: Record<string, string | undefined>): Promise<TestApp> {
  await t?.app.app.close()
  // WEBHOOK_SECRET_KEY undefined: a sandbox with no key configured (the helper sets one otherwise).
  t = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1', ...env } as Record<string, string>, { db })
  return t
}

const app = () => t as TestApp
const endpoint = (client: string) => `/v1/clients/${client}/webhook-endpoint`

async function stored(client: string) {
  const rows = await db.store.query<{ secret_ciphertext: string; previous_secret_ciphertext: string | null }>(
    'SELECT secret_ciphertext, previous_secret_ciphertext FROM webhook_endpoints WHERE client_code = $1',
    [client],
  )
  return rows[0] as { secret_ciphertext: string; previous_secret_ciphertext: string | null }
}

async function configure(client: string) {
  const tenant = await app().tenant(client)
  tenants[client] = tenant
  const put = await app().call('PUT', endpoint(client), { key: tenant.apiKey, body: { url: `${rx.url}/${client}` } })
  assert.equal(put.status, 201, put.body)
  secrets[client] = put.json.signingSecret
}

/** The format before the key ring: `v1.<iv>.<tag>.<ciphertext>`, AES-256-GCM under one key. */
function legacyEncrypt(hex: string, secret: string, aad: string): string {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', Buffer.from(hex, 'hex'), iv)
  cipher.setAAD(Buffer.from(aad))
  const ct = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()])
  return `v1.${iv.toString('base64url')}.${cipher.getAuthTag().toString('base64url')}.${ct.toString('base64url')}`
}

let customers = 0
async function change(client: string) {
  const tenant = tenants[client] as Tenant
  const res = await app().call('PUT', `/v1/clients/${client}/customers/c-${++customers}`, {
    key: tenant.apiKey,
    body: { type: 'person', name: { firstName: 'Ada', lastName: `K${customers}` }, sourceReference: `kr/${customers}` },
  })
  assert.equal(res.status, 201, res.body)
}

const receivedBy = (client: string) => rx.received.filter((r) => r.path === `/hooks/${client}`)

/** The v1 signatures of a notification, checked against the secrets expected to sign it (in that order). */
function assertSignedWith(r: Received, expected: string[]) {
  const parts = String(r.headers['service-signature']).split(',')
  const ts = Number((parts[0] as string).slice(2))
  assert.deepEqual(
    parts.slice(1),
    expected.map((s) => `v1=${sign(s, ts, r.rawBody)}`),
  )
}

async function deliveries(client: string) {
  const res = await app().call('GET', `${endpoint(client)}/deliveries`, { key: (tenants[client] as Tenant).apiKey })
  assert.equal(res.status, 200, res.body)
  return res.json.data as { status: string; attemptCount: number; lastError: string | null }[]
}

before(async () => {
  db = await createTestDatabase()
  rx = await startReceiver()
})
after(async () => {
  await t?.app.app.close()
  await rx.close()
  await db.drop()
})

describe(`changing the key that encrypts stored secrets (${engineName})`, () => {
  test('sandbox without WEBHOOK_SECRET_KEY: secrets are under the key the service generated and stored', async () => {
    await restart({ WEBHOOK_SECRET_KEY: undefined })
    await configure('kr-sbx')
    const [row] = await db.store.query<{ value: string }>(`SELECT value FROM settings WHERE key = 'webhook_secret_key'`)
    assert.ok((await stored('kr-sbx')).secret_ciphertext.startsWith(`v2.${idOf(row?.value as string)}.`))
  })

  test("WEBHOOK_SECRET_KEY set later: the stored key still opens its secrets, which move under the configured key by the operator's rewrap", async () => {
    const [sandboxKey] = await db.store.query<{ value: string }>(`SELECT value FROM settings WHERE key = 'webhook_secret_key'`)
    await restart({ WEBHOOK_SECRET_KEY: K1 })
    // Issue 33 item 9: nothing is re-encrypted at start; the rewrap is the operator's step.
    assert.ok((await stored('kr-sbx')).secret_ciphertext.startsWith(`v2.${idOf(sandboxKey?.value as string)}.`))
    const rewrap = await app().admin('POST', '/admin/v1/secrets/rewrap', {})
    assert.deepEqual([rewrap.status, rewrap.json], [200, { rewrapped: 1, undecryptable: 0 }])
    assert.ok((await stored('kr-sbx')).secret_ciphertext.startsWith(`v2.${idOf(K1)}.`))
    await change('kr-sbx')
    await app().app.webhookDispatcher.runOnce()
    assert.equal(receivedBy('kr-sbx').length, 1)
    assertSignedWith(receivedBy('kr-sbx')[0] as Received, [secrets['kr-sbx'] as string])
    await configure('kr-k1')
  })

  test("K2 with WEBHOOK_SECRET_KEY_PREVIOUS=K1: the operator's rewrap re-encrypts every secret under K2, and deliveries go on with the same secrets", async () => {
    // A row still in the format before the key ring (v1, no key id) is opened by trying every key.
    const k1 = tenants['kr-k1'] as Tenant
    await db.store.query('UPDATE webhook_endpoints SET secret_ciphertext = $2 WHERE client_code = $1', [
      'kr-k1',
      legacyEncrypt(K1, secrets['kr-k1'] as string, `webhook/kr-k1/${k1.integrationId}`),
    ])
    await restart({ WEBHOOK_SECRET_KEY: K2, WEBHOOK_SECRET_KEY_PREVIOUS: `${K3},${K1}` })
    assert.ok((await stored('kr-sbx')).secret_ciphertext.startsWith(`v2.${idOf(K1)}.`), 'not moved at start')
    const rewrap = await app().admin('POST', '/admin/v1/secrets/rewrap', {})
    assert.deepEqual([rewrap.status, rewrap.json], [200, { rewrapped: 2, undecryptable: 0 }])
    for (const client of ['kr-sbx', 'kr-k1']) {
      const row = await stored(client)
      assert.ok(row.secret_ciphertext.startsWith(`v2.${idOf(K2)}.`), client)
      assert.equal(row.previous_secret_ciphertext, null)
    }
    // Nothing left to move: the rewrap is idempotent.
    const again = await app().admin('POST', '/admin/v1/secrets/rewrap', {})
    assert.equal(again.status, 200, again.body)
    assert.deepEqual(again.json, { rewrapped: 0, undecryptable: 0 })
    await change('kr-sbx')
    await change('kr-k1')
    await app().app.webhookDispatcher.runOnce()
    assert.equal(receivedBy('kr-sbx').length, 2)
    assert.equal(receivedBy('kr-k1').length, 1)
    assertSignedWith(receivedBy('kr-sbx')[1] as Received, [secrets['kr-sbx'] as string])
    assertSignedWith(receivedBy('kr-k1')[0] as Received, [secrets['kr-k1'] as string])
    await configure('kr-put')
  })

  test('K3 with K2 forgotten: the endpoint is disabled signing_secret_unreadable, the delivery log says why, and it is audited', async () => {
    await restart({ WEBHOOK_SECRET_KEY: K3 })
    // Nothing opens them, so nothing moved: the ciphertexts are as they were.
    assert.ok((await stored('kr-sbx')).secret_ciphertext.startsWith(`v2.${idOf(K2)}.`))
    const rewrap = await app().admin('POST', '/admin/v1/secrets/rewrap')
    assert.deepEqual([rewrap.status, rewrap.json], [200, { rewrapped: 0, undecryptable: 3 }])
    const tenant = tenants['kr-sbx'] as Tenant
    await change('kr-sbx')
    await app().app.webhookDispatcher.runOnce()
    assert.equal(receivedBy('kr-sbx').length, 2)
    const got = await app().call('GET', endpoint('kr-sbx'), { key: tenant.apiKey })
    assert.deepEqual(got.json, {
      url: `${rx.url}/kr-sbx`,
      status: 'disabled',
      disabledReason: 'signing_secret_unreadable',
      secretVersion: 1,
      lagging: false,
      laggingSince: null,
    })
    const [pending] = await deliveries('kr-sbx')
    assert.deepEqual(pending, { ...pending, status: 'pending', attemptCount: 0, lastError: 'signing_secret_unreadable' })
    const retry = await app().call('POST', `${endpoint('kr-sbx')}/replay`, { key: tenant.apiKey, body: { after: 'eyJzIjoiMCJ9' } })
    assert.deepEqual(
      [retry.status, problemCode(retry), retry.json.disabledReason],
      [409, 'webhook_endpoint_disabled', 'signing_secret_unreadable'],
    )
    const audit = await db.store.query<{ actor: string; details: unknown }>(
      `SELECT actor, details FROM audit_events WHERE client_code = 'kr-sbx' AND action = 'webhook_endpoint.disabled'`,
    )
    assert.deepEqual(audit, [
      {
        actor: 'service',
        details: { integrationId: tenant.integrationId, status: 'disabled', disabledReason: 'signing_secret_unreadable', secretVersion: 1 },
      },
    ])
    // Another run changes nothing and sends nothing.
    await app().app.webhookDispatcher.runOnce()
    assert.equal(receivedBy('kr-sbx').length, 2)
  })

  test('rotate-secret issues a new secret without the unreadable one; a PUT re-enables, and the waiting delivery goes out signed with it', async () => {
    const tenant = tenants['kr-sbx'] as Tenant
    const rotated = await app().call('POST', `${endpoint('kr-sbx')}/rotate-secret`, { key: tenant.apiKey })
    assert.equal(rotated.status, 200, rotated.body)
    assert.match(rotated.json.signingSecret, /^whsec_/)
    assert.deepEqual(
      { ...rotated.json, signingSecret: 'x' },
      {
        url: `${rx.url}/kr-sbx`,
        status: 'disabled',
        disabledReason: 'signing_secret_unreadable',
        secretVersion: 2,
        lagging: false,
        laggingSince: null,
        signingSecret: 'x',
      },
    )
    const row = await stored('kr-sbx')
    assert.ok(row.secret_ciphertext.startsWith(`v2.${idOf(K3)}.`))
    assert.equal(row.previous_secret_ciphertext, null)
    const put = await app().call('PUT', endpoint('kr-sbx'), { key: tenant.apiKey, body: { url: `${rx.url}/kr-sbx` } })
    assert.deepEqual(
      [put.status, put.json],
      [200, { url: `${rx.url}/kr-sbx`, status: 'enabled', disabledReason: null, secretVersion: 2, lagging: false, laggingSince: null }],
    )
    await app().app.webhookDispatcher.runOnce()
    assert.equal(receivedBy('kr-sbx').length, 3)
    // The new secret alone: the old one could not be opened, so there is no overlap signature.
    assertSignedWith(receivedBy('kr-sbx')[2] as Received, [rotated.json.signingSecret])
    const [sent] = await deliveries('kr-sbx')
    assert.deepEqual(sent, { ...sent, status: 'delivered', attemptCount: 1, lastError: null })
  })

  test('disable then PUT replaces an unreadable secret: 200 with the new signingSecret, and deliveries are signed with it', async () => {
    const tenant = tenants['kr-put'] as Tenant
    const disabled = await app().call('POST', `${endpoint('kr-put')}/disable`, { key: tenant.apiKey })
    assert.equal(disabled.status, 200, disabled.body)
    const put = await app().call('PUT', endpoint('kr-put'), { key: tenant.apiKey, body: { url: `${rx.url}/kr-put` } })
    assert.equal(put.status, 200, put.body)
    assert.match(put.json.signingSecret, /^whsec_/)
    assert.notEqual(put.json.signingSecret, secrets['kr-put'])
    assert.deepEqual(
      { ...put.json, signingSecret: 'x' },
      {
        url: `${rx.url}/kr-put`,
        status: 'enabled',
        disabledReason: null,
        secretVersion: 2,
        lagging: false,
        laggingSince: null,
        signingSecret: 'x',
      },
    )
    assert.ok((await stored('kr-put')).secret_ciphertext.startsWith(`v2.${idOf(K3)}.`))
    // Readable now: a later PUT shows no secret.
    const again = await app().call('PUT', endpoint('kr-put'), { key: tenant.apiKey, body: { url: `${rx.url}/kr-put` } })
    assert.deepEqual(again.json, {
      url: `${rx.url}/kr-put`,
      status: 'enabled',
      disabledReason: null,
      secretVersion: 2,
      lagging: false,
      laggingSince: null,
    })
    await change('kr-put')
    await app().app.webhookDispatcher.runOnce()
    assert.equal(receivedBy('kr-put').length, 1)
    assertSignedWith(receivedBy('kr-put')[0] as Received, [put.json.signingSecret])
  })

  test('the operator rewrap is audited with counts and the current key id only', async () => {
    const res = await app().admin('POST', '/admin/v1/secrets/rewrap', {})
    // kr-k1 is still under the forgotten K2.
    assert.deepEqual([res.status, res.json], [200, { rewrapped: 0, undecryptable: 1 }])
    const audit = await db.store.query<{ actor: string; target_id: string; details: unknown }>(
      `SELECT actor, target_id, details FROM audit_events WHERE action = 'secrets.rewrapped' ORDER BY seq`,
    )
    assert.deepEqual(audit.at(-1), {
      actor: 'operator',
      target_id: idOf(K3),
      details: { currentKeyId: idOf(K3), rewrapped: 0, undecryptable: 1 },
    })
  })
})
