import type { Environment } from '../../config.ts'
import { type KeyRing, UnreadableSecretError } from '../../domain/key-ring.ts'
import type { Queryable } from '../../store/store.ts'
import type { CheckoutProvider, PaymentProvider } from './provider.ts'
import { type ProviderConfigStore, providerSecretAad } from './provider-config-store.ts'
import { createStripeProvider } from './stripe/adapter.ts'
import { createStripeGateway, type StripeGateway, type StripeKeyMode } from './stripe/gateway.ts'

/**
 * The provider registry (issue 22): what a payment of one client goes through.
 *
 * - The client has a Stripe configuration (`PUT /admin/v1/clients/{clientCode}/payment-provider`): its decrypted
 *   secret key and webhook secret, its mode, and a gateway built on them (src/resources/payments/stripe/gateway.ts).
 * - None, in sandbox: the sandbox provider. None, in production: `unconfigured` (the page says no payment provider
 *   is configured, as before).
 * - A configuration that cannot be used is `unconfigured` too, with the reason, and never falls back to the sandbox
 *   provider: a secret no key of the ring opens (`secret_unreadable`, as a webhook endpoint's is reported), or a key
 *   whose mode is not the environment's (`mode_mismatch`: a live key in sandbox, a test key in production; the
 *   operator route refuses both, so only a database copied between environments holds one).
 *
 * The hot path: one primary-key read per call (the row's `updated_at` and ciphertexts); the decrypted secrets and
 * the gateway are cached per client and rebuilt only when that row changed (a PUT changes `updated_at` and both
 * ciphertexts; a rewrap changes a ciphertext, and so rebuilds once, harmlessly). One entry per client, replaced,
 * never more: the cache is as large as the set of clients with a provider. A removed configuration is simply not
 * found, and its entry dropped.
 */

export interface StripeClientConfig {
  clientCode: string
  mode: StripeKeyMode
  secretKey: string
  webhookSecret: string
  gateway: StripeGateway
  /** The client's checkout provider over that gateway (stripe/adapter.ts). */
  provider: CheckoutProvider
  /** The configuration's `updated_at`, the cache's version. */
  updatedAt: string
}

export type ProviderChoice =
  | { kind: 'configured'; config: StripeClientConfig }
  | { kind: 'sandbox'; provider: PaymentProvider }
  | { kind: 'unconfigured'; reason: 'none' | 'secret_unreadable' | 'mode_mismatch' }

export interface ProviderRegistryDeps {
  store: Pick<ProviderConfigStore, 'findProviderSecrets'>
  /** The key ring the secrets were encrypted under (src/store/secret-keys.ts, keyRingLoader). */
  keyRing: () => Promise<KeyRing>
  environment: Environment
  /** STRIPE_API_BASE. */
  stripeApiBase: string
  /** The provider of a sandbox client without a configuration. */
  sandboxProvider: PaymentProvider
  /** The gateway's clock (checkout expiry, webhook signature age); the system clock by default. */
  now?: () => Date
}

const MODE_OF: Record<Environment, StripeKeyMode> = { sandbox: 'test', production: 'live' }

export function createProviderRegistry({ store, keyRing, environment, stripeApiBase, sandboxProvider, now }: ProviderRegistryDeps) {
  const cache = new Map<string, { version: string; config: StripeClientConfig }>()
  const none: ProviderChoice =
    environment === 'sandbox' ? { kind: 'sandbox', provider: sandboxProvider } : { kind: 'unconfigured', reason: 'none' }

  return {
    /**
     * `forEvents`: the provider's events (and the sweep, and refunds of its Payments) still go through a configuration
     * retired by a forced removal; new payments do not (`none`, as if removed).
     */
    async forClient(db: Queryable, clientCode: string, opts: { forEvents?: boolean } = {}): Promise<ProviderChoice> {
      const row = await store.findProviderSecrets(db, clientCode)
      if (!row) {
        cache.delete(clientCode)
        return none
      }
      if (row.retired_at !== null && opts.forEvents !== true) return none
      if (row.mode !== MODE_OF[environment]) return { kind: 'unconfigured', reason: 'mode_mismatch' }
      const version = `${row.updated_at}|${row.secret_key_ciphertext}|${row.webhook_secret_ciphertext}`
      const cached = cache.get(clientCode)
      if (cached?.version === version) return { kind: 'configured', config: cached.config }
      const ring = await keyRing()
      let secretKey: string
      let webhookSecret: string
      try {
        secretKey = ring.decrypt(providerSecretAad(clientCode, 'secret_key_ciphertext'), row.secret_key_ciphertext)
        webhookSecret = ring.decrypt(providerSecretAad(clientCode, 'webhook_secret_ciphertext'), row.webhook_secret_ciphertext)
      } catch (err) {
        if (!(err instanceof UnreadableSecretError)) throw err
        cache.delete(clientCode)
        return { kind: 'unconfigured', reason: 'secret_unreadable' }
      }
      const gateway = createStripeGateway({ secretKey, apiBase: stripeApiBase, ...(now ? { now } : {}) })
      const config: StripeClientConfig = {
        clientCode,
        mode: row.mode,
        secretKey,
        webhookSecret,
        gateway,
        provider: createStripeProvider({ clientCode, gateway, webhookSecret }),
        updatedAt: row.updated_at,
      }
      cache.set(clientCode, { version, config })
      return { kind: 'configured', config }
    },
  }
}

export type ProviderRegistry = ReturnType<typeof createProviderRegistry>

/**
 * The refund worker's provider: a Payment's refund goes to the provider named on the Payment. A Stripe Payment's
 * refund goes through its client's Stripe configuration (a configuration removed or unreadable since is a transient
 * failure, asked again later, never a refund through another provider); every other Payment's through `fallback`
 * (the sandbox provider in sandbox).
 */
export function refundsThroughProviders(registry: ProviderRegistry, db: Queryable, fallback: PaymentProvider): PaymentProvider {
  return {
    ...fallback,
    async refund(request) {
      if (request.provider === fallback.name) return fallback.refund(request)
      const choice = await registry.forClient(db, request.clientCode, { forEvents: true })
      if (choice.kind !== 'configured') {
        throw new Error(
          `client ${request.clientCode} has no usable Stripe configuration (${choice.kind === 'unconfigured' ? choice.reason : 'none'})`,
        )
      }
      if (choice.config.provider.name !== request.provider) {
        throw new Error(
          `client ${request.clientCode}'s provider is ${choice.config.provider.name}, not ${request.provider} that made the Payment`,
        )
      }
      return choice.config.provider.refund(request)
    },
  }
}
