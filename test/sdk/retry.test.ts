import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, beforeEach, describe, test } from 'node:test'
import {
  ApiError,
  BatchTimeoutError,
  createClient,
  type InboundClient,
  isRetryable,
  ProblemError,
  parseRetryAfter,
  type RetryInfo,
  type RetryOptions,
  SDK_VERSION,
} from '../../packages/sdk/src/index.ts'

/**
 * Retry rules on a tiny local server that answers scripted statuses (the service itself never answers a 503 on
 * demand): which statuses and methods are retried, how long each wait is, that attempts are bounded and that a
 * retried request is the identical request. Waits go through an injected sleep that records them.
 */
interface Scripted {
  status: number
  headers?: Record<string, string>
  body?: unknown
  contentType?: string
}
interface Seen {
  method: string
  path: string
  body: string
  authorization: string | undefined
  userAgent: string | undefined
}

let server: http.Server
let base: string
let script: Scripted[] = []
let seen: Seen[] = []

const problem = (code: string, status: number) => ({
  status,
  contentType: 'application/problem+json',
  body: {
    type: `http://127.0.0.1/docs/problems/${code}`,
    title: code,
    status,
    detail: `scripted ${code}`,
    requestId: '00000000-0000-4000-8000-000000000000',
  },
})
const ok = (body: unknown = { externalCustomerId: 'c-1', revision: 1 }): Scripted => ({ status: 200, body })

before(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      seen.push({
        method: req.method ?? '',
        path: req.url ?? '',
        body: Buffer.concat(chunks).toString('utf8'),
        authorization: req.headers.authorization,
        userAgent: req.headers['user-agent'],
      })
      const next = script.shift() ?? { status: 500, body: { unexpected: true } }
      res.writeHead(next.status, { 'content-type': next.contentType ?? 'application/json', ...next.headers })
      res.end(next.body === undefined ? undefined : typeof next.body === 'string' ? next.body : JSON.stringify(next.body))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
after(() => new Promise<void>((resolve) => server.close(() => resolve())))
beforeEach(() => {
  script = []
  seen = []
})

function client(retry: RetryOptions | false = {}): { irs: InboundClient; waits: number[]; retries: RetryInfo[] } {
  const waits: number[] = []
  const retries: RetryInfo[] = []
  const irs = createClient({
    baseUrl: base,
    apiKey: 'irk_sandbox_test',
    clientCode: 'demo',
    retry:
      retry === false
        ? false
        : {
            sleep: async (ms) => {
              waits.push(ms)
            },
            onRetry: (info) => retries.push(info),
            ...retry,
          },
  })
  return { irs, waits, retries }
}

const getCustomer = (irs: InboundClient) =>
  irs.GET('/v1/clients/{clientCode}/customers/{externalCustomerId}', { params: { path: { externalCustomerId: 'c-1' } } })
const putCustomer = (irs: InboundClient) =>
  irs.PUT('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
    params: { path: { externalCustomerId: 'c-1' } },
    body: { type: 'person', name: { firstName: 'Ada', lastName: 'L' }, sourceReference: 'r/1' },
  })
const patchCustomer = (irs: InboundClient) =>
  irs.PATCH('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
    params: { path: { externalCustomerId: 'c-1' } },
    body: { sourceReference: 'r/2' },
  })
const pause = (irs: InboundClient) =>
  irs.POST('/v1/clients/{clientCode}/receivables/{externalReceivableId}/pause', {
    params: { path: { externalReceivableId: 'r-1' } },
    body: { reason: 'source_request', effectiveAt: '2026-03-01T00:00:00Z' },
  })

async function problemOf(p: Promise<unknown>): Promise<ProblemError> {
  try {
    await p
  } catch (err) {
    assert.ok(err instanceof ProblemError, `not a ProblemError: ${err}`)
    return err
  }
  assert.fail('resolved')
}

describe('SDK retries', () => {
  test('429 with Retry-After (seconds) is retried after exactly that wait, then succeeds', async () => {
    const { irs, waits, retries } = client()
    script = [{ ...problem('rate_limit_exceeded', 429), headers: { 'retry-after': '3' } }, ok()]
    const c = await getCustomer(irs)
    assert.deepEqual(c, { externalCustomerId: 'c-1', revision: 1 })
    assert.deepEqual(waits, [3000])
    assert.deepEqual(
      retries.map((r) => [r.method, r.status, r.retry, r.delayMs, r.fromRetryAfter]),
      [['GET', 429, 1, 3000, true]],
    )
    assert.deepEqual(
      seen.map((s) => `${s.method} ${s.path}`),
      ['GET /v1/clients/demo/customers/c-1', 'GET /v1/clients/demo/customers/c-1'],
    )
    assert.ok(seen.every((s) => s.authorization === 'Bearer irk_sandbox_test'))
    // The SDK names itself with the version of its package.json.
    const { version } = JSON.parse(readFileSync(new URL('../../packages/sdk/package.json', import.meta.url), 'utf8'))
    assert.equal(SDK_VERSION, version)
    assert.ok(seen.every((s) => s.userAgent === `inbound-receivables-sdk/${version}`))
  })

  test('429 with Retry-After as an HTTP date waits until then', async () => {
    const now = Date.parse('2026-03-01T10:00:00Z')
    assert.equal(parseRetryAfter('Sun, 01 Mar 2026 10:00:07 GMT', now), 7000)
    assert.equal(parseRetryAfter('Sun, 01 Mar 2026 09:59:00 GMT', now), 0)
    assert.equal(parseRetryAfter('0', now), 0)
    assert.equal(parseRetryAfter(' 12 ', now), 12000)
    assert.equal(parseRetryAfter(null, now), null)
    assert.equal(parseRetryAfter('-3', now), null)
    assert.equal(parseRetryAfter('1.5', now), null)
    assert.equal(parseRetryAfter('soon', now), null)
    const { irs, waits } = client()
    const at = new Date(Date.now() + 3_600_000).toUTCString()
    script = [{ ...problem('rate_limit_exceeded', 429), headers: { 'retry-after': at } }, ok()]
    // An hour is beyond maxRetryAfterMs: not waited for.
    const err = await problemOf(getCustomer(irs))
    assert.equal(err.code, 'rate_limit_exceeded')
    assert.deepEqual(waits, [])
    assert.equal(seen.length, 1)
  })

  test('503 is retried with exponential backoff and jitter for GET, PUT and PATCH; the identical body is resent', async () => {
    const { irs, waits } = client({ baseDelayMs: 400, maxDelayMs: 1000 })
    script = [problem('projection_unavailable', 503), problem('projection_unavailable', 503), ok()]
    await getCustomer(irs)
    assert.equal(seen.length, 3)
    assert.equal(waits.length, 2)
    assert.ok(waits[0]! >= 200 && waits[0]! <= 400, `first wait ${waits[0]}`)
    assert.ok(waits[1]! >= 400 && waits[1]! <= 800, `second wait ${waits[1]}`)

    seen = []
    script = [problem('projection_unavailable', 503), ok()]
    await putCustomer(irs)
    assert.deepEqual(
      seen.map((s) => s.method),
      ['PUT', 'PUT'],
    )
    assert.equal(seen[0]!.body, seen[1]!.body)
    assert.deepEqual(JSON.parse(seen[1]!.body), { type: 'person', name: { firstName: 'Ada', lastName: 'L' }, sourceReference: 'r/1' })

    seen = []
    script = [problem('projection_unavailable', 503), ok()]
    await patchCustomer(irs)
    assert.deepEqual(
      seen.map((s) => s.method),
      ['PATCH', 'PATCH'],
    )
    assert.equal(seen[1]!.body, '{"sourceReference":"r/2"}')
  })

  test('backoff steps are capped by maxDelayMs', async () => {
    const { irs, waits } = client({ maxRetries: 5, baseDelayMs: 100, maxDelayMs: 300 })
    script = [...Array.from({ length: 5 }, () => problem('projection_unavailable', 503)), ok()]
    await getCustomer(irs)
    assert.equal(waits.length, 5)
    const steps = [100, 200, 300, 300, 300]
    for (const [i, w] of waits.entries()) assert.ok(w >= steps[i]! / 2 && w <= steps[i]!, `wait ${i}: ${w}`)
  })

  test('a 503 with Retry-After waits that long', async () => {
    const { irs, waits } = client()
    script = [{ ...problem('projection_unavailable', 503), headers: { 'retry-after': '2' } }, ok()]
    await getCustomer(irs)
    assert.deepEqual(waits, [2000])
  })

  test('POST: 429 is retried (the service refuses before running it), 503 never', async () => {
    const { irs, waits } = client()
    script = [{ ...problem('rate_limit_exceeded', 429), headers: { 'retry-after': '1' } }, ok({ status: 'paused' })]
    assert.deepEqual(await pause(irs), { status: 'paused' })
    assert.deepEqual(waits, [1000])
    assert.equal(seen.length, 2)
    assert.equal(seen[0]!.body, seen[1]!.body)

    seen = []
    script = [problem('projection_unavailable', 503), ok({ status: 'paused' })]
    const err = await problemOf(pause(irs))
    assert.equal(err.code, 'projection_unavailable')
    assert.equal(err.status, 503)
    assert.equal(seen.length, 1)
  })

  for (const [status, code] of [
    [400, 'malformed_json'],
    [401, 'invalid_api_key'],
    [403, 'client_scope_denied'],
    [404, 'customer_not_found'],
    [409, 'stale_source_revision'],
    [410, 'cursor_expired'],
    [413, 'request_too_large'],
    [415, 'unsupported_media_type'],
    [422, 'validation_error'],
  ] as const) {
    test(`${status} ${code} is never retried (GET and PUT)`, async () => {
      const { irs, waits } = client()
      script = [problem(code, status), ok()]
      const e1 = await problemOf(getCustomer(irs))
      assert.equal(e1.code, code)
      assert.equal(e1.status, status)
      script = [problem(code, status), ok()]
      const e2 = await problemOf(putCustomer(irs))
      assert.equal(e2.code, code)
      assert.equal(seen.length, 2)
      assert.deepEqual(waits, [])
    })
  }

  test('other 5xx are not retried; a body that is not problem+json is an ApiError, not a ProblemError', async () => {
    for (const status of [500, 502, 504]) {
      const { irs, waits } = client()
      seen = []
      script = [{ status, contentType: 'text/html', body: '<h1>Bad gateway</h1>' }, ok()]
      await assert.rejects(getCustomer(irs), (err: unknown) => {
        assert.ok(err instanceof ApiError)
        assert.ok(!(err instanceof ProblemError))
        assert.equal((err as ApiError).status, status)
        assert.equal((err as ApiError).body, '<h1>Bad gateway</h1>')
        return true
      })
      assert.equal(seen.length, 1)
      assert.deepEqual(waits, [])
    }
    // A problem+json body whose code this SDK does not know: a ProblemError with code null and the raw type.
    const { irs } = client()
    script = [problem('brand_new_problem', 409)]
    const err = await problemOf(getCustomer(irs))
    assert.equal(err.code, null)
    assert.equal(err.problem.type, 'http://127.0.0.1/docs/problems/brand_new_problem')
  })

  test('attempts are bounded: maxRetries retries, then the last answer is thrown', async () => {
    const { irs, waits } = client({ maxRetries: 2 })
    script = Array.from({ length: 5 }, () => ({ ...problem('rate_limit_exceeded', 429), headers: { 'retry-after': '1' } }))
    const err = await problemOf(getCustomer(irs))
    assert.equal(err.code, 'rate_limit_exceeded')
    assert.equal(seen.length, 3)
    assert.deepEqual(waits, [1000, 1000])

    const off = client(false)
    seen = []
    script = [problem('projection_unavailable', 503), ok()]
    assert.equal((await problemOf(getCustomer(off.irs))).code, 'projection_unavailable')
    assert.equal(seen.length, 1)

    const none = client({ maxRetries: 0 })
    seen = []
    script = [problem('rate_limit_exceeded', 429), ok()]
    assert.equal((await problemOf(getCustomer(none.irs))).code, 'rate_limit_exceeded')
    assert.equal(seen.length, 1)
    assert.deepEqual(none.waits, [])
  })

  test('bad retry options are refused; the retry rule as a table', () => {
    assert.throws(() => client({ maxRetries: -1 }), TypeError)
    assert.throws(() => client({ maxRetries: 1.5 }), TypeError)
    assert.throws(() => client({ baseDelayMs: Number.NaN }), TypeError)
    assert.deepEqual(
      ['GET', 'PUT', 'PATCH', 'POST'].map((m) => [m, isRetryable(m, 429), isRetryable(m, 503), isRetryable(m, 500), isRetryable(m, 409)]),
      [
        ['GET', true, true, false, false],
        ['PUT', true, true, false, false],
        ['PATCH', true, true, false, false],
        ['POST', true, false, false, false],
      ],
    )
  })

  test('an abort during a wait ends the call with the abort reason', async () => {
    const irs = createClient({ baseUrl: base, apiKey: 'k', clientCode: 'demo', retry: { baseDelayMs: 60_000, maxDelayMs: 60_000 } })
    script = [problem('projection_unavailable', 503), ok()]
    const controller = new AbortController()
    const call = irs.GET('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
      params: { path: { externalCustomerId: 'c-1' } },
      signal: controller.signal,
    })
    while (seen.length === 0) await new Promise((r) => setTimeout(r, 5))
    controller.abort(new Error('stop waiting'))
    await assert.rejects(call, /stop waiting/)
    assert.equal(seen.length, 1)
  })

  test('runBatch gives up after timeoutMs with the last state', async () => {
    const { irs } = client()
    const running = {
      externalBatchId: 'b-1',
      status: 'running',
      bookCompleteness: 'not_declared',
      submittedAt: '2026-03-01T00:00:00.000Z',
      counts: {},
      records: [],
    }
    script = [{ status: 202, body: { ...running, status: 'queued' } }, ...Array.from({ length: 50 }, () => ok(running))]
    await assert.rejects(
      irs.runBatch('b-1', { records: [] }, { pollIntervalMs: 5, maxPollIntervalMs: 5, timeoutMs: 60 }),
      (err: unknown) => {
        assert.ok(err instanceof BatchTimeoutError)
        assert.ok(['queued', 'running'].includes(err.batch.status))
        return true
      },
    )
    assert.deepEqual(seen[0]?.method, 'PUT')
    assert.ok(seen.slice(1).every((s) => s.method === 'GET' && s.path === '/v1/clients/demo/batches/b-1'))
  })
})
