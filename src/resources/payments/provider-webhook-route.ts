import type { FastifyInstance } from 'fastify'
import type { ProviderEvents } from './provider-events.ts'

/**
 * `POST /providers/{provider}/webhooks/{clientCode}`: where a client's payment provider sends its events (the URL the
 * operator's `GET .../payment-provider` gives; Stripe's is this route with the provider named stripe). Public: no API key and
 * no operator token; what proves the sender is the signature over the raw body, verified with the client's webhook
 * secret (provider-events.ts). So the route is not in the v1 route table, nor in /v1/openapi.json: no integrator
 * calls it, its request is the provider's event format and its answers are 200, 400, 404, 413 and 503 for the
 * provider's delivery machinery (docs/decisions.md, "Taking real payments"). Registered in its own scope, whose one
 * body parser keeps the bytes as they came (any media type, PROVIDER_EVENT_BODY_LIMIT_BYTES at most): a signature
 * covers exact bytes, and JSON parsed and written again does not verify.
 */
export const PROVIDER_EVENT_BODY_LIMIT_BYTES = 512 * 1024

export function registerProviderWebhooks(app: FastifyInstance, events: Pick<ProviderEvents, 'receive'>): void {
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers()
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: PROVIDER_EVENT_BODY_LIMIT_BYTES }, (_request, body, done) =>
      done(null, body),
    )
    // This route's own limit, in its own words (the API's 256 KiB is not this route's).
    scope.setErrorHandler((err: { code?: string }, _request, reply) => {
      if (err.code !== 'FST_ERR_CTP_BODY_TOO_LARGE') throw err
      return reply
        .code(413)
        .header('connection', 'close')
        .type('application/json; charset=utf-8')
        .send({ received: false, message: `The request body exceeds ${PROVIDER_EVENT_BODY_LIMIT_BYTES / 1024} KiB.` })
    })
    scope.post('/providers/:provider/webhooks/:clientCode', async (request, reply) => {
      const { provider, clientCode } = request.params as { provider: string; clientCode: string }
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0)
      const answer = await events.receive(provider, clientCode, body, request.headers)
      if (answer.headers) reply.headers(answer.headers)
      return reply.code(answer.status).type('application/json; charset=utf-8').send(answer.body)
    })
  })
}
