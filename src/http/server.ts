import { randomUUID } from 'node:crypto'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import sjson from 'secure-json-parse'
import type { Config } from '../config.ts'
import { isProblem, Problem } from '../domain/problems.ts'
import type { Queryable } from '../store/store.ts'
import { authorize, bearerToken, type Caller, constantTimeEqualHex, digestSecret, type Grant, identifyCaller } from './auth.ts'
import type { Lease, Limiter } from './limits.ts'
import { checkMediaType } from './media.ts'
import { problemFromFastifyError, sendProblem } from './problem-response.ts'
import type { RouteDef } from './route.ts'
import { parseOrThrow } from './validation.ts'

export const BODY_LIMIT_BYTES = 256 * 1024

/** Paths, headers and body fields that must never reach a log line. */
export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'apiKey',
  '*.apiKey',
  'adminToken',
  '*.adminToken',
  'signingSecret',
  '*.signingSecret',
  // Webhook destinations (request paths stay visible: they carry only opaque identifiers).
  'webhookUrl',
  '*.webhookUrl',
  'destination',
  '*.destination',
  'body',
  '*.body',
]

export interface HttpDeps {
  db: Queryable
  config: Pick<Config, 'environment' | 'docsUrl' | 'logLevel'>
  limiter: Limiter
  adminTokenDigest: string
}

interface RequestState {
  params: Record<string, unknown>
  query: Record<string, unknown>
  caller: Caller | null
  grant: Grant | null
  lease: Lease | null
}

declare module 'fastify' {
  interface FastifyRequest {
    irs: RequestState | null
  }
}

const UNEXPECTED = 'An unexpected error prevented a safe commit. Nothing was saved. Retry with backoff.'

function compilePath(path: string): RegExp {
  return new RegExp(`^${path.replace(/:[A-Za-z]+/g, '[^/]+')}$`)
}

export function buildServer(deps: HttpDeps, routes: RouteDef[]): FastifyInstance {
  const app = Fastify({
    logger: { level: deps.config.logLevel, redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' } },
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    bodyLimit: BODY_LIMIT_BYTES,
    return503OnClosing: true,
    // Long enough for any parameter our schemas could accept, so they (not the router) judge it.
    routerOptions: { maxParamLength: 512 },
    // The router's own refusals (undecodable or over-long path segments) answer like everything else.
    frameworkErrors: (err, request, reply) => {
      reply.header('cache-control', 'no-store')
      reply.header('service-api-version', 'v1')
      reply.header('x-request-id', request.id)
      const detail = err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'is longer than any identifier can be' : 'is not a valid URL path'
      return sendProblem(
        request,
        reply,
        new Problem('validation_error', `The request path ${detail}.`, { errors: [{ code: 'invalid_format', detail, pointer: '/path' }] }),
        deps.config.docsUrl,
      )
    },
  })
  const docsUrl = deps.config.docsUrl
  app.decorateRequest('irs', null)

  // Every response, success or error, carries these.
  app.addHook('onRequest', async (request, reply) => {
    reply.header('cache-control', 'no-store')
    reply.header('service-api-version', 'v1')
    reply.header('x-request-id', request.id)
  })
  // The concurrency slot is freed before the response is written, so a client that waits for each
  // response before sending the next request is never refused.
  app.addHook('onSend', async (request, _reply, payload) => {
    await request.irs?.lease?.release()
    return payload
  })
  app.addHook('onRequestAbort', async (request) => {
    await request.irs?.lease?.release()
  })
  app.addHook('onResponse', async (request) => {
    await request.irs?.lease?.release()
  })

  app.removeAllContentTypeParsers()
  app.addContentTypeParser(['application/json', 'application/merge-patch+json'], { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, sjson.parse(body as string, { protoAction: 'error', constructorAction: 'error' }))
    } catch {
      done(new Problem('malformed_json', 'The request body is not valid JSON.'), undefined)
    }
  })

  app.setErrorHandler((err, request, reply) => {
    let problem = isProblem(err) ? err : problemFromFastifyError(err as { code?: string; statusCode?: number })
    if (!problem) {
      const e = err as { name?: string; code?: string; message?: string; stack?: string }
      // Never the error's `detail` or parameters: they can hold customer data.
      request.log.error({ errName: e.name, errCode: e.code, errMessage: e.message, stack: e.stack }, 'unexpected error')
      problem = new Problem('projection_unavailable', UNEXPECTED)
    }
    if (problem.code === 'request_too_large') reply.header('connection', 'close')
    return sendProblem(request, reply, problem, docsUrl)
  })

  const matchers = routes.map((r) => ({ method: r.method, re: compilePath(r.path) }))
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? ''
    const allowed: string[] = [...new Set(matchers.filter((m) => m.re.test(path)).map((m) => m.method))]
    if (allowed.length > 0) {
      if (allowed.includes('GET')) allowed.push('HEAD')
      reply.header('allow', allowed.join(', '))
      return sendProblem(
        request,
        reply,
        new Problem('method_not_allowed', `${request.method} is not allowed here; use ${allowed.join(', ')}.`),
        docsUrl,
      )
    }
    return sendProblem(request, reply, new Problem('route_not_found', `No route ${request.method} ${path}.`), docsUrl)
  })

  async function gate(def: RouteDef, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const state: RequestState = { params: {}, query: {}, caller: null, grant: null, lease: null }
    request.irs = state
    // Route parameters are validated before authentication (spec, endpoint rule 12).
    if (def.params) state.params = parseOrThrow(def.params, request.params, '/path', 'A route parameter') as Record<string, unknown>
    if (def.query) state.query = parseOrThrow(def.query, request.query ?? {}, '/query', 'A query parameter') as Record<string, unknown>

    if (def.auth.kind === 'admin') {
      const token = bearerToken(request.headers.authorization)
      if (!token || !constantTimeEqualHex(digestSecret(token), deps.adminTokenDigest)) {
        throw new Problem('invalid_admin_token', 'The operator token is missing or wrong.')
      }
    } else if (def.auth.kind === 'api_key') {
      const clientCode = String(state.params.clientCode)
      const caller = await identifyCaller(deps.db, request.headers.authorization, deps.config.environment, clientCode)
      state.caller = caller
      const buckets = [`key:${caller.apiKeyId}`]
      // In sandbox the limits hold per client across all its keys too (only for a client the key is granted,
      // so an unknown client code cannot grow the counter table).
      if (deps.config.environment === 'sandbox' && caller.grant) buckets.push(`client:${clientCode}`)
      const rate = await deps.limiter.count(buckets)
      reply.header('ratelimit-policy', `"per-minute";q=${rate.limit};w=60`)
      reply.header('ratelimit', `"per-minute";r=${rate.remaining};t=${rate.resetSeconds}`)
      if (!rate.allowed) {
        throw new Problem(
          'rate_limit_exceeded',
          `At most ${rate.limit} requests a minute are accepted; retry after ${rate.resetSeconds} s.`,
          {
            headers: { 'retry-after': String(rate.resetSeconds) },
          },
        )
      }
      const lease = await deps.limiter.acquire(buckets)
      if (!lease) {
        throw new Problem(
          'rate_limit_exceeded',
          'Another request with this API key (or, in sandbox, this client) is still running; send one at a time.',
          {
            headers: { 'retry-after': '1' },
          },
        )
      }
      state.lease = lease
      state.grant = authorize(caller, clientCode, def.auth.scopes, request.ip)
    }
    checkMediaType(def, request)
  }

  for (const def of routes) {
    app.route({
      method: def.method,
      url: def.path,
      onRequest: async (request, reply) => gate(def, request, reply),
      handler: async (request, reply) => {
        const state = request.irs as RequestState
        let body: unknown
        if (def.body) {
          const raw = request.body === undefined && def.body.optional ? {} : request.body
          body = parseOrThrow(def.body.schema, raw, '', 'The request body')
        }
        const clientCode = String(state.params.clientCode ?? '')
        const result = await def.handler({
          params: state.params,
          query: state.query,
          body,
          grant: state.grant as Grant,
          clientCode,
          requestId: request.id,
          ip: request.ip,
          log: request.log,
          requireScopes: (scopes) => {
            if (state.caller) state.grant = authorize(state.caller, clientCode, scopes, request.ip)
          },
        })
        if (result.headers) reply.headers(result.headers)
        reply.code(result.status)
        const response = def.responses[result.status]
        if (!response) throw new Error(`${def.operationId} answered undocumented status ${result.status}`)
        if (response.schema === null || result.body === undefined) return reply.send()
        // Response schemas are an allowlist: nothing the schema does not name leaves the service.
        const out = response.schema.parse(result.body)
        return reply.type('application/json; charset=utf-8').send(JSON.stringify(out))
      },
    })
  }
  return app
}
