import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { TEST_RECEIPT_DELAY_MS } from '../../../src/resources/receipts/service.ts'
import { ADMIN_TOKEN, startTestApp, type Tenant, type TestApp } from '../../helpers/app.ts'
import { payableReceivable } from '../../helpers/payments.ts'
import { engineName } from '../../helpers/store.ts'
import { type Received, type Receiver, startReceiver } from '../../helpers/webhook-receiver.ts'

/**
 * The operator's view of receipt delivery (issue 23 item 5): `GET /admin/v1/clients/{clientCode}/receipt-route`
 * through every state of a route (none, unverified with its test receipt due, verified with a backlog and failed
 * attempts, disabled by a revoked grant), and `inbound receipts show` printing it, against the real app on a
 * loopback receiver. The dispatcher's runs are driven one at a time; its clock is moved to reach a retry.
 */
let offsetMs = 0
const clock = { now: () => new Date(Date.now() + offsetMs) }
const usd = (amount: string) => ({ amount, currency: 'USD' })
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

let t: TestApp
let rx: Receiver
let base: string
before(async () => {
  t = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1' }, { clock })
  rx = await startReceiver()
  base = await t.app.app.listen({ host: '127.0.0.1', port: 0 })
})
after(async () => {
  await rx.close()
  await t.close()
})

const run = () => t.app.receiptDispatcher.runOnce()
const view = (client: string) => t.admin('GET', `/admin/v1/clients/${client}/receipt-route`)

async function confirmedPayment(tn: Tenant, requestId: string, amount: string) {
  const receivable = await payableReceivable(t, tn, `rcv-${requestId}`)
  const pr = await t.call('PUT', `/v1/clients/${tn.clientCode}/payment-requests/${requestId}`, {
    key: tn.apiKey,
    body: { externalReceivableId: receivable, amount: usd(amount) },
  })
  assert.equal(pr.status, 201, pr.body)
  const sim = await t.admin('POST', `/admin/v1/clients/${tn.clientCode}/payment-requests/${requestId}/simulate`, { outcome: 'confirmed' })
  assert.equal(sim.status, 201, sim.body)
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/inbound.ts', ...args], {
      env: { ...process.env, INBOUND_URL: base, ADMIN_TOKEN },
    })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

describe(`the operator's view of receipt routes (${engineName})`, () => {
  test('404s: no such client, no route; the operator token is required', async () => {
    const none = await view('rco-nobody')
    assert.equal(none.status, 404, none.body)
    assert.equal(none.json.type, 'https://docs.irs.test/problems/client_not_found')
    await t.tenant('rco-noroute', { grant: { receiptDeliveryOwner: 'service' } })
    const noRoute = await view('rco-noroute')
    assert.equal(noRoute.status, 404, noRoute.body)
    assert.equal(noRoute.json.type, 'https://docs.irs.test/problems/receipt_route_not_found')
    const anonymous = await t.call('GET', '/admin/v1/clients/rco-noroute/receipt-route', { key: null })
    assert.equal(anonymous.status, 401, anonymous.body)
    const tn = await t.tenant('rco-apikey', { grant: { receiptDeliveryOwner: 'service' } })
    const withApiKey = await t.call('GET', '/admin/v1/clients/rco-apikey/receipt-route', { key: tn.apiKey })
    assert.equal(withApiKey.status, 401, withApiKey.body)
  })

  test('every state: unverified with its test receipt due; verified with a backlog and a failure; disabled; never the secret', async () => {
    const tn = await t.tenant('rco-life', { grant: { receiptDeliveryOwner: 'service' } })
    const put = await t.call('PUT', '/v1/clients/rco-life/receipt-route', { key: tn.apiKey, body: { url: `${rx.url}/rco-life` } })
    assert.equal(put.status, 201, put.body)
    const secret = put.json.signingSecret as string

    const unverified = await view('rco-life')
    assert.equal(unverified.status, 200, unverified.body)
    assert.deepEqual(unverified.json, {
      clientCode: 'rco-life',
      url: `${rx.url}/rco-life`,
      state: 'unverified',
      integrationId: tn.integrationId,
      version: 1,
      grant: { status: 'active', receiptDeliveryOwner: 'service' },
      capability: {
        state: 'disabled',
        disabledReason: 'no_verified_route',
        unverifiedRoutes: [{ route: 'vendor_receipt_posting', missingProof: 'source_posting_confirmation' }],
      },
      receipts: {
        // The test receipt is due a second after the PUT's commit.
        pending: 1,
        due: 0,
        delivered: 0,
        abandoned: 0,
        oldestPendingAt: unverified.json.receipts.oldestPendingAt,
        unscannedFeedEvents: 0,
      },
      recentAttempts: [],
      createdAt: unverified.json.createdAt,
      updatedAt: unverified.json.createdAt,
    })
    assert.match(unverified.json.receipts.oldestPendingAt, ISO)
    assert.ok(!unverified.body.includes(secret) && !unverified.body.includes('whsec_') && !unverified.body.includes('ciphertext'))

    offsetMs += TEST_RECEIPT_DELAY_MS
    await run()
    const testReceipt = rx.received.filter((r) => r.path === '/hooks/rco-life')[0] as Received
    const confirm = await t.call('POST', '/v1/clients/rco-life/receipt-route/confirm', {
      key: tn.apiKey,
      body: { confirmationCode: testReceipt.json.confirmationCode },
    })
    assert.equal(confirm.status, 200, confirm.body)

    // A backlog: three Payments confirmed, not yet looked at; then one of them refused by the Source (503).
    await confirmedPayment(tn, 'pr-a', '10.00')
    await confirmedPayment(tn, 'pr-b', '20.00')
    await confirmedPayment(tn, 'pr-c', '30.00')
    const backlog = (await view('rco-life')).json
    assert.equal(backlog.state, 'verified')
    assert.match(backlog.verifiedAt, ISO)
    assert.deepEqual(backlog.capability, { state: 'enabled', disabledReason: null, unverifiedRoutes: [] })
    // Each confirmation commits more than one feed event (the Payment request's, the Receivable's): at least three.
    assert.ok(backlog.receipts.unscannedFeedEvents >= 3, JSON.stringify(backlog.receipts))
    assert.deepEqual(
      { ...backlog.receipts, unscannedFeedEvents: 0, oldestPendingAt: null },
      { pending: 0, due: 0, delivered: 1, abandoned: 0, oldestPendingAt: null, unscannedFeedEvents: 0 },
    )
    assert.deepEqual(
      backlog.recentAttempts.map((a: { kind: string; outcome: string; httpStatus: number }) => [a.kind, a.outcome, a.httpStatus]),
      [['test', 'delivered', 204]],
    )

    rx.behave((r) => (r.path === '/hooks/rco-life' && r.json?.externalPaymentRequestId === 'pr-b' ? { status: 503 } : { status: 204 }))
    await run()
    const after = (await view('rco-life')).json
    assert.deepEqual(
      { ...after.receipts, oldestPendingAt: typeof after.receipts.oldestPendingAt },
      { pending: 1, due: 0, delivered: 3, abandoned: 0, oldestPendingAt: 'string', unscannedFeedEvents: 0 },
    )
    const failed = after.recentAttempts.find((a: { externalPaymentRequestId: string }) => a.externalPaymentRequestId === 'pr-b')
    assert.deepEqual(
      { ...failed, receiptId: typeof failed.receiptId, attemptedAt: typeof failed.attemptedAt },
      {
        receiptId: 'string',
        kind: 'payment',
        externalPaymentRequestId: 'pr-b',
        attempt: 1,
        outcome: 'failed',
        httpStatus: 503,
        errorClass: 'http_status',
        attemptedAt: 'string',
        nextAttemptAt: new Date(Date.parse(failed.attemptedAt) + 60_000).toISOString(),
      },
    )
    assert.equal(after.recentAttempts.length, 4)
    // Newest first.
    const times = after.recentAttempts.map((a: { attemptedAt: string }) => a.attemptedAt)
    assert.deepEqual(times, [...times].sort().reverse())
    // Due once its retry time has come.
    offsetMs += 61_000
    assert.deepEqual(
      { ...(await view('rco-life')).json.receipts, oldestPendingAt: null },
      {
        pending: 1,
        due: 1,
        delivered: 3,
        abandoned: 0,
        oldestPendingAt: null,
        unscannedFeedEvents: 0,
      },
    )

    // The CLI prints it.
    const shown = await cli(['receipts', 'show', 'rco-life'])
    assert.equal(shown.code, 0, shown.stderr)
    const lines = shown.stdout.split('\n')
    assert.ok(lines.includes('unscannedFeedEvents  0'), shown.stdout)
    for (const line of [
      `clientCode rco-life`,
      `state verified`,
      `integrationId ${tn.integrationId}`,
      'grant active, receiptDeliveryOwner service',
      'capability enabled',
      'pending 1',
      'due 1',
      'delivered 3',
      'abandoned 0',
      'latest attempts',
    ]) {
      assert.ok(
        lines.some((l) => l.replace(/^(\S+) {2,}/, '$1 ') === line),
        `${line}\n---\n${shown.stdout}`,
      )
    }
    const header = lines.indexOf('latest attempts') + 1
    assert.match(
      lines[header] as string,
      /^attemptedAt\s+kind\s+receiptId\s+paymentRequest\s+attempt\s+outcome\s+httpStatus\s+errorClass\s+nextAttemptAt$/,
    )
    assert.equal(lines.filter((l) => /\bpr-b\s+1\s+failed\s+503\s+http_status\s+\d{4}-/.test(l)).length, 1, shown.stdout)
    assert.equal(lines.filter((l) => /\btest\s+rcpt_\w+\s+-\s+1\s+delivered\s+204\s+-\s+-$/.test(l)).length, 1, shown.stdout)
    assert.ok(!shown.stdout.includes(secret))
    const json = await cli(['receipts', 'show', 'rco-life', '--json'])
    assert.equal(json.code, 0, json.stderr)
    assert.deepEqual(JSON.parse(json.stdout), (await view('rco-life')).json)
    const missing = await cli(['receipts', 'show', 'rco-noroute'])
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /^error: Receipt route not found \(404\)/)
    const usage = await cli(['receipts', 'show'])
    assert.equal(usage.code, 2)
    assert.match(usage.stderr, /missing clientCode/)

    // The grant revoked: the route disabled, and the view says why.
    const revoke = await t.admin('POST', `/admin/v1/integrations/${tn.integrationId}/grants/rco-life/revoke`, {})
    assert.equal(revoke.status, 200, revoke.body)
    const disabled = (await view('rco-life')).json
    assert.equal(disabled.state, 'disabled')
    assert.equal(disabled.disabledReason, 'grant_revoked')
    assert.deepEqual(disabled.grant, { status: 'revoked', receiptDeliveryOwner: 'service' })
    assert.deepEqual(disabled.capability, { state: 'disabled', disabledReason: 'grant_revoked', unverifiedRoutes: [] })
    rx.behave(() => ({ status: 204 }))
  })

  test('owner partner: the capability says so; the test receipt still proves the route', async () => {
    const tn = await t.tenant('rco-partner', { grant: { receiptDeliveryOwner: 'partner' } })
    assert.equal(
      (await t.call('PUT', '/v1/clients/rco-partner/receipt-route', { key: tn.apiKey, body: { url: `${rx.url}/rco-partner` } })).status,
      201,
    )
    offsetMs += TEST_RECEIPT_DELAY_MS
    await run()
    const v = (await view('rco-partner')).json
    assert.deepEqual(v.grant, { status: 'active', receiptDeliveryOwner: 'partner' })
    assert.deepEqual(v.capability, { state: 'disabled', disabledReason: 'delivery_owner_partner', unverifiedRoutes: [] })
    assert.deepEqual(
      { ...v.receipts, oldestPendingAt: null },
      { pending: 0, due: 0, delivered: 1, abandoned: 0, oldestPendingAt: null, unscannedFeedEvents: 0 },
    )
  })
})
