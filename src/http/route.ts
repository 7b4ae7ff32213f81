import type { FastifyBaseLogger } from 'fastify'
import type { z } from 'zod'
import type { ProblemCode } from '../domain/problems.ts'
import type { Scope } from '../domain/scopes.ts'
import type { Grant } from './auth.ts'

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

export interface RouteContext<P, Q, B> {
  params: P
  query: Q
  body: B
  /** Present on api_key routes: the caller's grant for the path's client, already authorized. */
  grant: Grant
  clientCode: string
  requestId: string
  ip: string
  log: FastifyBaseLogger
  /** Further scopes a route needs that depend on the body (a batch needs each kind's write scope). */
  requireScopes(scopes: readonly Scope[]): void
}

export interface RouteResult {
  status: number
  body?: unknown
  headers?: Record<string, string>
}

export interface RouteDef<P extends z.ZodType = z.ZodType, Q extends z.ZodType = z.ZodType, B extends z.ZodType = z.ZodType> {
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
  handler(ctx: RouteContext<z.output<P>, z.output<Q>, z.output<B>>): Promise<RouteResult>
}

export function defineRoute<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType>(def: RouteDef<P, Q, B>): RouteDef {
  return def as unknown as RouteDef
}

/** Cross-cutting problems every route of a kind can answer; OpenAPI documents them from here. */
export function crossCuttingProblems(def: RouteDef): ProblemCode[] {
  const codes: ProblemCode[] = []
  if (def.params || def.query || def.body) codes.push('validation_error')
  if (def.auth.kind === 'api_key') codes.push('invalid_api_key', 'client_scope_denied', 'rate_limit_exceeded')
  if (def.auth.kind === 'admin') codes.push('invalid_admin_token')
  if (def.body) codes.push('malformed_json', 'request_too_large', 'unsupported_media_type')
  codes.push('projection_unavailable')
  return codes
}
