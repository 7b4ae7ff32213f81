import type { Environment } from '../../config.ts'
import { type KeyRing, UnreadableSecretError } from '../../domain/key-ring.ts'
import type { Queryable } from '../../store/store.ts'
import type { PaymentProvider, ProviderKind, RefundRequest } from './provider.ts'
import { type ProviderConfigStore, providerSecretAad } from './provider-config-store.ts'

/**
 * The provider registry (issue 22): what a payment of one client goes through.
 *
 * - The client has a configuration (`PUT /admin/v1/clients/{clientCode}/payment-provider`): its decrypted secret
 *   key and webhook secret, its mode, and the provider its kind builds on them (`ProviderKind`, payments/provider.ts;
 *   the kinds are listed in src/app.ts).
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

export interface ClientProviderConfig {
  clientCode: string
  mode: 'test' | 'live'
  /** The client's provider, built by its kind on the decrypted secrets. */
  provider: PaymentProvider
  /** The configuration's `updated_at`, the cache's version. */
  updatedAt: string
}

export type ProviderChoice =
  | { kind: 'configured'; config: ClientProviderConfig }
  | { kind: 'sandbox'; provider: PaymentProvider }
  | { kind: 'unconfigured'; reason: 'none' | 'secret_unreadable' | 'mode_mismatch' }

export interface ProviderRegistryDeps {
  store: Pick<ProviderConfigStore, 'findProviderSecrets'>
  /** The key ring the secrets were encrypted under (src/store/secret-keys.ts, keyRingLoader). */
  keyRing: () => Promise<KeyRing>
  environment: Environment
  /** The kinds of provider a client can be configured with (src/app.ts). */
  kinds: readonly ProviderKind[]
  /** The provider of a sandbox client without a configuration (payments/sandbox/); only in sandbox. */
  sandboxProvider?: PaymentProvider
}

const MODE_OF: Record<Environment, 'test' | 'live'> = { sandbox: 'test', production: 'live' }

export function createProviderRegistry({ store, keyRing, environment, kinds, sandboxProvider }: ProviderRegistryDeps) {
  const cache = new Map<string, { version: string; config: ClientProviderConfig }>()
  const kindOf = new Map(kinds.map((k) => [k.name, k]))
  const none: ProviderChoice =
    environment === 'sandbox' && sandboxProvider ? { kind: 'sandbox', provider: sandboxProvider } : { kind: 'unconfigured', reason: 'none' }

  return {
    /** The deployment's providers: the kinds a client can have, and the sandbox's (in sandbox). */
    kinds: [...kinds, ...(environment === 'sandbox' && sandboxProvider ? [sandboxProvider] : [])] as readonly Pick<
      PaymentProvider,
      'name' | 'checkoutOrigins' | 'sessionLifetime'
    >[],

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
      const kind = kindOf.get(row.provider)
      // A provider this deployment does not know (a database from a newer version): not usable here.
      if (!kind) return { kind: 'unconfigured', reason: 'none' }
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
      const config: ClientProviderConfig = {
        clientCode,
        mode: row.mode,
        provider: kind.forClient({ clientCode, mode: row.mode, secretKey, webhookSecret }),
        updatedAt: row.updated_at,
      }
      cache.set(clientCode, { version, config })
      return { kind: 'configured', config }
    },
  }
}

export type ProviderRegistry = ReturnType<typeof createProviderRegistry>

/**
 * The refund worker's provider: a Payment's refund goes through the provider named on the Payment, through the one
 * interface, whichever it is: the deployment's sandbox provider for a sandbox Payment, else the client's configured
 * provider of that name. A configuration removed, unreadable, or now of another provider is a transient failure,
 * asked again later, never a refund through another provider.
 */
export function refundsThroughProviders(
  registry: Pick<ProviderRegistry, 'forClient'>,
  db: Queryable,
  sandboxProvider: PaymentProvider | undefined,
): Pick<PaymentProvider, 'refund'> {
  return {
    async refund(request: RefundRequest) {
      if (sandboxProvider && request.provider === sandboxProvider.name) return sandboxProvider.refund(request)
      const choice = await registry.forClient(db, request.clientCode, { forEvents: true })
      const provider = choice.kind === 'configured' ? choice.config.provider : null
      if (provider?.name !== request.provider) {
        const has = provider
          ? `its provider is ${provider.name}`
          : `it has none usable (${choice.kind === 'unconfigured' ? choice.reason : 'none'})`
        throw new Error(`client ${request.clientCode}'s Payment was made by ${request.provider}, and ${has}`)
      }
      return provider.refund(request)
    },
  }
}
