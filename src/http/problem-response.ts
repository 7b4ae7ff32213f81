import type { FastifyReply, FastifyRequest } from 'fastify'
import { Problem, problemCatalogue } from '../domain/problems.ts'

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

export function sendProblem(request: FastifyRequest, reply: FastifyReply, problem: Problem, docsUrl: string) {
  if (problem.headers) reply.headers(problem.headers)
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
