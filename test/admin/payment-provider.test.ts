import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import pino from 'pino'
import { STRIPE_WEBHOOK_EVENTS } from '../../src/admin/payment-provider-service.ts'
import { ConfigError, loadConfig } from '../../src/config.ts'
import { createKeyRing, keyId } from '../../src/domain/key-ring.ts'
import { LOG_REDACT_PATHS } from '../../src/http/server.ts'
import type { PaymentProvider, ProviderKind, ProviderSecrets } from '../../src/resources/payments/provider.ts'
import { providerConfigStore, providerSecretAad } from '../../src/resources/payments/provider-config-store.ts'
import { type ClientProviderConfig, createProviderRegistry, type ProviderChoice } from '../../src/resources/payments/registry.ts'
import { createSandboxProvider } from '../../src/resources/payments/sandbox/provider.ts'
import { createStripeKind } from '../../src/resources/payments/stripe/adapter.ts'
import type { Store } from '../../src/store/store.ts'
import { problemCode, type Response, startTestApp, type TestApp } from '../helpers/app.ts'
import { createTestDatabase, engineName, type TestDatabase } from '../helpers/store.ts'
import { generateStripeKey, type StripeStandIn, startStripeStandIn } from '../helpers/stripe-stand-in.ts'

/*
 * A client's payment provider (issue 22 item 1): the operator's PUT/GET/DELETE, the mode rules of each
 * environment, the secrets encrypted under the key ring (rewrapped with it) and never shown, logged or audited,
 * and the provider registry the payment path will resolve a client's provider through.
 */

const K1 = '11'.repeat(32)
const K2 = '22'.repeat(32)
const LOST = '33'.repeat(32)
const ring = (hex: string) => createKeyRing(Buffer.from(hex, 'hex'))
const idOf = (hex: string) => keyId(Buffer.from(hex, 'hex'))
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex')
const path = (client: string) => `/admin/v1/clients/${client}/payment-provider`
const webhookSecret = () => `whsec_${generateStripeKey('sk_test').slice(8)}`
const hintOf = (key: string) => `${key.slice(0, 8)}...${key.slice(-4)}`

/** Every secret any test sent, and every answer any test read: no answer may hold one. */
const sentSecrets: string[] = []
const answers: Response[] = []
function remember(r: Response): Response {
  answers.push(r)
  return r
}
function secrets<T extends Record<string, string>>(s: T): T {
  sentSecrets.push(...Object.values(s))
  return s
}

let sandbox: TestApp
let production: TestApp
let standIn: StripeStandIn
const put = (t: TestApp, client: string, body: unknown) => t.admin('PUT', path(client), body).then(remember)
const get = (t: TestApp, client: string) => t.admin('GET', path(client)).then(remember)
const del = (t: TestApp, client: string) => t.admin('DELETE', path(client)).then(remember)

async function storedRow(store: Store, client: string) {
  const rows = await store.query<Record<string, string>>('SELECT * FROM client_payment_providers WHERE client_code = $1', [client])
  return rows[0]
}

function assertProblem(res: Response, status: number, code: string) {
  assert.equal(res.status, status, res.body)
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/)
  assert.equal(problemCode(res), code)
}

before(async () => {
  sandbox = await startTestApp({ WEBHOOK_SECRET_KEY: K1 })
  production = await startTestApp({ SERVICE_ENVIRONMENT: 'production', WEBHOOK_SECRET_KEY: K1 })
  standIn = await startStripeStandIn()
  for (const c of ['pp-a', 'pp-bad', 'pp-reg', 'pp-reset']) await sandbox.admin('PUT', `/admin/v1/clients/${c}`, { name: c })
  for (const c of ['pp-live', 'pp-reg']) await production.admin('PUT', `/admin/v1/clients/${c}`, { name: c })
})
after(async () => {
  await standIn.close()
  await sandbox.close()
  await production.close()
})

describe(`payment provider: set, show, remove (${engineName})`, () => {
  test('PUT 201 then 200, GET the same without a secret, DELETE 204 then 404; the secrets stored encrypted', async () => {
    const first = secrets({ secretKey: generateStripeKey('sk_test'), webhookSecret: webhookSecret() })
    const created = await put(sandbox, 'pp-a', { provider: 'stripe', ...first })
    assert.equal(created.status, 201, created.body)
    const { createdAt, updatedAt, ...rest } = created.json
    assert.deepEqual(rest, {
      provider: 'stripe',
      mode: 'test',
      secretKeyHint: hintOf(first.secretKey),
      webhookUrl: 'http://irs.test/providers/stripe/webhooks/pp-a',
      events: [
        'checkout.session.completed',
        'checkout.session.async_payment_succeeded',
        'checkout.session.async_payment_failed',
        'checkout.session.expired',
        'refund.created',
        'refund.updated',
        'refund.failed',
        'charge.dispute.created',
        'charge.dispute.funds_withdrawn',
        'charge.dispute.closed',
        'charge.dispute.funds_reinstated',
      ],
    })
    assert.equal(createdAt, updatedAt)
    assert.match(rest.secretKeyHint, /^sk_test_\.\.\.[A-Za-z0-9]{4}$/)
    const read = await get(sandbox, 'pp-a')
    assert.equal(read.status, 200)
    assert.deepEqual(read.json, created.json)

    const row = (await storedRow(sandbox.store, 'pp-a')) as Record<string, string>
    assert.ok(!JSON.stringify(row).includes(first.secretKey) && !JSON.stringify(row).includes(first.webhookSecret), 'stored in clear')
    assert.deepEqual(
      [row.secret_key_ciphertext?.split('.').slice(0, 2), row.webhook_secret_ciphertext?.split('.').slice(0, 2)],
      [
        ['v2', idOf(K1)],
        ['v2', idOf(K1)],
      ],
    )
    const k1 = ring(K1)
    assert.equal(k1.decrypt(providerSecretAad('pp-a', 'secret_key_ciphertext'), row.secret_key_ciphertext as string), first.secretKey)
    assert.equal(
      k1.decrypt(providerSecretAad('pp-a', 'webhook_secret_ciphertext'), row.webhook_secret_ciphertext as string),
      first.webhookSecret,
    )
    // Each secret is bound to its own column: one copied over the other does not open there.
    assert.throws(() => k1.decrypt(providerSecretAad('pp-a', 'webhook_secret_ciphertext'), row.secret_key_ciphertext as string))

    // A restricted key replaces it: 200, a new hint, the creation time kept.
    const second = secrets({ secretKey: generateStripeKey('rk_test'), webhookSecret: webhookSecret() })
    const replaced = await put(sandbox, 'pp-a', { provider: 'stripe', ...second })
    assert.equal(replaced.status, 200, replaced.body)
    assert.deepEqual(
      [replaced.json.mode, replaced.json.secretKeyHint, replaced.json.createdAt],
      ['test', hintOf(second.secretKey), createdAt],
    )
    assert.equal((await get(sandbox, 'pp-a')).json.secretKeyHint, hintOf(second.secretKey))

    const removed = await del(sandbox, 'pp-a')
    assert.equal(removed.status, 204)
    assert.equal(removed.body, '')
    assert.equal(await storedRow(sandbox.store, 'pp-a'), undefined)
    assertProblem(await get(sandbox, 'pp-a'), 404, 'payment_provider_not_found')
    assertProblem(await del(sandbox, 'pp-a'), 404, 'payment_provider_not_found')
  })

  test('an unknown client: 404 client_not_found on PUT, GET and DELETE, nothing stored', async () => {
    const body = { provider: 'stripe', ...secrets({ secretKey: generateStripeKey('sk_test'), webhookSecret: webhookSecret() }) }
    assertProblem(await put(sandbox, 'pp-nobody', body), 404, 'client_not_found')
    assertProblem(await get(sandbox, 'pp-nobody'), 404, 'client_not_found')
    assertProblem(await del(sandbox, 'pp-nobody'), 404, 'client_not_found')
    assert.equal(await storedRow(sandbox.store, 'pp-nobody'), undefined)
  })

  test('every bad input answers 422 at its pointer, never echoing a secret, and stores nothing', async () => {
    const key = generateStripeKey('sk_test')
    const whsec = webhookSecret()
    const live = generateStripeKey('sk_live')
    secrets({ key, whsec, live })
    const cases: [unknown, [string, string][]][] = [
      [
        {},
        [
          ['invalid_value', '/provider'],
          ['invalid_type', '/secretKey'],
          ['invalid_type', '/webhookSecret'],
        ],
      ],
      [{ provider: 'adyen', secretKey: key, webhookSecret: whsec }, [['invalid_value', '/provider']]],
      [{ provider: 'stripe', secretKey: `pk_test_${key.slice(8)}`, webhookSecret: whsec }, [['invalid_format', '/secretKey']]],
      [{ provider: 'stripe', secretKey: `${key}!`, webhookSecret: whsec }, [['invalid_format', '/secretKey']]],
      [{ provider: 'stripe', secretKey: `sk_test_${'a'.repeat(600)}`, webhookSecret: whsec }, [['too_big', '/secretKey']]],
      [{ provider: 'stripe', secretKey: key, webhookSecret: key }, [['invalid_format', '/webhookSecret']]],
      [{ provider: 'stripe', secretKey: key, webhookSecret: 42 }, [['invalid_type', '/webhookSecret']]],
      [{ provider: 'stripe', secretKey: key, webhookSecret: whsec, mode: 'live' }, [['unrecognized_keys', '/mode']]],
      // The schema takes the key; the environment does not: a sandbox never takes a live key.
      [{ provider: 'stripe', secretKey: live, webhookSecret: whsec }, [['custom', '/secretKey']]],
      [{ provider: 'stripe', secretKey: generateStripeKey('rk_live'), webhookSecret: whsec }, [['custom', '/secretKey']]],
    ]
    for (const [body, expected] of cases) {
      const res = await put(sandbox, 'pp-bad', body)
      assertProblem(res, 422, 'validation_error')
      assert.deepEqual(
        res.json.errors.map((e: { code: string; pointer: string }) => [e.code, e.pointer]),
        expected,
        JSON.stringify(body).slice(0, 80),
      )
    }
    const liveInSandbox = await put(sandbox, 'pp-bad', { provider: 'stripe', secretKey: live, webhookSecret: whsec })
    assert.equal(liveInSandbox.json.errors[0].detail, 'must be a test key (sk_test_… or rk_test_…): a sandbox never takes live payments')
    assert.equal(await storedRow(sandbox.store, 'pp-bad'), undefined)
    const audit = await sandbox.admin('GET', '/admin/v1/audit-events?clientCode=pp-bad')
    assert.deepEqual(
      audit.json.data.map((e: { action: string }) => e.action),
      ['client.created'],
    )
  })

  test('production takes live keys (secret or restricted) and refuses test keys at /secretKey', async () => {
    const whsec = webhookSecret()
    const test = generateStripeKey('sk_test')
    const liveKeys = secrets({ sk: generateStripeKey('sk_live'), rk: generateStripeKey('rk_live'), whsec, test })
    for (const secretKey of [test, generateStripeKey('rk_test')]) {
      const refused = await put(production, 'pp-live', { provider: 'stripe', secretKey, webhookSecret: whsec })
      assertProblem(refused, 422, 'validation_error')
      assert.deepEqual(refused.json.errors, [
        {
          code: 'custom',
          pointer: '/secretKey',
          detail: 'must be a live key (sk_live_… or rk_live_…): production takes real payments only',
        },
      ])
    }
    assert.equal(await storedRow(production.store, 'pp-live'), undefined)
    const created = await put(production, 'pp-live', { provider: 'stripe', secretKey: liveKeys.sk, webhookSecret: whsec })
    assert.equal(created.status, 201, created.body)
    assert.deepEqual([created.json.mode, created.json.secretKeyHint], ['live', hintOf(liveKeys.sk)])
    const restricted = await put(production, 'pp-live', { provider: 'stripe', secretKey: liveKeys.rk, webhookSecret: whsec })
    assert.deepEqual([restricted.status, restricted.json.mode, restricted.json.secretKeyHint], [200, 'live', hintOf(liveKeys.rk)])
  })

  test('a sandbox reset keeps the provider (configuration, like the webhook endpoint)', async () => {
    const body = { provider: 'stripe', ...secrets({ secretKey: generateStripeKey('sk_test'), webhookSecret: webhookSecret() }) }
    assert.equal((await put(sandbox, 'pp-reset', body)).status, 201)
    const reset = await sandbox.admin('POST', '/admin/v1/clients/pp-reset/sandbox-reset', {})
    assert.equal(reset.status, 200, reset.body)
    assert.equal(reset.json.deleted.client_payment_providers, undefined)
    assert.equal((await get(sandbox, 'pp-reset')).json.secretKeyHint, hintOf(body.secretKey))
  })
})

describe(`payment provider: audit, logs, documents (${engineName})`, () => {
  test('audited with digests of the secrets, never a secret', async () => {
    const s = secrets({ secretKey: generateStripeKey('sk_test'), webhookSecret: webhookSecret() })
    await sandbox.admin('PUT', '/admin/v1/clients/pp-audit', {})
    assert.equal((await put(sandbox, 'pp-audit', { provider: 'stripe', ...s })).status, 201)
    assert.equal((await put(sandbox, 'pp-audit', { provider: 'stripe', ...s })).status, 200)
    assert.equal((await del(sandbox, 'pp-audit')).status, 204)
    const audit = (await sandbox.admin('GET', '/admin/v1/audit-events?clientCode=pp-audit')).json.data
    const details = { provider: 'stripe', mode: 'test', secretKeyHint: hintOf(s.secretKey) }
    const digests = { secretKeyDigest: sha256(s.secretKey), webhookSecretDigest: sha256(s.webhookSecret) }
    assert.deepEqual(
      audit.map((e: { action: string; targetType: string; targetId: string; details: unknown }) => [
        e.action,
        e.targetType,
        e.targetId,
        e.details,
      ]),
      [
        ['client.created', 'client', 'pp-audit', { collectionEnabled: false }],
        ['payment_provider.created', 'payment_provider', 'pp-audit', { ...details, ...digests }],
        ['payment_provider.updated', 'payment_provider', 'pp-audit', { ...details, ...digests }],
        ['payment_provider.removed', 'payment_provider', 'pp-audit', details],
      ],
    )
  })

  test('the logger redacts the secrets wherever a log line would carry them', () => {
    const lines: string[] = []
    const log = pino({ redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' } }, { write: (l: string) => lines.push(l) })
    const s = { secretKey: 'sk_live_SECRET0', webhookSecret: 'whsec_SECRET1' }
    log.info({ ...s, provider: { secretKey: 'rk_live_SECRET2', webhookSecret: 'whsec_SECRET3' }, clientCode: 'pp-a' })
    const out = lines.join('')
    for (const secret of ['SECRET0', 'SECRET1', 'SECRET2', 'SECRET3']) assert.ok(!out.includes(secret), secret)
    assert.ok(out.includes('"clientCode":"pp-a"'), out)
  })

  test('the operator OpenAPI document has the three operations, with their 404s', async () => {
    const res = await sandbox.admin('GET', '/admin/v1/openapi.json')
    assert.equal(res.status, 200, res.body.slice(0, 300))
    const doc = res.json
    const ops = doc.paths['/admin/v1/clients/{clientCode}/payment-provider']
    assert.deepEqual(Object.keys(ops).sort(), ['delete', 'get', 'put'])
    assert.deepEqual(
      [ops.put.operationId, ops.get.operationId, ops.delete.operationId],
      ['adminPutPaymentProvider', 'adminGetPaymentProvider', 'adminDeletePaymentProvider'],
    )
    assert.deepEqual(
      Object.keys(ops.put.responses).filter((s) => s < '300'),
      ['200', '201'],
    )
    assert.deepEqual(Object.keys(ops.delete.responses['404'].content['application/problem+json'].examples), [
      'client_not_found',
      'payment_provider_not_found',
    ])
    assert.deepEqual(Object.keys(doc.components.schemas.OperatorPaymentProvider.properties), [
      'provider',
      'mode',
      'secretKeyHint',
      'webhookUrl',
      'events',
      'createdAt',
      'updatedAt',
    ])
    assert.deepEqual(doc.components.schemas.OperatorPaymentProvider.properties.events.items.enum, [...STRIPE_WEBHOOK_EVENTS])
  })
})

describe(`payment provider: the key ring (${engineName})`, () => {
  let db: TestDatabase
  let t: TestApp | undefined
  const s = secrets({ secretKey: generateStripeKey('sk_test'), webhookSecret: webhookSecret() })
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => {
    await t?.close()
    await db.drop()
  })
  const restart = async (env: Record<string, string>) => {
    await t?.app.app.close()
    t = await startTestApp(env, { db })
    return t
  }
  const keyIds = async (client: string) => {
    const row = (await storedRow(db.store, client)) as Record<string, string>
    return [row.secret_key_ciphertext?.split('.')[1], row.webhook_secret_ciphertext?.split('.')[1]]
  }

  test("a new key: the operator's rewrap (never the start) moves both secrets under it, and reports what no key opens", async () => {
    let app = await restart({ WEBHOOK_SECRET_KEY: K1 })
    await app.admin('PUT', '/admin/v1/clients/pp-rot', {})
    await app.admin('PUT', '/admin/v1/clients/pp-lost', {})
    assert.equal((await put(app, 'pp-rot', { provider: 'stripe', ...s })).status, 201)
    assert.deepEqual(await keyIds('pp-rot'), [idOf(K1), idOf(K1)])

    app = await restart({ WEBHOOK_SECRET_KEY: K2, WEBHOOK_SECRET_KEY_PREVIOUS: K1 })
    // Issue 33 item 9: not at start (an instance holding only K1 may still run).
    assert.deepEqual(await keyIds('pp-rot'), [idOf(K1), idOf(K1)])
    const moved = await app.admin('POST', '/admin/v1/secrets/rewrap', {})
    assert.deepEqual([moved.status, moved.json], [200, { rewrapped: 2, undecryptable: 0 }])
    assert.deepEqual(await keyIds('pp-rot'), [idOf(K2), idOf(K2)])
    const kind = watchedStripeKind()
    const k2only = createProviderRegistry({
      store: providerConfigStore,
      keyRing: async () => ring(K2),
      environment: 'sandbox',
      kinds: [kind],
      sandboxProvider: createSandboxProvider(),
    })
    const choice = await k2only.forClient(db.store, 'pp-rot')
    assert.equal(choice.kind, 'configured')
    const stripe = kind.built.get((choice as { config: ClientProviderConfig }).config.provider)
    assert.deepEqual([stripe?.secretKey, stripe?.webhookSecret], [s.secretKey, s.webhookSecret])

    // A provider whose secrets are under a key the ring does not hold: counted, left as they are, never a crash.
    assert.equal((await put(app, 'pp-lost', { provider: 'stripe', ...s })).status, 201)
    const lost = ring(LOST)
    await db.store.query(
      'UPDATE client_payment_providers SET secret_key_ciphertext = $2, webhook_secret_ciphertext = $3 WHERE client_code = $1',
      [
        'pp-lost',
        lost.encrypt(providerSecretAad('pp-lost', 'secret_key_ciphertext'), s.secretKey),
        lost.encrypt(providerSecretAad('pp-lost', 'webhook_secret_ciphertext'), s.webhookSecret),
      ],
    )
    const rewrap = await app.admin('POST', '/admin/v1/secrets/rewrap', {})
    assert.deepEqual([rewrap.status, rewrap.json], [200, { rewrapped: 0, undecryptable: 2 }])
    assert.deepEqual(await keyIds('pp-lost'), [idOf(LOST), idOf(LOST)])
    assert.equal((await get(app, 'pp-lost')).status, 200)
    assert.deepEqual(await k2only.forClient(db.store, 'pp-lost'), { kind: 'unconfigured', reason: 'secret_unreadable' })

    // Under a previous key again (an instance not restarted yet wrote it): the operator's rewrap moves it.
    await db.store.query('UPDATE client_payment_providers SET secret_key_ciphertext = $2 WHERE client_code = $1', [
      'pp-rot',
      ring(K1).encrypt(providerSecretAad('pp-rot', 'secret_key_ciphertext'), s.secretKey),
    ])
    const again = await app.admin('POST', '/admin/v1/secrets/rewrap', {})
    assert.deepEqual(again.json, { rewrapped: 1, undecryptable: 2 })
    assert.deepEqual(await keyIds('pp-rot'), [idOf(K2), idOf(K2)])
  })
})

/**
 * Stripe's kind (STRIPE_API_BASE the stand-in, once it is started), remembering the secrets each provider it built
 * was given.
 */
function watchedStripeKind(): ProviderKind & { built: Map<PaymentProvider, ProviderSecrets> } {
  const real = () => createStripeKind({ apiBase: standIn.url })
  const built = new Map<PaymentProvider, ProviderSecrets>()
  return {
    name: 'stripe',
    checkoutOrigins: [],
    sessionLifetime: { minSeconds: 0, maxSeconds: 0 },
    built,
    forClient(secrets) {
      const provider = real().forClient(secrets)
      built.set(provider, secrets)
      return provider
    },
  }
}

describe(`the provider registry (${engineName})`, () => {
  const sandboxProvider = createSandboxProvider()
  const kind = watchedStripeKind()
  const registry = (environment: 'sandbox' | 'production') =>
    createProviderRegistry({
      store: providerConfigStore,
      keyRing: async () => ring(K1),
      environment,
      kinds: [kind],
      sandboxProvider,
    })
  const stripeOf = (c: ProviderChoice): ClientProviderConfig & ProviderSecrets => {
    assert.equal(c.kind, 'configured', JSON.stringify(c))
    const config = (c as { config: ClientProviderConfig }).config
    const secrets = kind.built.get(config.provider)
    assert.ok(secrets, 'built by the Stripe kind')
    return { ...config, ...secrets }
  }
  const checkout = (config: ClientProviderConfig) =>
    config.provider.startCheckout({
      clientCode: config.clientCode,
      externalPaymentRequestId: 'pr-7',
      attempt: 1,
      amountMinor: 1250n,
      currency: 'USD',
      description: 'Invoice 7',
      returnUrl: (id) => `http://irs.test/pay/x?back=${id}`,
      cancelUrl: 'http://irs.test/pay/x',
      expiresAt: new Date(Date.now() + 2 * 60 * 60 * 1000),
      idempotencyKey: `pr-7-${config.updatedAt}`,
    })

  test('sandbox: the sandbox provider without a configuration; with one, Stripe through a cached gateway', async () => {
    const r = registry('sandbox')
    assert.deepEqual(await r.forClient(sandbox.store, 'pp-reg'), { kind: 'sandbox', provider: sandboxProvider })
    assert.equal(((await r.forClient(sandbox.store, 'pp-reg')) as { provider: unknown }).provider, sandboxProvider)

    const s = secrets({ secretKey: generateStripeKey('sk_test'), webhookSecret: webhookSecret() })
    standIn.addKey(s.secretKey)
    const created = await put(sandbox, 'pp-reg', { provider: 'stripe', ...s })
    const first = stripeOf(await r.forClient(sandbox.store, 'pp-reg'))
    assert.deepEqual(
      [first.clientCode, first.mode, first.secretKey, first.webhookSecret, first.updatedAt, first.provider.name],
      ['pp-reg', 'test', s.secretKey, s.webhookSecret, created.json.updatedAt, 'stripe'],
    )
    // The hot path: the same configuration and provider while the row is unchanged.
    assert.equal(stripeOf(await r.forClient(sandbox.store, 'pp-reg')).provider, first.provider)

    // The gateway is built on the client's key and STRIPE_API_BASE: the stand-in sees the call under that key.
    const calls = standIn.calls.length
    const session = await checkout(first)
    assert.match(session.url, /^http/)
    assert.deepEqual(
      standIn.calls.slice(calls).map((c) => [c.method, c.path, c.status]),
      [['POST', '/v1/checkout/sessions', 200]],
    )
    // Its webhook secret verifies what Stripe signs with it, and nothing signed with another.
    const event = standIn.completeSession(session.sessionId, { outcome: 'paid' }).at(-1)
    assert.ok(event, 'the paid session produced an event')
    const signed = standIn.sign(event, s.webhookSecret)
    assert.equal(first.provider.readEvent(Buffer.from(signed.payload), { 'stripe-signature': signed.header }).id, event.id)
    const forged = standIn.sign(event, s.webhookSecret, { forged: true })
    assert.throws(() => first.provider.readEvent(Buffer.from(forged.payload), { 'stripe-signature': forged.header }), {
      name: 'ProviderSignatureError',
    })

    // A new configuration is picked up at once (a new row version), and a removed one falls back to the sandbox.
    const s2 = secrets({ secretKey: generateStripeKey('rk_test'), webhookSecret: webhookSecret() })
    assert.equal((await put(sandbox, 'pp-reg', { provider: 'stripe', ...s2 })).status, 200)
    const second = stripeOf(await r.forClient(sandbox.store, 'pp-reg'))
    assert.notEqual(second.provider, first.provider)
    assert.deepEqual([second.secretKey, second.webhookSecret], [s2.secretKey, s2.webhookSecret])
    assert.equal((await del(sandbox, 'pp-reg')).status, 204)
    assert.deepEqual(await r.forClient(sandbox.store, 'pp-reg'), { kind: 'sandbox', provider: sandboxProvider })
  })

  test('production: unconfigured without a configuration; with a live key, Stripe (against the stand-in)', async () => {
    const r = registry('production')
    assert.deepEqual(await r.forClient(production.store, 'pp-reg'), { kind: 'unconfigured', reason: 'none' })
    const s = secrets({ secretKey: generateStripeKey('sk_live'), webhookSecret: webhookSecret() })
    standIn.addKey(s.secretKey)
    assert.equal((await put(production, 'pp-reg', { provider: 'stripe', ...s })).status, 201)
    const live = stripeOf(await r.forClient(production.store, 'pp-reg'))
    assert.deepEqual([live.mode, live.secretKey], ['live', s.secretKey])
    const calls = standIn.calls.length
    await checkout(live)
    assert.deepEqual(
      standIn.calls.slice(calls).map((c) => [c.method, c.path, c.status]),
      [['POST', '/v1/checkout/sessions', 200]],
    )
  })

  test('a configuration of the other mode (a database copied between environments) is unconfigured, never used', async () => {
    const s = secrets({ secretKey: generateStripeKey('sk_test'), webhookSecret: webhookSecret() })
    await sandbox.admin('PUT', '/admin/v1/clients/pp-copied', {})
    assert.equal((await put(sandbox, 'pp-copied', { provider: 'stripe', ...s })).status, 201)
    // The sandbox's row read by a production registry.
    assert.deepEqual(await registry('production').forClient(sandbox.store, 'pp-copied'), {
      kind: 'unconfigured',
      reason: 'mode_mismatch',
    })
  })

  test('no answer of any test held a secret', () => {
    assert.ok(answers.length >= 30, `${answers.length} answers`)
    assert.ok(sentSecrets.length >= 20, `${sentSecrets.length} secrets`)
    for (const r of answers) for (const secret of sentSecrets) assert.ok(!r.body.includes(secret), `${r.status} ${r.body}`)
  })
})

describe('STRIPE_API_BASE', () => {
  test('https://api.stripe.com by default; a scheme, host and port are taken; a path, query or other scheme refused', () => {
    assert.equal(loadConfig({}).stripe.apiBase, 'https://api.stripe.com')
    assert.equal(loadConfig({ STRIPE_API_BASE: 'http://127.0.0.1:12111/' }).stripe.apiBase, 'http://127.0.0.1:12111')
    assert.equal(loadConfig({ STRIPE_API_BASE: 'https://stripe-proxy.internal:8443' }).stripe.apiBase, 'https://stripe-proxy.internal:8443')
    for (const [value, problem] of [
      ['api.stripe.com', 'is not a URL'],
      ['ftp://api.stripe.com', 'is not an http or https URL'],
      ['https://api.stripe.com/v1', 'has a path, query or credentials (only a scheme, host and port are taken)'],
      ['https://api.stripe.com/?x=1', 'has a path, query or credentials (only a scheme, host and port are taken)'],
      ['https://user:pw@api.stripe.com', 'has a path, query or credentials (only a scheme, host and port are taken)'],
    ]) {
      assert.throws(
        () => loadConfig({ STRIPE_API_BASE: value }),
        (err: unknown) => {
          assert.ok(err instanceof ConfigError, value)
          assert.deepEqual(
            err.problems.map((p) => [p.variable, p.problem]),
            [['STRIPE_API_BASE', problem]],
          )
          return true
        },
      )
    }
  })
})
