import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { systemClock } from '../../src/domain/time.ts'
import { systemResolver } from '../../src/outbound/destination.ts'
import { openStore } from '../../src/store/open.ts'
import type { Store } from '../../src/store/store.ts'
import { createWebhookDispatcher } from '../../src/workers/webhook-dispatcher.ts'
import { startTestApp } from '../helpers/app.ts'
import { assertAllCreated, assertEachCustomerWrittenOnce, customerRecords, getBatch, waitFor } from '../helpers/batch-process.ts'
import { http, type ServiceProcess, seedTenant, startService } from '../helpers/service-process.ts'
import { splitPut } from '../helpers/slow-request.ts'
import { createTestDatabase, engineName, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * Issue 13.3: SIGTERM stops the service gracefully, on either store. The real service runs as a child process
 * (node --import tsx src/main.ts) on this file's own store: a fresh PostgreSQL database, or a PGlite DATA_DIR
 * that the next start opens again. Signalled in the middle of a batch, it finishes the chunk it is in, hands the
 * batch's lease back, closes the store, logs "stopped" and exits 0; the next start finishes the batch at once
 * (the lease is an hour long: only a handed-back lease lets it) and no record runs twice. A request in flight
 * gets its answer, and a webhook delivery in flight is finished and recorded, before the process exits; the
 * webhook dispatcher, stopped, claims no endpoint beyond those it is serving.
 */
const children: ServiceProcess[] = []
const dirs: string[] = []
let db: TestDatabase | undefined
after(async () => {
  for (const c of children) await c.kill('SIGKILL')
  await db?.drop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/** Where a test's service keeps its data: this file's PostgreSQL database, or the test's own DATA_DIR. */
async function storeEnv(): Promise<Record<string, string>> {
  if (onPostgres) {
    // One database for the file; each test has its own client.
    db ??= await createTestDatabase()
    return { DATABASE_URL: db.url as string }
  }
  const dir = mkdtempSync(join(tmpdir(), 'irs-shutdown-'))
  dirs.push(dir)
  return { DATA_DIR: dir }
}

/**
 * The stored rows, read while no service runs: on PostgreSQL through the test's own connection; on PGlite by
 * opening the DATA_DIR (which takes its lock, so this also proves the stopped service released it).
 */
async function inspect<T>(env: Record<string, string>, fn: (store: Store) => Promise<T>): Promise<T> {
  if (db) return fn(db.store)
  const store = await openStore({ dataDir: env.DATA_DIR as string })
  try {
    return await fn(store)
  } finally {
    await store.close()
  }
}

async function start(env: Record<string, string>): Promise<ServiceProcess> {
  const s = await startService({
    ...env,
    LOG_LEVEL: 'info',
    // One record per chunk transaction: the batch takes long enough to be caught in the middle.
    BATCH_CHUNK_SIZE: '1',
    // Far longer than the test: only a lease handed back on SIGTERM lets the next start resume at once.
    BATCH_LEASE_SECONDS: '3600',
    BATCH_POLL_MS: '50',
    // The test polls; the per-key limits are not what it is about.
    RATE_LIMIT_PER_MINUTE: '1000000',
    CONCURRENCY_PER_KEY: '1000',
  })
  children.push(s)
  return s
}

/**
 * The log's messages in the order they were logged (by their `time`, stably). Every logger writes synchronously
 * through one destination, so the pipe has them in that order; the sort is a second guard. (With pino's default
 * asynchronous destinations, CI once read "stopped" before the SIGTERM line logged before it.)
 */
const logMessages = (out: string) =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l, i) => ({ ...(JSON.parse(l) as { msg: string; time: number }), i }))
    .sort((a, b) => a.time - b.time || a.i - b.i)
    .map((l) => l.msg)

const STOPPING = 'SIGTERM: stopping (finishing requests in flight, handing back batch leases)'

/** SIGTERM, then the exit: code 0, no signal, the stopping line once and "stopped" last. */
async function sigterm(s: ServiceProcess): Promise<string[]> {
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => s.child.once('exit', (c, sig) => resolve([c, sig])))
  s.child.kill('SIGTERM')
  assert.deepEqual(await exited, [0, null], s.output())
  const msgs = logMessages(s.output())
  assert.equal(msgs.filter((m) => m === STOPPING).length, 1, s.output())
  assert.equal(msgs.at(-1), 'stopped', s.output())
  return msgs
}

async function portIsFree(url: string): Promise<boolean> {
  const { port } = new URL(url)
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve(false)
    })
    socket.once('error', () => resolve(true))
  })
}

/** Every event of the client's change feed, page after page through `nextCursor`. */
async function feed(url: string, key: string, clientCode: string) {
  const events: { type: string; resource: { type: string; id: string }; revision: number }[] = []
  let after: string | undefined
  for (let page = 0; page < 100; page++) {
    const res = await http(url, 'GET', `/v1/clients/${clientCode}/changes?limit=200${after ? `&after=${after}` : ''}`, { token: key })
    assert.equal(res.status, 200, JSON.stringify(res.json))
    events.push(...res.json.data)
    if (!res.json.hasMore) return events
    after = res.json.nextCursor
  }
  throw new Error('the change feed did not end within 100 pages')
}

/** A webhook receiver on 127.0.0.1 that holds every notification until the test lets it answer (204). */
async function holdingReceiver() {
  const received: { client: string; id: string; answer: () => void }[] = []
  const receiver = createServer((req, res) => {
    let text = ''
    req.on('data', (d) => {
      text += d
    })
    req.on('end', () => {
      const body = JSON.parse(text)
      received.push({ client: body.clientCode, id: body.resource.id, answer: () => res.writeHead(204).end() })
    })
  })
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()))
  return {
    received,
    port: (receiver.address() as net.AddressInfo).port,
    async close() {
      receiver.closeAllConnections()
      await new Promise<void>((resolve) => receiver.close(() => resolve()))
    },
  }
}

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i + 1}`)
const TOTAL = 100

describe(`SIGTERM (${engineName} store)`, () => {
  test('mid-batch: exit 0 and "stopped"; the next start finishes the batch at once and runs no record twice', {
    timeout: 300_000,
  }, async () => {
    const env = await storeEnv()
    const one = await start(env)
    const key = await seedTenant(one.url, 'term', ['customers:write', 'customers:read'])
    const put = await http(one.url, 'PUT', '/v1/clients/term/batches/b-1', { token: key, body: { records: customerRecords('t', TOTAL) } })
    assert.equal(put.status, 202, JSON.stringify(put.json))
    assert.deepEqual(put.json.counts, { total: TOTAL, pending: TOTAL, succeeded: 0, failed: 0, dependencyFailed: 0 })

    // Some records done, as the API reports them: the signal comes in the middle of the batch.
    const seen = await waitFor('the first records of the batch done', async () => {
      const b = await getBatch(one.url, key, 'term', 'b-1')
      return b.counts.succeeded > 0 ? b : undefined
    })
    await sigterm(one)
    assert.equal(await portIsFree(one.url), true)

    // Stopped: the chunks run so far committed and the rest is pending, under a lease handed back.
    const stopped = await inspect(env, async (store) => {
      const [batch] = await store.query<{ status: string; attempts: number; handed_back: boolean; completed: boolean }>(
        `SELECT status, attempts::int AS attempts, lease_expires_at <= now() AS handed_back, completed_at IS NOT NULL AS completed
           FROM batches WHERE client_code = 'term' AND external_batch_id = 'b-1'`,
      )
      const records = await store.query<{ status: string; n: number; first: number; last: number }>(
        `SELECT status, count(*)::int AS n, min(position)::int AS first, max(position)::int AS last
           FROM batch_records WHERE client_code = 'term' AND external_batch_id = 'b-1' GROUP BY status ORDER BY status`,
      )
      const customers = await store.query<{ n: number }>(`SELECT count(*)::int AS n FROM customers WHERE client_code = 'term'`)
      return {
        batch: batch && { ...batch, attempts: Number(batch.attempts) },
        records: records.map((r) => [r.status, Number(r.n), Number(r.first), Number(r.last)]),
        customers: Number(customers[0]?.n),
      }
    })
    const done = stopped.customers
    assert.ok(done >= seen.counts.succeeded && done < TOTAL, `SIGTERM came in the middle: ${done} of ${TOTAL} done`)
    assert.deepEqual(stopped.batch, { status: 'running', attempts: 1, handed_back: true, completed: false })
    assert.deepEqual(stopped.records, [
      ['pending', TOTAL - done, done + 1, TOTAL],
      ['succeeded', done, 1, done],
    ])

    // The next start on the same data finishes the batch: without the handed-back lease it would wait an hour.
    const two = await start(env)
    const finished = await waitFor(
      'the batch finished by the next start',
      async () => {
        const b = await getBatch(two.url, key, 'term', 'b-1')
        return b.status === 'queued' || b.status === 'running' ? undefined : b
      },
      120_000,
    )
    assertAllCreated(finished, ids('t', TOTAL))
    // Every record applied exactly once: one Customer at revision 1 and one feed event each, nothing else.
    const events = await feed(two.url, key, 'term')
    assert.deepEqual(
      events.map((e) => [e.type, e.resource.type, e.resource.id, e.revision]).sort(),
      ids('t', TOTAL)
        .map((id) => ['customer.created', 'customer', id, 1])
        .sort(),
    )
    for (const id of ['t-1', `t-${done}`, `t-${done + 1}`, `t-${TOTAL}`]) {
      const c = await http(two.url, 'GET', `/v1/clients/term/customers/${id}`, { token: key })
      assert.equal(c.status, 200)
      assert.equal(c.json.revision, 1)
    }
    await sigterm(two)
    await inspect(env, async (store) => {
      await assertEachCustomerWrittenOnce({ store } as TestDatabase, 'term', ids('t', TOTAL))
      const [batch] = await store.query<{ status: string; attempts: number }>(
        `SELECT status, attempts::int AS attempts FROM batches WHERE client_code = 'term' AND external_batch_id = 'b-1'`,
      )
      // Claimed once by each process: the second took the handed-back lease.
      assert.deepEqual(batch && { ...batch, attempts: Number(batch.attempts) }, { status: 'succeeded', attempts: 2 })
    })
  })

  test('a request in flight when SIGTERM arrives gets its answer; a new connection is refused', { timeout: 300_000 }, async () => {
    const env = await storeEnv()
    const s = await start(env)
    const key = await seedTenant(s.url, 'inflight', ['customers:write', 'customers:read'])
    const body = JSON.stringify({ type: 'person', name: { firstName: 'Ada', lastName: 'Inflight' }, sourceReference: 'ref/1' })
    // Headers and the first bytes now; the rest only once the service is stopping.
    const put = splitPut(`${s.url}/v1/clients/inflight/customers/c-1`, key, body)
    await waitFor('the request received', async () =>
      /"url":"\/v1\/clients\/inflight\/customers\/c-1"[^\n]*"msg":"incoming request"/.test(s.output()) ? true : undefined,
    )
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => s.child.once('exit', (c, sig) => resolve([c, sig])))
    s.child.kill('SIGTERM')
    await waitFor('the service stopping', async () => (logMessages(s.output()).includes(STOPPING) ? true : undefined))
    // Stopping: it takes no new connection, and still runs (the request in flight holds it).
    await waitFor('the port closed', async () => ((await portIsFree(s.url)) ? true : undefined))
    assert.equal(s.child.exitCode, null)
    put.sendRest()
    const res = await put.answer
    assert.equal(res.status, 201, res.body)
    assert.equal(JSON.parse(res.body).externalCustomerId, 'c-1')
    assert.equal(JSON.parse(res.body).revision, 1)
    assert.deepEqual(await exited, [0, null], s.output())
    const msgs = logMessages(s.output())
    assert.deepEqual(msgs.slice(-3), [STOPPING, 'request completed', 'stopped'])
    // The answer was saved: the store holds the Customer once, with its one feed event.
    await inspect(env, (store) => assertEachCustomerWrittenOnce({ store } as TestDatabase, 'inflight', ['c-1']))
  })

  test('a webhook delivery in flight when SIGTERM arrives is finished and recorded; the next start sends nothing again', {
    timeout: 300_000,
  }, async () => {
    const { received, port, close } = await holdingReceiver()
    try {
      const env = { ...(await storeEnv()), WEBHOOK_DEV_ALLOW_LOOPBACK: '1', WEBHOOK_INTERVAL_MS: '200' }
      const s = await start(env)
      const key = await seedTenant(s.url, 'hooks', ['customers:write', 'customers:read', 'webhooks:manage'])
      const endpoint = await http(s.url, 'PUT', '/v1/clients/hooks/webhook-endpoint', {
        token: key,
        body: { url: `http://127.0.0.1:${port}/hooks` },
      })
      assert.equal(endpoint.status, 201, JSON.stringify(endpoint.json))
      const put = await http(s.url, 'PUT', '/v1/clients/hooks/customers/in-flight', {
        token: key,
        body: { type: 'person', name: { firstName: 'Ada', lastName: 'Hook' }, sourceReference: 'hook/1' },
      })
      assert.equal(put.status, 201)
      await waitFor('the notification at the receiver', async () => (received.length === 1 ? true : undefined))

      const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => s.child.once('exit', (c, sig) => resolve([c, sig])))
      s.child.kill('SIGTERM')
      await waitFor('the service stopping', async () => (logMessages(s.output()).includes(STOPPING) ? true : undefined))
      await waitFor('the port closed', async () => ((await portIsFree(s.url)) ? true : undefined))
      // Stopping, it waits for the delivery it is sending.
      assert.equal(s.child.exitCode, null)
      received[0]?.answer()
      assert.deepEqual(await exited, [0, null], s.output())
      assert.equal(logMessages(s.output()).at(-1), 'stopped')

      // The outcome was recorded before the store closed: the next start finds it delivered, after one attempt,
      // and sends nothing again.
      const two = await start(env)
      const log = await http(two.url, 'GET', '/v1/clients/hooks/webhook-endpoint/deliveries', { token: key })
      assert.equal(log.status, 200, JSON.stringify(log.json))
      assert.deepEqual(
        log.json.data.map((d: { resource: { id: string }; status: string; attemptCount: number; attempts: { httpStatus: number }[] }) => [
          d.resource.id,
          d.status,
          d.attemptCount,
          d.attempts.map((a) => a.httpStatus),
        ]),
        [['in-flight', 'delivered', 1, [204]]],
      )
      await sigterm(two)
      assert.deepEqual(
        received.map((r) => r.id),
        ['in-flight'],
      )
    } finally {
      await close()
    }
  })

  test("the webhook dispatcher's stop: deliveries being sent finish and are recorded, no other endpoint is claimed", async () => {
    const { received, port, close } = await holdingReceiver()
    const t = await startTestApp({ WEBHOOK_DEV_ALLOW_LOOPBACK: '1' })
    try {
      const clients = ['stop-a', 'stop-b', 'stop-c']
      const keys: Record<string, string> = {}
      for (const client of clients) {
        const tenant = await t.tenant(client)
        keys[client] = tenant.apiKey
        const put = await t.call('PUT', `/v1/clients/${client}/webhook-endpoint`, {
          key: tenant.apiKey,
          body: { url: `http://127.0.0.1:${port}/${client}` },
        })
        assert.equal(put.status, 201, put.body)
        const c = await t.call('PUT', `/v1/clients/${client}/customers/c-1`, {
          key: tenant.apiKey,
          body: { type: 'person', name: { firstName: 'Ada', lastName: client }, sourceReference: `stop/${client}` },
        })
        assert.equal(c.status, 201, c.body)
      }
      const dispatcher = (concurrency: number) =>
        createWebhookDispatcher({
          store: t.store,
          clock: systemClock,
          resolver: systemResolver,
          allowLoopback: true,
          keyRing: t.app.services.webhooks.keyRing,
          intervalMs: 3_600_000,
          retryScheduleMs: [60_000],
          concurrency,
        })
      // Two endpoints served at once: two notifications held at the receiver, the third endpoint waiting its turn.
      const one = dispatcher(2)
      one.start()
      await waitFor('two notifications at the receiver', async () => (received.length === 2 ? true : undefined))
      const stopped = one.stop()
      for (const r of received) r.answer()
      await stopped
      assert.equal(received.length, 2)
      const sent = received.map((r) => r.client)
      const waiting = clients.filter((c) => !sent.includes(c))
      assert.equal(waiting.length, 1)
      const state = async (client: string) => {
        const res = await t.call('GET', `/v1/clients/${client}/webhook-endpoint/deliveries`, { key: keys[client] as string })
        assert.equal(res.status, 200, res.body)
        return res.json.data.map((d: { status: string; attemptCount: number }) => [d.status, d.attemptCount])
      }
      for (const client of sent) assert.deepEqual(await state(client), [['delivered', 1]])
      // Never claimed: pending, no attempt, and free for the next run at once (a claim would hold it 20 s).
      assert.deepEqual(await state(waiting[0] as string), [['pending', 0]])
      const two = dispatcher(2)
      const next = two.runOnce()
      await waitFor('the third notification at the receiver', async () => (received.length === 3 ? true : undefined))
      assert.equal(received[2]?.client, waiting[0])
      received[2]?.answer()
      // One turn that did work (runOnce's answer, src/workers/worker.ts); the one attempt is the state below.
      assert.equal(await next, true)
      await two.stop()
      assert.deepEqual(await state(waiting[0] as string), [['delivered', 1]])
      assert.equal(received.length, 3)
    } finally {
      await t.close()
      await close()
    }
  })
})
