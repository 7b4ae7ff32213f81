import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { ApiError, createClient, type InboundClient, ProblemError, type RetryInfo } from '../../packages/sdk/src/index.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { engineName } from '../helpers/store.ts'

/**
 * The SDK against the real service (Fastify on a port, the real store of this run's engine): typed calls, problem
 * errors with their exact codes and no retry, the batch helper against the running batch worker, the change-feed
 * iterator across pages, and a real 429 with its Retry-After.
 */
let t: TestApp
let base: string
let a: Tenant
/** Requests the SDK sent, by method and path. */
const sent: string[] = []
const counting = (request: Request) => {
  sent.push(`${request.method} ${new URL(request.url).pathname}`)
  return fetch(request)
}
const sdk = (tenant: Tenant, extra: Partial<Parameters<typeof createClient>[0]> = {}): InboundClient =>
  createClient({ baseUrl: base, apiKey: tenant.apiKey, clientCode: tenant.clientCode, fetch: counting, ...extra })

const customer = (n: number) => ({ type: 'person' as const, name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `sdk/c/${n}` })
const receivable = (customerId: string, sourceRevision = 1) => ({
  financialType: 'loan_balance' as const,
  sourceRevision,
  recoverableAmount: { amount: '125.50', currency: 'USD' },
  creditUnion: { loanAccountReference: 'sdk/l/1', loanType: 'auto' as const },
  dueDate: '2026-04-01',
  responsibleCustomers: [{ externalCustomerId: customerId, role: 'primary' as const }],
  sourceReference: 'sdk/r/1',
})

before(async () => {
  t = await startTestApp({ BATCH_POLL_MS: '20' })
  base = await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  t.app.batchRunner.start()
  a = await t.tenant('sdk-a')
})
after(async () => {
  await t.app.batchRunner.stop()
  await t.close()
})

async function rejects(p: Promise<unknown>): Promise<ProblemError> {
  try {
    await p
  } catch (err) {
    assert.ok(err instanceof ProblemError, `not a ProblemError: ${err}`)
    return err
  }
  assert.fail('the call resolved')
}

describe(`SDK client against the service (${engineName})`, () => {
  test('typed calls: the client code is filled into every path; bodies come back as the service sent them', async () => {
    const irs = sdk(a)
    sent.length = 0
    const c = await irs.PUT('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
      params: { path: { externalCustomerId: 'cust-1' } },
      body: customer(1),
    })
    assert.equal(c.externalCustomerId, 'cust-1')
    assert.equal(c.revision, 1)
    const r = await irs.PUT('/v1/clients/{clientCode}/receivables/{externalReceivableId}', {
      params: { path: { externalReceivableId: 'rcv-1' } },
      body: receivable('cust-1'),
    })
    assert.equal(r.financialPosition.sourceAmount.amount, '125.50')
    const read = await irs.GET('/v1/clients/{clientCode}/receivables/{externalReceivableId}', {
      params: { path: { externalReceivableId: 'rcv-1' } },
    })
    assert.equal(read.externalReceivableId, 'rcv-1')
    assert.equal(read.financialPosition.workingAmount.amount, '125.50')
    assert.equal(read.status, 'active')
    const paused = await irs.POST('/v1/clients/{clientCode}/receivables/{externalReceivableId}/pause', {
      params: { path: { externalReceivableId: 'rcv-1' } },
      body: { reason: 'source_request', effectiveAt: '2026-03-01T00:00:00Z' },
    })
    assert.equal(paused.status, 'paused')
    assert.deepEqual(sent, [
      'PUT /v1/clients/sdk-a/customers/cust-1',
      'PUT /v1/clients/sdk-a/receivables/rcv-1',
      'GET /v1/clients/sdk-a/receivables/rcv-1',
      'POST /v1/clients/sdk-a/receivables/rcv-1/pause',
    ])
  })

  test('problem answers throw ProblemError with the exact code, status, body and request id, sent once each', async () => {
    const irs = sdk(a)
    await irs.PUT('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
      params: { path: { externalCustomerId: 'cust-p' } },
      body: customer(2),
    })
    sent.length = 0

    const notFound = await rejects(
      irs.GET('/v1/clients/{clientCode}/receivables/{externalReceivableId}', { params: { path: { externalReceivableId: 'nope' } } }),
    )
    assert.equal(notFound.code, 'receivable_not_found')
    assert.equal(notFound.status, 404)
    assert.equal(notFound.problem.status, 404)
    assert.equal(notFound.problem.title, 'Receivable not found')
    assert.equal(notFound.problem.type, 'https://docs.irs.test/problems/receivable_not_found')
    assert.equal(notFound.requestId, notFound.problem.requestId)
    assert.match(notFound.requestId ?? '', /^[0-9a-f-]{36}$/)
    assert.deepEqual(notFound.fieldErrors, [])

    const invalid = await rejects(
      irs.PUT('/v1/clients/{clientCode}/receivables/{externalReceivableId}', {
        params: { path: { externalReceivableId: 'rcv-bad' } },
        body: { ...receivable('cust-p'), dueDate: 'tomorrow' },
      }),
    )
    assert.equal(invalid.code, 'validation_error')
    assert.equal(invalid.status, 422)
    assert.deepEqual(
      invalid.fieldErrors.map((e) => e.pointer),
      ['/dueDate'],
    )

    const unknownCustomer = await rejects(
      irs.PUT('/v1/clients/{clientCode}/receivables/{externalReceivableId}', {
        params: { path: { externalReceivableId: 'rcv-orphan' } },
        body: receivable('cust-missing'),
      }),
    )
    assert.equal(unknownCustomer.code, 'validation_error')
    assert.deepEqual(
      unknownCustomer.fieldErrors.map((e) => [e.code, e.pointer]),
      [['unknown_reference', '/responsibleCustomers/0/externalCustomerId']],
    )

    const records = [{ recordId: 'c', kind: 'customer' as const, externalId: 'cust-b', body: customer(3) }]
    await irs.PUT('/v1/clients/{clientCode}/batches/{externalBatchId}', {
      params: { path: { externalBatchId: 'b-conflict' } },
      body: { records },
    })
    const conflict = await rejects(
      irs.PUT('/v1/clients/{clientCode}/batches/{externalBatchId}', {
        params: { path: { externalBatchId: 'b-conflict' } },
        body: { records: [{ ...records[0]!, externalId: 'cust-other' }] },
      }),
    )
    assert.equal(conflict.code, 'batch_conflict')
    assert.equal(conflict.status, 409)

    const badRequest = await rejects(irs.GET('/v1/clients/{clientCode}/changes', { params: { query: { after: 'not a cursor!' } } }))
    assert.equal(badRequest.code, 'validation_error')
    assert.deepEqual(
      badRequest.fieldErrors.map((e) => e.pointer),
      ['/query/after'],
    )

    // Every call above was sent exactly once: no retry of 404, 409 or 422.
    assert.deepEqual(sent, [
      'GET /v1/clients/sdk-a/receivables/nope',
      'PUT /v1/clients/sdk-a/receivables/rcv-bad',
      'PUT /v1/clients/sdk-a/receivables/rcv-orphan',
      'PUT /v1/clients/sdk-a/batches/b-conflict',
      'PUT /v1/clients/sdk-a/batches/b-conflict',
      `GET /v1/clients/sdk-a/changes`,
    ])
  })

  test('401 invalid_api_key and 403 client_scope_denied', async () => {
    const wrongKey = createClient({ baseUrl: base, apiKey: `irk_sandbox_${'x'.repeat(40)}`, clientCode: 'sdk-a' })
    const e401 = await rejects(wrongKey.GET('/v1/clients/{clientCode}/source-freshness'))
    assert.equal(e401.code, 'invalid_api_key')
    assert.equal(e401.status, 401)
    const otherClient = createClient({ baseUrl: base, apiKey: a.apiKey, clientCode: 'not-granted' })
    const e403 = await rejects(otherClient.GET('/v1/clients/{clientCode}/source-freshness'))
    assert.equal(e403.code, 'client_scope_denied')
    assert.equal(e403.status, 403)
    assert.ok(e403 instanceof ApiError)
  })

  test('a bad configuration is refused before any request', () => {
    assert.throws(() => createClient({ baseUrl: base, apiKey: undefined, clientCode: 'sdk-a' }), TypeError)
    assert.throws(() => createClient({ baseUrl: base, apiKey: '', clientCode: 'sdk-a' }), TypeError)
    assert.throws(() => createClient({ baseUrl: base, apiKey: 'k', clientCode: 'a/b' }), TypeError)
    assert.throws(() => createClient({ baseUrl: base, apiKey: 'k', clientCode: '' }), TypeError)
    assert.throws(() => createClient({ baseUrl: 'ftp://x', apiKey: 'k', clientCode: 'a' }), TypeError)
    assert.throws(() => createClient({ baseUrl: 'not a url', apiKey: 'k', clientCode: 'a' }), TypeError)
  })

  test('runBatch submits and polls until the batch is final; an identical resubmission answers the final state', async () => {
    const irs = sdk(a)
    const progress: string[] = []
    const body = {
      records: [
        { recordId: 'c', kind: 'customer' as const, externalId: 'cust-batch', body: customer(4) },
        { recordId: 'r', kind: 'receivable' as const, externalId: 'rcv-batch', dependsOn: ['c'], body: receivable('cust-batch') },
        { recordId: 'bad', kind: 'receivable' as const, externalId: 'rcv-bad-batch', body: receivable('cust-nobody') },
        { recordId: 'after-bad', kind: 'receivable' as const, externalId: 'rcv-after', dependsOn: ['bad'], body: receivable('cust-batch') },
      ],
    }
    const done = await irs.runBatch('b-run', body, { pollIntervalMs: 10, onProgress: (b) => progress.push(b.status) })
    assert.equal(done.status, 'partially_succeeded')
    assert.deepEqual(done.counts, { total: 4, pending: 0, succeeded: 2, failed: 1, dependencyFailed: 1 })
    assert.deepEqual(
      done.records.map((r) => [r.recordId, r.status, r.httpStatus]),
      [
        ['c', 'succeeded', 201],
        ['r', 'succeeded', 201],
        ['bad', 'failed', 422],
        ['after-bad', 'dependency_failed', undefined],
      ],
    )
    assert.equal(done.records[2]?.problem?.type, 'https://docs.irs.test/problems/validation_error')
    assert.equal(progress[0], 'queued')
    assert.equal(progress.at(-1), 'partially_succeeded')
    assert.ok(
      progress.slice(0, -1).every((s) => s === 'queued' || s === 'running'),
      progress.join(),
    )
    const read = await irs.GET('/v1/clients/{clientCode}/receivables/{externalReceivableId}', {
      params: { path: { externalReceivableId: 'rcv-batch' } },
    })
    assert.equal(read.financialPosition.sourceAmount.amount, '125.50')

    sent.length = 0
    const again = await irs.runBatch('b-run', body)
    assert.deepEqual(again, done)
    assert.deepEqual(sent, ['PUT /v1/clients/sdk-a/batches/b-run'])
  })

  test('retryBatch queues the failed and blocked records of a finished batch and polls it; previewBookCompletion changes nothing', async () => {
    const irs = sdk(a)
    const body = {
      records: [
        { recordId: 'late', kind: 'receivable' as const, externalId: 'rcv-late', body: receivable('cust-late') },
        { recordId: 'next', kind: 'receivable' as const, externalId: 'rcv-next', dependsOn: ['late'], body: receivable('cust-late') },
      ],
    }
    assert.equal((await irs.runBatch('b-retry-0', body, { pollIntervalMs: 10 })).status, 'failed')
    await irs.PUT('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
      params: { path: { externalCustomerId: 'cust-late' } },
      body: customer(7),
    })
    const done = await irs.retryBatch('b-retry-1', 'b-retry-0', { pollIntervalMs: 10 })
    assert.equal(done.status, 'succeeded')
    assert.equal(done.retryOf, 'b-retry-0')
    assert.deepEqual(
      done.records.map((r) => [r.recordId, r.status, r.retriedFrom]),
      [
        ['late', 'succeeded', { externalBatchId: 'b-retry-0', position: 1 }],
        ['next', 'succeeded', { externalBatchId: 'b-retry-0', position: 2 }],
      ],
    )
    const nothing = await rejects(irs.retryBatch('b-retry-2', 'b-retry-1'))
    assert.equal(nothing.code, 'validation_error')
    const preview = await irs.previewBookCompletion({ asOf: '2026-03-01T00:00:00Z', sourcePosition: 1, batches: ['b-retry-1'] })
    assert.equal(preview.coveredReceivableCount, 2)
    assert.equal(preview.omittedReceivableCount, preview.omissions.length)
    assert.ok(preview.omissions.every((o) => o.externalReceivableId !== 'rcv-late'))
  })

  test('the change feed iterator follows nextCursor across pages and resumes from its cursor', async () => {
    const c = await t.tenant('sdk-feed')
    const irs = sdk(c)
    for (let i = 1; i <= 5; i++) {
      await irs.PUT('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
        params: { path: { externalCustomerId: `f-${i}` } },
        body: customer(i),
      })
    }
    sent.length = 0
    const feed = irs.changes({ limit: 2 })
    assert.equal(feed.cursor, undefined)
    const events = []
    for await (const e of feed) events.push(e)
    assert.deepEqual(
      events.map((e) => [e.type, e.resource.id, e.revision]),
      [1, 2, 3, 4, 5].map((i) => ['customer.created', `f-${i}`, 1]),
    )
    // Pages of 2, 2 and 1, then stop: three requests, each after the previous page's nextCursor.
    assert.equal(sent.length, 3)
    assert.equal(sent[0], 'GET /v1/clients/sdk-feed/changes')
    const cursor = feed.cursor
    assert.equal(typeof cursor, 'string')

    const pages = []
    for await (const page of irs.changePages({ limit: 2 })) pages.push(page)
    assert.deepEqual(
      pages.map((p) => [p.data.length, p.hasMore]),
      [
        [2, true],
        [2, true],
        [1, false],
      ],
    )
    assert.equal(pages.at(-1)?.nextCursor, cursor)

    // Caught up: nothing after the cursor; one more change and exactly it.
    const none = []
    for await (const e of irs.changes({ after: cursor! })) none.push(e)
    assert.deepEqual(none, [])
    await irs.PUT('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
      params: { path: { externalCustomerId: 'f-1' } },
      body: customer(99),
    })
    const resumed = irs.changes({ after: cursor! })
    const next = []
    for await (const e of resumed) next.push(e)
    assert.deepEqual(
      next.map((e) => [e.type, e.resource.id, e.revision]),
      [['customer.updated', 'f-1', 2]],
    )
    assert.notEqual(resumed.cursor, cursor)

    // A cursor the feed never issued: the iterator throws the problem, with the pointer.
    await assert.rejects(
      async () => {
        for await (const _ of irs.changes({ after: 'not-a-cursor' })) {
        }
      },
      (err: unknown) =>
        err instanceof ProblemError &&
        err.code === 'validation_error' &&
        JSON.stringify(err.fieldErrors.map((e) => [e.code, e.pointer])) === '[["invalid_format","/query/after"]]',
    )
  })

  test('every list answer is a page that iterates over the whole list, fetching the following pages as it goes', async () => {
    const c = await t.tenant('sdk-pages')
    const irs = sdk(c)
    for (let i = 1; i <= 5; i++) {
      await irs.PUT('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
        params: { path: { externalCustomerId: `p-${i}` } },
        body: customer(i),
      })
    }
    // The pages one by one, as an integrator without the iterator reads them.
    const byHand: string[] = []
    let cursor: string | undefined
    for (;;) {
      const query: { limit: number; cursor?: string } = { limit: 2 }
      if (cursor !== undefined) query.cursor = cursor
      const page = await irs.GET('/v1/clients/{clientCode}/customers', { params: { query } })
      byHand.push(...page.data.map((x) => x.externalCustomerId))
      if (page.nextCursor === null) break
      cursor = page.nextCursor
    }
    assert.deepEqual([...byHand].sort(), ['p-1', 'p-2', 'p-3', 'p-4', 'p-5'])

    sent.length = 0
    const first = await irs.GET('/v1/clients/{clientCode}/customers', { params: { query: { limit: 2 } } })
    // The page is the body the service sent: the iterator is not an own enumerable member.
    assert.deepEqual(Object.keys(first), ['data', 'nextCursor'])
    assert.equal(JSON.stringify(first), JSON.stringify({ data: first.data, nextCursor: first.nextCursor }))
    const all: string[] = []
    for await (const x of first) all.push(x.externalCustomerId)
    assert.deepEqual(all, byHand)
    // Pages of 2, 2 and 1: the first call and two more, each with the same limit and the previous nextCursor.
    assert.equal(sent.length, 3)
    assert.ok(sent.every((line) => line === 'GET /v1/clients/sdk-pages/customers'))
    // Iterating again starts again from the first page's items.
    const again: string[] = []
    for await (const x of first) again.push(x.externalCustomerId)
    assert.deepEqual(again, byHand)

    // The change feed's page iterates too, with `after` and until `hasMore` is false.
    const feedPage = await irs.GET('/v1/clients/{clientCode}/changes', { params: { query: { limit: 2 } } })
    const events: string[] = []
    for await (const e of feedPage) events.push(`${e.type} ${e.resource.id}`)
    assert.deepEqual(
      events,
      [1, 2, 3, 4, 5].map((i) => `customer.created p-${i}`),
    )

    // An empty list: one request, no items.
    const empty = await t.tenant('sdk-pages-empty')
    const none: unknown[] = []
    for await (const x of await sdk(empty).GET('/v1/clients/{clientCode}/customers')) none.push(x)
    assert.deepEqual(none, [])
  })

  test('the list methods: one page each, newest first, following nextCursor, filters and their 422s', async () => {
    const c = await t.tenant('sdk-lists')
    const irs = sdk(c)
    await irs.PUT('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
      params: { path: { externalCustomerId: 'lc-1' } },
      body: customer(1),
    })
    await irs.PUT('/v1/clients/{clientCode}/receivables/{externalReceivableId}', {
      params: { path: { externalReceivableId: 'lr-1' } },
      body: receivable('lc-1'),
    })
    for (const id of ['lpo-1', 'lpo-2', 'lpo-3']) {
      await irs.PUT('/v1/clients/{clientCode}/payment-observations/{externalEventId}', {
        params: { path: { externalEventId: id } },
        body: {
          type: 'payment',
          amount: { amount: '1.00', currency: 'USD' },
          allocations: [{ amount: { amount: '1.00', currency: 'USD' }, externalReceivableId: 'lr-1' }],
          effectiveAt: '2026-03-01T00:00:00Z',
          externalCustomerId: 'lc-1',
          method: 'cash',
          sourceReference: `sdk/${id}`,
        },
      })
      // Distinct acceptance times, so that newest first is the reverse of this order.
      await new Promise((resolve) => setTimeout(resolve, 3))
    }
    const first = await irs.listPaymentObservations({ limit: 2, externalCustomerId: 'lc-1' })
    assert.deepEqual(
      first.data.map((o) => o.externalEventId),
      ['lpo-3', 'lpo-2'],
    )
    assert.equal(typeof first.nextCursor, 'string')
    const second = await irs.listPaymentObservations({ limit: 2, cursor: first.nextCursor as string })
    assert.deepEqual([second.data.map((o) => o.externalEventId), second.nextCursor], [['lpo-1'], null])
    // A list method's page iterates over the whole list too.
    const all: string[] = []
    for await (const o of await irs.listPaymentObservations({ limit: 2, externalCustomerId: 'lc-1' })) all.push(o.externalEventId)
    assert.deepEqual(all, ['lpo-3', 'lpo-2', 'lpo-1'])
    assert.deepEqual(await irs.listPaymentObservations({ externalCustomerId: 'nobody' }), { data: [], nextCursor: null })

    sent.length = 0
    const empty = { data: [], nextCursor: null }
    assert.deepEqual(await irs.listPaymentRequests({ status: 'open' }), empty)
    assert.deepEqual(await irs.listRecoveryInstructions(), empty)
    assert.deepEqual(await irs.listPaymentReconciliations({ status: 'held' }), empty)
    assert.deepEqual(await irs.listAdjustments({ externalReceivableId: 'lr-1' }), empty)
    assert.deepEqual(await irs.listCreditNotes(), empty)
    assert.deepEqual(await irs.listWriteOffs(), empty)
    assert.deepEqual(await irs.listBatches({ status: 'queued' }), empty)
    assert.deepEqual(
      sent,
      ['payment-requests', 'recovery-instructions', 'payment-reconciliations', 'adjustments', 'credit-notes', 'write-offs', 'batches'].map(
        (segment) => `GET /v1/clients/sdk-lists/${segment}`,
      ),
    )
    const bad = await rejects(irs.listBatches({ status: 'done' as 'queued' }))
    assert.deepEqual([bad.code, bad.fieldErrors.map((e) => e.pointer)], ['validation_error', ['/query/status']])
  })

  test('following the feed picks up new events until aborted', async () => {
    const c = await t.tenant('sdk-follow')
    const irs = sdk(c)
    const controller = new AbortController()
    const seen: string[] = []
    const following = (async () => {
      for await (const e of irs.changes({ follow: true, pollIntervalMs: 20, signal: controller.signal })) {
        seen.push(e.resource.id)
        if (seen.length === 2) controller.abort()
      }
    })()
    await irs.PUT('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
      params: { path: { externalCustomerId: 'fo-1' } },
      body: customer(1),
    })
    await irs.PUT('/v1/clients/{clientCode}/customers/{externalCustomerId}', {
      params: { path: { externalCustomerId: 'fo-2' } },
      body: customer(2),
    })
    await following.catch((err: unknown) => {
      // Aborted during a wait or a request: the AbortError is the end of following.
      assert.equal((err as Error).name, 'AbortError')
    })
    assert.deepEqual(seen, ['fo-1', 'fo-2'])
  })
})

describe(`SDK retries against the service's real rate limit (${engineName})`, () => {
  let limited: TestApp
  let limitedBase: string
  before(async () => {
    limited = await startTestApp({ RATE_LIMIT_PER_MINUTE: '2' })
    limitedBase = await limited.app.app.listen({ host: '127.0.0.1', port: 0 })
  })
  after(() => limited.close())

  test('429 rate_limit_exceeded is retried after its Retry-After, at most maxRetries times, then thrown', async () => {
    const k = await limited.tenant('sdk-rl')
    const retryAfter: (string | null)[] = []
    const retries: RetryInfo[] = []
    const irs = createClient({
      baseUrl: limitedBase,
      apiKey: k.apiKey,
      clientCode: k.clientCode,
      fetch: async (request) => {
        const res = await fetch(request)
        retryAfter.push(res.status === 429 ? res.headers.get('retry-after') : null)
        return res
      },
      retry: { maxRetries: 2, onRetry: (info) => retries.push(info), sleep: async () => {} },
    })
    await irs.GET('/v1/clients/{clientCode}/source-freshness')
    await irs.GET('/v1/clients/{clientCode}/source-freshness')
    const err = await rejects(irs.GET('/v1/clients/{clientCode}/source-freshness'))
    assert.equal(err.code, 'rate_limit_exceeded')
    assert.equal(err.status, 429)
    // Two allowed, then the third sent three times (1 + 2 retries), each refused with a Retry-After.
    assert.equal(retryAfter.length, 5)
    assert.deepEqual(retryAfter.slice(0, 2), [null, null])
    for (const v of retryAfter.slice(2)) assert.match(v ?? '', /^\d+$/)
    assert.deepEqual(
      retries.map((r) => [r.status, r.retry, r.delayMs, r.fromRetryAfter]),
      [
        [429, 1, Number(retryAfter[2]) * 1000, true],
        [429, 2, Number(retryAfter[3]) * 1000, true],
      ],
    )
  })
})
