/**
 * Automatic retries, inside the fetch that openapi-fetch calls: an answer worth retrying is sent again (a clone
 * of the same Request, so the identical body) after a wait, at most `maxRetries` times.
 *
 * - 429 (`rate_limit_exceeded`): the service refuses before it runs the request ("nothing was processed"), so it
 *   is retried for every method, POST included. The wait is `Retry-After` (seconds or an HTTP date) when given.
 * - 503 (`projection_unavailable`): retried only for the methods that are idempotent in this API: GET, HEAD, PUT
 *   (identical retry answers 200 and changes nothing), PATCH (a JSON merge patch applied twice changes nothing
 *   the second time) and DELETE. Never for POST: the lifecycle commands, rotate-secret, replay and delivery retry
 *   are not idempotent, and a 503 from something in front of the service does not prove nothing ran.
 * - Nothing else is retried: no other 4xx, no other 5xx, no network error.
 * - Without `Retry-After` the wait is exponential with jitter: a random value in [d/2, d] with
 *   d = min(maxDelayMs, baseDelayMs * 2^(retry-1)). A `Retry-After` longer than `maxRetryAfterMs` is not waited
 *   for: the 429/503 is returned to the caller at once.
 */
export interface RetryOptions {
  /** Retries after the first attempt (default 2: at most 3 attempts). 0 turns retries off. */
  maxRetries?: number
  /** First backoff step without Retry-After (default 500 ms). */
  baseDelayMs?: number
  /** Largest backoff step without Retry-After (default 20 s). */
  maxDelayMs?: number
  /** The longest Retry-After honoured (default 60 s, the rate limit's window); longer ones are not retried. */
  maxRetryAfterMs?: number
  /** Called before each wait: for logging, metrics or tests. */
  onRetry?: (info: RetryInfo) => void
  /** How to wait (default: a timer, cut short by the request's AbortSignal). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>
}

export interface RetryInfo {
  method: string
  url: string
  status: number
  /** 1 for the first retry. */
  retry: number
  delayMs: number
  /** Whether the wait came from the answer's Retry-After header. */
  fromRetryAfter: boolean
}

const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/** Whether an answer with this status may be sent again for this method. */
export function isRetryable(method: string, status: number): boolean {
  if (status === 429) return true
  if (status === 503) return IDEMPOTENT.has(method.toUpperCase())
  return false
}

/** Retry-After as milliseconds (delta-seconds or an HTTP date), or null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | null {
  if (value === null) return null
  const text = value.trim()
  if (/^\d+$/.test(text)) return Number(text) * 1000
  if (!/[a-z]/i.test(text)) return null
  const at = Date.parse(text)
  if (Number.isNaN(at)) return null
  return Math.max(0, at - now)
}

export function defaultSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

function nonNegativeInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 0) throw new TypeError(`retry.${name} must be a non-negative integer, got ${value}`)
  return value
}

/** A fetch for openapi-fetch's `fetch` option that retries as described above. */
export function retryingFetch(
  base: (input: Request) => Promise<Response>,
  options: RetryOptions = {},
): (input: Request) => Promise<Response> {
  const maxRetries = nonNegativeInteger('maxRetries', options.maxRetries ?? 2)
  const baseDelayMs = nonNegativeInteger('baseDelayMs', options.baseDelayMs ?? 500)
  const maxDelayMs = nonNegativeInteger('maxDelayMs', options.maxDelayMs ?? 20_000)
  const maxRetryAfterMs = nonNegativeInteger('maxRetryAfterMs', options.maxRetryAfterMs ?? 60_000)
  const sleep = options.sleep ?? defaultSleep
  return async (request) => {
    for (let retry = 1; ; retry++) {
      // The last permitted attempt sends the original; every earlier one a clone, so the body can be sent again.
      const last = retry > maxRetries
      const response = await base(last ? request : request.clone())
      if (last || !isRetryable(request.method, response.status)) return response
      const retryAfter = parseRetryAfter(response.headers.get('retry-after'))
      if (retryAfter !== null && retryAfter > maxRetryAfterMs) return response
      const step = Math.min(maxDelayMs, baseDelayMs * 2 ** (retry - 1))
      const delayMs = retryAfter ?? Math.round(step / 2 + Math.random() * (step / 2))
      // Free the connection: the answer being retried is never read.
      await response.body?.cancel().catch(() => {})
      options.onRetry?.({
        method: request.method,
        url: request.url,
        status: response.status,
        retry,
        delayMs,
        fromRetryAfter: retryAfter !== null,
      })
      await sleep(delayMs, request.signal)
    }
  }
}
