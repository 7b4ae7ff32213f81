import { z } from 'zod'
import { Timestamp } from '../../domain/time.ts'
import { ClientParams, ListQuery } from '../../http/common-schemas.ts'
import { CHANGE_TYPES, RESOURCE_TYPES } from '../feed/store.ts'

export const WebhookEndpointParams = ClientParams

export const WebhookEndpointPut = z
  .strictObject({
    url: z.string().min(1).max(2048).describe('`https` on port 443 with a public DNS name, no credentials, no fragment.'),
  })
  .meta({ id: 'WebhookEndpointPut', examples: [{ url: 'https://hooks.acme-lending.com/irs' }] })

const endpointFields = {
  url: z.string(),
  status: z.enum(['enabled', 'disabled']),
  disabledReason: z
    .enum(['grant_revoked', 'destination_unsafe', 'signing_secret_unreadable'])
    .nullable()
    .describe(
      "Why the service disabled the endpoint; null while enabled, and after `POST .../disable`. `signing_secret_unreadable`: the stored signing secret can no longer be decrypted (the service's encryption key changed without the old key being kept), so nothing can be signed; `rotate-secret` or a PUT issues a new secret, and a PUT re-enables the endpoint.",
    ),
  secretVersion: z.number().int().min(1).describe('1 for the first secret, +1 on each rotation.'),
  lagging: z
    .boolean()
    .describe(
      'True while the endpoint is lagging (our extension): its pending backlog reached WEBHOOK_BACKLOG_LIMIT notifications, so changes committed since are not queued for it yet (they are, oldest first, as the backlog drains; nothing is dropped while the change feed keeps them, 30 days). Read the change feed (`GET /changes`) from your cursor to catch up now.',
    ),
  laggingSince: Timestamp.nullable().describe('When the endpoint started lagging; null when it is not.'),
}

const endpointExample = {
  url: 'https://hooks.acme-lending.com/irs',
  status: 'enabled',
  disabledReason: null,
  secretVersion: 1,
  lagging: false,
  laggingSince: null,
} as const

export const WebhookEndpoint = z.object(endpointFields).meta({ id: 'WebhookEndpoint', examples: [endpointExample] })

export const WebhookEndpointWithSecret = z
  .object({
    ...endpointFields,
    signingSecret: z.string().describe('Shown once: store it now. Sign-checks use the whole string as the HMAC key.'),
  })
  .meta({
    id: 'WebhookEndpointWithSecret',
    examples: [{ ...endpointExample, signingSecret: 'whsec_3q2-7wAbCdEfGhIjKlMnOpQrStUvWxYz0123456789A' }],
  })

export const WebhookEndpointReconfigured = z
  .object({
    ...endpointFields,
    signingSecret: z
      .string()
      .optional()
      .describe(
        'Present only when this PUT issued a new secret (shown once) because the stored one could not be decrypted any more (`disabledReason` `signing_secret_unreadable`).',
      ),
  })
  .meta({ id: 'WebhookEndpointReconfigured', examples: [endpointExample] })

export const DeliveryParams = ClientParams.extend({
  deliveryId: z.string().regex(/^[A-Za-z0-9_-]{1,128}$/, 'must be a deliveryId from the delivery log'),
})

export const DeliveriesQuery = ListQuery.extend({
  eventId: z.string().uuid().optional().describe('Only the delivery of this change-feed event.'),
})

const AttemptView = z
  .object({
    attempt: z.number().int().min(1),
    attemptedAt: Timestamp,
    durationMs: z.number().int().min(0),
    httpStatus: z.number().int().nullable().describe('The receiver’s status; null when no response came.'),
    errorClass: z
      .enum(['http_status', 'redirect', 'timeout', 'connection_refused', 'connection_error', 'tls_error', 'dns_error'])
      .nullable()
      .describe('Why the attempt failed; null when it succeeded.'),
  })
  .meta({ id: 'WebhookAttempt' })

const deliveryExample = {
  deliveryId: 'dlv_5d0c2b7e9a7d4c4f8b9e0a1b2c3d4e5f',
  eventId: '6e5d4c3b-2a19-4f08-9e7d-6c5b4a392817',
  type: 'receivable.updated',
  resource: { type: 'receivable', id: 'rcv-demo-1' },
  revision: 2,
  occurredAt: '2026-01-31T09:30:00.112Z',
  status: 'delivered',
  supersededBy: null,
  supersedes: { notifications: 3, fromRevision: 1 },
  attemptCount: 2,
  nextAttemptAt: null,
  lastError: null,
  createdAt: '2026-01-31T09:30:01.000Z',
  completedAt: '2026-01-31T09:31:02.310Z',
  attempts: [
    { attempt: 1, attemptedAt: '2026-01-31T09:30:01.020Z', durationMs: 5001, httpStatus: null, errorClass: 'timeout' },
    { attempt: 2, attemptedAt: '2026-01-31T09:31:02.250Z', durationMs: 60, httpStatus: 204, errorClass: null },
  ],
} as const

export const WebhookDelivery = z
  .object({
    deliveryId: z.string(),
    eventId: z.string().uuid(),
    type: z.enum([...CHANGE_TYPES, 'ping']).describe('The change-feed event type; `ping` for a test notification (POST .../test).'),
    resource: z
      .object({ type: z.enum([...RESOURCE_TYPES, 'webhook_endpoint']), id: z.string() })
      .describe('A ping names the endpoint: type `webhook_endpoint`, id the client code.'),
    revision: z.number().int().describe('The revision notified; 0 for a ping.'),
    occurredAt: Timestamp,
    status: z
      .enum(['pending', 'delivered', 'abandoned', 'skipped', 'superseded'])
      .describe(
        '`skipped`: the grant could no longer read the resource type, so nothing was sent. `superseded`: a newer revision of the same resource was queued before this one was delivered (while it waited for a retry, or was being attempted); only the newer one is sent (`supersededBy`).',
      ),
    supersededBy: z.string().nullable().describe('The delivery of the newer revision that superseded this one; null unless `superseded`.'),
    supersedes: z
      .object({
        notifications: z.number().int().min(1).describe('Earlier notifications of this resource folded into this one.'),
        fromRevision: z.number().int().describe('The revision of the first of them.'),
      })
      .nullable()
      .describe(
        'Notifications of earlier revisions of this resource that were still waiting, never attempted, when a newer revision was queued: not sent on their own, this delivery carries the newest revision instead. Null when none.',
      ),
    attemptCount: z.number().int().min(0),
    nextAttemptAt: Timestamp.nullable(),
    lastError: z
      .string()
      .nullable()
      .describe(
        'Why the last attempt failed (the error class, with the HTTP status when one came), or why a pending delivery is not being sent: `signing_secret_unreadable` (the endpoint was disabled because its signing secret can no longer be decrypted).',
      ),
    createdAt: Timestamp,
    completedAt: Timestamp.nullable(),
    attempts: z.array(AttemptView),
  })
  .meta({ id: 'WebhookDelivery', examples: [deliveryExample] })
export type WebhookDelivery = z.output<typeof WebhookDelivery>

const Lagging = z
  .object({
    since: Timestamp,
    backlogLimit: z.number().int().min(1),
    detail: z.string(),
  })
  .nullable()
  .describe(
    'Non-null while the endpoint is lagging: its pending backlog reached `backlogLimit`, and changes committed since are queued only as it drains. Read the change feed to catch up.',
  )

export const WebhookDeliveryPage = z
  .object({ data: z.array(WebhookDelivery), nextCursor: z.string().nullable(), lagging: Lagging })
  .meta({ id: 'WebhookDeliveryPage', examples: [{ data: [deliveryExample], nextCursor: null, lagging: null }] })

export const ReplayBody = z
  .strictObject({
    after: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,200}$/, 'must be a change-feed cursor')
      .describe('A change-feed cursor (`nextCursor` of `GET /changes`): every notification after it is queued again.'),
  })
  .meta({ id: 'WebhookReplay', examples: [{ after: 'eyJsIjoiY2hhbmdlcyIsInMiOiIyIn0' }] })

export const ReplayResult = z
  .object({ queued: z.number().int().min(0).describe('Deliveries queued, each due now.') })
  .meta({ id: 'WebhookReplayResult', examples: [{ queued: 12 }] })

/** A command that takes no body (rotate-secret, disable, a delivery's retry): the route declares none. */
export const NoBody = z.undefined()

/** One chunk of a replay, inside its request (never answered on its own). */
export const ReplayChunk = z.object({ queued: z.number().int().min(0), lastSeq: z.string().nullable() })
export type ReplayChunk = z.output<typeof ReplayChunk>
