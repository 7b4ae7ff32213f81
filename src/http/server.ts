import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import pino from 'pino'
import type { Config } from '../config.ts'
import { isProblem, Problem } from '../domain/problems.ts'
import { CommitOutcomeUnknownError, type Queryable } from '../store/store.ts'
import {
  authorize,
  bearerToken,
  type Caller,
  constantTimeEqualHex,
  digestSecret,
  type Grant,
  invalidKey,
  presentedKeyDigest,
} from './auth.ts'
import { assertStorableParameters, parseJsonBody } from './json-body.ts'
import type { Gate, GateOutcome, GateRequest, Lease } from './limits.ts'
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
 * A request URL as the logs may show it. The hosted payment page's address, `/pay/<token>`, carries the page's
 * only credential (whoever has it can open the page and, in sandbox, pay or fail the request): anything under
 * `/pay/` but the page's stylesheet is logged as `/pay/[redacted]`, query string and all. The path is judged
 * decoded and case-insensitively, so `/%70ay/<token>` is not a way around it.
 */
export function loggedUrl(url: string): string {
  const path = url.split('?')[0] ?? ''
  let decoded = path
  try {
    decoded = decodeURIComponent(path)
  } catch {}
  if (!/^\/pay\//i.test(decoded) || /^\/pay\/assets\/[^?]*$/i.test(decoded)) return url
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
  /** API key, grant, rate and concurrency limits: one decision before any work (src/http/limits.ts). */
  gate: Gate
  /** The operator token's digest; a function when it is known only once the store is reachable (src/main.ts). */
  adminTokenDigest: string | (() => string)
  /**
   * Web pages served under a path prefix (the hosted payment page): a path the router itself refuses there
   * (an undecodable or over-long segment) answers that page family's 404 page, never problem+json.
   */
  pages?: readonly { prefix: string; notFound: { headers: Readonly<Record<string, string>>; html: string } }[]
  /**
   * Sandbox clocks (src/resources/sandbox-clock/clock.ts): runs the handler of a route with a `{clientCode}`
   * parameter at that client's time. Absent in production: the handler runs as it is.
   */
  atClientTime?: <T>(clientCode: string, fn: () => Promise<T>) => Promise<T>
}

interface RequestState {
  params: Record<string, unknown>
  query: Record<string, unknown>
  caller: Caller | null
  grant: Grant | null
  /** The concurrency slot, from its claim until `releaseSlot` gives it back. */
  lease: Lease | null
  /** The HTTP exchange has ended (response written, or the client went away). */
  closed: boolean
  /** The route handler finished: a write may have committed, so a later failure must not say "Nothing was saved". */
  handled: boolean
  /** Which limit refused the request (its 429), for the metrics (src/http/metrics.ts); null when none did. */
  refusedBy: 'rate' | 'concurrency' | null
  /**
   * A `oneRead` route on a gate that can run in the read (Gate.enterWithRead): the gate has not run yet; it runs
   * in the handler's one statement, or (should the handler end without a statement) on its own after it.
   */
  deferred: { req: GateRequest; done: boolean } | null
}

declare module 'fastify' {
  interface FastifyRequest {
    irs: RequestState | null
  }
}

const UNEXPECTED = 'An unexpected error prevented a safe commit. Nothing was saved. Retry with backoff.'
const AFTER_HANDLER =
  'The request was processed, but its answer could not be produced; it may have been saved. Read the resource before retrying.'
const COMMIT_OUTCOME_UNKNOWN =
  'The database connection was lost while this write was being committed, so its outcome is unknown. Retrying the identical request is safe: every write is idempotent by its identity.'

/**
 * Gives the request's concurrency slot back, once. Never throws: it runs after the request's work (often after
 * commit), and a failure there (logged, retried in the background by the gate) must not change the answer.
 */
function releaseSlot(state: RequestState | null): Promise<void> {
  const lease = state?.lease
  if (!state || !lease) return Promise.resolve()
  state.lease = null
  return lease.release()
}

/**
 * The store as a `oneRead` route's handler sees it: one statement, its text fixed (prepared by name). A second
 * statement is a route declared `oneRead` that is not: an error, so that a test finds it. `run` runs the
 * statement (with the request's gate in it, where the gate can: see the route handler).
 */
function oneReadDb(
  db: Queryable,
  operationId: string,
  run?: <T extends object>(sql: string, params: readonly unknown[]) => Promise<T[]>,
): Queryable {
  let used = false
  return {
    async query<T extends object>(sql: string, params: readonly unknown[] = []): Promise<T[]> {
      if (used) throw new Error(`${operationId} is declared oneRead but ran a second statement`)
      used = true
      return run ? run<T>(sql, params) : db.query<T>(sql, params, { prepared: true })
    },
    exec: (sql) => db.exec(sql),
  }
}

/**
 * How long a response waits for its slot's release. A store that hangs (no answer while PostgreSQL restarts;
 * the pool waits up to 10 s for a connection) must not hold back a committed answer: the release goes on in
 * the background, and the client's next request may meet a 429 with Retry-After 1 meanwhile.
 */
const RELEASE_WAIT_MS = 2000

async function releaseSlotWithin(state: RequestState | null, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const waited = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms)
  })
  try {
    await Promise.race([releaseSlot(state), waited])
  } finally {
    clearTimeout(timer)
  }
}

/** TRUST_PROXY as Fastify takes it: a hop count trusts that many proxies nearest the service. */
function trustProxyOption(setting: false | number | string[]): boolean | string[] | ((address: string, hop: number) => boolean) {
  return typeof setting === 'number' ? (_address, hop) => hop < setting : setting
}

/**
 * The operator token check of every operator route (and of /metrics, src/http/metrics.ts): a missing or wrong
 * token is `401 invalid_admin_token`, compared in constant time.
 */
export function assertOperatorToken(authorization: string | undefined, adminTokenDigest: string | (() => string)): void {
  const token = bearerToken(authorization)
  const expected = typeof adminTokenDigest === 'function' ? adminTokenDigest() : adminTokenDigest
  if (!token || !constantTimeEqualHex(digestSecret(token), expected)) {
    throw new Problem('invalid_admin_token', 'The operator token is missing or wrong.')
  }
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
      const page = deps.pages?.find((p) => request.url.startsWith(p.prefix))
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
  app.decorateRequest('irs', null)

  // Every response, success or error, carries these.
  app.addHook('onRequest', async (request, reply) => {
    reply.header('cache-control', 'no-store')
    reply.header('service-api-version', 'v1')
    reply.header('x-request-id', request.id)
  })
  // The concurrency slot lives exactly as long as the HTTP exchange, and is given back in the two places
  // every exchange passes through: here, before the response is written (so a client that waits for each
  // response before sending the next request is never refused), and on the connection's end (see `gate`),
  // for a request whose client went away before it was answered. `releaseSlot` never throws.
  app.addHook('onSend', async (request, _reply, payload) => {
    await releaseSlotWithin(request.irs, RELEASE_WAIT_MS)
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

  app.setErrorHandler((err, request, reply) => {
    let problem = isProblem(err) ? err : problemFromFastifyError(err as { code?: string; statusCode?: number })
    if (!problem) {
      const e = err as { name?: string; code?: string; message?: string; stack?: string }
      // Never the error's `detail` or parameters: they can hold customer data.
      request.log.error({ errName: e.name, errCode: e.code, errMessage: e.message, stack: e.stack }, 'unexpected error')
      // "Nothing was saved" only while it is true: once a write's handler has finished, it may have committed.
      const mayHaveSaved = request.irs?.handled === true && request.method !== 'GET' && request.method !== 'HEAD'
      problem = new Problem(
        'projection_unavailable',
        err instanceof CommitOutcomeUnknownError ? COMMIT_OUTCOME_UNKNOWN : mayHaveSaved ? AFTER_HANDLER : UNEXPECTED,
      )
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

  /** The client went away while the gate was waiting on the store: stop here, holding nothing. */
  function abandon(request: FastifyRequest, reply: FastifyReply, state: RequestState, stage: string): Promise<void> {
    request.log.info({ stage }, 'client closed the connection before the request was served')
    // Hijacked, Fastify runs nothing more for this request (no body parsing that would wait forever on a
    // closed stream, no handler); there is no one to answer.
    reply.hijack()
    return releaseSlot(state)
  }

  async function gate(def: RouteDef, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const state: RequestState = {
      params: {},
      query: {},
      caller: null,
      grant: null,
      lease: null,
      closed: false,
      handled: false,
      refusedBy: null,
      deferred: null,
    }
    request.irs = state
    // The exchange's end frees the slot, whatever stage the request is at: the response's 'close' comes when
    // it is written or its connection ends; the request's, with `aborted`, when the client goes away before
    // the request is complete (a pipelined request has no response socket yet). Measured before this: a
    // request aborted while its slot was being claimed kept the key at 429 for the whole 30 s lease.
    const onEnd = () => {
      state.closed = true
      void releaseSlot(state)
    }
    reply.raw.once('close', onEnd)
    request.raw.once('close', () => {
      if (request.raw.aborted) onEnd()
    })
    if (request.raw.socket?.destroyed === true) state.closed = true

    // Route parameters and query strings may not carry text the store cannot keep (`%00`), whatever the route.
    assertStorableParameters(request.params, '/path', 'A route parameter')
    assertStorableParameters(request.query ?? {}, '/query', 'A query parameter')
    // Route parameters are validated before authentication (spec, endpoint rule 12).
    if (def.params) state.params = parseOrThrow(def.params, request.params, '/path', 'A route parameter') as Record<string, unknown>
    if (def.query) state.query = parseOrThrow(def.query, request.query ?? {}, '/query', 'A query parameter') as Record<string, unknown>

    if (def.auth.kind === 'admin') {
      assertOperatorToken(request.headers.authorization, deps.adminTokenDigest)
    } else if (def.auth.kind === 'api_key') {
      const clientCode = String(state.params.clientCode)
      const digest = presentedKeyDigest(request.headers.authorization, deps.config.environment)
      const gateRequest: GateRequest = { digest, environment: deps.config.environment, clientCode, log: request.log }
      // A request whose whole work is one read: its gate runs in that read's statement (one round trip in all).
      if (def.oneRead && deps.gate.enterWithRead) {
        state.deferred = { req: gateRequest, done: false }
        return
      }
      // One round trip: the key and its grant, the minute's count, a slot in every bucket (src/http/limits.ts).
      const outcome = await deps.gate.enter(gateRequest)
      if (!outcome.caller) throw invalidKey()
      state.caller = outcome.caller
      state.lease = outcome.lease
      // Closed while the gate ran: its 'close' found no slot to give back, so give it back now.
      if (state.closed) return abandon(request, reply, state, 'gate')
      admit(def, request, reply, state, outcome)
      return
    }
    checkMediaType(def, request)
  }

  /**
   * The gate's outcome applied, in the order every request meets it: the key (401), the rate headers, the
   * limits (429), the grant, its scopes and IP allowlist (403), then the body's media type (415).
   */
  function admit(def: RouteDef, request: FastifyRequest, reply: FastifyReply, state: RequestState, outcome: GateOutcome): void {
    if (!outcome.caller) throw invalidKey()
    state.caller = outcome.caller
    const rate = outcome.rate
    state.refusedBy = outcome.refused
    reply.header('ratelimit-policy', `"per-minute";q=${rate.limit};w=60`)
    reply.header('ratelimit', `"per-minute";r=${rate.remaining};t=${rate.resetSeconds}`)
    if (outcome.refused === 'rate') {
      throw new Problem(
        'rate_limit_exceeded',
        `At most ${rate.limit} requests a minute are accepted; retry after ${rate.resetSeconds} s.`,
        {
          headers: { 'retry-after': String(rate.resetSeconds) },
        },
      )
    }
    if (outcome.refused === 'concurrency') {
      throw new Problem(
        'rate_limit_exceeded',
        'Another request with this API key (or, in sandbox, this client) is still running; send one at a time.',
        { headers: { 'retry-after': '1' } },
      )
    }
    if (def.auth.kind === 'api_key') state.grant = authorize(outcome.caller, String(state.params.clientCode), def.auth.scopes, request.ip)
    checkMediaType(def, request)
  }

  /** A deferred gate (see RequestState.deferred) that the handler's statement did not run: run it on its own. */
  async function gateAfterHandler(def: RouteDef, request: FastifyRequest, reply: FastifyReply, state: RequestState): Promise<void> {
    const deferred = state.deferred
    if (!deferred || deferred.done) return
    deferred.done = true
    const outcome = await deps.gate.enter(deferred.req)
    if (outcome.caller) state.lease = outcome.lease
    // Closed meanwhile: its 'close' found no slot to give back.
    if (state.closed) void releaseSlot(state)
    admit(def, request, reply, state, outcome)
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
        const deferred = state.deferred
        const enterWithRead = deps.gate.enterWithRead
        // The gate and the read in one statement; the rows are used only once the request is admitted.
        const scopes = def.auth.kind === 'api_key' ? def.auth.scopes : []
        const gatedRead =
          deferred && enterWithRead
            ? async <T extends object>(sql: string, params: readonly unknown[]): Promise<T[]> => {
                deferred.done = true
                const { outcome, rows } = await enterWithRead<T>(deferred.req, { sql, params, scopes })
                admit(def, request, reply, state, outcome)
                return rows
              }
            : undefined
        const run = () =>
          def.handler({
            params: state.params,
            query: state.query,
            body,
            // A getter: on a route whose gate runs in its read, the grant is known once that read has run.
            get grant() {
              return state.grant as Grant
            },
            clientCode,
            requestId: request.id,
            ip: request.ip,
            log: request.log,
            db: def.oneRead ? oneReadDb(deps.db, def.operationId, gatedRead) : deps.db,
            slot: {
              releaseIn: async (tx) => {
                const lease = state.lease
                return lease?.releaseIn ? lease.releaseIn(tx) : () => {}
              },
            },
            requireScopes: (scopes) => {
              if (state.caller) state.grant = authorize(state.caller, clientCode, scopes, request.ip)
            },
          })
        let result: Awaited<ReturnType<typeof run>>
        try {
          result = deps.atClientTime && clientCode ? await deps.atClientTime(clientCode, run) : await run()
        } catch (err) {
          // Authentication and the limits answer before anything the handler found.
          await gateAfterHandler(def, request, reply, state)
          throw err
        }
        await gateAfterHandler(def, request, reply, state)
        state.handled = true
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
