import type { FastifyReply, FastifyRequest } from 'fastify'
import { Problem, type ProblemCode, problemCatalogue } from '../domain/problems.ts'

export interface ProblemBody {
  type: string
  title: string
  status: number
  detail: string
  requestId: string
  errors?: { code: string; detail: string; pointer: string }[]
  [extension: string]: unknown
}

export function problemBody(problem: Problem, requestId: string, docsUrl: string): ProblemBody {
  const entry = problemCatalogue[problem.code]
  return {
    ...problem.extensions,
    type: `${docsUrl}/problems/${problem.code}`,
    title: entry.title,
    status: entry.status,
    detail: problem.detail,
    requestId,
    ...(problem.errors ? { errors: problem.errors } : {}),
  }
}

/** The protection space of each credential a 401 can be about (RFC 9110 section 11.6.1). */
const REALMS: Partial<Record<ProblemCode, string>> = {
  invalid_api_key: 'inbound-receivables',
  invalid_admin_token: 'inbound-receivables-operator',
}

/**
 * The challenge every 401 carries (RFC 6750 section 3): the realm, and `error="invalid_token"` when a Bearer
 * credential was presented but refused. A request with no credential (or another scheme) gets no error code.
 */
export function bearerChallenge(problem: Problem, authorization: string | undefined): string {
  const realm = REALMS[problem.code] ?? 'inbound-receivables'
  const presented = authorization !== undefined && /^bearer(\s|$)/i.test(authorization.trim())
  return presented ? `Bearer realm="${realm}", error="invalid_token"` : `Bearer realm="${realm}"`
}

export function sendProblem(request: FastifyRequest, reply: FastifyReply, problem: Problem, docsUrl: string) {
  if (problem.headers) reply.headers(problem.headers)
  if (problem.status === 401) reply.header('www-authenticate', bearerChallenge(problem, request.headers.authorization))
  return reply
    .code(problem.status)
    .type('application/problem+json')
    .send(JSON.stringify(problemBody(problem, request.id, docsUrl)))
}

/** Fastify's own errors (body parsing, limits) in the service's vocabulary. */
export function problemFromFastifyError(err: { code?: string; statusCode?: number; message?: string }): Problem | null {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new Problem('request_too_large', 'The request body exceeds 256 KiB.')
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return new Problem('unsupported_media_type', 'Send an uncompressed application/json body.')
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new Problem('malformed_json', 'The request body is not valid JSON.')
  }
  if (err.statusCode === 400) return new Problem('malformed_json', 'The request could not be read as JSON.')
  return null
}
