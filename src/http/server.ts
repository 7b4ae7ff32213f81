import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import pino from 'pino'
import type { Grant } from '../access/grants.ts'
import type { Config } from '../config.ts'
import { isProblem, Problem } from '../domain/problems.ts'
import { noStatement } from '../store/one-statement.ts'
import { CommitOutcomeUnknownError, FailedAfterCommitError, type Queryable } from '../store/store.ts'
import type { SlotRelease } from '../store/transactions.ts'
import {
  type Admission,
  AdmissionChanged,
  type Admitted,
  createAdmission,
  type Entry,
  type Exchange,
  releaseBeforeSend,
} from './admission.ts'
import { parseJsonBody } from './json-body.ts'
import type { Gate } from './limits.ts'
import { problemFromFastifyError, sendProblem } from './problem-response.ts'
import type { RouteDef, RouteResult } from './route.ts'
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
  // A client's Stripe keys (src/admin/payment-provider-routes.ts).
  'secretKey',
  '*.secretKey',
  'webhookSecret',
  '*.webhookSecret',
  // Webhook destinations (request paths stay visible: they carry only opaque identifiers).
  'webhookUrl',
  '*.webhookUrl',
  'destination',
  '*.destination',
  'body',
  '*.body',
]

/**
 * Options of every logger of the service: redaction always; pretty lines when stdout is a terminal (a person
 * reads it), JSON lines otherwise (a supervisor or a log shipper reads it). pino-pretty is loaded only then.
 */
let stdoutDestination: pino.DestinationStream | undefined

/**
 * Every logger of the process (the start-up logger in src/main.ts and each Fastify instance's) writes through this
 * one synchronous destination. With pino's default (one asynchronous destination per logger) two loggers' lines
 * could reach stdout out of order, and a line still being written when the process exits came out after a later
 * one or not at all (CI once read "stopped" before the SIGTERM line logged before it). Sync writes cost a few
 * microseconds per line; see docs/decisions.md, "Logs".
 */
function stdoutLog(): pino.DestinationStream {
  stdoutDestination ??= pino.destination({ dest: 1, sync: true })
  return stdoutDestination
}

export function logOptions(level: string) {
  const common = { level, redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' }, serializers: { req: logRequest } }
  if (!process.stdout.isTTY) return { ...common, stream: stdoutLog() }
  const pretty: typeof import('pino-pretty').build = createRequire(import.meta.url)('pino-pretty')
  return { ...common, stream: pretty({ sync: true }) }
}

/**
 * The path of a request target as the router matches it, whatever its form (RFC 9112 section 3.2): the origin
 * form `/pay/x?q`, and the absolute form `http://host/pay/x?q` that a client may send and Fastify's router
 * serves as `/pay/x`. Cut at `?`, `;` or `#` as the router cuts it; repeated leading slashes are one.
 */
export function targetPath(url: string): string {
  const origin = url.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/, '')
  const path = origin.split(/[?;#]/)[0] ?? ''
  return path.replace(/^\/{2,}/, '/')
}

/**
 * A request URL as the logs may show it. The hosted payment page's address, `/pay/<token>`, carries the page's
 * only credential (whoever has it can open the page and, in sandbox, pay or fail the request): anything under
 * `/pay/` but the page's stylesheet is logged as `/pay/[redacted]`, query string and all. The path is judged as
 * the router parses it (targetPath: an absolute-form target `http://host/pay/<token>` too), decoded and
 * case-insensitively, so `/%70ay/<token>` is not a way around it.
 */
export function loggedUrl(url: string): string {
  const path = targetPath(url)
  let decoded = path
  try {
    decoded = decodeURIComponent(path)
  } catch {}
  if (!/^\/pay(\/|$)/i.test(decoded)) return url
  if (/^\/pay\/assets\/[^?]*$/i.test(decoded) && path === url) return url
  return '/pay/[redacted]'
}

/** Fastify's request serializer (method, url, host, address), with the URL as loggedUrl gives it. */
function logRequest(req: {
  method?: string
  url?: string
  host?: string
  ip?: string
  headers?: Record<string, string | string[] | undefined>
  socket?: { remotePort?: number }
}) {
  return {
    method: req.method,
    url: loggedUrl(req.url ?? ''),
    version: String(req.headers?.['accept-version'] ?? '') || undefined,
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  }
}

export interface HttpDeps {
  db: Queryable
  config: Pick<Config, 'environment' | 'docsUrl' | 'logLevel'> & Partial<Pick<Config, 'trustProxy'>>
  /** API key, grant, rate and concurrency limits: one decision before any work (src/http/admission.ts). */
  gate: Gate
  /** The operator token's digest; a function when it is known only once the store is reachable (src/main.ts). */
  adminTokenDigest: string | (() => string)
  /**
   * Web pages served under a path prefix (the hosted payment page): a path the router itself refuses there
   * (an undecodable or over-long segment) answers that page family's 404 page, never problem+json.
   */
  pages?: readonly { prefix: string; notFound: { headers: Readonly<Record<string, string>>; html: string } }[]
  /**
   * Sandbox clocks (src/sandbox/clock.ts): runs the handler of a route with a `{clientCode}`
   * parameter at that client's time. Absent in production: the handler runs as it is.
   */
  atClientTime?: <T>(clientCode: string, fn: () => Promise<T>) => Promise<T>
}

const UNEXPECTED = 'An unexpected error prevented a safe commit. Nothing was saved. Retry with backoff.'
const AFTER_HANDLER =
  'The request was processed, but its answer could not be produced; it may have been saved. Read the resource before retrying.'
const SAVED_WITHOUT_ANSWER =
  'The write was saved, but its answer could not be produced. Read the resource to see it; retrying the identical request is safe: every write is idempotent by its identity.'
const COMMIT_OUTCOME_UNKNOWN =
  'The database connection was lost while this write was being committed, so its outcome is unknown. Retrying the identical request is safe: every write is idempotent by its identity.'

/** TRUST_PROXY as Fastify takes it: a hop count trusts that many proxies nearest the service. */
function trustProxyOption(setting: false | number | string[]): boolean | string[] | ((address: string, hop: number) => boolean) {
  return typeof setting === 'number' ? (_address, hop) => hop < setting : setting
}

function compilePath(path: string): RegExp {
  return new RegExp(`^${path.replace(/:[A-Za-z]+/g, '[^/]+')}$`)
}

export function buildServer(deps: HttpDeps, routes: RouteDef[]): FastifyInstance {
  const app = Fastify({
    logger: logOptions(deps.config.logLevel),
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    bodyLimit: BODY_LIMIT_BYTES,
    return503OnClosing: true,
    // Which address `request.ip` (the IP allowlist, the logs) is: the socket's, unless TRUST_PROXY names the
    // proxies whose X-Forwarded-For may be believed (a hop count or their addresses; never "everyone").
    trustProxy: trustProxyOption(deps.config.trustProxy ?? false),
    // Long enough for any parameter our schemas could accept, so they (not the router) judge it.
    routerOptions: { maxParamLength: 512 },
    // The router's own refusals (undecodable or over-long path segments) answer like everything else.
    frameworkErrors: (err, request, reply) => {
      reply.header('cache-control', 'no-store')
      reply.header('service-api-version', 'v1')
      reply.header('x-request-id', request.id)
      const page = deps.pages?.find((p) => targetPath(request.url).startsWith(p.prefix))
      if (page) {
        const html = reply as unknown as FastifyReply
        return html.code(404).headers(page.notFound.headers).type('text/html; charset=utf-8').send(page.notFound.html)
      }
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
  const admission = createAdmission({
    gate: deps.gate,
    environment: deps.config.environment,
    adminTokenDigest: deps.adminTokenDigest,
    db: deps.db,
  })
  app.decorateRequest('exchange', null)

  // Every response, success or error, carries these.
  app.addHook('onRequest', async (request, reply) => {
    reply.header('cache-control', 'no-store')
    reply.header('service-api-version', 'v1')
    reply.header('x-request-id', request.id)
  })
  // A slot still held is given back before the response is written (src/http/admission.ts, step 5); never throws.
  app.addHook('onSend', async (request, _reply, payload) => {
    await releaseBeforeSend(request.exchange)
    return payload
  })

  app.removeAllContentTypeParsers()
  // The one body parser of every route, operator routes included: malformed JSON is a 400, text the store
  // cannot keep (U+0000, unpaired surrogates) a 422, both before anything reaches the store.
  app.addContentTypeParser(['application/json', 'application/merge-patch+json'], { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as string))
    } catch (err) {
      done(err as Error, undefined)
    }
  })

  app.setErrorHandler(async (failure, request, reply) => {
    let thrown: unknown = failure
    // A body refused before the handler (malformed JSON, too large) while the gate was still pending (admission.ts,
    // step 3): the gate answers first, and its refusal is the answer.
    if (request.exchange?.pendingGate) {
      try {
        await admission.meetPending(request, reply, request.exchange)
      } catch (refusal) {
        thrown = refusal
      }
    }
    const err = thrown instanceof AnswerError ? thrown.cause : thrown
    const handled = thrown instanceof AnswerError
    let problem = isProblem(err) ? err : problemFromFastifyError(err as { code?: string; statusCode?: number })
    if (!problem) {
      const e = err as { name?: string; code?: string; message?: string; stack?: string }
      // Never the error's `detail` or parameters: they can hold customer data.
      request.log.error({ errName: e.name, errCode: e.code, errMessage: e.message, stack: e.stack }, 'unexpected error')
      // "Nothing was saved" only while it is true: once a write's handler has finished, it may have committed.
      const mayHaveSaved = handled && request.method !== 'GET' && request.method !== 'HEAD'
      problem = new Problem(
        'projection_unavailable',
        err instanceof CommitOutcomeUnknownError
          ? COMMIT_OUTCOME_UNKNOWN
          : err instanceof FailedAfterCommitError
            ? SAVED_WITHOUT_ANSWER
            : mayHaveSaved
              ? AFTER_HANDLER
              : UNEXPECTED,
      )
    }
    if (problem.code === 'request_too_large') reply.header('connection', 'close')
    return sendProblem(request, reply, problem, docsUrl)
  })

  const matchers = routes.map((r) => ({ method: r.method, re: compilePath(r.path) }))
  app.setNotFoundHandler((request, reply) => {
    const path = targetPath(request.url)
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

  for (const def of routes) {
    app.route({
      method: def.method,
      url: def.path,
      // Admission, before any byte of the body is read (src/http/admission.ts, steps 1 and 2).
      onRequest: async (request, reply) => {
        const exchange = admission.open(request, reply)
        request.exchange = exchange
        exchange.entry = await admission.enter(def, request, reply, exchange)
      },
      handler: routeHandler(def, deps, admission),
    })
  }
  return app
}

/**
 * A route's handler around its definition's: the body against its schema, the one-read route's read (with the
 * gate where it runs in it: admission.ts, step 3), the definition's handler at the client's time, the answer.
 */
function routeHandler(def: RouteDef, deps: HttpDeps, admission: Admission) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const exchange = request.exchange as Exchange
    const entry = exchange.entry as Entry
    let body: unknown
    if (def.body) {
      const raw = request.body === undefined && def.body.optional ? {} : request.body
      try {
        body = parseOrThrow(def.body.schema, raw, '', 'The request body')
      } catch (err) {
        // A gate still pending answers first (admission.ts, step 3): its refusal, before anything of the body.
        await admission.meetPending(request, reply, exchange)
        throw err
      }
    }
    const clientCode = String(entry.params.clientCode ?? '')
    const handle = (admitted: Admitted | null, read: unknown, slot: SlotRelease) =>
      def.handler({
        params: entry.params,
        query: entry.query,
        body,
        grant: admitted?.grant as Grant,
        ...(admitted ? { apiKeyId: admitted.caller.apiKeyId } : {}),
        clientCode,
        requestId: request.id,
        ip: request.ip,
        log: request.log,
        read,
        db: def.oneRead ? noStatement(def.operationId) : deps.db,
        slot,
        requireScopes: (scopes) => admission.requireScopes(admitted, clientCode, scopes, request.ip),
      })
    const run = async () => {
      const { admitted, read } = await admission.read(def, request, reply, exchange, entry)
      if (!exchange.pendingGate) return handle(admitted, read, exchange.slot)
      // The gate leaves ahead of the write's BEGIN (admission.ts, step 3).
      let result: RouteResult
      try {
        result = await handle(admitted, read, admission.admittingSlot(request, reply, exchange))
      } catch (err) {
        // Admitted as another caller than the one it ran as: rolled back; once more, as that caller.
        if (err instanceof AdmissionChanged) return handle(err.admitted, read, exchange.slot)
        await admission.meetPending(request, reply, exchange)
        throw err
      }
      // A handler that ended without its transaction never sent the gate: it answers now, a refusal first.
      await admission.meetPending(request, reply, exchange)
      return result
    }
    const result = deps.atClientTime && clientCode ? await deps.atClientTime(clientCode, run) : await run()
    try {
      return respond(def, reply, result)
    } catch (err) {
      throw new AnswerError(err)
    }
  }
}

/** The handler's result as the response: its status must be documented, its body passes the status's schema. */
function respond(def: RouteDef, reply: FastifyReply, result: RouteResult): FastifyReply {
  if (result.headers) reply.headers(result.headers)
  reply.code(result.status)
  const response = def.responses[result.status]
  if (!response) throw new Error(`${def.operationId} answered undocumented status ${result.status}`)
  if (response.schema === null || result.body === undefined) return reply.send()
  // Response schemas are an allowlist: nothing the schema does not name leaves the service.
  const out = result.validated ? result.body : response.schema.parse(result.body)
  return reply.type('application/json; charset=utf-8').send(JSON.stringify(out))
}

/**
 * An error after the route's handler finished (producing its answer): a write may have committed, so the error
 * handler must not say "Nothing was saved".
 */
class AnswerError extends Error {
  override readonly name = 'AnswerError'
  constructor(override readonly cause: unknown) {
    super('the answer could not be produced', { cause })
  }
}
