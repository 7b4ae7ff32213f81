import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { createClient } from '../../packages/sdk/src/index.ts'
import { startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { engineName } from '../helpers/store.ts'

/**
 * Issue 33 item 8: the SDK sends at most the key's concurrency at once (default 1, the service's default
 * CONCURRENCY_PER_KEY) and queues the rest in order, so parallel calls are answered instead of refused with 429.
 */
let t: TestApp
let base: string
let k: Tenant
before(async () => {
  t = await startTestApp()
  base = await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  k = await t.tenant('sdk-queue')
})
after(() => t.close())

/** A fetch to the service that records how many of its requests were in flight at most, and the order they went in. */
function measured(delayMs = 0) {
  const m = { inFlight: 0, most: 0, order: [] as string[] }
  const fetchFn = async (request: Request) => {
    m.inFlight++
    m.most = Math.max(m.most, m.inFlight)
    m.order.push(new URL(request.url).pathname)
    try {
      if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs))
      return await fetch(request)
    } finally {
      m.inFlight--
    }
  }
  return { m, fetchFn }
}

const paths = Array.from({ length: 8 }, (_, i) => `q-${i}`)
const eightAtOnce = (irs: ReturnType<typeof createClient>) =>
  Promise.allSettled(
    paths.map((id) => irs.GET('/v1/clients/{clientCode}/customers/{externalCustomerId}', { params: { path: { externalCustomerId: id } } })),
  )

describe(`SDK: requests queued to the key's concurrency (${engineName})`, () => {
  test('by default one at a time: 8 parallel calls, no retries, every one answered by the route (404), none 429, in call order', async () => {
    const { m, fetchFn } = measured(5)
    const irs = createClient({ baseUrl: base, apiKey: k.apiKey, clientCode: k.clientCode, fetch: fetchFn, retry: false })
    const results = await eightAtOnce(irs)
    assert.equal(m.most, 1)
    assert.deepEqual(
      results.map((r) => (r.status === 'rejected' ? (r.reason as { code?: string }).code : 'resolved')),
      paths.map(() => 'customer_not_found'),
    )
    assert.deepEqual(
      m.order,
      paths.map((id) => `/v1/clients/sdk-queue/customers/${id}`),
    )
  })

  test('concurrency 3: at most 3 in flight; false: all at once (as before issue 33)', async () => {
    const three = measured(20)
    await eightAtOnce(
      createClient({ baseUrl: base, apiKey: k.apiKey, clientCode: k.clientCode, fetch: three.fetchFn, concurrency: 3, retry: false }),
    )
    assert.equal(three.m.most, 3)
    const all = measured(20)
    await eightAtOnce(
      createClient({ baseUrl: base, apiKey: k.apiKey, clientCode: k.clientCode, fetch: all.fetchFn, concurrency: false, retry: false }),
    )
    assert.equal(all.m.most, 8)
  })

  test('a call aborted while it waits leaves the queue with its reason and takes no place', async () => {
    const { m, fetchFn } = measured(30)
    const irs = createClient({ baseUrl: base, apiKey: k.apiKey, clientCode: k.clientCode, fetch: fetchFn, retry: false })
    const abort = new AbortController()
    const first = irs.GET('/v1/clients/{clientCode}/source-freshness')
    const waiting = irs.GET('/v1/clients/{clientCode}/source-freshness', { signal: abort.signal })
    const third = irs.GET('/v1/clients/{clientCode}/source-freshness')
    abort.abort()
    await assert.rejects(waiting, (err: Error) => err.name === 'AbortError')
    await first
    await third
    assert.equal(m.order.length, 2)
    assert.equal(m.most, 1)
  })

  test('concurrency must be a whole number of at least 1, or false', () => {
    for (const concurrency of [0, -1, 1.5, Number.NaN]) {
      assert.throws(
        () => createClient({ baseUrl: base, apiKey: k.apiKey, clientCode: k.clientCode, concurrency }),
        (err: Error) => err instanceof TypeError && /concurrency must be a whole number of at least 1/.test(err.message),
        String(concurrency),
      )
    }
  })
})
