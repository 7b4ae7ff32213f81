import { z } from 'zod'
import { Timestamp } from '../domain/time.ts'
import { defineRoute, type RouteDef } from '../http/route.ts'
import { type PaymentProviderService, STRIPE_WEBHOOK_EVENTS } from './payment-provider-service.ts'
import { ClientCodeParams } from './schema.ts'

/*
 * The operator's routes for a client's payment provider (docs/design/payment-providers.md; docs/operator-api.md), wrapped by
 * `inbound provider set|show|remove`. Schemas carry ids starting `Operator` (src/admin/schema.ts says why).
 */

const AT = '2026-01-31T09:30:00.000Z'

/** Stripe's key formats; the mode an environment accepts is the service's rule (422 `custom` at /secretKey). */
const STRIPE_SECRET_KEY = /^(?:sk|rk)_(?:test|live)_[A-Za-z0-9]+$/
const STRIPE_WEBHOOK_SECRET = /^whsec_[A-Za-z0-9]+$/

export const PaymentProviderPut = z
  .strictObject({
    provider: z.literal('stripe').describe('The provider; Stripe is the only one.'),
    secretKey: z
      .string()
      .max(512)
      .regex(
        STRIPE_SECRET_KEY,
        'must be a Stripe secret key (sk_test_… or sk_live_…) or restricted key (rk_test_… or rk_live_…); a publishable key (pk_) does not work',
      )
      .describe(
        "The client's Stripe secret key, or a restricted key with Checkout Sessions: Write, PaymentIntents: Read, Refunds: Write and Disputes: Read. Test keys (`sk_test_`, `rk_test_`) only in sandbox, live keys only in production. Stored encrypted; never returned.",
      ),
    webhookSecret: z
      .string()
      .max(512)
      .regex(STRIPE_WEBHOOK_SECRET, "must be the webhook endpoint's signing secret, whsec_…")
      .describe(
        "The signing secret of the webhook endpoint created in Stripe's dashboard for `webhookUrl` (`whsec_…`). Stored encrypted; never returned.",
      ),
  })
  .meta({
    id: 'OperatorPaymentProviderPut',
    description: 'Replaces the configuration: both secrets are given every time.',
    examples: [{ provider: 'stripe', secretKey: 'rk_test_EXAMPLEexampleEXAMPLE', webhookSecret: 'whsec_EXAMPLEexampleEXAMPLE' }],
  })

export const PaymentProviderView = z
  .object({
    provider: z.literal('stripe'),
    mode: z.enum(['test', 'live']).describe("The key's mode: `test` in sandbox, `live` in production."),
    secretKeyHint: z.string().describe('The key with all but its prefix and last 4 characters hidden (`rk_live_...4242`).'),
    webhookUrl: z
      .string()
      .describe("The URL to enter in Stripe's dashboard (Developers, Webhooks, Add endpoint) for this client's events."),
    events: z.array(z.enum(STRIPE_WEBHOOK_EVENTS)).describe('The events to select for that endpoint.'),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({
    id: 'OperatorPaymentProvider',
    description: 'Never a secret: the key and the signing secret are stored encrypted and are not shown again.',
    examples: [
      {
        provider: 'stripe',
        mode: 'test',
        secretKeyHint: 'rk_test_...MPLE',
        webhookUrl: 'https://receivables.example.com/providers/stripe/webhooks/acme-cu',
        events: [...STRIPE_WEBHOOK_EVENTS],
        createdAt: AT,
        updatedAt: AT,
      },
    ],
  })

export const PaymentProviderDeleteQuery = z
  .strictObject({
    force: z
      .enum(['true', 'false'])
      .optional()
      .describe('true: retire it even while checkout attempts are open or processing (no new payments; its events still apply).'),
  })
  .meta({ id: 'OperatorPaymentProviderDeleteQuery' })

export const PaymentProviderSync = z
  .object({
    eventsRead: z.number().int().min(0).describe("The provider's events read after the last one stored for the client."),
    eventsApplied: z
      .number()
      .int()
      .min(0)
      .describe('Events and checkout read-backs that changed something here (each event id is applied once, whichever way it came).'),
  })
  .meta({ id: 'OperatorPaymentProviderSync', examples: [{ eventsRead: 3, eventsApplied: 1 }] })

export function paymentProviderRoutes(svc: PaymentProviderService): RouteDef[] {
  const path = '/admin/v1/clients/:clientCode/payment-provider'
  const auth = { kind: 'admin' } as const
  return [
    defineRoute({
      method: 'PUT',
      path,
      operationId: 'adminPutPaymentProvider',
      summary: "Configure a client's payment provider (Stripe)",
      description:
        "Creates or replaces the client's Stripe configuration. A live key is refused in sandbox and a test key in production (422 `custom` at /secretKey). The secrets are encrypted at rest under the key ring (WEBHOOK_SECRET_KEY, rewrapped with it), never returned and never logged. Audited as `payment_provider.created` / `payment_provider.updated` with SHA-256 digests of the secrets.",
      tags: ['Operator'],
      auth,
      params: ClientCodeParams,
      body: { schema: PaymentProviderPut, mediaType: 'application/json' },
      responses: {
        201: { schema: PaymentProviderView, description: 'Configured' },
        200: { schema: PaymentProviderView, description: 'Replaced' },
      },
      problems: ['client_not_found'],
      public: false,
      handler: async ({ params, body }) => svc.put(params.clientCode, body),
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: 'adminGetPaymentProvider',
      summary: "Read a client's payment provider (never a secret), with the webhook URL and events to set in Stripe",
      tags: ['Operator'],
      auth,
      params: ClientCodeParams,
      responses: { 200: { schema: PaymentProviderView, description: 'The configuration, without its secrets' } },
      problems: ['client_not_found', 'payment_provider_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.get(params.clientCode) }),
    }),
    defineRoute({
      method: 'DELETE',
      path,
      operationId: 'adminDeletePaymentProvider',
      summary: "Remove a client's payment provider",
      description:
        'The secrets are deleted. In sandbox the client falls back to the sandbox provider; in production its hosted page offers no payment until a provider is configured again. While checkout attempts are open or processing at it, 409 `payment_provider_in_use` (with `openCheckouts`); `?force=true` then retires it instead: no new payment goes through it, its events are still verified and applied until they settle. Audited as `payment_provider.removed`.',
      tags: ['Operator'],
      auth,
      params: ClientCodeParams,
      query: PaymentProviderDeleteQuery,
      responses: { 204: { schema: null, description: 'Removed (or retired, with force)' } },
      problems: ['client_not_found', 'payment_provider_not_found', 'payment_provider_in_use'],
      public: false,
      handler: async ({ params, query }) => {
        await svc.remove(params.clientCode, { force: query.force === 'true' })
        return { status: 204 }
      },
    }),
    defineRoute({
      method: 'POST',
      path: `${path}/sync`,
      operationId: 'adminSyncPaymentProvider',
      summary: "Catch up with a client's payment provider now",
      description:
        "Runs the catch-up sweep for this client now (as every PROVIDER_SYNC_INTERVAL_SECONDS): the provider's events after the last one stored, each applied once through the same handling as the webhook route, then the checkout attempts past their expiry or of requests that can no longer take money read back. A sweep of the client already running elsewhere answers 0 and 0.",
      tags: ['Operator'],
      auth,
      params: ClientCodeParams,
      responses: { 200: { schema: PaymentProviderSync, description: 'What the sweep read and applied' } },
      problems: ['client_not_found', 'payment_provider_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.syncNow(params.clientCode) }),
    }),
  ]
}
