import { z } from 'zod'
import { Branding } from '../domain/branding.ts'
import { Timestamp } from '../domain/time.ts'
import { defineRoute, type RouteDef } from '../http/route.ts'
import type { BrandingService } from './branding-service.ts'
import { ClientCodeParams } from './schema.ts'

/*
 * The operator's routes for a client's branding on the hosted payment page (docs/operator-api.md, "Branding"),
 * wrapped by `inbound client branding`. Schemas carry ids starting `Operator` (src/admin/schema.ts says why).
 */

export const BrandingView = z
  .object({
    clientCode: z.string(),
    displayName: z.string().nullable(),
    accentColor: z.string().nullable(),
    supportEmail: z.string().nullable(),
    supportPhone: z.string().nullable(),
    supportUrl: z.string().nullable(),
    locale: z.string().nullable(),
    updatedAt: Timestamp.describe('When the client (its settings or its branding) last changed.'),
  })
  .meta({
    id: 'OperatorBrandingView',
    description: 'Every field of the branding, null where not set (the page then uses its default).',
    examples: [
      {
        clientCode: 'acme-cu',
        displayName: 'Acme Credit Union',
        accentColor: '#0f5132',
        supportEmail: 'help@acme-cu.example',
        supportPhone: '+1 555 010 0199',
        supportUrl: 'https://acme-cu.example/help',
        locale: 'en-US',
        updatedAt: '2026-01-31T09:30:00.000Z',
      },
    ],
  })

const admin = { kind: 'admin' } as const

export function brandingRoutes(svc: BrandingService): RouteDef[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/admin/v1/clients/:clientCode/branding',
      operationId: 'adminGetClientBranding',
      summary: "Read a client's branding on the hosted payment page",
      description:
        'The display name, accent colour, support contact and locale the hosted payment page uses for this client; null fields take the page defaults (the client name, the service blue, no contact block, en-US).',
      tags: ['Operator'],
      auth: admin,
      params: ClientCodeParams,
      responses: { 200: { schema: BrandingView, description: 'The branding' } },
      problems: ['client_not_found'],
      public: false,
      handler: async ({ params }) => ({ status: 200, body: await svc.get(params.clientCode) }),
    }),
    defineRoute({
      method: 'PUT',
      path: '/admin/v1/clients/:clientCode/branding',
      operationId: 'adminPutClientBranding',
      summary: "Replace a client's branding on the hosted payment page",
      description:
        'Replaces the whole branding (omitted fields are removed). The accent colour must have a contrast of at least 4.5:1 against white, the URL must be https, the locale one the service formats numbers in; text follows the rules of everything shown to a debtor. Every page state then shows the support contact, and amounts are written in the locale. Audited as `client.branding_updated`.',
      tags: ['Operator'],
      auth: admin,
      params: ClientCodeParams,
      body: { schema: Branding, mediaType: 'application/json' },
      responses: { 200: { schema: BrandingView, description: 'The branding as stored' } },
      problems: ['client_not_found'],
      public: false,
      handler: async ({ params, body }) => ({ status: 200, body: await svc.put(params.clientCode, body) }),
    }),
  ]
}
