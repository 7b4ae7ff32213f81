import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { ConfigError, loadConfig } from '../../../src/config.ts'
import { encodeCursor } from '../../../src/domain/cursor.ts'
import { keyId } from '../../../src/domain/key-ring.ts'
import { SCOPES } from '../../../src/domain/scopes.ts'
import type { ResolvedAddress } from '../../../src/http/destination.ts'
import { LOG_REDACT_PATHS } from '../../../src/http/server.ts'
import { loadKeyRing } from '../../../src/store/secret-keys.ts'
import { problemCode, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { engineName } from '../../helpers/store.ts'

/**
 * The webhook endpoint routes (issue 10 items 1, 2 and 5): every rule and every 4xx path. Delivery itself is
 * tested end to end in test/workers/webhook-dispatcher.test.ts.
 */
const PUBLIC = '93.184.215.14'
const resolver = async (name: string): Promise<ResolvedAddress[]> => {
  if (name.endsWith('.acme.com')) return [{ address: PUBLIC, family: 4 }]
  if (name === 'private.acme.org') return [{ address: '10.0.0.1', family: 4 }]
  throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' })
}

let t: TestApp
let a: Tenant
const URL_A = 'https://hooks.acme.com/irs'
const path = (c = 'wh-a') => `/v1/clients/${c}/webhook-endpoint`

before(async () => {
  t = await startTestApp({}, { resolver })
  a = await t.tenant('wh-a')
})
after(() => t.close())

describe(`webhook endpoint routes (${engineName})`, () => {
  test('no endpoint yet: GET, rotate-secret, disable, deliveries, retry and replay answer 404 webhook_endpoint_not_found', async () => {
    const fresh = await t.tenant('wh-none')
    for (const [method, p, body] of [
      ['GET', path('wh-none'), undefined],
      ['POST', `${path('wh-none')}/rotate-secret`, undefined],
      ['POST', `${path('wh-none')}/disable`, {}],
      ['GET', `${path('wh-none')}/deliveries`, undefined],
      ['POST', `${path('wh-none')}/deliveries/dlv_x/retry`, undefined],
      ['POST', `${path('wh-none')}/replay`, { after: encodeCursor('changes', { s: '0' }) }],
    ] as const) {
      const res = await t.call(method, p, { key: fresh.apiKey, ...(body ? { body } : {}) })
      assert.equal(res.status, 404, `${method} ${p}: ${res.body}`)
      assert.equal(problemCode(res), 'webhook_endpoint_not_found')
    }
  })

  test('PUT: 201 with signingSecret the first time, 200 without it later; GET shows url, status, disabledReason, secretVersion', async () => {
    const first = await t.call('PUT', path(), { key: a.apiKey, body: { url: URL_A } })
    assert.equal(first.status, 201, first.body)
    assert.match(first.json.signingSecret, /^whsec_[A-Za-z0-9_-]{43}$/)
    assert.deepEqual(
      { ...first.json, signingSecret: 'x' },
      {
        url: URL_A,
        status: 'enabled',
        disabledReason: null,
        secretVersion: 1,
        lagging: false,
        laggingSince: null,
        signingSecret: 'x',
      },
    )
    const again = await t.call('PUT', path(), { key: a.apiKey, body: { url: URL_A } })
    assert.equal(again.status, 200)
    assert.deepEqual(again.json, {
      url: URL_A,
      status: 'enabled',
      disabledReason: null,
      secretVersion: 1,
      lagging: false,
      laggingSince: null,
    })
    const moved = await t.call('PUT', path(), { key: a.apiKey, body: { url: 'https://other.acme.com/x?y=1' } })
    assert.equal(moved.status, 200)
    assert.deepEqual((await t.call('GET', path(), { key: a.apiKey })).json, {
      url: 'https://other.acme.com/x?y=1',
      status: 'enabled',
      disabledReason: null,
      secretVersion: 1,
      lagging: false,
      laggingSince: null,
    })
    await t.call('PUT', path(), { key: a.apiKey, body: { url: URL_A } })
  })

  test('the secret is stored encrypted (AES-256-GCM), never in clear, and never in audit events', async () => {
    const rotated = await t.call('POST', `${path()}/rotate-secret`, { key: a.apiKey })
    const secret = rotated.json.signingSecret as string
    const rows = await t.store.query<{ secret_ciphertext: string; previous_secret_ciphertext: string }>(
      'SELECT secret_ciphertext, previous_secret_ciphertext FROM webhook_endpoints WHERE client_code = $1',
      ['wh-a'],
    )
    assert.equal(rows.length, 1)
    // v2.<key id>.<iv>.<tag>.<ciphertext>, under the configured key (src/domain/key-ring.ts).
    const id = keyId(Buffer.from('ab'.repeat(32), 'hex'))
    assert.match(rows[0]?.secret_ciphertext ?? '', new RegExp(`^v2\\.${id}\\.[A-Za-z0-9_-]{16}\\.[A-Za-z0-9_-]{22}\\.[A-Za-z0-9_-]+$`))
    assert.ok(!rows[0]?.secret_ciphertext.includes(secret.slice(6)))
    const audit = await t.store.query<{ actor: string; action: string; details: unknown; change_digest: string }>(
      `SELECT actor, action, details, change_digest FROM audit_events WHERE target_type = 'webhook_endpoint' AND client_code = $1 ORDER BY seq`,
      ['wh-a'],
    )
    assert.deepEqual(
      audit.map((r) => r.action),
      ['webhook_endpoint.created', 'webhook_endpoint.updated', 'webhook_endpoint.updated', 'webhook_endpoint.secret_rotated'],
    )
    for (const r of audit) {
      assert.equal(r.actor, `integration:${a.integrationId}`)
      assert.match(r.change_digest, /^[0-9a-f]{64}$/)
      const text = JSON.stringify(r)
      assert.ok(!text.includes('whsec_') && !text.includes('acme.com'), text)
    }
    assert.deepEqual(audit[3]?.details, { integrationId: a.integrationId, status: 'enabled', secretVersion: 2 })
    // The operator's audit listing shows the same, with no secret or URL.
    const listed = await t.admin('GET', '/admin/v1/audit-events?clientCode=wh-a&limit=200')
    assert.equal(listed.status, 200)
    assert.ok(!listed.body.includes('whsec_') && !listed.body.includes('acme.com'))
  })

  test('rotate-secret: a new secret each time, secretVersion + 1; GET never shows a secret', async () => {
    const before = (await t.call('GET', path(), { key: a.apiKey })).json.secretVersion
    const r1 = await t.call('POST', `${path()}/rotate-secret`, { key: a.apiKey, body: {} })
    assert.equal(r1.status, 200)
    assert.equal(r1.json.secretVersion, before + 1)
    const r2 = await t.call('POST', `${path()}/rotate-secret`, { key: a.apiKey })
    assert.notEqual(r1.json.signingSecret, r2.json.signingSecret)
    const got = await t.call('GET', path(), { key: a.apiKey })
    assert.equal(got.json.secretVersion, before + 2)
    assert.equal('signingSecret' in got.json, false)
  })

  test('the signing secret and the URL are on the log redaction list', () => {
    for (const p of ['signingSecret', '*.signingSecret', 'webhookUrl', 'body', '*.body']) assert.ok(LOG_REDACT_PATHS.includes(p), p)
  })

  test('disable: 200 disabled with disabledReason null; idempotent; a PUT re-enables', async () => {
    const d = await t.call('POST', `${path()}/disable`, { key: a.apiKey })
    assert.equal(d.status, 200)
    assert.deepEqual({ status: d.json.status, disabledReason: d.json.disabledReason }, { status: 'disabled', disabledReason: null })
    assert.equal((await t.call('POST', `${path()}/disable`, { key: a.apiKey })).json.status, 'disabled')
    const put = await t.call('PUT', path(), { key: a.apiKey, body: { url: URL_A } })
    assert.equal(put.status, 200)
    assert.equal(put.json.status, 'enabled')
    assert.equal('signingSecret' in put.json, false)
  })

  test('PUT refuses unsafe destinations with 422 webhook_destination_unsafe at /url, and changes nothing', async () => {
    for (const url of [
      'http://hooks.acme.com/irs',
      'https://hooks.acme.com:8443/irs',
      'https://u:p@hooks.acme.com/irs',
      'https://hooks.acme.com/irs#f',
      'https://127.0.0.1/irs',
      'https://2130706433/irs',
      'https://[::1]/irs',
      'https://localhost/irs',
      'https://private.acme.org/irs',
      'https://unresolvable.acme.org/irs',
      'http://127.0.0.1:8080/irs',
      'not a url',
    ]) {
      const res = await t.call('PUT', path(), { key: a.apiKey, body: { url } })
      assert.equal(res.status, 422, url)
      assert.equal(problemCode(res), 'webhook_destination_unsafe', url)
      assert.equal(res.json.errors[0].pointer, '/url')
      assert.equal(res.json.errors[0].code, 'webhook_destination_unsafe')
      assert.ok(!res.body.includes(url), 'the problem never repeats the URL')
    }
    assert.equal((await t.call('GET', path(), { key: a.apiKey })).json.url, URL_A)
  })

  test('PUT body: missing url, wrong type, unknown keys, too long: 422 validation_error', async () => {
    for (const [body, pointer] of [
      [{}, '/url'],
      [{ url: 5 }, '/url'],
      [{ url: URL_A, secret: 'x' }, '/secret'],
      [{ url: `https://hooks.acme.com/${'a'.repeat(2100)}` }, '/url'],
    ] as const) {
      const res = await t.call('PUT', path(), { key: a.apiKey, body })
      assert.equal(res.status, 422, JSON.stringify(body))
      assert.equal(problemCode(res), 'validation_error')
      assert.equal(res.json.errors[0].pointer, pointer)
    }
  })

  test('scope webhooks:manage is required on every webhook route (403 client_scope_denied)', async () => {
    const narrow = await t.tenant('wh-a', { integrationId: 'int-wh-narrow', scopes: SCOPES.filter((s) => s !== 'webhooks:manage') })
    for (const [method, p] of [
      ['PUT', path()],
      ['GET', path()],
      ['POST', `${path()}/rotate-secret`],
      ['POST', `${path()}/disable`],
      ['GET', `${path()}/deliveries`],
      ['POST', `${path()}/deliveries/dlv_x/retry`],
      ['POST', `${path()}/replay`],
    ] as const) {
      const res = await t.call(method, p, { key: narrow.apiKey, ...(method === 'GET' ? {} : { body: { url: URL_A } }) })
      assert.equal(res.status, 403, `${method} ${p}`)
      assert.equal(problemCode(res), 'client_scope_denied')
    }
  })

  test('one endpoint per Integration per Client: another Integration of the same client has its own', async () => {
    const other = await t.tenant('wh-a', { integrationId: 'int-wh-other' })
    assert.equal((await t.call('GET', path(), { key: other.apiKey })).status, 404)
    const put = await t.call('PUT', path(), { key: other.apiKey, body: { url: 'https://b.acme.com/' } })
    assert.equal(put.status, 201)
    assert.equal((await t.call('GET', path(), { key: a.apiKey })).json.url, URL_A)
    assert.equal((await t.call('GET', path(), { key: other.apiKey })).json.url, 'https://b.acme.com/')
    // And the same Integration on another client is another endpoint again.
    const otherClient = await t.tenant('wh-b', { integrationId: a.integrationId })
    assert.equal((await t.call('GET', path('wh-b'), { key: otherClient.apiKey })).status, 404)
  })

  test('revoking the grant disables the endpoint with grant_revoked; a PUT after re-granting re-enables it', async () => {
    const r = await t.tenant('wh-rev')
    assert.equal((await t.call('PUT', path('wh-rev'), { key: r.apiKey, body: { url: URL_A } })).status, 201)
    assert.equal((await t.admin('POST', `/admin/v1/integrations/${r.integrationId}/grants/wh-rev/revoke`, {})).status, 200)
    assert.equal((await t.call('GET', path('wh-rev'), { key: r.apiKey })).status, 403)
    await t.admin('PUT', `/admin/v1/integrations/${r.integrationId}/grants/wh-rev`, { scopes: [...SCOPES] })
    assert.deepEqual((await t.call('GET', path('wh-rev'), { key: r.apiKey })).json, {
      url: URL_A,
      status: 'disabled',
      disabledReason: 'grant_revoked',
      secretVersion: 1,
      lagging: false,
      laggingSince: null,
    })
    const audit = await t.store.query<{ actor: string; action: string }>(
      `SELECT actor, action FROM audit_events WHERE target_type = 'webhook_endpoint' AND client_code = 'wh-rev' ORDER BY seq`,
    )
    assert.deepEqual(audit.at(-1), { actor: 'service', action: 'webhook_endpoint.disabled' })
    const put = await t.call('PUT', path('wh-rev'), { key: r.apiKey, body: { url: URL_A } })
    assert.deepEqual(put.json, {
      url: URL_A,
      status: 'enabled',
      disabledReason: null,
      secretVersion: 1,
      lagging: false,
      laggingSince: null,
    })
  })

  test('delivery log and its 4xx: bad cursor, bad eventId, unknown delivery, disabled endpoint', async () => {
    const list = await t.call('GET', `${path()}/deliveries?limit=5`, { key: a.apiKey })
    assert.equal(list.status, 200)
    assert.deepEqual(list.json, { data: [], nextCursor: null, lagging: null })
    for (const q of ['cursor=not-a-cursor!', 'cursor=abc', 'limit=0', 'limit=201', 'eventId=nope', 'other=1']) {
      const res = await t.call('GET', `${path()}/deliveries?${q}`, { key: a.apiKey })
      assert.equal(res.status, 422, q)
      assert.equal(problemCode(res), 'validation_error')
    }
    const missing = await t.call('POST', `${path()}/deliveries/dlv_missing/retry`, { key: a.apiKey })
    assert.equal(missing.status, 404)
    assert.equal(problemCode(missing), 'webhook_delivery_not_found')
    const badId = await t.call('POST', `${path()}/deliveries/bad.id/retry`, { key: a.apiKey })
    assert.equal(badId.status, 422)
    assert.equal(badId.json.errors[0].pointer, '/path/deliveryId')
  })

  test('replay and its 4xx: bad cursor 422, purged cursor 410, disabled endpoint 409; retry on a disabled endpoint 409', async () => {
    for (const body of [{}, { after: 'x!' }, { after: 'abc' }, { after: encodeCursor('changes', { s: 'x' }) }]) {
      const res = await t.call('POST', `${path()}/replay`, { key: a.apiKey, body })
      assert.equal(res.status, 422, JSON.stringify(body))
      assert.equal(problemCode(res), 'validation_error')
    }
    const ok = await t.call('POST', `${path()}/replay`, { key: a.apiKey, body: { after: encodeCursor('changes', { s: '0' }) } })
    assert.equal(ok.status, 202)
    assert.deepEqual(ok.json, { queued: 0 })
    await t.store.query(
      `INSERT INTO feed_heads (client_code, last_seq, purged_through_seq) VALUES ('wh-a', 10, 5)
       ON CONFLICT (client_code) DO UPDATE SET purged_through_seq = 5`,
    )
    const expired = await t.call('POST', `${path()}/replay`, { key: a.apiKey, body: { after: encodeCursor('changes', { s: '4' }) } })
    assert.equal(expired.status, 410)
    assert.equal(problemCode(expired), 'cursor_expired')
    await t.call('POST', `${path()}/disable`, { key: a.apiKey })
    const disabled = await t.call('POST', `${path()}/replay`, { key: a.apiKey, body: { after: encodeCursor('changes', { s: '6' }) } })
    assert.equal(disabled.status, 409)
    assert.equal(problemCode(disabled), 'webhook_endpoint_disabled')
    const retry = await t.call('POST', `${path()}/deliveries/dlv_missing/retry`, { key: a.apiKey })
    assert.equal(retry.status, 409)
    assert.equal(problemCode(retry), 'webhook_endpoint_disabled')
    await t.call('PUT', path(), { key: a.apiKey, body: { url: URL_A } })
  })
})

describe('configuration', () => {
  test('production refuses to start without WEBHOOK_SECRET_KEY, and with WEBHOOK_DEV_ALLOW_LOOPBACK=1', () => {
    assert.throws(
      () => loadConfig({ SERVICE_ENVIRONMENT: 'production' }),
      (err) => err instanceof ConfigError && err.problems.some((p) => p.variable === 'WEBHOOK_SECRET_KEY'),
    )
    assert.throws(
      () =>
        loadConfig({
          SERVICE_ENVIRONMENT: 'production',
          ADMIN_TOKEN: 'operator-token-of-24-chars',
          WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
          WEBHOOK_DEV_ALLOW_LOOPBACK: '1',
        }),
      (err) => err instanceof ConfigError && err.problems.map((p) => p.variable).join() === 'WEBHOOK_DEV_ALLOW_LOOPBACK',
    )
    assert.equal(
      loadConfig({ SERVICE_ENVIRONMENT: 'production', ADMIN_TOKEN: 'operator-token-of-24-chars', WEBHOOK_SECRET_KEY: 'ab'.repeat(32) })
        .webhooks.secretKeyHex,
      'ab'.repeat(32),
    )
  })
  test('WEBHOOK_SECRET_KEY must be 64 hex digits, and its value is never echoed', () => {
    assert.throws(
      () => loadConfig({ WEBHOOK_SECRET_KEY: 'secret-value-zzz' }),
      (err) => err instanceof ConfigError && !err.message.includes('secret-value-zzz') && /64 hexadecimal/.test(err.message),
    )
  })
  test('WEBHOOK_BACKLOG_LIMIT: a whole number from 100 to 10,000,000; anything else is refused, naming the variable', () => {
    assert.equal(loadConfig({ WEBHOOK_BACKLOG_LIMIT: '100' }).webhooks.backlogLimit, 100)
    assert.equal(loadConfig({ WEBHOOK_BACKLOG_LIMIT: '10000000' }).webhooks.backlogLimit, 10_000_000)
    for (const bad of ['99', '0', '-5', '1.5', 'abc', '10000001', '']) {
      assert.throws(
        () => loadConfig({ WEBHOOK_BACKLOG_LIMIT: bad }),
        (err) => err instanceof ConfigError && err.problems.map((p) => p.variable).join() === 'WEBHOOK_BACKLOG_LIMIT',
        bad,
      )
    }
  })
  test('defaults: every minute, 1m,5m,30m,2h,6h,12h,24h, loopback off; sandbox generates a key when none is set', async () => {
    const c = loadConfig({})
    assert.deepEqual(c.webhooks, {
      intervalMs: 60_000,
      retryScheduleMs: [60_000, 300_000, 1_800_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000],
      backlogLimit: 10_000,
      allowLoopback: false,
      secretKeyHex: undefined,
      previousSecretKeysHex: [],
    })
    const r1 = await loadKeyRing(t.store, { currentHex: undefined, previousHex: [] })
    const r2 = await loadKeyRing(t.store, { currentHex: undefined, previousHex: [] })
    assert.equal(r1.current.key.length, 32)
    assert.deepEqual(r1.current, r2.current)
  })
})
