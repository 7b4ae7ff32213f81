import { defineRoute, type RouteDef } from '../../http/route.ts'
import { type RouteDeps, writeRoute } from '../operations.ts'
import {
  DeliveriesQuery,
  DeliveryParams,
  ReplayBody,
  ReplayResult,
  WebhookDeliveryPage,
  WebhookEndpoint,
  WebhookEndpointParams,
} from './schema.ts'
import type { WebhookService } from './service.ts'

const path = '/v1/clients/:clientCode/webhook-endpoint'
const auth = { kind: 'api_key', scopes: ['webhooks:manage'] } as const
const tags = ['Webhooks']

/**
 * The endpoint's writes are WriteOperations (src/resources/webhooks/service.ts) served by `writeRoute`; an endpoint
 * is the calling Integration's for the path's client, so `clientCode` names it. The replay writes in chunks (its
 * service method).
 */
export function webhookRoutes(deps: RouteDeps, webhooks: WebhookService): RouteDef[] {
  const { operations } = webhooks
  return [
    writeRoute(deps, operations.put, {
      method: 'PUT',
      path,
      idParam: 'clientCode',
      operationId: 'putWebhookEndpoint',
      summary: "Configure this Integration's webhook endpoint for the client",
      description:
        'One endpoint per Integration per Client. The first call answers 201 with `signingSecret` (shown once); later calls change the URL and answer 200 without it (unless the stored secret can no longer be decrypted: the PUT then issues a new one, `secretVersion` + 1, and answers it once). A PUT re-enables a disabled endpoint; notifications then cover changes committed after it. The URL must be `https` on port 443 with a public DNS name that resolves only to public addresses, with no credentials and no fragment.',
      tags,
      params: WebhookEndpointParams,
      answers: {
        201: 'Configured; the signing secret is shown this once',
        200: 'Reconfigured (and re-enabled if it was disabled); with a new `signingSecret` only when the stored one could not be decrypted',
      },
      problems: ['webhook_destination_unsafe'],
    }),
    defineRoute({
      method: 'GET',
      path,
      operationId: 'getWebhookEndpoint',
      summary: "Read this Integration's webhook endpoint",
      description:
        "Reads this Integration's webhook endpoint for the client: its `url`, `status` (`enabled` or `disabled`, with the reason) and signing `secretVersion`. The secret itself is never returned after the PUT or rotation that issued it.",
      tags,
      auth,
      params: WebhookEndpointParams,
      responses: { 200: { schema: WebhookEndpoint, description: 'The endpoint (never its secret)' } },
      problems: ['webhook_endpoint_not_found'],
      public: true,
      handler: async ({ grant }) => ({ status: 200, body: await webhooks.get(grant) }),
    }),
    writeRoute(deps, operations.rotateSecret, {
      method: 'POST',
      path: `${path}/rotate-secret`,
      idParam: 'clientCode',
      operationId: 'rotateWebhookSecret',
      summary: 'Issue a new signing secret',
      description:
        'Returns the new secret once. For 24 hours every notification carries two `v1` signatures, one with the new secret and one with the previous. When the previous secret can no longer be decrypted (`disabledReason` `signing_secret_unreadable`), the new one is issued without it and signs alone; a PUT then re-enables the endpoint.',
      tags,
      params: WebhookEndpointParams,
      noBody: true,
      answers: { 200: 'The new secret, shown this once' },
      problems: ['webhook_endpoint_not_found'],
    }),
    writeRoute(deps, operations.disable, {
      method: 'POST',
      path: `${path}/disable`,
      idParam: 'clientCode',
      operationId: 'disableWebhookEndpoint',
      summary: 'Stop delivery',
      description: 'Nothing is sent while disabled (pending deliveries wait). A PUT enables it again.',
      tags,
      params: WebhookEndpointParams,
      noBody: true,
      answers: { 200: 'Disabled' },
      problems: ['webhook_endpoint_not_found'],
    }),
    defineRoute({
      method: 'GET',
      path: `${path}/deliveries`,
      operationId: 'listWebhookDeliveries',
      summary: 'The delivery log (our extension)',
      description:
        'Each delivery with its attempts (time, HTTP status or error class, duration; never the URL, secret or signature), newest event first. Kept 30 days. Notifications are coalesced per resource: a delivery shows the earlier revisions it superseded before they were attempted (`supersedes`), and one that a newer revision superseded after an attempt is `superseded`. `lagging` says when the backlog reached its limit.',
      tags,
      auth,
      params: WebhookEndpointParams,
      query: DeliveriesQuery,
      responses: { 200: { schema: WebhookDeliveryPage, description: 'A page of deliveries' } },
      problems: ['webhook_endpoint_not_found'],
      public: true,
      handler: async ({ grant, query }) => ({ status: 200, body: await webhooks.deliveries(grant, query) }),
    }),
    writeRoute(deps, operations.retry, {
      method: 'POST',
      path: `${path}/deliveries/:deliveryId/retry`,
      idParam: 'deliveryId',
      operationId: 'retryWebhookDelivery',
      summary: 'Send one delivery again now (our extension)',
      description:
        "Queues the delivery, due now, with a new round of the retry schedule; it is attempted within seconds, inside the endpoint's budget of 10 notifications per minute. A superseded delivery can be retried too: it is then sent as it is (receivers ignore a revision not newer than the one they hold).",
      tags,
      params: DeliveryParams,
      noBody: true,
      answers: { 202: 'Queued' },
      problems: ['webhook_endpoint_not_found', 'webhook_delivery_not_found', 'webhook_endpoint_disabled'],
    }),
    writeRoute(deps, operations.test, {
      method: 'POST',
      path: `${path}/test`,
      idParam: 'clientCode',
      operationId: 'testWebhookEndpoint',
      summary: 'Send a signed ping to the endpoint (our extension)',
      description:
        'Queues a `ping` notification, signed like every other and sent within seconds, so you can check your receiver without changing any data: `type` `ping`, `resource` `{type: "webhook_endpoint", id: <clientCode>}`, `revision` 0, a fresh `eventId`. It is attempted once, ahead of other due notifications and within the same budget of 10 per endpoint per minute; a failure is not retried (the delivery log shows the attempt; ask again). Asked again while a ping still waits, the same ping is answered.',
      tags,
      params: WebhookEndpointParams,
      noBody: true,
      answers: { 202: 'The ping, queued (its delivery, as the delivery log shows it)' },
      problems: ['webhook_endpoint_not_found', 'webhook_endpoint_disabled'],
    }),
    defineRoute({
      method: 'POST',
      path: `${path}/replay`,
      operationId: 'replayWebhookNotifications',
      summary: 'Queue again every notification after a change-feed cursor (our extension)',
      description:
        'Every change-feed event after `after` that the grant may read, up to what the worker has already turned into deliveries, is queued again, due now; events without a delivery (committed while the endpoint was disabled, or before it was configured) get one.',
      tags,
      auth,
      params: WebhookEndpointParams,
      body: { schema: ReplayBody, mediaType: 'application/json' },
      responses: { 202: { schema: ReplayResult, description: 'Queued' } },
      problems: ['webhook_endpoint_not_found', 'webhook_endpoint_disabled', 'cursor_expired'],
      public: true,
      handler: async ({ grant, body, slot }) => ({ status: 202, body: await webhooks.replay(grant, body.after, slot) }),
    }),
  ]
}
