import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import pg from 'pg'
import { CommitOutcomeUnknownError } from '../../src/store/store.ts'
import { createPrivateCluster, type PrivateCluster, privateClusterUnavailable } from '../helpers/private-cluster.ts'
import { type ServiceProcess, seedTenant, startService } from '../helpers/service-process.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * Issue 8: a PostgreSQL connection lost at any moment (terminated backend, server restart or crash) is a
 * failed request, never a dead process. The real service runs as a child process; while it serves a
 * sequential PUT loop, its connections are terminated or its server is restarted. Afterwards the process
 * is alive, every answer was a 2xx or a 503 problem, every acknowledged write reads back exactly, every
 * "nothing was saved" is true, and the service serves again without having been restarted.
 */
const NOTHING_SAVED = 'Nothing was saved'
/** The answers that do not know whether the write was saved (lost during COMMIT, or after the handler). */
const OUTCOME_UNKNOWN = /outcome is unknown|may have been saved/
// Limits high, as for every test not about limits (test/helpers/app.ts): with one slot per key, a slot whose
// release met a dropped connection refuses the key's next requests (429) until the limiter's retry frees it.
const serviceEnv = { RATE_LIMIT_PER_MINUTE: '1000000', CONCURRENCY_PER_KEY: '1000', LOG_LEVEL: 'fatal' }
const scopes = ['customers:read', 'customers:write']

interface Answer {
  id: string
  body: Record<string, unknown>
  status: number
  contentType: string
  // biome-ignore lint/suspicious/noExplicitAny: answers are inspected field by field
  json: any
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const customer = (id: string) => ({ type: 'person', name: { firstName: 'Ada', lastName: id }, sourceReference: `ledger/c/${id}` })

async function call(svc: ServiceProcess, key: string, method: string, path: string, body?: unknown): Promise<Omit<Answer, 'id' | 'body'>> {
  const res = await fetch(`${svc.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  const text = await res.text()
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', json: text ? JSON.parse(text) : undefined }
}

const alive = (svc: ServiceProcess) => svc.child.exitCode === null && svc.child.signalCode === null

/**
 * A sequential writer: one PUT of a new Customer at a time, until `stop()` is called or `max` requests were
 * sent. A request the process could not answer at all (it died) ends the loop and is recorded as status 0.
 */
function writer(svc: ServiceProcess, key: string, clientCode: string, prefix: string, max: number) {
  const answers: Answer[] = []
  let stopped = false
  const done = (async () => {
    for (let i = 0; i < max && !stopped; i++) {
      const id = `${prefix}-${i}`
      const body = customer(id)
      try {
        answers.push({ id, body, ...(await call(svc, key, 'PUT', `/v1/clients/${clientCode}/customers/${id}`, body)) })
      } catch {
        answers.push({ id, body, status: 0, contentType: '', json: undefined })
        return
      }
      // While the database is down answers come back at once; do not spin.
      if (answers.at(-1)?.status === 503) await sleep(10)
    }
  })()
  return {
    answers,
    stop: async () => {
      stopped = true
      await done
    },
  }
}

/** Polls `check` every 20 ms, at most `tries` times; fails with `what` if it never held. */
async function waitFor(what: string, check: () => boolean, tries = 1500): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (check()) return
    await sleep(20)
  }
  throw new Error(`timed out waiting for ${what}`)
}

/**
 * Every answer was a 2xx or a 503 problem; every 2xx reads back exactly; every "nothing was saved" is true
 * (the Customer does not exist, and an identical retry creates it); every "outcome unknown" is settled by an
 * identical retry. Returns the number of each kind of 503.
 */
async function verify(svc: ServiceProcess, key: string, clientCode: string, answers: Answer[]) {
  const path = (id: string) => `/v1/clients/${clientCode}/customers/${id}`
  let nothingSaved = 0
  let unknown = 0
  for (const a of answers) {
    if (a.status === 200 || a.status === 201) {
      const read = await call(svc, key, 'GET', path(a.id))
      assert.equal(read.status, 200, `${a.id} was acknowledged with ${a.status} but reads back ${read.status}`)
      assert.deepEqual(read.json, a.json, `${a.id} reads back differently from its acknowledgement`)
      continue
    }
    assert.equal(a.status, 503, `${a.id} answered ${a.status}: ${JSON.stringify(a.json)}`)
    assert.equal(a.contentType, 'application/problem+json; charset=utf-8')
    assert.equal(a.json.title, 'Projection unavailable')
    assert.equal(a.json.status, 503)
    assert.match(a.json.type, /\/problems\/projection_unavailable$/)
    if (a.json.detail.includes(NOTHING_SAVED)) {
      nothingSaved++
      const read = await call(svc, key, 'GET', path(a.id))
      assert.equal(read.status, 404, `${a.id} answered "${NOTHING_SAVED}" but reads back ${read.status}`)
      const retry = await call(svc, key, 'PUT', path(a.id), a.body)
      assert.equal(retry.status, 201, `the retry of ${a.id} answered ${retry.status}`)
    } else {
      assert.match(a.json.detail, OUTCOME_UNKNOWN)
      unknown++
      const retry = await call(svc, key, 'PUT', path(a.id), a.body)
      assert.ok(retry.status === 200 || retry.status === 201, `the retry of ${a.id} answered ${retry.status}`)
      assert.equal(retry.json.revision, 1)
      assert.deepEqual((await call(svc, key, 'GET', path(a.id))).json, retry.json)
    }
  }
  return { nothingSaved, unknown, acknowledged: answers.filter((a) => a.status < 300).length }
}

/** The service still serves: a new Customer is created and reads back. */
async function servesAgain(svc: ServiceProcess, key: string, clientCode: string, id: string) {
  const put = await call(svc, key, 'PUT', `/v1/clients/${clientCode}/customers/${id}`, customer(id))
  assert.equal(put.status, 201, JSON.stringify(put.json))
  assert.deepEqual((await call(svc, key, 'GET', `/v1/clients/${clientCode}/customers/${id}`)).json, put.json)
}

/**
 * Issue 20.1: at production scale. 16 writers PUT Customers in parallel while every backend of the service is
 * terminated every 100 ms for 30 s; 5 runs, each a new service process. With 2 writers this passed while 16 killed
 * the process in 2 runs of 3 (an 'error' event on a client nobody listened to at that moment). After each run the
 * process is alive, every acknowledged write reads back exactly and the service serves again.
 */
const SWEEP_RUNS = 5
const SWEEP_WRITERS = 16
const SWEEP_TENANTS = 4
const SWEEP_FOR_MS = 30_000
const SWEEP_EVERY_MS = 100

describe('terminating the service’s backends under load', { skip: onPostgres ? false : 'needs PostgreSQL (DATABASE_URL)' }, () => {
  let db: TestDatabase
  let svc: ServiceProcess | undefined
  before(async () => {
    db = await createTestDatabase()
  })
  after(async () => {
    await svc?.kill()
    await db.drop()
  })

  for (let run = 1; run <= SWEEP_RUNS; run++) {
    test(`run ${run} of ${SWEEP_RUNS}: ${SWEEP_WRITERS} writers, backends terminated every ${SWEEP_EVERY_MS} ms for ${SWEEP_FOR_MS / 1000} s: alive, nothing acknowledged is lost`, async (t) => {
      await svc?.kill()
      svc = await startService({ ...serviceEnv, DATABASE_URL: db.url as string })
      const s = svc
      const tenants: { code: string; key: string }[] = []
      for (let i = 0; i < SWEEP_TENANTS; i++) {
        const code = `sw${run}-${i}`
        tenants.push({ code, key: await seedTenant(s.url, code, scopes) })
      }
      const dbName = new URL(db.url as string).pathname.slice(1)
      const killer = new pg.Client({ connectionString: process.env.DATABASE_URL })
      killer.on('error', () => {})
      await killer.connect()
      const writers = Array.from({ length: SWEEP_WRITERS }, (_, i) => {
        const tenant = tenants[i % SWEEP_TENANTS] as { code: string; key: string }
        return { tenant, w: writer(s, tenant.key, tenant.code, `w${i}`, 1_000_000) }
      })
      let terminated = 0
      let sweeps = 0
      try {
        const end = Date.now() + SWEEP_FOR_MS
        while (Date.now() < end && alive(s)) {
          const r = await killer.query<{ n: number }>(
            `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n
               FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
            [dbName],
          )
          terminated += r.rows[0]?.n ?? 0
          sweeps++
          await sleep(SWEEP_EVERY_MS)
        }
      } finally {
        await killer.end()
        await Promise.all(writers.map(({ w }) => w.stop()))
      }
      assert.ok(alive(s), `the service died after ${sweeps} sweeps:\n${s.output()}`)
      assert.ok(terminated > 0)
      // Let the pool notice the last terminations on its idle connections before reading back.
      await sleep(300)
      const results = await Promise.all(writers.map(({ tenant, w }) => verify(s, tenant.key, tenant.code, w.answers)))
      const sum = (k: 'acknowledged' | 'nothingSaved' | 'unknown') => results.reduce((n, r) => n + r[k], 0)
      t.diagnostic(
        `${sweeps} sweeps, ${terminated} backends terminated; ${sum('acknowledged')} writes acknowledged, lost 0; ` +
          `${sum('nothingSaved')} answered 503 nothing saved, ${sum('unknown')} 503 outcome unknown; process alive`,
      )
      assert.ok(sum('acknowledged') > 0)
      assert.ok(sum('nothingSaved') + sum('unknown') > 0, 'no request was ever hit by a terminated connection')
      await servesAgain(s, tenants[0]?.key as string, tenants[0]?.code as string, 'after')
      assert.ok(alive(s), `the service died:\n${s.output()}`)
      await s.kill('SIGTERM')
      assert.equal(s.child.exitCode, 0, s.output())
    })
  }
})

/**
 * COMMIT made slow on purpose: a deferred constraint trigger sleeps at COMMIT for rows whose key starts with
 * `slow-`, so a test can terminate the backend exactly while COMMIT is in flight.
 */
async function slowCommitOn(admin: pg.Client, table: string, column: string) {
  await admin.query(`CREATE OR REPLACE FUNCTION irs_test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$`)
  await admin.query(`CREATE CONSTRAINT TRIGGER irs_test_slow_commit AFTER INSERT ON ${table} DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.${column} LIKE 'slow-%') EXECUTE FUNCTION irs_test_slow_commit()`)
}

/** Terminates the backend of `dbName` that is sleeping in COMMIT, once it is there; returns its pid. */
async function terminateCommit(admin: pg.Client, dbName: string): Promise<number> {
  for (let i = 0; i < 500; i++) {
    const r = await admin.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
        WHERE datname = $1 AND state = 'active' AND query = 'COMMIT' AND wait_event = 'PgSleep'`,
      [dbName],
    )
    const pid = r.rows[0]?.pid
    if (pid !== undefined) {
      await admin.query('SELECT pg_terminate_backend($1, 10000)', [pid])
      return pid
    }
    await sleep(20)
  }
  throw new Error('no backend ever slept in COMMIT')
}

describe('a connection lost inside a transaction', { skip: onPostgres ? false : 'needs PostgreSQL (DATABASE_URL)' }, () => {
  let db: TestDatabase
  let admin: pg.Client
  let dbName: string
  let svc: ServiceProcess | undefined
  before(async () => {
    db = await createTestDatabase()
    dbName = new URL(db.url as string).pathname.slice(1)
    admin = new pg.Client({ connectionString: db.url })
    admin.on('error', () => {})
    await admin.connect()
    await admin.query('CREATE TABLE fault_probe (id text PRIMARY KEY)')
    await slowCommitOn(admin, 'fault_probe', 'id')
  })
  after(async () => {
    await svc?.kill()
    await admin.end()
    await db.drop()
  })
  const probes = async () => (await db.store.query<{ id: string }>('SELECT id FROM fault_probe ORDER BY id')).map((r) => r.id)

  test('lost before COMMIT: the transaction fails with the connection error, nothing is saved, the store serves on', async () => {
    const failure = await db.store
      .transaction(async (tx) => {
        await tx.query(`INSERT INTO fault_probe VALUES ('early-1')`)
        const [me] = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')
        await admin.query('SELECT pg_terminate_backend($1, 10000)', [me?.pid])
        // The work goes on as if nothing happened (the failure swallowed): COMMIT must still not be sent.
        await tx.query('SELECT 1').catch(() => {})
      })
      .then(
        () => null,
        (err: unknown) => err,
      )
    assert.ok(failure instanceof Error)
    assert.ok(!(failure instanceof CommitOutcomeUnknownError), `${failure}`)
    // The broken client was discarded, not pooled: the very next checkout works.
    assert.deepEqual(await probes(), [])
    await db.store.transaction(async (tx) => {
      await tx.query(`INSERT INTO fault_probe VALUES ('early-2')`)
    })
    assert.deepEqual(await probes(), ['early-2'])
  })

  test('lost while COMMIT is in flight: CommitOutcomeUnknownError, and the store serves on', async () => {
    const pending = db.store.transaction(async (tx) => {
      await tx.query(`INSERT INTO fault_probe VALUES ('slow-1')`)
    })
    const settled = pending.then(
      () => null,
      (err: unknown) => err,
    )
    await terminateCommit(admin, dbName)
    const failure = await settled
    assert.ok(failure instanceof CommitOutcomeUnknownError, `${failure}`)
    // Here the trigger had not finished, so the server rolled back; the client could not have known.
    assert.deepEqual(await probes(), ['early-2'])
    await db.store.transaction(async (tx) => {
      await tx.query(`INSERT INTO fault_probe VALUES ('late-1')`)
    })
    assert.deepEqual(await probes(), ['early-2', 'late-1'])
  })

  test('over HTTP, a COMMIT cut off answers 503 "outcome unknown", and the identical retry settles it', async () => {
    await slowCommitOn(admin, 'customers', 'external_customer_id')
    svc = await startService({ ...serviceEnv, DATABASE_URL: db.url as string })
    const s = svc
    const key = await seedTenant(s.url, 'cmt', scopes)
    const path = '/v1/clients/cmt/customers/slow-1'
    const answer = call(s, key, 'PUT', path, customer('slow-1'))
    await terminateCommit(admin, dbName)
    const a = await answer
    assert.equal(a.status, 503)
    assert.equal(a.contentType, 'application/problem+json; charset=utf-8')
    assert.match(a.json.type, /\/problems\/projection_unavailable$/)
    assert.equal(
      a.json.detail,
      'The database connection was lost while this write was being committed, so its outcome is unknown. Retrying the identical request is safe: every write is idempotent by its identity.',
    )
    await admin.query('DROP TRIGGER irs_test_slow_commit ON customers')
    const retry = await call(s, key, 'PUT', path, customer('slow-1'))
    assert.equal(retry.status, 201)
    assert.deepEqual((await call(s, key, 'GET', path)).json, retry.json)
    assert.ok(alive(s), `the service died:\n${s.output()}`)
  })
})

const clusterUnavailable = onPostgres ? privateClusterUnavailable() : 'runs in the PostgreSQL pass (DATABASE_URL)'

describe('restarting a private PostgreSQL cluster under load', { skip: clusterUnavailable ?? false }, () => {
  let cluster: PrivateCluster | undefined
  let svc: ServiceProcess | undefined
  after(async () => {
    await svc?.kill()
    await cluster?.destroy()
  })

  test('503 while down, serves again after each restart without being restarted, acknowledged writes read back', async (t) => {
    cluster = await createPrivateCluster()
    const c = cluster
    const admin = new pg.Client({ connectionString: c.url })
    await admin.connect()
    await admin.query('CREATE DATABASE irs')
    await admin.end()
    svc = await startService({ ...serviceEnv, DATABASE_URL: c.urlOf('irs') })
    const s = svc
    const key = await seedTenant(s.url, 'rst', scopes)
    const w = writer(s, key, 'rst', 'r', 5000)
    const count = (from: number, ok: boolean) => w.answers.slice(from).filter((a) => a.status < 300 === ok).length
    const episodes: string[] = []
    try {
      await waitFor('the first answers', () => w.answers.length >= 20 || !alive(s))

      // A crash: the server dies under the writer; the service answers 503 until it is started again.
      await c.stop('immediate')
      // The request in flight when the server went down may have committed just before; every later one
      // started with the server down.
      let mark = w.answers.length + 1
      await waitFor('503 answers while the server is down', () => count(mark, false) >= 5 || !alive(s))
      assert.equal(count(mark, true), 0, 'a write was acknowledged while the server was down')
      mark = w.answers.length
      await c.start()
      await waitFor('acknowledged writes after the start', () => count(mark, true) >= 10 || !alive(s))
      episodes.push('stop immediate, start')

      // Restarts while the writer runs: fast (sessions terminated, 57P01), then immediate (backends killed).
      for (const mode of ['fast', 'immediate'] as const) {
        mark = w.answers.length
        await c.restart(mode)
        await waitFor(`acknowledged writes after restart -m ${mode}`, () => count(mark, true) >= 10 || !alive(s))
        episodes.push(`restart ${mode}`)
      }
    } catch (err) {
      throw new Error(`${(err as Error).message} after [${episodes.join(', ')}]\nservice:\n${s.output()}\nserver:\n${c.log()}`)
    } finally {
      await w.stop()
    }
    assert.ok(alive(s), `the service died:\n${s.output()}`)
    assert.deepEqual(episodes, ['stop immediate, start', 'restart fast', 'restart immediate'])
    const r = await verify(s, key, 'rst', w.answers)
    assert.ok(r.nothingSaved + r.unknown >= 5)
    t.diagnostic(`${r.acknowledged} writes acknowledged, ${r.nothingSaved} answered 503 nothing saved, ${r.unknown} 503 outcome unknown`)
    await servesAgain(s, key, 'rst', 'after')
    assert.ok(alive(s), `the service died:\n${s.output()}`)
  })
})
