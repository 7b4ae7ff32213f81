import assert from 'node:assert/strict'
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import fc from 'fast-check'
import ts from 'typescript'
import {
  isTestReceipt,
  type MoneyReceipt,
  type Receipt,
  type ReceiptRoute,
  type ReceiptRouteWithSecret,
  verifyReceipt,
  WebhookVerificationError,
  type WebhookVerificationFailure,
} from '../../packages/sdk/src/index.ts'
import { TEST_RECEIPT_DELAY_MS } from '../../src/resources/receipts/service.ts'
import { newSigningSecret, signatureHeader } from '../../src/resources/webhooks/secrets.ts'
import { startTestApp, type TestApp } from '../helpers/app.ts'
import { payableReceivable } from '../helpers/payments.ts'
import { engineName } from '../helpers/store.ts'

/**
 * The SDK's receipt side (issue 23 item 5): verifyReceipt against headers made by the service's own signing code,
 * good and bad; then the SDK README's receiving Source, taken from the README itself: it type-checks against the
 * SDK, and, run as is with node against the built package, it receives and verifies the real dispatcher's test
 * receipt and a Payment's receipt (and answers 400 to a forged one).
 */
const T = 1_772_359_200 // 2026-03-01T10:00:00Z
const at = (seconds: number) => ({ now: seconds * 1000 })
const secret = newSigningSecret()
const usd = (amount: string) => ({ amount, currency: 'USD' })
const payment: MoneyReceipt = {
  receiptId: 'rcpt_3b6f0d0c8a2e4f5a9c1d7e2b4a6c8d0e',
  kind: 'payment',
  externalPaymentRequestId: 'pr-1',
  providerPaymentId: 'sbx_pay_1',
  occurredAt: '2026-03-01T10:00:00.000Z',
  amount: usd('40.00'),
  allocations: [{ externalReceivableId: 'rcv-1', amount: usd('40.00') }],
  unappliedAmount: usd('0.00'),
}

function failure(fn: () => unknown): WebhookVerificationFailure {
  try {
    fn()
  } catch (err) {
    assert.ok(err instanceof WebhookVerificationError, `not a WebhookVerificationError: ${err}`)
    return err.reason
  }
  assert.fail('verified')
}

describe('verifyReceipt', () => {
  test('a receipt signed by the service verifies and is returned typed; a test receipt too', () => {
    const body = JSON.stringify(payment)
    const r: Receipt = verifyReceipt(body, signatureHeader([secret], T, body), [secret], 300, at(T))
    assert.deepEqual(r, payment)
    assert.equal(isTestReceipt(r), false)
    if (!isTestReceipt(r)) assert.equal(r.amount.amount, '40.00')
    const test = { receiptId: 'rcpt_0', kind: 'test', occurredAt: '2026-03-01T10:00:00.000Z', confirmationCode: 'rcc_x' }
    const tb = JSON.stringify(test)
    const t = verifyReceipt(new TextEncoder().encode(tb), signatureHeader([secret], T, tb), [secret], 300, at(T))
    assert.ok(isTestReceipt(t))
    assert.equal(t.confirmationCode, 'rcc_x')
    // Node's header type (string | string[]): one value in an array is that header.
    assert.deepEqual(verifyReceipt(body, [signatureHeader([secret], T, body)], [secret], 300, at(T)), payment)
  })

  test('refused: another secret, a changed byte, an old or future t, no header, a body that is not a receipt', () => {
    const body = JSON.stringify(payment)
    const header = signatureHeader([secret], T, body)
    assert.equal(
      failure(() => verifyReceipt(body, header, [newSigningSecret()], 300, at(T))),
      'signature_mismatch',
    )
    assert.equal(
      failure(() => verifyReceipt(body.replace('40.00', '41.00'), header, [secret], 300, at(T))),
      'signature_mismatch',
    )
    assert.equal(
      failure(() => verifyReceipt(body, header, [secret], 300, at(T + 301))),
      'timestamp_outside_tolerance',
    )
    assert.equal(
      failure(() => verifyReceipt(body, header, [secret], 300, at(T - 301))),
      'timestamp_outside_tolerance',
    )
    assert.equal(
      failure(() => verifyReceipt(body, undefined, [secret], 300, at(T))),
      'missing_header',
    )
    assert.equal(
      failure(() => verifyReceipt(body, [], [secret], 300, at(T))),
      'missing_header',
    )
    // Validly signed JSON that is not a receipt: malformed_body.
    for (const other of [
      { clientCode: 'demo', eventId: 'e', type: 'receivable.updated' },
      { ...payment, kind: 'chargeback' },
      { ...payment, receiptId: 7 },
      { ...payment, amount: undefined },
      { ...payment, allocations: 'none' },
      { receiptId: 'rcpt_0', kind: 'test', occurredAt: '2026-03-01T10:00:00.000Z' },
      [payment],
      null,
      'rcpt',
    ]) {
      const b = JSON.stringify(other)
      assert.equal(
        failure(() => verifyReceipt(b, signatureHeader([secret], T, b), [secret], 300, at(T))),
        'malformed_body',
        b,
      )
    }
    assert.throws(() => verifyReceipt(body, header, [], 300, at(T)), {
      name: 'TypeError',
      message: 'verifyReceipt: secrets must be a non-empty array of signing secrets',
    })
    assert.throws(() => verifyReceipt(body, header, ['whsec_x'], -1, at(T)), {
      name: 'TypeError',
      message: 'verifyReceipt: toleranceSeconds must be a non-negative number',
    })
  })

  test('property: any receipt round-trips; any one byte changed is refused', () => {
    const money = fc.record(
      {
        amount: fc.bigInt({ min: 0n, max: 10n ** 12n }).map((m) => `${m / 100n}.${String(m % 100n).padStart(2, '0')}`),
        currency: fc.constantFrom('USD', 'EUR', 'JPY'),
      },
      { noNullPrototype: true },
    )
    const receipt = fc.record(
      {
        receiptId: fc.string({ minLength: 1 }),
        kind: fc.constantFrom('payment' as const, 'refund' as const, 'reversal' as const),
        externalPaymentRequestId: fc.string({ minLength: 1 }),
        providerPaymentId: fc.string(),
        occurredAt: fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
        amount: money,
        allocations: fc.array(fc.record({ externalReceivableId: fc.string({ minLength: 1 }), amount: money }, { noNullPrototype: true }), {
          maxLength: 3,
        }),
        unappliedAmount: money,
      },
      { noNullPrototype: true },
    )
    fc.assert(
      fc.property(receipt, fc.nat(), (r, at_) => {
        const body = JSON.stringify(r)
        const header = signatureHeader([secret], T, body)
        assert.deepEqual(verifyReceipt(body, header, [secret], 300, at(T)), r)
        const bytes = Buffer.from(body, 'utf8')
        const i = at_ % bytes.length
        bytes[i] = (bytes[i] as number) ^ 0x01
        assert.equal(
          failure(() => verifyReceipt(bytes, header, [secret], 300, at(T))),
          'signature_mismatch',
        )
      }),
      { numRuns: 200 },
    )
  })
})

// The README's receiving Source.
const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
function receiptExample(): string {
  const readme = readFileSync(join(root, 'packages/sdk/README.md'), 'utf8')
  const section = readme.split('\n## ').find((s) => s.startsWith('Receipts'))
  assert.ok(section, 'README has a "Receipts" section')
  const match = /```ts\n([\s\S]*?)```/.exec(section)
  assert.ok(match, 'the section has a ts code block')
  return match[1] as string
}

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok))
  const { port } = server.address() as { port: number }
  await new Promise((ok) => server.close(ok))
  return port
}

let app: TestApp
let child: ChildProcess | undefined
before(async () => {
  app = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1' })
})
after(async () => {
  child?.kill('SIGKILL')
  await app.close()
})

describe(`SDK README: a Source receiving receipts (${engineName})`, () => {
  test('it type-checks against the SDK (strict); a misspelt field fails', () => {
    const code = receiptExample()
    assert.ok(code.split('\n').filter((l) => l.trim() !== '').length <= 16, 'a few lines')
    const dir = mkdtempSync(join(tmpdir(), 'irs-sdk-receipts-'))
    try {
      const file = join(dir, 'source.mts')
      writeFileSync(file, code)
      const options: ts.CompilerOptions = {
        strict: true,
        noEmit: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        allowImportingTsExtensions: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(root, 'node_modules/@types')],
        baseUrl: root,
        paths: { '@inbound-receivables/sdk': ['packages/sdk/src/index.ts'] },
      }
      const diagnostics = ts
        .getPreEmitDiagnostics(ts.createProgram([file], options))
        .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
      assert.deepEqual(diagnostics, [])
      writeFileSync(file, code.replace('receipt.confirmationCode', 'receipt.confirmationCod'))
      assert.equal(ts.getPreEmitDiagnostics(ts.createProgram([file], options)).length, 1)
      // A money receipt has no confirmation code: the narrowing is real.
      writeFileSync(file, code.replace('receipt.amount.amount', 'receipt.confirmationCode'))
      assert.equal(ts.getPreEmitDiagnostics(ts.createProgram([file], options)).length, 1)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('run as is: it prints the test receipt code, which verifies the route, then the Payment receipt; 400 to a forgery', async () => {
    const build = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'packages/sdk', '--noCheck'], {
      cwd: root,
      encoding: 'utf8',
    })
    assert.equal(build.status, 0, build.stdout + build.stderr)
    const tn = await app.tenant('sdk-rcpt', { grant: { receiptDeliveryOwner: 'service' } })
    const port = await freePort()
    const put = await app.call('PUT', '/v1/clients/sdk-rcpt/receipt-route', {
      key: tn.apiKey,
      body: { url: `http://127.0.0.1:${port}/receipts` },
    })
    assert.equal(put.status, 201, put.body)
    const route: ReceiptRouteWithSecret = put.json
    let out = ''
    let err = ''
    child = spawn(process.execPath, ['--input-type=module', '-e', receiptExample()], {
      cwd: root,
      env: { ...process.env, PORT: String(port), RECEIPT_SECRET: route.signingSecret },
    })
    child.stdout?.on('data', (d) => {
      out += d
    })
    child.stderr?.on('data', (d) => {
      err += d
    })
    // Listening: a forged receipt answers 400 and prints nothing.
    const forged = JSON.stringify(payment)
    let status = 0
    for (let i = 0; i < 200 && status === 0; i++) {
      status = await fetch(`http://127.0.0.1:${port}/receipts`, {
        method: 'POST',
        body: forged,
        headers: { 'service-signature': signatureHeader([newSigningSecret()], Math.floor(Date.now() / 1000), forged) },
      }).then(
        (r) => r.status,
        async () => {
          await new Promise((ok) => setTimeout(ok, 50))
          return 0
        },
      )
    }
    assert.equal(status, 400, err)
    assert.equal(out, '')

    // The child's stdout arrives through a pipe, possibly after its 204: wait for the line (bounded).
    const lines = async (n: number) => {
      for (let i = 0; i < 400 && out.split('\n').length <= n; i++) await new Promise((ok) => setTimeout(ok, 25))
    }
    // The test receipt is due a second after the PUT's commit (docs/decisions.md, "Receipt route confirmation codes").
    await new Promise((ok) => setTimeout(ok, TEST_RECEIPT_DELAY_MS))
    await app.app.receiptDispatcher.runOnce()
    await lines(1)
    const code = /^confirmationCode (rcc_\S+)\n$/.exec(out)?.[1]
    assert.ok(code, `${out} ${err}`)
    const confirm = await app.call('POST', '/v1/clients/sdk-rcpt/receipt-route/confirm', {
      key: tn.apiKey,
      body: { confirmationCode: code },
    })
    assert.equal(confirm.status, 200, confirm.body)
    const verified: ReceiptRoute = confirm.json
    assert.equal(verified.state, 'verified')

    const receivable = await payableReceivable(app, tn, 'rcv-sdk')
    const pr = await app.call('PUT', '/v1/clients/sdk-rcpt/payment-requests/pr-sdk', {
      key: tn.apiKey,
      body: { externalReceivableId: receivable, amount: usd('25.50') },
    })
    assert.equal(pr.status, 201, pr.body)
    assert.equal(
      (await app.admin('POST', '/admin/v1/clients/sdk-rcpt/payment-requests/pr-sdk/simulate', { outcome: 'confirmed' })).status,
      201,
    )
    await app.app.receiptDispatcher.runOnce()
    const d = await app.call('GET', '/v1/clients/sdk-rcpt/payment-requests/pr-sdk/receipt-delivery', { key: tn.apiKey })
    const attempt = d.json.deliveryAttempts[0]
    await lines(2)
    assert.deepEqual([attempt?.kind, attempt?.outcome, attempt?.httpStatus], ['payment', 'delivered', 204])
    assert.equal(out, `confirmationCode ${code}\n${attempt.receiptId} payment 25.50 USD\n`)
    assert.equal(err, '')
  })
})
