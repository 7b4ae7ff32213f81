import assert from 'node:assert/strict'
import net from 'node:net'
import { after, describe, test } from 'node:test'
import { z } from 'zod'
import { systemClock } from '../../src/domain/time.ts'
import { createGate } from '../../src/http/limits.ts'
import { defineRoute } from '../../src/http/route.ts'
import { buildServer } from '../../src/http/server.ts'
import { FailedAfterCommitError, type Queryable, type QueryOptions, type Row, type Store } from '../../src/store/store.ts'
import { problemCode, startTestApp, type TestApp } from '../helpers/app.ts'
import { createTestDatabase, onPostgres } from '../helpers/store.ts'

/**
 * The concurrency slot follows the request's life in one place: whatever stage a request is at when its
 * client goes away (before, during or after the slot's claim, while the body uploads, inside the handler),
 * the slot is released at once, not after its 30-second lease; and nothing that fails after commit
 * (releasing the slot) changes a committed answer.
 *
 * To stop a request at a chosen stage on either engine, the app runs on a store that delegates every
 * call to the real one but can hold a chosen statement until the test lets it go. On PostgreSQL the gate is
 * one statement (`request_gate`: key, count and slot); on PGlite the slots live in the process and the key
 * lookup is the gate's one statement (the key's slot is taken before it).
 */
const GATE_SQL = onPostgres ? /request_gate/ : /FROM api_keys/
const memoryOnly = onPostgres ? false : 'the embedded store keeps its slots in memory: a release there cannot fail or hang'
const LIMITS = { RATE_LIMIT_PER_MINUTE: '100000', CONCURRENCY_PER_KEY: '1' }
const customer = JSON.stringify({ type: 'person', name: { firstName: 'Ada', lastName: 'Lovelace' }, sourceReference: 'ledger/c/1' })

interface Hold {
  /** Resolves when a matching statement has reached the hold point. */
  reached: Promise<void>
  release(): void
}

/** A store that runs everything on `inner` but can hold one statement (matched by its SQL) before or after it runs. */
function holdingStore(inner: Store) {
  let pending: { match: RegExp; when: 'before' | 'after'; reached: () => void; gate: Promise<void> } | null = null
  const statements: string[] = []
  async function checkpoint(sql: string, when: 'before' | 'after') {
    const p = pending
    if (p && p.when === when && p.match.test(sql)) {
      pending = null
      p.reached()
      await p.gate
    }
  }
  const store: Store = {
    kind: inner.kind,
    async query<T extends object>(sql: string, params?: readonly unknown[]): Promise<T[]> {
      statements.push(sql)
      await checkpoint(sql, 'before')
      const rows = await inner.query<T>(sql, params)
      await checkpoint(sql, 'after')
      return rows
    },
    exec: (sql) => inner.exec(sql),
    async transaction(fn, ahead) {
      await checkpoint('BEGIN', 'before')
      // A write's gate sent ahead of BEGIN (src/http/admission.ts, step 3) meets the same checkpoints.
      const checked =
        ahead &&
        ((connection: Queryable) =>
          ahead({
            async query<T extends object = Row>(sql: string, params?: readonly unknown[], options?: QueryOptions) {
              statements.push(sql)
              await checkpoint(sql, 'before')
              const rows = await connection.query<T>(sql, params, options)
              await checkpoint(sql, 'after')
              return rows
            },
            exec: (sql) => connection.exec(sql),
          }))
      return inner.transaction(fn, checked)
    },
    close: () => inner.close(),
  }
  return {
    store,
    /** How many statements run so far match. */
    count: (match: RegExp) => statements.filter((sql) => match.test(sql)).length,
    hold(match: RegExp, when: 'before' | 'after' = 'before'): Hold {
      let reached!: () => void
      let release!: () => void
      const reachedP = new Promise<void>((r) => {
        reached = r
      })
      const gate = new Promise<void>((r) => {
        release = r
      })
      pending = { match, when, reached, gate }
      return { reached: reachedP, release }
    },
  }
}

const opened: { t: TestApp; drop: () => Promise<void> }[] = []
after(async () => {
  for (const o of opened.reverse()) {
    await o.t.app.app.close()
    await o.drop()
  }
})

async function holdingApp(env: Record<string, string> = {}) {
  const db = await createTestDatabase()
  const h = holdingStore(db.store)
  const t = await startTestApp({ ...LIMITS, ...env }, { db: { ...db, store: h.store } })
  opened.push({ t, drop: () => db.drop() })
  await t.app.app.listen({ host: '127.0.0.1', port: 0 })
  const port = (t.app.app.server.address() as net.AddressInfo).port
  return { t, hold: h.hold, count: h.count, port, inner: db.store }
}

/**
 * A raw connection to the app, and a way to close it that returns only once the server has seen the
 * close (its own socket's 'close' listeners have run), so the next step starts from a known state.
 */
async function rawConnection(t: TestApp, port: number) {
  const server = t.app.app.server
  const client = net.connect(port, '127.0.0.1')
  const serverSide = new Promise<net.Socket>((resolve) => {
    const onConnection = (s: net.Socket) => {
      if (s.remotePort === client.localPort) {
        server.off('connection', onConnection)
        resolve(s)
      }
    }
    server.on('connection', onConnection)
  })
  await new Promise<void>((resolve) => client.once('connect', () => resolve()))
  const socket = await serverSide
  let data = ''
  client.on('data', (d) => {
    data += d.toString()
  })
  client.on('error', () => {})
  return {
    write: (s: string) => client.write(s),
    received: () => data,
    async abort() {
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
      client.destroy()
      await closed
      await new Promise((r) => setImmediate(r))
    },
    async response(): Promise<string> {
      await new Promise<void>((resolve) => (client.closed ? resolve() : client.once('close', () => resolve())))
      return data
    },
  }
}

function putHead(path: string, key: string, length = Buffer.byteLength(customer)) {
  return `PUT ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`
}

/**
 * The key answers again: a bounded number of tries, each a real request (a lease of 30 s would exhaust them
 * all). Returns the last status and how many requests it took.
 */
async function keyAnswers(t: TestApp, clientCode: string, key: string, expected: number): Promise<number> {
  return (await keyAnswersAfter(t, clientCode, key, expected)).status
}

async function keyAnswersAfter(t: TestApp, clientCode: string, key: string, expected: number) {
  let status = 0
  let tries = 0
  while (tries < 100) {
    tries++
    status = (await t.call('GET', `/v1/clients/${clientCode}/customers/none`, { key })).status
    if (status === expected) break
    await new Promise((r) => setTimeout(r, 20))
  }
  return { status, tries }
}

/**
 * Slots the key holds: on PostgreSQL its rows; on PGlite (slots in memory) whether a request of the key is
 * refused as busy right now (the probe's own slot is given back with its answer).
 */
async function liveSlots(inner: Store, apiKeyId: string, probe?: { t: TestApp; clientCode: string; key: string }): Promise<number> {
  if (!onPostgres) {
    if (!probe) throw new Error('on PGlite a probe request tells whether the slot is held')
    const res = await probe.t.call('GET', `/v1/clients/${probe.clientCode}/customers/none`, { key: probe.key })
    return res.status === 429 && res.headers['retry-after'] === '1' ? 1 : 0
  }
  const rows = await inner.query<{ n: number }>('SELECT count(*)::int AS n FROM inflight_requests WHERE bucket = $1', [`key:${apiKeyId}`])
  return rows[0]?.n ?? 0
}

describe('a client that goes away never keeps its key locked', () => {
  const stages: { name: string; sql: RegExp; when: 'before' | 'after' }[] = [
    { name: 'while the gate waits on the store (key, count, slot)', sql: GATE_SQL, when: 'before' },
    { name: 'after the gate took the slot, before the app learns it', sql: GATE_SQL, when: 'after' },
    { name: 'inside the handler, before its transaction', sql: /^BEGIN$/, when: 'before' },
  ]
  for (const [i, stage] of stages.entries()) {
    test(`aborted ${stage.name}: the key answers at once`, async () => {
      const { t, hold, port, inner } = await holdingApp()
      const code = `gone-${i}`
      const k = await t.tenant(code)
      const h = hold(stage.sql, stage.when)
      const conn = await rawConnection(t, port)
      // The whole request is sent: headers and body.
      conn.write(putHead(`/v1/clients/${code}/customers/c-1`, k.apiKey) + customer)
      await h.reached
      await conn.abort()
      h.release()
      assert.equal(await keyAnswers(t, code, k.apiKey, 404), 404)
      assert.equal(await liveSlots(inner, k.apiKeyId, { t, clientCode: code, key: k.apiKey }), 0)
    })
  }

  test('aborted while the body is uploading (slot held): the key answers at once', async () => {
    const { t, port, inner } = await holdingApp()
    const k = await t.tenant('gone-upload')
    const conn = await rawConnection(t, port)
    conn.write(putHead('/v1/clients/gone-upload/customers/c-1', k.apiKey) + customer.slice(0, 10))
    const probe = { t, clientCode: 'gone-upload', key: k.apiKey }
    for (let i = 0; i < 200 && (await liveSlots(inner, k.apiKeyId, probe)) === 0; i++) await new Promise((r) => setTimeout(r, 10))
    assert.equal(await liveSlots(inner, k.apiKeyId, probe), 1)
    await conn.abort()
    assert.equal(await keyAnswers(t, 'gone-upload', k.apiKey, 404), 404)
  })

  test('aborted while the gate waits: nothing is written, and the very next request is served', async () => {
    const { t, hold, count, port, inner } = await holdingApp()
    const k = await t.tenant('gone-early')
    const h = hold(GATE_SQL)
    const conn = await rawConnection(t, port)
    conn.write(putHead('/v1/clients/gone-early/customers/c-1', k.apiKey) + customer)
    await h.reached
    await conn.abort()
    h.release()
    // The key answers again as soon as the gate's statement is back (the slot it took is given back then), and
    // the aborted write was never applied.
    const answered = await keyAnswersAfter(t, 'gone-early', k.apiKey, 404)
    assert.equal(answered.status, 404)
    assert.equal((await t.call('GET', '/v1/clients/gone-early/customers/c-1', { key: k.apiKey })).status, 404)
    assert.equal(await liveSlots(inner, k.apiKeyId, { t, clientCode: 'gone-early', key: k.apiKey }), 0)
    // One gate statement per request (the aborted PUT's, the GETs', the probe's on PGlite); the limits run no
    // other statement but the releases.
    assert.equal(count(GATE_SQL), 1 + answered.tries + 1 + (onPostgres ? 0 : 1))
    assert.equal(count(/rate_limit_windows|INSERT INTO inflight_requests/), 0)
  })

  test('a request held inside the handler still answers normally when its client stays', async () => {
    const { t, hold, port } = await holdingApp()
    const k = await t.tenant('stays')
    const h = hold(/^BEGIN$/)
    const conn = await rawConnection(t, port)
    conn.write(putHead('/v1/clients/stays/customers/c-1', k.apiKey) + customer)
    await h.reached
    // One at a time: while it runs, the key is busy.
    const busy = await t.call('GET', '/v1/clients/stays/customers/none', { key: k.apiKey })
    assert.equal(busy.status, 429)
    assert.equal(problemCode(busy), 'rate_limit_exceeded')
    h.release()
    assert.match(await conn.response(), /^HTTP\/1\.1 201 /)
    assert.equal((await t.call('GET', '/v1/clients/stays/customers/c-1', { key: k.apiKey })).status, 200)
  })
})

describe('nothing after commit changes a committed answer', () => {
  const TRIGGER = `
    CREATE FUNCTION refuse_release() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'release refused by test trigger'; END $$;
    CREATE TRIGGER refuse_release BEFORE DELETE ON inflight_requests FOR EACH ROW EXECUTE FUNCTION refuse_release();`
  const DROP = 'DROP TRIGGER refuse_release ON inflight_requests; DROP FUNCTION refuse_release();'

  test('a write whose slot cannot be freed in its transaction saves nothing, says so, and succeeds once release works', {
    skip: memoryOnly,
  }, async () => {
    const { t, inner } = await holdingApp()
    const k = await t.tenant('release-fails')
    await inner.exec(TRIGGER)
    // The slot is freed by the write's own transaction (issue 12): a refused release rolls the write back.
    const res = await t.call('PUT', '/v1/clients/release-fails/customers/c-1', { key: k.apiKey, rawBody: customer })
    assert.equal(res.status, 503, res.body)
    assert.equal(res.json.detail, 'An unexpected error prevented a safe commit. Nothing was saved. Retry with backoff.')
    // Its ordinary release after the answer is refused too: the slot is still there.
    assert.equal(await liveSlots(inner, k.apiKeyId), 1)
    await inner.exec(DROP)
    // The background retry frees it (bounded wait; the lease alone would take 30 s).
    for (let i = 0; i < 400 && (await liveSlots(inner, k.apiKeyId)) > 0; i++) await new Promise((r) => setTimeout(r, 50))
    assert.equal(await liveSlots(inner, k.apiKeyId), 0)
    assert.equal((await t.call('GET', '/v1/clients/release-fails/customers/c-1', { key: k.apiKey })).status, 404, 'nothing was saved')
    const retry = await t.call('PUT', '/v1/clients/release-fails/customers/c-1', { key: k.apiKey, rawBody: customer })
    assert.equal(retry.status, 201, retry.body)
    assert.deepEqual(retry.json.name, { firstName: 'Ada', lastName: 'Lovelace' })
    assert.equal(await liveSlots(inner, k.apiKeyId), 0)
  })

  test('while its release cannot reach the store, the key still serves the next request of this process at once', {
    skip: memoryOnly,
  }, async () => {
    const { t, inner } = await holdingApp()
    const k = await t.tenant('release-pending')
    await inner.exec(TRIGGER)
    try {
      // A list read has no transaction and is not a one-read route: its release is a statement of its own.
      assert.equal((await t.call('GET', '/v1/clients/release-pending/customers', { key: k.apiKey })).status, 200)
      assert.equal(await liveSlots(inner, k.apiKeyId), 1)
      // The slot's request is over; this process knows it, so its next request takes the slot over instead of
      // waiting for a background retry (which keeps failing while the trigger is there) or the 30 s lease.
      for (let i = 0; i < 3; i++) {
        const res = await t.call('GET', '/v1/clients/release-pending/customers', { key: k.apiKey })
        assert.equal(res.status, 200, res.body)
      }
      assert.equal(await liveSlots(inner, k.apiKeyId), 1)
      // A one-read GET holds its slot only for its one statement (migration 0015) and deletes no row: it is
      // served (no such Customer), this process's finished holder passed over as above, and the row stays.
      const read = await t.call('GET', '/v1/clients/release-pending/customers/c-1', { key: k.apiKey })
      assert.equal(read.status, 404, read.body)
      assert.equal(problemCode(read), 'customer_not_found')
      assert.equal(await liveSlots(inner, k.apiKeyId), 1)
    } finally {
      await inner.exec(DROP)
    }
    for (let i = 0; i < 400 && (await liveSlots(inner, k.apiKeyId)) > 0; i++) await new Promise((r) => setTimeout(r, 50))
    assert.equal(await liveSlots(inner, k.apiKeyId), 0)
  })

  test('a release of its own that hangs does not hold back the answer', { timeout: 30_000, skip: memoryOnly }, async () => {
    const { t, hold, inner } = await holdingApp()
    const k = await t.tenant('release-hangs')
    assert.equal((await t.call('PUT', '/v1/clients/release-hangs/customers/c-1', { key: k.apiKey, rawBody: customer })).status, 201)
    const h = hold(/^DELETE FROM inflight_requests/)
    // Answered while the release is still stuck (without a bound on the wait, this would never return).
    const res = await t.call('GET', '/v1/clients/release-hangs/customers', { key: k.apiKey })
    assert.equal(res.status, 200, res.body)
    assert.deepEqual(
      res.json.data.map((c: { externalCustomerId: string }) => c.externalCustomerId),
      ['c-1'],
    )
    assert.equal(await liveSlots(inner, k.apiKeyId), 1)
    h.release()
    assert.equal(await keyAnswers(t, 'release-hangs', k.apiKey, 404), 404)
  })

  test('a failed release after a refusal keeps the refusal as it was (422, not 503)', { skip: memoryOnly }, async () => {
    const { t, inner } = await holdingApp()
    const k = await t.tenant('release-fails-422')
    await inner.exec(TRIGGER)
    const res = await t.call('PUT', '/v1/clients/release-fails-422/customers/c-1', { key: k.apiKey, body: { type: 'person' } })
    assert.equal(res.status, 422, res.body)
    assert.equal(problemCode(res), 'validation_error')
    await inner.exec(DROP)
  })
})

describe('"Nothing was saved" is said only when true', () => {
  test('a failure after a write handler finished says the write may have been saved, after COMMIT that it was; before it, or on a read, that nothing was', async () => {
    const db = await createTestDatabase()
    const Answer = z.object({ id: z.string() })
    const route = (method: 'GET' | 'PUT', path: string, handler: () => Promise<{ status: number; body: unknown }>) =>
      defineRoute({
        method,
        path,
        operationId: path,
        summary: path,
        tags: [],
        auth: { kind: 'none' },
        responses: { 201: { schema: Answer, description: '' }, 200: { schema: Answer, description: '' } },
        problems: [],
        public: false,
        handler,
      })
    const app = buildServer(
      {
        db: db.store,
        config: { environment: 'sandbox', docsUrl: 'https://docs.irs.test', logLevel: 'silent' },
        gate: createGate(db.store, { perMinute: 1000, concurrency: 1, clock: systemClock }),
        adminTokenDigest: '00',
      },
      [
        // The answer does not match its schema: found only after the handler (and its commit) finished.
        route('PUT', '/probe/render-fails', async () => ({ status: 201, body: { id: 1 } })),
        route('GET', '/probe/render-fails', async () => ({ status: 200, body: { id: 1 } })),
        route('PUT', '/probe/handler-fails', async () => {
          throw new Error('before commit')
        }),
        // COMMIT left with the render, then the answer failed its schema (src/resources/operations.ts, executeWrite).
        route('PUT', '/probe/saved-without-answer', async () => {
          throw new FailedAfterCommitError(new Error('the answer does not fit'))
        }),
      ],
    )
    try {
      const put = await app.inject({ method: 'PUT', url: '/probe/render-fails' })
      assert.equal(put.statusCode, 503)
      assert.equal(
        put.json().detail,
        'The request was processed, but its answer could not be produced; it may have been saved. Read the resource before retrying.',
      )
      const saved = await app.inject({ method: 'PUT', url: '/probe/saved-without-answer' })
      assert.equal(saved.statusCode, 503)
      assert.equal(saved.json().type, 'https://docs.irs.test/problems/projection_unavailable')
      assert.equal(
        saved.json().detail,
        'The write was saved, but its answer could not be produced. Read the resource to see it; retrying the identical request is safe: every write is idempotent by its identity.',
      )
      for (const res of [
        await app.inject({ method: 'GET', url: '/probe/render-fails' }),
        await app.inject({ method: 'PUT', url: '/probe/handler-fails' }),
      ]) {
        assert.equal(res.statusCode, 503)
        assert.equal(res.json().detail, 'An unexpected error prevented a safe commit. Nothing was saved. Retry with backoff.')
      }
    } finally {
      await app.close()
      await db.drop()
    }
  })
})

describe('a real lock holds the claim (PostgreSQL)', () => {
  test('aborted while the claim waits on a lock: the key answers once the lock is gone', {
    skip: onPostgres ? false : 'needs PostgreSQL (a second connection holds the lock)',
  }, async () => {
    const { t, port, inner } = await holdingApp()
    const k = await t.tenant('gone-locked')
    await inner.exec(`
      CREATE FUNCTION wait_for_test_lock() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$;
      CREATE TRIGGER wait_for_test_lock BEFORE INSERT ON inflight_requests FOR EACH ROW EXECUTE FUNCTION wait_for_test_lock();`)
    const locker = await import('pg').then((pg) => new pg.default.Client({ connectionString: (t.db as { url?: string }).url }))
    await locker.connect()
    try {
      await locker.query('BEGIN')
      await locker.query('SELECT pg_advisory_xact_lock(4242)')
      const conn = await rawConnection(t, port)
      conn.write(putHead('/v1/clients/gone-locked/customers/c-1', k.apiKey) + customer)
      // Wait until the claim is blocked on the lock.
      let waiting = 0
      for (let i = 0; i < 500 && waiting === 0; i++) {
        const rows = await inner.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted`,
        )
        waiting = rows[0]?.n ?? 0
        if (waiting === 0) await new Promise((r) => setTimeout(r, 10))
      }
      assert.equal(waiting, 1, 'the claim waits on the lock')
      await conn.abort()
      await locker.query('COMMIT')
      await inner.exec('DROP TRIGGER wait_for_test_lock ON inflight_requests; DROP FUNCTION wait_for_test_lock();')
      assert.equal(await keyAnswers(t, 'gone-locked', k.apiKey, 404), 404)
      assert.equal(await liveSlots(inner, k.apiKeyId), 0)
    } finally {
      await locker.end()
    }
  })
})
