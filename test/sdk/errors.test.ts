import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { test } from 'node:test'
import { inspect } from 'node:util'
import { errorFor } from '../../packages/sdk/src/errors.ts'
import { ApiError, ProblemError } from '../../packages/sdk/src/index.ts'

/**
 * A ProblemError prints one clear line (status, code, detail, request id, the first field errors) wherever it is
 * printed: console.log (util.inspect), util.inspect and String()/toString(), never the Response it came with.
 */
const problemResponse = (problem: Record<string, unknown>, requestId: string | null = 'req-7f3a') =>
  new Response(JSON.stringify(problem), {
    status: problem.status as number,
    headers: { 'content-type': 'application/problem+json', ...(requestId ? { 'x-request-id': requestId } : {}) },
  })

const errorOf = (problem: Record<string, unknown>, requestId?: string | null) => {
  const err = errorFor(problemResponse(problem, requestId), problem)
  assert.ok(err instanceof ProblemError)
  return err
}

/** What console.log writes to stdout for the value. */
function consoleLogged(value: unknown): string {
  let out = ''
  const write = process.stdout.write
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += String(chunk)
    return true
  }) as typeof process.stdout.write
  try {
    console.log(value)
  } finally {
    process.stdout.write = write
  }
  return out
}

const type = (code: string) => `https://docs.irs.test/problems/${code}`

test('a 404 prints status, code, detail and request id on one line, in console.log, util.inspect and toString', () => {
  const err = errorOf({
    type: type('receivable_not_found'),
    title: 'Receivable not found',
    status: 404,
    detail: 'No receivable rcv-9.',
    requestId: 'req-7f3a',
  })
  const line = 'ProblemError: 404 receivable_not_found: No receivable rcv-9. (request req-7f3a)'
  assert.equal(err.toString(), line)
  assert.equal(String(err), line)
  assert.equal(`${err}`, line)
  assert.equal(inspect(err), line)
  assert.equal(consoleLogged(err), `${line}\n`)
  assert.equal(err.message, '404 receivable_not_found: No receivable rcv-9. (request req-7f3a)')
  // Nested in another value, the same line, not the Response.
  assert.equal(inspect({ err }), `{\n  err: ${line}\n}`)
})

test('a 422 names its first three field errors and counts the rest; line breaks in a detail become spaces', () => {
  const errors = [
    { code: 'invalid_date', detail: 'Must be a date.', pointer: '/dueDate' },
    { code: 'custom', detail: 'At most\n2 fractional digits.', pointer: '/recoverableAmount/amount' },
    { code: 'unknown_reference', detail: 'No such customer.', pointer: '/responsibleCustomers/0/externalCustomerId' },
    { code: 'too_big', detail: 'Too long.', pointer: '/sourceReference' },
    { code: 'too_big', detail: 'Too long.', pointer: '/creditUnion/loanAccountReference' },
  ]
  const err = errorOf(
    {
      type: type('validation_error'),
      title: 'Validation failed',
      status: 422,
      detail: 'The request is\ninvalid.',
      requestId: 'req-1',
      errors,
    },
    'req-1',
  )
  const line =
    'ProblemError: 422 validation_error: The request is invalid. (request req-1) [/dueDate invalid_date: Must be a date.; ' +
    '/recoverableAmount/amount custom: At most 2 fractional digits.; /responsibleCustomers/0/externalCustomerId unknown_reference: No such customer.; +2 more]'
  assert.equal(err.toString(), line)
  assert.equal(inspect(err), line)
  assert.equal(consoleLogged(err), `${line}\n`)

  const one = errorOf(
    { type: type('validation_error'), title: 'Validation failed', status: 422, detail: 'Invalid.', errors: errors.slice(0, 1) },
    'req-2',
  )
  assert.equal(inspect(one), 'ProblemError: 422 validation_error: Invalid. (request req-2) [/dueDate invalid_date: Must be a date.]')
})

test('a code newer than the SDK prints its type URL; without an X-Request-Id header the body requestId is used', () => {
  const err = errorOf({ type: type('brand_new_problem'), title: 'New', status: 409, detail: 'Something new.', requestId: 'req-body' }, null)
  assert.equal(err.code, null)
  assert.equal(inspect(err), 'ProblemError: 409 https://docs.irs.test/problems/brand_new_problem: Something new. (request req-body)')
  const bare = errorOf({ type: type('rate_limit_exceeded'), title: 'Too many', status: 429, detail: 'Slow down.' }, null)
  assert.equal(bare.toString(), 'ProblemError: 429 rate_limit_exceeded: Slow down.')
})

test('a non-problem answer (ApiError) prints one line too', () => {
  const response = new Response('<html>bad gateway</html>', {
    status: 502,
    statusText: 'Bad Gateway',
    headers: { 'content-type': 'text/html' },
  })
  const err = errorFor(response, '<html>bad gateway</html>')
  assert.ok(err instanceof ApiError && !(err instanceof ProblemError))
  const line = 'ApiError: 502 Bad Gateway (not a problem+json answer)'
  assert.equal(err.toString(), line)
  assert.equal(inspect(err), line)
  assert.equal(consoleLogged(err), `${line}\n`)
})

test('an uncaught ProblemError prints its line and its stack, not the Response', () => {
  const errors = JSON.stringify(join(process.cwd(), 'packages/sdk/src/errors.ts'))
  const code = `import { errorFor } from ${errors}
const problem = { type: 'https://docs.irs.test/problems/receivable_not_found', title: 'Receivable not found', status: 404, detail: 'No receivable rcv-9.', requestId: 'req-7f3a' }
const response = new Response(JSON.stringify(problem), { status: 404, headers: { 'content-type': 'application/problem+json', 'x-request-id': 'req-7f3a' } })
throw errorFor(response, problem)`
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { encoding: 'utf8' })
  assert.equal(run.status, 1)
  const lines = run.stderr.split('\n')
  assert.ok(lines.includes('ProblemError: 404 receivable_not_found: No receivable rcv-9. (request req-7f3a)'), run.stderr)
  assert.doesNotMatch(run.stderr, /Response|headersList|ReadableStream|problem:|body:/)
  // The line, the stack's frames and Node's own lines: nothing else.
  const frames = lines.filter((l) => /^\s+at /.test(l))
  assert.ok(lines.filter((l) => l.trim() !== '' && !/^\s+at /.test(l)).length <= 6, run.stderr)
  assert.ok(frames.length >= 1)
  // The members stay readable; they are only not enumerated.
  const err = errorOf({ type: type('receivable_not_found'), title: 'Receivable not found', status: 404, detail: 'x' })
  assert.deepEqual(Object.keys(err), [])
  assert.deepEqual(
    [err.status, err.code, err.requestId, err.problem.detail, err.response.status],
    [404, 'receivable_not_found', 'req-7f3a', 'x', 404],
  )
})
