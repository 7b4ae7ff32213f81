import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { createMetrics } from '../../src/http/metrics.ts'
import { ADMIN_TOKEN, problemCode, type Response, startTestApp, type Tenant, type TestApp } from '../helpers/app.ts'
import { slotTaken, slowPut } from '../helpers/slow-request.ts'
import { createTestDatabase, engineName, onPostgres } from '../helpers/store.ts'
import { type Receiver, startReceiver } from '../helpers/webhook-receiver.ts'

/**
 * GET /metrics (src/http/metrics.ts) on the real app and store: the operator token exactly as the operator
 * routes check it, exact counts after known traffic, 429s by the limit that refused them, the batch queue and
 * the change-feed head as the database has them, pool gauges, the exposition format, and no tenant identifier
 * anywhere in the output. Durations are never asserted, only that each request was observed once.
 */

// ---------------------------------------------------------------------------------------------------------------
// A strict reader of the Prometheus text exposition format 0.0.4: any line it cannot read fails the test.

interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}
interface Family {
  type: string
  help: string
  samples: Sample[]
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped'])

/** A value as Go's strconv.ParseFloat reads it (the format's rule): NaN and infinities in any letter case. */
function parseValue(text: string, line: string): number {
  if (/^\+?inf(inity)?$/i.test(text)) return Number.POSITIVE_INFINITY
  if (/^-inf(inity)?$/i.test(text)) return Number.NEGATIVE_INFINITY
  if (/^nan$/i.test(text)) return Number.NaN
  assert.match(text, /^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$/, `not a sample value: ${line}`)
  return Number(text)
}

/** `{a="x",b="y\"z"}` from position `i` (at the `{`); returns the labels and the position after the `}`. */
function parseLabels(line: string, start: number): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {}
  let i = start + 1
  while (line[i] !== '}') {
    const eq = line.indexOf('=', i)
    assert.ok(eq > i, `label without a value: ${line}`)
    const name = line.slice(i, eq)
    assert.match(name, LABEL_NAME, `bad label name ${name}: ${line}`)
    assert.equal(line[eq + 1], '"', `label value not quoted: ${line}`)
    let value = ''
    let j = eq + 2
    for (; j < line.length && line[j] !== '"'; j++) {
      if (line[j] === '\\') {
        const next = line[++j]
        assert.ok(next === '\\' || next === '"' || next === 'n', `bad escape in a label value: ${line}`)
        value += next === 'n' ? '\n' : next
      } else value += line[j]
    }
    assert.equal(line[j], '"', `unterminated label value: ${line}`)
    assert.equal(Object.hasOwn(labels, name), false, `label ${name} twice: ${line}`)
    labels[name] = value
    i = j + 1
    if (line[i] === ',') i++
    else assert.equal(line[i], '}', `expected , or } after a label: ${line}`)
  }
  return { labels, end: i + 1 }
}

/** The family a sample belongs to: its own name, or a histogram's or summary's name without its suffix. */
function familyOf(name: string, families: Map<string, Family>): string | undefined {
  if (families.has(name)) return name
  for (const suffix of ['_bucket', '_sum', '_count']) {
    const base = name.endsWith(suffix) ? name.slice(0, -suffix.length) : null
    const type = base === null ? undefined : families.get(base)?.type
    if (base !== null && (type === 'histogram' || (type === 'summary' && suffix !== '_bucket'))) return base
  }
  return undefined
}

function parseExposition(text: string): Map<string, Family> {
  assert.ok(text.endsWith('\n'), 'the exposition ends with a line feed')
  const families = new Map<string, Family>()
  const helped = new Set<string>()
  for (const line of text.slice(0, -1).split('\n')) {
    if (line === '') continue
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line)
      if (!m) {
        assert.ok(!/^# (HELP|TYPE)\b/.test(line), `malformed ${line}`)
        continue
      }
      const [, kind, name, rest] = m as unknown as [string, string, string, string]
      assert.match(name, METRIC_NAME, `bad metric name: ${line}`)
      if (kind === 'HELP') {
        assert.equal(helped.has(name), false, `HELP twice for ${name}`)
        helped.add(name)
        const f = families.get(name)
        if (f) f.help = rest
        else families.set(name, { type: 'untyped', help: rest, samples: [] })
      } else {
        assert.ok(TYPES.has(rest), `unknown type: ${line}`)
        const f = families.get(name) ?? { type: 'untyped', help: '', samples: [] }
        assert.equal(f.samples.length, 0, `TYPE after samples of ${name}`)
        f.type = rest
        families.set(name, f)
      }
      continue
    }
    const nameEnd = line.search(/[{ ]/)
    assert.ok(nameEnd > 0, `not a sample: ${line}`)
    const name = line.slice(0, nameEnd)
    assert.match(name, METRIC_NAME, `bad metric name: ${line}`)
    let labels: Record<string, string> = {}
    let i = nameEnd
    if (line[i] === '{') ({ labels, end: i } = parseLabels(line, i))
    assert.equal(line[i], ' ', `no space before the value: ${line}`)
    const parts = line.slice(i + 1).split(' ')
    assert.ok(parts.length === 1 || (parts.length === 2 && /^-?\d+$/.test(parts[1] as string)), `bad value or timestamp: ${line}`)
    const value = parseValue(parts[0] as string, line)
    const family = familyOf(name, families)
    assert.ok(family, `sample of an undeclared family: ${line}`)
    ;(families.get(family) as Family).samples.push({ name, labels, value })
  }
  for (const [name, f] of families) {
    assert.ok(helped.has(name), `no HELP for ${name}`)
    if (f.type === 'histogram') checkHistogram(name, f)
  }
  return families
}

/** Per series: buckets cumulative and ascending, ending at +Inf, whose count is the series' _count. */
function checkHistogram(name: string, f: Family): void {
  const series = new Map<string, { buckets: [number, number][]; count?: number; sum?: number }>()
  for (const s of f.samples) {
    const { le, ...rest } = s.labels
    const key = JSON.stringify(Object.entries(rest).sort())
    const entry = series.get(key) ?? { buckets: [] }
    series.set(key, entry)
    if (s.name === `${name}_bucket`) entry.buckets.push([parseValue(le as string, `${name} le=${le}`), s.value])
    else if (s.name === `${name}_count`) entry.count = s.value
    else if (s.name === `${name}_sum`) entry.sum = s.value
  }
  for (const [key, e] of series) {
    assert.ok(e.buckets.length > 0 && e.count !== undefined && e.sum !== undefined, `incomplete histogram series ${name} ${key}`)
    for (let i = 1; i < e.buckets.length; i++) {
      const [le0, n0] = e.buckets[i - 1] as [number, number]
      const [le1, n1] = e.buckets[i] as [number, number]
      assert.ok(le1 > le0 && n1 >= n0, `buckets of ${name} ${key} not cumulative`)
    }
    const last = e.buckets.at(-1) as [number, number]
    assert.equal(last[0], Number.POSITIVE_INFINITY, `${name} ${key} has no +Inf bucket`)
    assert.equal(last[1], e.count, `${name} ${key}: +Inf bucket differs from _count`)
  }
}

// ---------------------------------------------------------------------------------------------------------------

interface Scrape {
  text: string
  families: Map<string, Family>
  /** The value of the one sample of `name` with exactly these labels; undefined when there is none. */
  value(name: string, labels?: Record<string, string>): number | undefined
  /** Every sample of a family's own name (not its _bucket/_sum/_count). */
  samples(name: string): Sample[]
}

async function scrape(t: TestApp): Promise<Scrape> {
  const res = await t.admin('GET', '/metrics')
  assert.equal(res.status, 200, res.body)
  assert.equal(res.headers['content-type'], 'text/plain; version=0.0.4; charset=utf-8')
  const families = parseExposition(res.body)
  const all = [...families.values()].flatMap((f) => f.samples)
  const same = (a: Record<string, string>, b: Record<string, string>) =>
    JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort())
  return {
    text: res.body,
    families,
    value(name, labels = {}) {
      const found = all.filter((s) => s.name === name && same(s.labels, labels))
      assert.ok(found.length <= 1, `${found.length} samples of ${name} ${JSON.stringify(labels)}`)
      return found[0]?.value
    },
    samples: (name) => families.get(name)?.samples.filter((s) => s.name === name) ?? [],
  }
}

const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `m/${n}` })
const CUSTOMER_ROUTE = '/v1/clients/:clientCode/customers/:externalCustomerId'

/** What the service's own metric families are, with their types and label names: the documented contract. */
const OWN_FAMILIES: Record<string, { type: string; labels: string[] }> = {
  irs_http_requests_total: { type: 'counter', labels: ['method', 'route', 'status'] },
  irs_http_request_duration_seconds: { type: 'histogram', labels: ['method', 'route', 'status'] },
  irs_http_rate_limited_total: { type: 'counter', labels: ['limit'] },
  irs_batch_records_processed_total: { type: 'counter', labels: [] },
  irs_batch_queue_batches: { type: 'gauge', labels: ['status'] },
  irs_batch_queue_records: { type: 'gauge', labels: [] },
  irs_change_feed_head_sequence: { type: 'gauge', labels: [] },
  irs_webhook_deliveries: { type: 'gauge', labels: ['status'] },
  irs_webhook_endpoints_lagging: { type: 'gauge', labels: [] },
  irs_store_up: { type: 'gauge', labels: [] },
  irs_store_info: { type: 'gauge', labels: ['engine'] },
  irs_store_pool_connections: { type: 'gauge', labels: ['state'] },
  irs_store_pool_max_connections: { type: 'gauge', labels: [] },
  irs_store_pool_waiting: { type: 'gauge', labels: [] },
}

const apps: TestApp[] = []
after(async () => {
  const closed = await Promise.allSettled(apps.reverse().map((a) => a.close()))
  for (const c of closed) if (c.status === 'rejected') throw c.reason
})
async function app(env: Record<string, string> = {}, opts: Parameters<typeof startTestApp>[1] = {}): Promise<TestApp> {
  const t = await startTestApp(env, opts)
  apps.push(t)
  return t
}

describe(`GET /metrics: the operator token (${engineName})`, () => {
  let t: TestApp
  let tenant: Tenant
  before(async () => {
    t = await app()
    tenant = await t.tenant('mt-auth')
  })

  /** The parts of a 401 that must be identical to an operator route's: status, headers, problem body. */
  const refusal = (res: Response) => {
    const { requestId, ...body } = res.json
    assert.match(String(requestId), /^[0-9a-f-]{36}$/)
    return {
      status: res.status,
      contentType: res.headers['content-type'],
      challenge: res.headers['www-authenticate'],
      cacheControl: res.headers['cache-control'],
      body,
    }
  }

  for (const [what, headers] of [
    ['no token', {}],
    ['a wrong token', { authorization: `Bearer ${ADMIN_TOKEN}x` }],
    ['another scheme', { authorization: `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}` }],
    ['an empty bearer', { authorization: 'Bearer ' }],
  ] as const) {
    test(`${what}: 401 invalid_admin_token, exactly as an operator route answers`, async () => {
      const res = await t.call('GET', '/metrics', { headers })
      assert.equal(res.status, 401)
      assert.equal(problemCode(res), 'invalid_admin_token')
      assert.equal(res.body.includes('irs_'), false)
      const operator = await t.call('GET', '/admin/v1/clients', { headers })
      assert.deepEqual(refusal(res), refusal(operator))
    })
  }

  test("an API key in the operator token's place: 401 invalid_admin_token", async () => {
    const res = await t.call('GET', '/metrics', { key: tenant.apiKey })
    assert.equal(res.status, 401)
    assert.equal(problemCode(res), 'invalid_admin_token')
    assert.equal(res.headers['www-authenticate'], 'Bearer realm="inbound-receivables-operator", error="invalid_token"')
  })

  test('the right token: 200, Prometheus text 0.0.4, not cached, every service family with its type and labels', async () => {
    const res = await t.admin('GET', '/metrics')
    assert.equal(res.status, 200)
    assert.equal(res.headers['cache-control'], 'no-store')
    const s = await scrape(t)
    for (const [name, want] of Object.entries(OWN_FAMILIES)) {
      const f = s.families.get(name)
      assert.ok(f, `${name} is missing`)
      assert.equal(f.type, want.type, name)
      assert.ok(f.help.length > 10, `${name} has a HELP text`)
      for (const sample of f.samples) {
        const labels = Object.keys(sample.labels)
          .filter((l) => l !== 'le')
          .sort()
        assert.deepEqual(labels, [...want.labels].sort(), `labels of ${sample.name}`)
      }
    }
    // No other family of ours; the rest are prom-client's process and Node.js metrics.
    const ours = [...s.families.keys()].filter((n) => n.startsWith('irs_')).sort()
    assert.deepEqual(ours, Object.keys(OWN_FAMILIES).sort())
    assert.ok(s.families.has('process_cpu_user_seconds_total'))
    assert.ok(s.families.has('nodejs_eventloop_lag_seconds'))
    assert.equal(s.value('irs_store_up'), 1)
    assert.equal(s.value('irs_store_info', { engine: engineName }), 1)
  })

  test('HEAD answers like GET without a body; other methods are not routes', async () => {
    assert.equal((await t.call('HEAD', '/metrics')).status, 401)
    const head = await t.call('HEAD', '/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    assert.equal(head.status, 200)
    assert.equal(head.body, '')
    const post = await t.call('POST', '/metrics', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: {} })
    assert.equal(post.status, 404)
    assert.equal(problemCode(post), 'route_not_found')
  })

  test('not in the public OpenAPI document nor in the operator one', async () => {
    const pub = await t.call('GET', '/v1/openapi.json')
    assert.equal(pub.status, 200)
    const op = await t.admin('GET', '/admin/v1/openapi.json')
    assert.equal(op.status, 200)
    for (const doc of [pub.json, op.json]) {
      assert.equal(Object.hasOwn(doc.paths, '/metrics'), false)
      assert.equal(JSON.stringify(doc).includes('/metrics'), false)
    }
  })
})

describe(`GET /metrics: request counts and latency per route and status (${engineName})`, () => {
  test('exact counts by route template, method and status; one latency observation per request', async () => {
    const t = await app()
    const k = await t.tenant('mt-count')
    const base = `/v1/clients/${k.clientCode}/customers`
    for (const id of ['c-1', 'c-2', 'c-3'])
      assert.equal((await t.call('PUT', `${base}/${id}`, { key: k.apiKey, body: customer(1) })).status, 201)
    assert.equal((await t.call('PUT', `${base}/c-1`, { key: k.apiKey, body: customer(2) })).status, 200)
    assert.equal((await t.call('GET', `${base}/c-2`, { key: k.apiKey })).status, 200)
    assert.equal((await t.call('GET', `${base}/c-9`, { key: k.apiKey })).status, 404)
    assert.equal((await t.call('GET', `${base}/c-1`, { key: 'irk_sandbox_notakey' })).status, 401)
    assert.equal((await t.call('PUT', `${base}/c-4`, { key: k.apiKey, rawBody: '{' })).status, 400)
    assert.equal((await t.call('GET', `/v1/clients/${k.clientCode}/no-such-thing`)).status, 404)
    assert.equal((await t.call('GET', '/healthz')).status, 200)

    const s = await scrape(t)
    const expected: [string, string, string, number][] = [
      ['PUT', CUSTOMER_ROUTE, '201', 3],
      ['PUT', CUSTOMER_ROUTE, '200', 1],
      ['PUT', CUSTOMER_ROUTE, '400', 1],
      ['GET', CUSTOMER_ROUTE, '200', 1],
      ['GET', CUSTOMER_ROUTE, '404', 1],
      ['GET', CUSTOMER_ROUTE, '401', 1],
      ['GET', 'unmatched', '404', 1],
      ['GET', '/healthz', '200', 1],
      // The tenant's set-up: one request each.
      ['PUT', '/admin/v1/clients/:clientCode', '201', 1],
      ['PUT', '/admin/v1/integrations/:integrationId', '201', 1],
      ['PUT', '/admin/v1/integrations/:integrationId/grants/:clientCode', '201', 1],
      ['POST', '/admin/v1/integrations/:integrationId/api-keys', '201', 1],
    ]
    const got = s
      .samples('irs_http_requests_total')
      .map((x) => [x.labels.method, x.labels.route, x.labels.status, x.value])
      .sort()
    assert.deepEqual(got, [...expected].sort())
    for (const [method, route, status, n] of expected) {
      assert.equal(s.value('irs_http_request_duration_seconds_count', { method, route, status }), n, `${method} ${route} ${status}`)
      const sum = s.value('irs_http_request_duration_seconds_sum', { method, route, status }) as number
      assert.ok(sum > 0, 'the latency of a request is positive')
    }

    // The scrape itself is counted once it is answered.
    const again = await scrape(t)
    assert.equal(again.value('irs_http_requests_total', { method: 'GET', route: '/metrics', status: '200' }), 1)
    assert.equal(again.value('irs_http_requests_total', { method: 'PUT', route: CUSTOMER_ROUTE, status: '201' }), 3)
  })

  test('each app instance has its own registry: two apps in one process count only their own requests', async () => {
    const one = await app()
    const two = await app({}, { db: one.db })
    const k = await one.tenant('mt-two')
    assert.equal((await one.call('PUT', `/v1/clients/mt-two/customers/a`, { key: k.apiKey, body: customer(1) })).status, 201)
    assert.equal((await two.call('GET', `/v1/clients/mt-two/customers/a`, { key: k.apiKey })).status, 200)
    assert.equal((await two.call('GET', `/v1/clients/mt-two/customers/a`, { key: k.apiKey })).status, 200)
    const s1 = await scrape(one)
    const s2 = await scrape(two)
    assert.equal(s1.value('irs_http_requests_total', { method: 'PUT', route: CUSTOMER_ROUTE, status: '201' }), 1)
    assert.equal(s1.value('irs_http_requests_total', { method: 'GET', route: CUSTOMER_ROUTE, status: '200' }), undefined)
    assert.equal(s2.value('irs_http_requests_total', { method: 'PUT', route: CUSTOMER_ROUTE, status: '201' }), undefined)
    assert.equal(s2.value('irs_http_requests_total', { method: 'GET', route: CUSTOMER_ROUTE, status: '200' }), 2)
    // Database state is the same truth in both.
    assert.equal(s1.value('irs_change_feed_head_sequence'), 1)
    assert.equal(s2.value('irs_change_feed_head_sequence'), 1)
  })
})

/** A manual clock: every request of the limits test falls in one calendar minute. */
function fixedClock(iso: string) {
  const now = Date.parse(iso)
  return { now: () => new Date(now) }
}

describe(`GET /metrics: 429s by the limit that refused them (${engineName})`, () => {
  test('one refusal by concurrency, one by the per-minute budget, each counted under its limit', async () => {
    const t = await app({ RATE_LIMIT_PER_MINUTE: '3', CONCURRENCY_PER_KEY: '1' }, { clock: fixedClock('2026-11-23T10:00:05.000Z') })
    const k = await t.tenant('mt-limits')
    await t.app.app.listen({ host: '127.0.0.1', port: 0 })
    const path = `/v1/clients/${k.clientCode}/customers/slow`
    const before = await scrape(t)
    assert.equal(before.value('irs_http_rate_limited_total', { limit: 'per_minute' }), 0)
    assert.equal(before.value('irs_http_rate_limited_total', { limit: 'concurrency' }), 0)

    // Request 1 holds the key's only slot; request 2 meets it.
    const slow = await slowPut(t, path, k.apiKey, JSON.stringify(customer(7)))
    await slotTaken(t, slow, k.apiKeyId)
    const busy = await t.call('GET', path, { key: k.apiKey })
    assert.equal(busy.status, 429, busy.body)
    assert.equal(busy.headers['retry-after'], '1')
    assert.match(await slow.finish(), /^HTTP\/1\.1 201 /)
    // Request 3 is the minute's last; request 4 is over the budget.
    assert.equal((await t.call('GET', path, { key: k.apiKey })).status, 200)
    const over = await t.call('GET', path, { key: k.apiKey })
    assert.equal(over.status, 429, over.body)
    assert.notEqual(over.headers['retry-after'], undefined)

    const s = await scrape(t)
    assert.equal(s.value('irs_http_rate_limited_total', { limit: 'concurrency' }), 1)
    assert.equal(s.value('irs_http_rate_limited_total', { limit: 'per_minute' }), 1)
    assert.deepEqual(
      s.samples('irs_http_rate_limited_total').map((x) => x.labels.limit),
      ['per_minute', 'concurrency'],
    )
    assert.equal(s.value('irs_http_requests_total', { method: 'GET', route: CUSTOMER_ROUTE, status: '429' }), 2)
    assert.equal(s.value('irs_http_requests_total', { method: 'PUT', route: CUSTOMER_ROUTE, status: '201' }), 1)
  })
})

describe(`GET /metrics: batches, the change-feed head, webhook deliveries, no tenant identifiers (${engineName})`, () => {
  let t: TestApp
  let rx: Receiver
  let a: Tenant
  let b: Tenant
  const secrets: string[] = []
  before(async () => {
    t = await app({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1' })
    rx = await startReceiver()
    a = await t.tenant('zebra-cu-7731', { integrationId: 'ledger-int-5521' })
    b = await t.tenant('okapi-cu-4093', { integrationId: 'crm-int-8812' })
    secrets.push(a.apiKey, b.apiKey, ADMIN_TOKEN)
  })
  after(async () => {
    await t.app.webhookDispatcher.stop()
    await rx.close()
  })

  test('a batch: the queue depth before the runner, nothing left after it', async () => {
    const records = Array.from({ length: 5 }, (_, i) => ({
      recordId: `r${i}`,
      kind: 'customer',
      externalId: `okapi-member-${i}`,
      body: customer(i),
    }))
    const put = await t.call('PUT', `/v1/clients/${b.clientCode}/batches/okapi-batch-77`, { key: b.apiKey, body: { records } })
    assert.equal(put.status, 202, put.body)
    const queued = await scrape(t)
    assert.equal(queued.value('irs_batch_queue_batches', { status: 'queued' }), 1)
    assert.equal(queued.value('irs_batch_queue_batches', { status: 'running' }), 0)
    assert.equal(queued.value('irs_batch_queue_records'), 5)
    assert.equal(queued.value('irs_batch_records_processed_total'), 0)

    await t.app.batchRunner.drain()
    const done = await t.call('GET', `/v1/clients/${b.clientCode}/batches/okapi-batch-77`, { key: b.apiKey })
    assert.equal(done.json.status, 'succeeded', done.body)
    const after = await scrape(t)
    assert.equal(after.value('irs_batch_queue_batches', { status: 'queued' }), 0)
    assert.equal(after.value('irs_batch_queue_batches', { status: 'running' }), 0)
    assert.equal(after.value('irs_batch_queue_records'), 0)
  })

  test('batch records processed: the runner counts each committed record once', async () => {
    const records = [{ recordId: 'x', kind: 'customer', externalId: 'okapi-member-x', body: customer(9) }]
    const put = await t.call('PUT', `/v1/clients/${b.clientCode}/batches/okapi-batch-78`, { key: b.apiKey, body: { records } })
    assert.equal(put.status, 202, put.body)
    await t.app.batchRunner.drain()
    // 5 from the test above and this one.
    assert.equal((await scrape(t)).value('irs_batch_records_processed_total'), 6)
  })

  test('the change-feed head is the highest sequence over all clients, as the store has it', async () => {
    for (const id of ['zebra-member-1', 'zebra-member-2']) {
      const res = await t.call('PUT', `/v1/clients/${a.clientCode}/customers/${id}`, { key: a.apiKey, body: customer(3) })
      assert.equal(res.status, 201, res.body)
    }
    const head = async (client: string) =>
      Number((await t.store.query<{ n: string }>('SELECT max(seq)::text AS n FROM change_events WHERE client_code = $1', [client]))[0]?.n)
    const headA = await head(a.clientCode)
    const headB = await head(b.clientCode)
    assert.ok(headA !== headB && headA > 0 && headB > 0, `two different heads: ${headA}, ${headB}`)
    const s = await scrape(t)
    assert.equal(s.value('irs_change_feed_head_sequence'), Math.max(headA, headB))
  })

  test('webhook deliveries by status, as the store has them', async () => {
    const put = await t.call('PUT', `/v1/clients/${a.clientCode}/webhook-endpoint`, { key: a.apiKey, body: { url: `${rx.url}/zebra` } })
    assert.equal(put.status, 201, put.body)
    secrets.push(put.json.signingSecret)
    for (const id of ['zebra-member-3', 'zebra-member-4']) {
      assert.equal((await t.call('PUT', `/v1/clients/${a.clientCode}/customers/${id}`, { key: a.apiKey, body: customer(4) })).status, 201)
    }
    const pending = await scrape(t)
    await t.app.webhookDispatcher.runOnce()
    const delivered = await scrape(t)
    const rows = await t.store.query<{ status: string; n: string }>(
      'SELECT status, count(*)::text AS n FROM webhook_deliveries GROUP BY status',
    )
    const inStore: Record<string, number> = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]))
    assert.deepEqual({ ...inStore }, { delivered: 2 })
    assert.equal(rx.received.length, 2)
    for (const status of ['pending', 'delivered', 'abandoned', 'skipped', 'superseded']) {
      assert.equal(delivered.value('irs_webhook_deliveries', { status }), inStore[status] ?? 0, status)
    }
    // Before the dispatcher ran, the two were not delivered yet (pending, or not yet derived from the feed).
    assert.equal(pending.value('irs_webhook_deliveries', { status: 'delivered' }), 0)
  })

  test('no client code, integration id, external id, key or secret anywhere in the output', async () => {
    // More traffic from both clients, including refusals and URLs no route matches.
    for (const k of [a, b]) {
      await t.call('GET', `/v1/clients/${k.clientCode}/customers/${k.clientCode}-member-404`, { key: k.apiKey })
      await t.call('GET', `/v1/clients/${k.clientCode}/nothing-here/${k.clientCode}-zz`, { key: k.apiKey })
      await t.call('GET', `/v1/clients/${k.clientCode}/customers/x`, { key: `${k.apiKey}0` })
      await t.call('GET', `/admin/v1/clients/${k.clientCode}`)
      await t.admin('GET', `/admin/v1/integrations/${k.integrationId}`)
    }
    const s = await scrape(t)
    const forbidden = [
      a.clientCode,
      b.clientCode,
      a.integrationId,
      b.integrationId,
      a.apiKeyId,
      b.apiKeyId,
      'zebra',
      'okapi',
      'member',
      'okapi-batch-77',
      ...secrets,
    ]
    for (const f of forbidden) assert.equal(s.text.includes(f), false, `${f} appears in the metrics`)
    // Every route label is a route template of the app (or `unmatched`), never a URL.
    const routes = new Set(s.samples('irs_http_requests_total').map((x) => x.labels.route as string))
    const appTemplates = new Set(t.app.routes.map((r) => r.path))
    for (const route of routes) {
      assert.ok(
        route === 'unmatched' || appTemplates.has(route) || ['/metrics', '/healthz', '/readyz'].includes(route),
        `route label ${route} is not a template`,
      )
    }
    assert.ok(routes.has('unmatched') && routes.has(CUSTOMER_ROUTE) && routes.has('/admin/v1/clients/:clientCode'))
  })
})

describe(`GET /metrics: store pool usage (${engineName})`, () => {
  test(
    onPostgres
      ? 'PostgreSQL: the pg pool (max 10), one connection in use while a transaction holds it, none waiting'
      : 'PGlite: one backend, idle at the scrape',
    async () => {
      const t = await app()
      const idle = await scrape(t)
      assert.equal(idle.value('irs_store_pool_max_connections'), onPostgres ? 10 : 1)
      assert.equal(idle.value('irs_store_pool_connections', { state: 'in_use' }), 0)
      assert.equal(idle.value('irs_store_pool_waiting'), 0)
      const idleCount = idle.value('irs_store_pool_connections', { state: 'idle' }) as number
      if (onPostgres) assert.ok(idleCount >= 1 && idleCount <= 10, `idle ${idleCount}`)
      else assert.equal(idleCount, 1)
      if (!onPostgres) return

      // A transaction holds a connection while the scrape runs on another.
      let release: () => void = () => {}
      const held = new Promise<void>((r) => {
        release = r
      })
      let began: () => void = () => {}
      const begun = new Promise<void>((r) => {
        began = r
      })
      const tx = t.store.transaction(async (q) => {
        await q.query('SELECT 1')
        began()
        await held
      })
      await begun
      const busy = await scrape(t)
      release()
      await tx
      assert.equal(busy.value('irs_store_pool_connections', { state: 'in_use' }), 1)
      assert.equal(busy.value('irs_store_pool_waiting'), 0)
    },
  )

  test('the store reports its pool statistics itself: a call waiting behind a transaction is counted', async () => {
    const db = await createTestDatabase()
    try {
      const store = db.store
      assert.ok(store.poolStats)
      let release: () => void = () => {}
      const held = new Promise<void>((r) => {
        release = r
      })
      let began: () => void = () => {}
      const begun = new Promise<void>((r) => {
        began = r
      })
      const tx = store.transaction(async (q) => {
        await q.query('SELECT 1')
        began()
        await held
      })
      await begun
      if (onPostgres) {
        const s = store.poolStats()
        assert.deepEqual({ max: s.max, inUse: s.total - s.idle, waiting: s.waiting }, { max: 10, inUse: 1, waiting: 0 })
      } else {
        assert.deepEqual(store.poolStats(), { max: 1, total: 1, idle: 0, waiting: 0 })
        // On PGlite a second call waits behind the open transaction.
        const queued = store.query('SELECT 1')
        assert.deepEqual(store.poolStats(), { max: 1, total: 1, idle: 0, waiting: 1 })
        release()
        await Promise.all([tx, queued])
      }
      release()
      await tx
      const after = store.poolStats()
      assert.equal(after.total - after.idle, 0)
      assert.equal(after.waiting, 0)
    } finally {
      await db.drop()
    }
  })
})

describe(`GET /metrics: when the store cannot be read (${engineName})`, () => {
  test('the scrape still answers: irs_store_up 0, the database gauges left out, the process metrics kept', async () => {
    // Its own database, closed under the app: the app's usual close would close it a second time.
    const db = await createTestDatabase()
    const t = await startTestApp({}, { db })
    try {
      assert.equal((await t.call('GET', '/healthz')).status, 200)
      assert.equal((await scrape(t)).value('irs_store_up'), 1)
      await t.store.close()
      const s = await scrape(t)
      assert.equal(s.value('irs_store_up'), 0)
      for (const name of [
        'irs_change_feed_head_sequence',
        'irs_batch_queue_batches',
        'irs_batch_queue_records',
        'irs_webhook_deliveries',
        'irs_webhook_endpoints_lagging',
      ]) {
        assert.equal(s.families.has(name), false, `${name} is left out`)
      }
      assert.equal(s.value('irs_http_requests_total', { method: 'GET', route: '/healthz', status: '200' }), 1)
      assert.equal(s.value('irs_http_requests_total', { method: 'GET', route: '/metrics', status: '200' }), 1)
      assert.equal(s.value('irs_store_info', { engine: engineName }), 1)
    } finally {
      await t.app.app.close()
      // PostgreSQL: drop the test's database (closing its pool again is harmless there); PGlite is already closed.
      if (onPostgres) await db.drop()
    }
  })
})

describe('recordsProcessed', () => {
  test('counts whole numbers of records and refuses anything else', async () => {
    const db = await createTestDatabase()
    try {
      const m = createMetrics(db.store)
      m.recordsProcessed(3)
      m.recordsProcessed(0)
      m.recordsProcessed(2)
      for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) assert.throws(() => m.recordsProcessed(bad), RangeError)
      const text = await m.scrape()
      assert.match(text, /^irs_batch_records_processed_total 5$/m)
    } finally {
      await db.drop()
    }
  })
})
