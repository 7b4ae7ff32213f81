import { type ProblemCode, problemCatalogue } from './generated/problems.ts'
import type { components } from './generated/schema.ts'

/** An `application/problem+json` body as the service sends it (generated from the OpenAPI document). */
export type Problem = components['schemas']['Problem'] & Record<string, unknown>

/** Whether a string is a problem code this SDK knows (the service's catalogue when the SDK was generated). */
export function isProblemCode(code: unknown): code is ProblemCode {
  return typeof code === 'string' && Object.hasOwn(problemCatalogue, code)
}

/**
 * The code of a problem `type` URL (`{docs_url}/problems/<code>`), or null when the URL has no such segment or
 * names a code this SDK does not know (a newer service: the raw `type` is still on the problem).
 */
export function problemCodeOf(type: unknown): ProblemCode | null {
  if (typeof type !== 'string') return null
  const match = /\/problems\/([A-Za-z0-9_]+)\/?$/.exec(type)
  return match && isProblemCode(match[1]) ? match[1] : null
}

const inspectCustom = Symbol.for('nodejs.util.inspect.custom')

/**
 * Makes own properties non-enumerable: Node prints an uncaught error with its stack and its enumerable properties
 * (not through the custom inspection), and a `Response` among them is a 100-line dump. They stay readable.
 */
function hide(target: object, keys: readonly string[]): void {
  for (const key of keys) Object.defineProperty(target, key, { enumerable: false })
}

/** One line of text: runs of whitespace (line breaks included) become one space. */
const oneLine = (text: unknown): string => String(text).replace(/\s+/g, ' ').trim()

/** How many field errors the printed line names; the rest are counted (`+N more`). */
const PRINTED_FIELD_ERRORS = 3

/** Any answer other than 2xx. `body` is the parsed JSON body when there was one, else the text (or undefined). */
export class ApiError extends Error {
  readonly status: number
  readonly body: unknown
  readonly response: Response
  /** The service's `X-Request-Id`: quote it to the operator. */
  readonly requestId: string | null

  constructor(message: string, response: Response, body: unknown) {
    super(message)
    this.name = 'ApiError'
    this.status = response.status
    this.body = body
    this.response = response
    this.requestId = response.headers.get('x-request-id')
    hide(this, ['name', 'status', 'body', 'response', 'requestId'])
  }

  /** One line: `<name>: <message>` (console.log, util.inspect and String() all print it, not the Response). */
  override toString(): string {
    return `${this.name}: ${this.message}`
  }

  [inspectCustom](): string {
    return this.toString()
  }
}

/**
 * A problem+json answer. `code` is the typed problem code (null only for a code newer than this SDK); `problem`
 * is the whole body, extension members included (`holds`, `currentSourceRevision`, `errors[]` on 422, ...).
 */
export class ProblemError extends ApiError {
  readonly code: ProblemCode | null
  readonly problem: Problem

  constructor(response: Response, problem: Problem) {
    const code = problemCodeOf(problem.type)
    super(problemLine(response, code, problem), response, problem)
    this.name = 'ProblemError'
    this.code = code
    this.problem = problem
    hide(this, ['code', 'problem'])
  }

  /** On 422: one entry per invalid field (`pointer` is a JSON pointer). Empty otherwise. */
  get fieldErrors(): { code: string; detail: string; pointer: string }[] {
    return this.problem.errors ?? []
  }
}

/**
 * The message of a ProblemError, one line: status, code (the `type` URL for a code newer than this SDK), detail,
 * request id, then the first field errors (`pointer code: detail`), e.g.
 * `422 validation_error: The request is invalid. (request 3f2a...) [/dueDate invalid_date: Must be a date.]`.
 */
function problemLine(response: Response, code: ProblemCode | null, problem: Problem): string {
  const requestId = response.headers.get('x-request-id') ?? (typeof problem.requestId === 'string' ? problem.requestId : null)
  let line = `${response.status} ${code ?? problem.type}: ${oneLine(problem.detail ?? problem.title)}`
  if (requestId) line += ` (request ${requestId})`
  const errors = Array.isArray(problem.errors) ? problem.errors : []
  if (errors.length > 0) {
    const shown = errors.slice(0, PRINTED_FIELD_ERRORS).map((e) => `${e.pointer} ${e.code}: ${oneLine(e.detail)}`)
    if (errors.length > PRINTED_FIELD_ERRORS) shown.push(`+${errors.length - PRINTED_FIELD_ERRORS} more`)
    line += ` [${shown.join('; ')}]`
  }
  return line
}

function looksLikeProblem(body: unknown): body is Problem {
  if (typeof body !== 'object' || body === null) return false
  const b = body as Record<string, unknown>
  return typeof b.type === 'string' && typeof b.title === 'string' && typeof b.status === 'number'
}

/** The error for a non-2xx answer: a ProblemError for a problem+json body, an ApiError for anything else. */
export function errorFor(response: Response, body: unknown): ApiError {
  const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase()
  if (mediaType === 'application/problem+json' && looksLikeProblem(body)) return new ProblemError(response, body)
  return new ApiError(`${response.status} ${response.statusText || 'error'} (not a problem+json answer)`, response, body)
}
