import assert from 'node:assert/strict'
import { createHmac } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { createClient, verifyWebhook, WebhookVerificationError, type WebhookVerificationFailure } from '../../packages/sdk/src/index.ts'
import { newSigningSecret, signatureHeader } from '../../src/resources/webhooks/secrets.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { engineName } from '../helpers/store.ts'
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * verifyWebhook against the specification's rules, with headers made by the service's own signing code (the
 * function the dispatcher calls), then end to end: notifications the real dispatcher delivered, before and during
 * a secret rotation made through the SDK.
 */
const body = JSON.stringify({
  clientCode: 'demo',
  eventId: '0b7c2d4e-5f60-4a1b-8c9d-0e1f2a3b4c5d',
  type: 'receivable.updated',
  resource: { type: 'receivable', id: 'rcv-demo-1' },
  revision: 4,
  occurredAt: '2026-03-01T10:00:00.123Z',
})
const T = 1_772_359_200 // 2026-03-01T10:00:00Z
const at = (seconds: number) => ({ now: seconds * 1000 })
const oldSecret = newSigningSecret()
const newSecret = newSigningSecret()

function failure(fn: () => unknown): WebhookVerificationFailure {
  try {
    fn()
  } catch (err) {
    assert.ok(err instanceof WebhookVerificationError, `not a WebhookVerificationError: ${err}`)
    return err.reason
  }
  assert.fail('verified')
}

describe('verifyWebhook', () => {
  test('a notification signed by the service verifies and is returned parsed', () => {
    const header = signatureHeader([newSecret], T, body)
    assert.match(header, /^t=\d+,v1=[0-9a-f]{64}$/)
    assert.deepEqual(verifyWebhook(body, header, [newSecret], 300, at(T)), JSON.parse(body))
    // The same bytes as a Uint8Array (a raw body buffer) verify too.
    assert.deepEqual(verifyWebhook(new TextEncoder().encode(body), header, [newSecret], 300, at(T)), JSON.parse(body))
    // The independent computation of the spec's rule: hex HMAC-SHA256 over "<t>.<raw body>" keyed with the whole secret.
    const v1 = createHmac('sha256', newSecret).update(`${T}.${body}`).digest('hex')
    assert.equal(header, `t=${T},v1=${v1}`)
    assert.deepEqual(verifyWebhook(body, `t=${T},v1=${v1}`, [newSecret], 300, at(T)).eventId, '0b7c2d4e-5f60-4a1b-8c9d-0e1f2a3b4c5d')
  })

  test('timestamp tolerance: 300 s either way is accepted, 301 s is refused, even with a valid signature', () => {
    const header = signatureHeader([newSecret], T, body)
    assert.ok(verifyWebhook(body, header, [newSecret], 300, at(T + 300)))
    assert.ok(verifyWebhook(body, header, [newSecret], 300, at(T - 300)))
    assert.equal(
      failure(() => verifyWebhook(body, header, [newSecret], 300, at(T + 301))),
      'timestamp_outside_tolerance',
    )
    assert.equal(
      failure(() => verifyWebhook(body, header, [newSecret], 300, at(T - 301))),
      'timestamp_outside_tolerance',
    )
    // The default tolerance is the spec's 5 minutes; a Date works as the clock.
    assert.ok(verifyWebhook(body, header, [newSecret], undefined, { now: new Date((T + 299) * 1000) }))
    assert.equal(
      failure(() => verifyWebhook(body, header, [newSecret], undefined, { now: new Date((T + 400) * 1000) })),
      'timestamp_outside_tolerance',
    )
    // A custom tolerance.
    assert.equal(
      failure(() => verifyWebhook(body, header, [newSecret], 10, at(T + 11))),
      'timestamp_outside_tolerance',
    )
    assert.ok(verifyWebhook(body, header, [newSecret], 0, at(T)))
    // Without a clock option: the real clock, so an old header is refused.
    assert.equal(
      failure(() => verifyWebhook(body, header, [newSecret])),
      'timestamp_outside_tolerance',
    )
    const fresh = Math.floor(Date.now() / 1000)
    assert.ok(verifyWebhook(body, signatureHeader([newSecret], fresh, body), [newSecret]))
  })

  test('a tampered body, timestamp or signature is refused', () => {
    const header = signatureHeader([newSecret], T, body)
    assert.equal(
      failure(() => verifyWebhook(`${body} `, header, [newSecret], 300, at(T))),
      'signature_mismatch',
    )
    assert.equal(
      failure(() => verifyWebhook(body.replace('"revision":4', '"revision":5'), header, [newSecret], 300, at(T))),
      'signature_mismatch',
    )
    assert.equal(
      failure(() => verifyWebhook(body, header.replace(`t=${T}`, `t=${T + 1}`), [newSecret], 300, at(T))),
      'signature_mismatch',
    )
    const v1 = header.split('v1=')[1]!
    const flipped = `${v1.slice(0, -1)}${v1.endsWith('0') ? '1' : '0'}`
    assert.equal(
      failure(() => verifyWebhook(body, `t=${T},v1=${flipped}`, [newSecret], 300, at(T))),
      'signature_mismatch',
    )
    // Upper-case hex, a truncated or an over-long value: never equal.
    assert.equal(
      failure(() => verifyWebhook(body, `t=${T},v1=${v1.toUpperCase()}`, [newSecret], 300, at(T))),
      'signature_mismatch',
    )
    assert.equal(
      failure(() => verifyWebhook(body, `t=${T},v1=${v1.slice(0, 63)}`, [newSecret], 300, at(T))),
      'signature_mismatch',
    )
    assert.equal(
      failure(() => verifyWebhook(body, `t=${T},v1=${v1}00`, [newSecret], 300, at(T))),
      'signature_mismatch',
    )
    // The wrong secret; a signature made with a secret's suffix only (the whole string is the key).
    assert.equal(
      failure(() => verifyWebhook(body, header, [oldSecret], 300, at(T))),
      'signature_mismatch',
    )
    const suffixOnly = createHmac('sha256', newSecret.slice('whsec_'.length)).update(`${T}.${body}`).digest('hex')
    assert.equal(
      failure(() => verifyWebhook(body, `t=${T},v1=${suffixOnly}`, [newSecret], 300, at(T))),
      'signature_mismatch',
    )
    // The old scheme name is not accepted in place of v1.
    assert.equal(
      failure(() => verifyWebhook(body, `t=${T},v0=${v1}`, [newSecret], 300, at(T))),
      'no_signature',
    )
  })

  test('several v1 values: any one matching is enough, in any position', () => {
    const good = createHmac('sha256', newSecret).update(`${T}.${body}`).digest('hex')
    const other = createHmac('sha256', oldSecret).update(`${T}.${body}`).digest('hex')
    for (const header of [
      `t=${T},v1=${'0'.repeat(64)},v1=${good}`,
      `t=${T},v1=${good},v1=${'0'.repeat(64)}`,
      `t=${T},v1=${other},v1=garbage,v1=${good}`,
      `v1=${good},t=${T}`,
      ` t=${T} , v1=${good} `,
      `t=${T},v0=abc,v1=${good},x=1`,
    ]) {
      assert.ok(verifyWebhook(body, header, [newSecret], 300, at(T)), header)
    }
    assert.equal(
      failure(() => verifyWebhook(body, `t=${T},v1=${'0'.repeat(64)},v1=${other}`, [newSecret], 300, at(T))),
      'signature_mismatch',
    )
  })

  test('rotation: a header with both secrets verifies with either; several receiver secrets match any v1', () => {
    // The dispatcher's header during the 24 h overlap: the new secret's v1 first, then the previous one's.
    const both = signatureHeader([newSecret, oldSecret], T, body)
    assert.equal(both.split(',').length, 3)
    assert.ok(verifyWebhook(body, both, [oldSecret], 300, at(T)))
    assert.ok(verifyWebhook(body, both, [newSecret], 300, at(T)))
    assert.ok(verifyWebhook(body, both, [oldSecret, newSecret], 300, at(T)))
    // After the overlap the header has the new secret only: a receiver holding both secrets still verifies.
    const onlyNew = signatureHeader([newSecret], T, body)
    assert.ok(verifyWebhook(body, onlyNew, [oldSecret, newSecret], 300, at(T)))
    assert.equal(
      failure(() => verifyWebhook(body, onlyNew, [oldSecret], 300, at(T))),
      'signature_mismatch',
    )
    const third = newSigningSecret()
    assert.equal(
      failure(() => verifyWebhook(body, both, [third], 300, at(T))),
      'signature_mismatch',
    )
  })

  test('malformed and missing headers', () => {
    const v1 = createHmac('sha256', newSecret).update(`${T}.${body}`).digest('hex')
    const cases: [string | null | undefined, WebhookVerificationFailure][] = [
      [undefined, 'missing_header'],
      [null, 'missing_header'],
      ['', 'missing_header'],
      ['   ', 'missing_header'],
      [`v1=${v1}`, 'malformed_header'],
      [`t=${T}`, 'no_signature'],
      [`t=,v1=${v1}`, 'malformed_header'],
      [`t=abc,v1=${v1}`, 'malformed_header'],
      [`t=-5,v1=${v1}`, 'malformed_header'],
      [`t=1.5,v1=${v1}`, 'malformed_header'],
      [`t=${T},t=${T},v1=${v1}`, 'malformed_header'],
      [`t=${T};v1=${v1}`, 'malformed_header'],
      [`t=${T},,v1=${v1}`, 'malformed_header'],
      ['garbage', 'malformed_header'],
      [`=x,t=${T},v1=${v1}`, 'malformed_header'],
    ]
    for (const [header, reason] of cases) {
      assert.equal(
        failure(() => verifyWebhook(body, header, [newSecret], 300, at(T))),
        reason,
        String(header),
      )
    }
  })

  test('misuse is a TypeError: no secrets, an empty secret, a negative tolerance, a parsed body', () => {
    const header = signatureHeader([newSecret], T, body)
    assert.throws(() => verifyWebhook(body, header, [], 300, at(T)), TypeError)
    assert.throws(() => verifyWebhook(body, header, [''], 300, at(T)), TypeError)
    assert.throws(() => verifyWebhook(body, header, [newSecret], -1, at(T)), TypeError)
    assert.throws(() => verifyWebhook(body, header, [newSecret], Number.NaN, at(T)), TypeError)
    assert.throws(() => verifyWebhook(JSON.parse(body), header, [newSecret], 300, at(T)), TypeError)
  })

  test('a signed body that is not JSON is refused after verification', () => {
    const header = signatureHeader([newSecret], T, 'not json')
    assert.equal(
      failure(() => verifyWebhook('not json', header, [newSecret], 300, at(T))),
      'malformed_body',
    )
  })
})

describe(`verifyWebhook on notifications the dispatcher delivered (${engineName})`, () => {
  let t: TestApp
  let rx: Receiver
  let base: string
  before(async () => {
    t = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1' })
    base = await t.app.app.listen({ host: '127.0.0.1', port: 0 })
    rx = await startReceiver()
  })
  after(async () => {
    await t.app.webhookDispatcher.stop()
    await rx.close()
    await t.close()
  })

  test('configured and rotated through the SDK; each delivery verifies with the right secrets only', async () => {
    const tenant = await t.tenant('sdk-wh')
    const irs = createClient({ baseUrl: base, apiKey: tenant.apiKey, clientCode: tenant.clientCode })
    const endpoint = await irs.PUT('/v1/clients/{clientCode}/webhook-endpoint', { body: { url: `${rx.url}/sdk-wh` } })
    const first = 'signingSecret' in endpoint ? endpoint.signingSecret : undefined
    assert.match(first ?? '', /^whsec_/)
    const putCustomer = (id: string) =>
      irs.PUT('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
        params: { path: { externalCustomerId: id } },
        body: { type: 'person', name: { firstName: 'Ada', lastName: 'L' }, sourceReference: `wh/${id}` },
      })

    await putCustomer('wh-1')
    await t.app.webhookDispatcher.runOnce()
    assert.equal(rx.received.length, 1)
    const one = rx.received[0]!
    const n1 = verifyWebhook(one.rawBody, one.headers['service-signature'] as string, [first!])
    assert.deepEqual(
      [n1.clientCode, n1.type, n1.resource, n1.revision],
      ['sdk-wh', 'customer.created', { type: 'customer', id: 'wh-1' }, 1],
    )
    assert.equal(n1.eventId, one.headers['service-event-id'])
    assert.equal(
      failure(() => verifyWebhook(one.rawBody, one.headers['service-signature'] as string, [newSigningSecret()])),
      'signature_mismatch',
    )
    assert.equal(
      failure(() => verifyWebhook(`${one.rawBody}\n`, one.headers['service-signature'] as string, [first!])),
      'signature_mismatch',
    )

    const rotated = await irs.POST('/v1/clients/{clientCode}/webhook-endpoint/rotate-secret')
    const second = rotated.signingSecret
    assert.match(second ?? '', /^whsec_/)
    assert.notEqual(second, first)
    await putCustomer('wh-2')
    await t.app.webhookDispatcher.runOnce()
    assert.equal(rx.received.length, 2)
    const two = rx.received[1]!
    const header = two.headers['service-signature'] as string
    assert.match(header, /^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/)
    // During the overlap: the old secret, the new one, or both verify.
    for (const secrets of [[first!], [second!], [first!, second!], [second!, first!]]) {
      assert.equal(verifyWebhook(two.rawBody, header, secrets).resource.id, 'wh-2')
    }
    assert.equal(
      failure(() => verifyWebhook(two.rawBody, header, [newSigningSecret()])),
      'signature_mismatch',
    )
    // Replayed six minutes later: refused by the tolerance, whatever the secrets.
    const t0 = Number(/^t=(\d+)/.exec(header)![1])
    assert.equal(
      failure(() => verifyWebhook(two.rawBody, header, [second!], 300, { now: (t0 + 360) * 1000 })),
      'timestamp_outside_tolerance',
    )
  })
})
