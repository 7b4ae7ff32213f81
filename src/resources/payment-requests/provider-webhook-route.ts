import type { FastifyInstance } from 'fastify'
import type { ProviderEvents } from './provider-events.ts'

/**
 * `POST /providers/stripe/webhooks/{clientCode}`: where Stripe sends a client's events (the URL the operator's
 * `GET .../payment-provider` gives). Public: no API key and no operator token; what proves the sender is the
 * signature over the raw body, verified with the client's webhook secret (provider-events.ts). So the route is not
 * in the v1 route table, nor in /v1/openapi.json: no integrator calls it, its request is Stripe's event format and
 * its only answers are 200, 400 and 404 for Stripe's delivery machinery (docs/decisions.md, "Taking real
 * payments"). Registered in its own scope, whose one body parser keeps the bytes as they came (any media type,
 * PROVIDER_EVENT_BODY_LIMIT_BYTES at most): a signature covers exact bytes, and JSON parsed and written again
 * does not verify.
 */
export const PROVIDER_EVENT_BODY_LIMIT_BYTES = 512 * 1024

export function registerProviderWebhooks(app: FastifyInstance, events: Pick<ProviderEvents, 'receive'>): void {
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers()
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: PROVIDER_EVENT_BODY_LIMIT_BYTES }, (_request, body, done) =>
      done(null, body),
    )
    scope.post('/providers/stripe/webhooks/:clientCode', async (request, reply) => {
      const { clientCode } = request.params as { clientCode: string }
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0)
      const answer = await events.receive(clientCode, body, request.headers)
      return reply.code(answer.status).type('application/json; charset=utf-8').send(answer.body)
    })
  })
}
