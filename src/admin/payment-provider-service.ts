import { digestSecret } from '../access/keys.ts'
import type { Environment } from '../config.ts'
import type { KeyRing } from '../domain/key-ring.ts'
import { fieldProblem, Problem } from '../domain/problems.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import { recordAudit } from '../resources/audit/store.ts'
import { providerSecretAad } from '../resources/payments/provider-config-store.ts'
import { STRIPE_WEBHOOK_EVENTS } from '../resources/payments/stripe/adapter.ts'
import { keyHint, keyMode } from '../resources/payments/stripe/gateway.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import type { Store } from '../store/store.ts'
import {
  countLiveCheckouts,
  deletePaymentProvider,
  findPaymentProvider,
  type PaymentProviderRow,
  retirePaymentProvider,
  upsertPaymentProvider,
} from './payment-provider-store.ts'
import { findClient } from './store.ts'

/**
 * A client's payment provider, configured by the operator (docs/design/payment-providers.md; docs/operator-api.md): Stripe, with
 * the client's secret (or restricted) API key and the signing secret of the webhook endpoint the operator created
 * in Stripe's dashboard. The secrets are encrypted under the key ring (as webhook signing secrets are), never
 * answered, never logged, and audited only as SHA-256 digests.
 */

/** The Stripe events the webhook endpoint must send (docs/design/payment-providers.md): everything the service acts on. */
export { STRIPE_WEBHOOK_EVENTS }

/** Where Stripe sends a client's events (the route is issue 22 item 3's): what the operator enters in the dashboard. */
export const stripeWebhookUrl = (publicBaseUrl: string, clientCode: string) =>
  `${publicBaseUrl}/providers/stripe/webhooks/${encodeURIComponent(clientCode)}`

export interface PaymentProviderPutBody {
  provider: 'stripe'
  secretKey: string
  webhookSecret: string
}

export interface PaymentProviderServiceDeps {
  store: Store
  clock: Clock
  environment: Environment
  keyRing: () => Promise<KeyRing>
  publicBaseUrl: string
  /** The catch-up sweep of one client (payments/provider-sync.ts): `POST .../payment-provider/sync`. */
  sync?: (clientCode: string) => Promise<{ eventsRead: number; eventsApplied: number }>
}

/** The mode each environment takes: test keys are for sandbox, live keys for production, never the other way. */
const MODE_OF: Record<Environment, 'test' | 'live'> = { sandbox: 'test', production: 'live' }

export function createPaymentProviderService({ store, clock, environment, keyRing, publicBaseUrl, sync }: PaymentProviderServiceDeps) {
  const view = (r: PaymentProviderRow) => ({
    provider: r.provider,
    mode: r.mode,
    secretKeyHint: r.secret_key_hint,
    webhookUrl: stripeWebhookUrl(publicBaseUrl, r.client_code),
    events: [...STRIPE_WEBHOOK_EVENTS],
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  })
  const notFound = (clientCode: string) =>
    new Problem('payment_provider_not_found', `Client ${clientCode} has no payment provider configured.`)

  return {
    /** 201 when the client had none, 200 when it replaced one. Both secrets are replaced together. */
    async put(clientCode: string, body: PaymentProviderPutBody) {
      const mode = keyMode(body.secretKey)
      // The schema admits only sk_/rk_ test or live keys; the environment decides which of the two modes it takes.
      const wanted = MODE_OF[environment]
      if (mode !== wanted) {
        throw fieldProblem(
          '/secretKey',
          'custom',
          wanted === 'test'
            ? 'must be a test key (sk_test_… or rk_test_…): a sandbox never takes live payments'
            : 'must be a live key (sk_live_… or rk_live_…): production takes real payments only',
        )
      }
      // Outside the transaction: the ring may load from the store the first time.
      const ring = await keyRing()
      return inUnitOfWork(store, async ({ tx }) => {
        // Locked: the operator actions on one client are serialized, so two PUTs cannot both answer 201.
        if (!(await findClient(tx, clientCode, true))) throw new Problem('client_not_found', `No client ${clientCode}.`)
        const existing = await findPaymentProvider(tx, clientCode)
        const now = isoNow(clock)
        const row = await upsertPaymentProvider(tx, {
          clientCode,
          provider: body.provider,
          mode: wanted,
          secretKeyCiphertext: ring.encrypt(providerSecretAad(clientCode, 'secret_key_ciphertext'), body.secretKey),
          webhookSecretCiphertext: ring.encrypt(providerSecretAad(clientCode, 'webhook_secret_ciphertext'), body.webhookSecret),
          secretKeyHint: keyHint(body.secretKey),
          now,
        })
        // Digests only: they tell which key was set (compare with `sha256sum` of the key file), never the key.
        const digests = { secretKeyDigest: digestSecret(body.secretKey), webhookSecretDigest: digestSecret(body.webhookSecret) }
        await recordAudit(tx, {
          action: existing ? 'payment_provider.updated' : 'payment_provider.created',
          clientCode,
          targetType: 'payment_provider',
          targetId: clientCode,
          details: { provider: body.provider, mode: wanted, secretKeyHint: row.secret_key_hint, ...digests },
          change: { provider: body.provider, mode: wanted, ...digests },
          occurredAt: now,
        })
        return { status: existing ? 200 : 201, body: view(row) }
      })
    },

    async get(clientCode: string) {
      const row = await findPaymentProvider(store, clientCode)
      // Retired by a forced removal: removed for every purpose an operator sees (its events still apply).
      if (row && row.retired_at === null) return view(row)
      // An unknown client answers as every operator route of a client does; a known one without a provider, so.
      if (!(await findClient(store, clientCode))) throw new Problem('client_not_found', `No client ${clientCode}.`)
      throw notFound(clientCode)
    },

    /**
     * Removes it: the client's payments fall back to the sandbox provider in sandbox, to none in production. While a
     * checkout attempt is open or processing, money may still move through it: 409 `payment_provider_in_use` with the
     * count, unless `force`, which retires it (no new payment goes through it; its events are still verified and
     * applied until its attempts settle).
     */
    remove(clientCode: string, opts: { force?: boolean } = {}) {
      return inUnitOfWork(store, async ({ tx }) => {
        if (!(await findClient(tx, clientCode, true))) throw new Problem('client_not_found', `No client ${clientCode}.`)
        const existing = await findPaymentProvider(tx, clientCode)
        if (!existing || existing.retired_at !== null) throw notFound(clientCode)
        const live = await countLiveCheckouts(tx, clientCode)
        if (live > 0 && !opts.force) {
          throw new Problem(
            'payment_provider_in_use',
            `${live} checkout attempt${live === 1 ? ' is' : 's are'} open or processing at this provider: money may still move through it. Remove it once they settle, or with ?force=true to stop new payments and keep applying its events.`,
            { extensions: { openCheckouts: live } },
          )
        }
        const now = isoNow(clock)
        const row = live > 0 ? await retirePaymentProvider(tx, clientCode, now) : await deletePaymentProvider(tx, clientCode)
        if (!row) throw notFound(clientCode)
        await recordAudit(tx, {
          action: 'payment_provider.removed',
          clientCode,
          targetType: 'payment_provider',
          targetId: clientCode,
          details: {
            provider: row.provider,
            mode: row.mode,
            secretKeyHint: row.secret_key_hint,
            ...(live > 0 ? { retiredWithOpenCheckouts: live } : {}),
          },
          change: { removed: row.provider },
          occurredAt: now,
        })
      })
    },

    /** The catch-up sweep of the client now: `{eventsRead, eventsApplied}`. */
    async syncNow(clientCode: string) {
      const row = await findPaymentProvider(store, clientCode)
      if (!row) {
        if (!(await findClient(store, clientCode))) throw new Problem('client_not_found', `No client ${clientCode}.`)
        throw notFound(clientCode)
      }
      const result = sync ? await sync(clientCode) : { eventsRead: 0, eventsApplied: 0 }
      return { eventsRead: result.eventsRead, eventsApplied: result.eventsApplied }
    },
  }
}

export type PaymentProviderService = ReturnType<typeof createPaymentProviderService>
