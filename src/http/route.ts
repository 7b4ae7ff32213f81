import type { FastifyBaseLogger } from 'fastify'
import type { z } from 'zod'
import type { Grant } from '../access/grants.ts'
import type { ProblemCode } from '../domain/problems.ts'
import type { Scope } from '../domain/scopes.ts'
import type { Queryable } from '../store/store.ts'
import type { SlotRelease } from '../store/transactions.ts'

/**
 * The route object is the contract: method, path, operation id, the Zod schemas of parameters, query,
 * body and responses, the scopes and the problems the route may answer. The same object drives request
 * validation, authorization, response serialization (response schemas are an allowlist) and the OpenAPI
 * document, so none of them can drift from the others.
 */
export type MediaType = 'application/json' | 'application/merge-patch+json'

export type RouteAuth =
  | { kind: 'none' }
  | { kind: 'admin' }
  /** API key with an active grant for the path's client holding every scope listed. */
  | { kind: 'api_key'; scopes: readonly Scope[] }

export interface RouteContext<P, Q, B, R = undefined> {
  params: P
  query: Q
  body: B
  /** Present on api_key routes: the caller's grant for the path's client, already authorized. */
  grant: Grant
  /** Present on api_key routes: the calling API key's id (a write records it as the feed rows' actor, migration 0038). */
  apiKeyId?: string
  clientCode: string
  requestId: string
  ip: string
  log: FastifyBaseLogger
  /** The request's concurrency slot, for a write to free inside its transaction (src/http/admission.ts, Slot). */
  slot: SlotRelease
  /** On a route declared `oneRead`: what its read returned (run by the server, src/http/admission.ts); else undefined. */
  read: R
  /**
   * The store, for this request's reads. On a route declared `oneRead` the read has run already, so any
   * statement here is a programming error (it rejects); on every other route it is the store itself.
   */
  db: Queryable
  /** Further scopes a route needs that depend on the body (a batch needs each kind's write scope). */
  requireScopes(scopes: readonly Scope[]): void
}

export interface RouteResult {
  status: number
  body?: unknown
  headers?: Record<string, string>
  /**
   * The body already passed the status's response schema (a write route's answer, parsed before its COMMIT by
   * executeWrite against the operation's response, which is the route's): it is sent as it is, not parsed twice.
   */
  validated?: true
}

/**
 * A one-read route's read, declared as data the server runs: a store read of one statement through `db`, with
 * the request's parameters. On PostgreSQL that statement is the request's gate too (src/http/admission.ts).
 */
export type OneRead<P, Q, R> = (db: Queryable, request: { clientCode: string; params: P; query: Q }) => Promise<R>

export interface RouteDef<P extends z.ZodType = z.ZodType, Q extends z.ZodType = z.ZodType, B extends z.ZodType = z.ZodType, R = unknown> {
  method: 'GET' | 'PUT' | 'POST' | 'PATCH' | 'DELETE'
  path: string
  operationId: string
  summary: string
  description?: string
  tags: string[]
  auth: RouteAuth
  params?: P
  query?: Q
  body?: { schema: B; mediaType: MediaType; optional?: boolean }
  /** Success statuses and the schema each is serialized through (null: no body). */
  responses: Record<number, { schema: z.ZodType | null; description: string }>
  /** Problems this route can answer beyond the cross-cutting ones (auth, limits, media, validation). */
  problems: readonly ProblemCode[]
  /** Documented in OpenAPI? (the operator API and infrastructure routes are not part of the v1 contract) */
  public: boolean
  /**
   * The route's whole work is this one read (one statement): the server runs it before the handler, on
   * PostgreSQL in the request's gate statement (key, grant, count and a slot held for the statement), so the
   * whole request is one round trip; the handler receives its result as `ctx.read`, with the grant.
   */
  oneRead?: OneRead<z.output<P>, z.output<Q>, R>
  /**
   * A write whose whole work is one request transaction opened with the request's slot (`executeWrite`): on
   * PostgreSQL its gate may leave ahead of that transaction's BEGIN, in its first round trip (src/http/admission.ts,
   * "the gate in the write's first round trip"). Its handler acts on nothing outside that transaction before it.
   */
  gateInWrite?: true
  handler(ctx: RouteContext<z.output<P>, z.output<Q>, z.output<B>, R>): Promise<RouteResult>
}

export function defineRoute<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType, R = undefined>(
  def: RouteDef<P, Q, B, R>,
): RouteDef {
  return def as unknown as RouteDef
}

/** Cross-cutting problems every route of a kind can answer; OpenAPI documents them from here. */
export function crossCuttingProblems(def: RouteDef): ProblemCode[] {
  const codes: ProblemCode[] = []
  if (def.params || def.query || def.body) codes.push('validation_error')
  if (def.auth.kind === 'api_key') codes.push('invalid_api_key', 'client_scope_denied', 'rate_limit_exceeded')
  if (def.auth.kind === 'admin') codes.push('invalid_admin_token')
  // A route that takes no body still reads one that is sent (except on GET): as every JSON body, it must be of the
  // JSON media type, at most 256 KiB and valid JSON; only then is it ignored (docs/decisions.md, "Action routes").
  if (def.body || def.method !== 'GET') codes.push('malformed_json', 'request_too_large', 'unsupported_media_type')
  codes.push('projection_unavailable')
  return codes
}
