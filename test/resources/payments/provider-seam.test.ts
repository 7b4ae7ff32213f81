import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import fc from 'fast-check'
import { createKeyRing } from '../../../src/domain/key-ring.ts'
import type { PaymentProvider, ProviderKind, RefundRequest } from '../../../src/resources/payments/provider.ts'
import { type ProviderSecretsRow, providerSecretAad } from '../../../src/resources/payments/provider-config-store.ts'
import { createProviderRegistry, refundsThroughProviders } from '../../../src/resources/payments/registry.ts'
import { createSandboxProvider, SANDBOX_FAILING_REFUND_CENTS } from '../../../src/resources/payments/sandbox/provider.ts'

/**
 * The one payment-provider seam (docs/design/payment-provider-seam.md): the sandbox provider implements the whole
 * `PaymentProvider` interface, the registry builds a client's provider by the kind its configuration names, and a
 * Payment's refund goes to the provider named on it, through the one interface, never to a fallback.
 */
const sandbox = createSandboxProvider()

const refundOf = (over: Partial<RefundRequest> = {}): RefundRequest => ({
  clientCode: 'seam-a',
  reason: 'requested_by_customer',
  externalPaymentRequestId: 'pr-1',
  externalRefundId: 'rf-1',
  provider: 'sandbox',
  providerPaymentId: 'sbx_1',
  amountMinor: 1000n,
  currency: 'USD',
  idempotencyKey: 'refund/seam-a/pr-1/rf-1',
  ...over,
})

/** A provider of another kind (named `acme`), recording the refunds it was asked for. */
function acmeProvider(name = 'acme'): PaymentProvider & { refunds: RefundRequest[] } {
  const refunds: RefundRequest[] = []
  return {
    ...createSandboxProvider(),
    name,
    refunds,
    settle: undefined,
    async refund(request) {
      refunds.push(request)
      return { providerRefundId: `${name}_re_1`, status: 'pending' }
    },
  }
}

describe('the sandbox provider, through the one interface', () => {
  test('settles at once, for the request, with a payment id derived from the client and request', () => {
    const request = { clientCode: 'seam-a', externalPaymentRequestId: 'pr-1', amountMinor: 3000n, currency: 'USD' }
    const confirmed = sandbox.settle?.(request, 'confirmed')
    assert.deepEqual(confirmed && { ...confirmed, providerPaymentId: confirmed.providerPaymentId.length }, {
      provider: 'sandbox',
      providerPaymentId: 36,
      outcome: 'confirmed',
      amountMinor: 3000n,
      currency: 'USD',
    })
    assert.match(confirmed?.providerPaymentId ?? '', /^sbx_[0-9a-f]{32}$/)
    assert.equal(sandbox.settle?.(request, 'failed').providerPaymentId, confirmed?.providerPaymentId)
    assert.notEqual(
      sandbox.settle?.({ ...request, externalPaymentRequestId: 'pr-2' }, 'confirmed').providerPaymentId,
      confirmed?.providerPaymentId,
    )
  })

  test('its checkout is the page itself; it has no session to read or close, no events, nothing to return', async () => {
    const session = await sandbox.startCheckout({
      clientCode: 'seam-a',
      externalPaymentRequestId: 'pr-1',
      attempt: 1,
      amountMinor: 3000n,
      currency: 'USD',
      description: 'Invoice 1',
      returnUrl: (id) => `http://irs.test/pay/t?checkout=${id}`,
      cancelUrl: 'http://irs.test/pay/t',
      expiresAt: new Date('2026-12-01T00:00:00Z'),
      idempotencyKey: 'checkout/seam-a/pr-1/1',
    })
    assert.deepEqual(
      { ...session, sessionId: session.sessionId.slice(0, 7) },
      {
        sessionId: 'sbx_cs_',
        url: 'http://irs.test/pay/t',
        expiresAt: '2026-12-01T00:00:00.000Z',
      },
    )
    const none = { kind: 'none', why: 'the sandbox settles at once from the page, with no session' }
    assert.deepEqual(await sandbox.readCheckout(session.sessionId), none)
    assert.equal(await sandbox.closeCheckout(session.sessionId), undefined)
    const event = sandbox.readEvent(Buffer.from('{"id":"evt_1"}'), {})
    assert.deepEqual(event, { id: '', type: '', objectId: '', ignored: 'the sandbox sends no events' })
    assert.deepEqual(await sandbox.factOf(event), none)
    const pages = []
    for await (const page of sandbox.eventPages(null, new Date(0))) pages.push(page)
    assert.deepEqual(pages, [])
    const paid = { kind: 'paid', requestId: 'pr-1', sessionId: 's', providerPaymentId: 'p', amountMinor: 1n, currency: 'USD' } as const
    assert.equal(await sandbox.returnPayment(paid, 'seam-a'), undefined)
    assert.deepEqual([sandbox.checkoutOrigins, sandbox.sessionLifetime.minSeconds], [[], 0])
  })

  test('a refund succeeds, unless its amount ends in .13; the same key is the same refund', async () => {
    await fc.assert(
      fc.asyncProperty(fc.bigInt({ min: 1n, max: 10n ** 12n }), fc.string({ minLength: 1, maxLength: 40 }), async (amountMinor, key) => {
        const a = await sandbox.refund(refundOf({ amountMinor, idempotencyKey: key }))
        const b = await sandbox.refund(refundOf({ amountMinor, idempotencyKey: key }))
        assert.deepEqual(a, b)
        assert.match(a.providerRefundId, /^sbx_re_[0-9a-f]{29}$/)
        assert.equal(a.status, amountMinor % 100n === SANDBOX_FAILING_REFUND_CENTS ? 'failed' : 'succeeded')
      }),
    )
  })
})

describe('refunds through the provider named on the Payment', () => {
  const registryWith = (choice: Awaited<ReturnType<ReturnType<typeof createProviderRegistry>['forClient']>>) => ({
    forClient: async () => choice,
  })
  const configured = (provider: PaymentProvider) =>
    registryWith({ kind: 'configured', config: { clientCode: 'seam-a', mode: 'test', provider, updatedAt: '2026-11-01T00:00:00Z' } })

  test("a sandbox Payment's through the sandbox provider, whatever the client has", async () => {
    const acme = acmeProvider()
    const refunds = refundsThroughProviders(configured(acme), {} as never, sandbox)
    assert.equal((await refunds.refund(refundOf({ amountMinor: 1013n }))).status, 'failed')
    assert.deepEqual(acme.refunds, [])
  })

  test("another provider's Payment through the client's provider of that name, never the sandbox's", async () => {
    const acme = acmeProvider()
    const refunds = refundsThroughProviders(configured(acme), {} as never, sandbox)
    const request = refundOf({ provider: 'acme', providerPaymentId: 'acme_pay_1' })
    assert.deepEqual(await refunds.refund(request), { providerRefundId: 'acme_re_1', status: 'pending' })
    assert.deepEqual(acme.refunds, [request])
  })

  test('a client now with another provider, or none, is a transient failure (asked again later)', async () => {
    const request = refundOf({ provider: 'acme' })
    await assert.rejects(refundsThroughProviders(configured(acmeProvider('other')), {} as never, sandbox).refund(request), {
      message: "client seam-a's Payment was made by acme, and its provider is other",
    })
    await assert.rejects(
      refundsThroughProviders(registryWith({ kind: 'unconfigured', reason: 'secret_unreadable' }), {} as never, sandbox).refund(request),
      { message: "client seam-a's Payment was made by acme, and it has none usable (secret_unreadable)" },
    )
    // In production there is no sandbox provider: a sandbox Payment cannot be refunded through another.
    await assert.rejects(refundsThroughProviders(configured(acmeProvider()), {} as never, undefined).refund(refundOf()), {
      message: "client seam-a's Payment was made by sandbox, and its provider is acme",
    })
  })
})

describe("the registry builds a client's provider by its kind", () => {
  const ring = createKeyRing(Buffer.from('22'.repeat(32), 'hex'))
  const rowOf = (provider: string, mode: 'test' | 'live' = 'test'): ProviderSecretsRow => ({
    provider,
    mode,
    secret_key_ciphertext: ring.encrypt(providerSecretAad('seam-a', 'secret_key_ciphertext'), 'sk_acme_1'),
    webhook_secret_ciphertext: ring.encrypt(providerSecretAad('seam-a', 'webhook_secret_ciphertext'), 'whsec_acme_1'),
    updated_at: '2026-11-01T00:00:00Z',
    retired_at: null,
  })
  const built: unknown[] = []
  const acmeKind: ProviderKind = {
    name: 'acme',
    checkoutOrigins: ['https://pay.acme.test'],
    sessionLifetime: { minSeconds: 60, maxSeconds: 3600 },
    forClient(secrets) {
      built.push(secrets)
      return acmeProvider()
    },
  }
  const registry = (row: ProviderSecretsRow | undefined, environment: 'sandbox' | 'production' = 'sandbox') =>
    createProviderRegistry({
      store: { findProviderSecrets: async () => row },
      keyRing: async () => ring,
      environment,
      kinds: [acmeKind],
      ...(environment === 'sandbox' ? { sandboxProvider: sandbox } : {}),
    })

  test('the kind the row names, on its decrypted secrets; a kind the deployment does not know is unconfigured', async () => {
    const choice = await registry(rowOf('acme')).forClient({} as never, 'seam-a')
    assert.equal(choice.kind === 'configured' && choice.config.provider.name, 'acme')
    assert.deepEqual(built, [{ clientCode: 'seam-a', mode: 'test', secretKey: 'sk_acme_1', webhookSecret: 'whsec_acme_1' }])
    assert.deepEqual(await registry(rowOf('gocardless')).forClient({} as never, 'seam-a'), { kind: 'unconfigured', reason: 'none' })
  })

  test("the deployment's kinds: the configured ones, and the sandbox's in sandbox only", () => {
    assert.deepEqual(
      registry(undefined).kinds.map((k) => [k.name, k.checkoutOrigins]),
      [
        ['acme', ['https://pay.acme.test']],
        ['sandbox', []],
      ],
    )
    assert.deepEqual(
      registry(undefined, 'production').kinds.map((k) => k.name),
      ['acme'],
    )
  })
})
