import assert from 'node:assert/strict'
import { after, describe, test } from 'node:test'
import pg from 'pg'
import { ADMIN_TOKEN } from '../helpers/app.ts'
import { createPrivateCluster, type PrivateCluster, privateClusterUnavailable } from '../helpers/private-cluster.ts'
import { freePort, http, type SpawnedProcess, seedTenant, spawnProcess } from '../helpers/service-process.ts'
import { onPostgres } from '../helpers/store.ts'

/**
 * Issue 20.10: PostgreSQL not reachable when the service starts (compose, a rollout, a reboot that starts the
 * service first) is waited for with the port bound: /healthz 200, /readyz 503 and every route 503 meanwhile, one
 * log line at most every 5 s, migrations once it answers; exit 1 with one line when DATABASE_CONNECT_TIMEOUT_SECONDS
 * is up; SIGTERM during the wait stops it cleanly. The cases against a port nothing listens on need no server and
 * run in both passes; the late server is a private cluster, in the PostgreSQL pass.
 */
const children: SpawnedProcess[] = []
after(async () => {
  for (const c of children) await c.kill()
})

function service(port: number, env: Record<string, string>): SpawnedProcess {
  const proc = spawnProcess(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    HOST: '127.0.0.1',
    PORT: String(port),
    ADMIN_TOKEN,
    SEED_DEMO: '0',
    LOG_LEVEL: 'info',
    RATE_LIMIT_PER_MINUTE: '1000000',
    CONCURRENCY_PER_KEY: '1000',
    ...env,
  })
  children.push(proc)
  return proc
}

interface LogLine {
  level: number
  msg: string
  attempt?: number
}
const lines = (out: string): LogLine[] =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine)
const waitingLines = (out: string) => lines(out).filter((l) => / is not reachable yet /.test(l.msg))
const noStackTrace = (out: string) => assert.ok(!/^\s+at /m.test(out), out)

const STARTING = 'The service is starting and its database is not reachable yet. Nothing was saved. Retry with backoff.'

/** While waiting: liveness 200, readiness 503, an API route and an operator route 503 problem+json. */
async function answersWhileWaiting(url: string) {
  const health = await fetch(`${url}/healthz`)
  assert.equal(health.status, 200)
  assert.deepEqual(await health.json(), { status: 'ok' })
  const readiness = await fetch(`${url}/readyz`)
  assert.equal(readiness.status, 503)
  assert.deepEqual(await readiness.json(), { status: 'unavailable' })
  for (const [method, path, token] of [
    ['GET', '/v1/clients/acme/customers/c-1', 'irk_sandbox_whatever'],
    ['PUT', '/admin/v1/clients/acme', ADMIN_TOKEN],
  ] as const) {
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(method === 'PUT' ? { body: JSON.stringify({ name: 'Acme' }) } : {}),
    })
    assert.equal(res.status, 503, path)
    assert.equal(res.headers.get('content-type'), 'application/problem+json; charset=utf-8')
    assert.equal(res.headers.get('retry-after'), '5')
    const body = (await res.json()) as Record<string, unknown>
    assert.equal(body.title, 'Projection unavailable')
    assert.equal(body.status, 503)
    assert.match(String(body.type), /\/problems\/projection_unavailable$/)
    assert.equal(body.detail, STARTING)
  }
}

describe('PostgreSQL not reachable at start (a port nothing listens on)', () => {
  test('waits with the port bound: /healthz 200, /readyz 503, routes 503; the time up, exit 1 with one line', {
    timeout: 120_000,
  }, async () => {
    const dbPort = await freePort()
    const port = await freePort()
    const url = `http://127.0.0.1:${port}`
    const proc = service(port, {
      DATABASE_URL: `postgres://inbound:secret-password@127.0.0.1:${dbPort}/inbound`,
      DATABASE_CONNECT_TIMEOUT_SECONDS: '4',
    })
    await proc.waitForOutput(/ is not reachable yet /, 90_000)
    await answersWhileWaiting(url)
    const { code } = await proc.exited
    assert.equal(code, 1)
    const out = proc.output()
    noStackTrace(out)
    assert.ok(!out.includes('secret-password'), 'the password in DATABASE_URL is never printed')
    const all = lines(out)
    // The first failed attempt is reported at once, the next not before 5 s: within 4 s, one line.
    const waiting = waitingLines(out)
    assert.equal(waiting.length, 1, out)
    assert.equal(waiting[0]?.level, 40)
    assert.equal(waiting[0]?.attempt, 1)
    assert.equal(
      waiting[0]?.msg,
      `PostgreSQL at 127.0.0.1:${dbPort}/inbound is not reachable yet (connect ECONNREFUSED 127.0.0.1:${dbPort}); waiting up to 4 s ` +
        '(DATABASE_CONNECT_TIMEOUT_SECONDS): attempt 1, 0 s so far; /readyz answers 503 meanwhile',
    )
    const last = all.at(-1) as LogLine
    assert.equal(last.level, 60)
    assert.equal(
      last.msg,
      `PostgreSQL at 127.0.0.1:${dbPort}/inbound was not reachable within 4 s (DATABASE_CONNECT_TIMEOUT_SECONDS); ` +
        `last error: connect ECONNREFUSED 127.0.0.1:${dbPort}. Start it, check DATABASE_URL, or set DATABASE_CONNECT_TIMEOUT_SECONDS higher`,
    )
    assert.equal(all.filter((l) => l.level === 60).length, 1, out)
  })

  test('SIGTERM during the wait stops it at once: exit 0, "stopped"', { timeout: 120_000 }, async () => {
    const dbPort = await freePort()
    const port = await freePort()
    const proc = service(port, { DATABASE_URL: `postgres://inbound@127.0.0.1:${dbPort}/inbound`, DATABASE_CONNECT_TIMEOUT_SECONDS: '600' })
    await proc.waitForOutput(/ is not reachable yet /, 90_000)
    proc.child.kill('SIGTERM')
    const { code, signal } = await proc.exited
    assert.deepEqual({ code, signal }, { code: 0, signal: null })
    const out = proc.output()
    noStackTrace(out)
    const msgs = lines(out).map((l) => l.msg)
    assert.ok(msgs.includes('SIGTERM: stopping (still waiting for PostgreSQL)'), out)
    assert.equal(msgs.at(-1), 'stopped')
  })
})

const clusterUnavailable = onPostgres ? privateClusterUnavailable() : 'runs in the PostgreSQL pass (DATABASE_URL)'

describe('PostgreSQL started after the service', { skip: clusterUnavailable ?? false }, () => {
  let cluster: PrivateCluster | undefined
  after(async () => {
    await cluster?.destroy()
  })

  test('503 while it is down; once it is up: migrated, ready, writes read back, without a restart', { timeout: 300_000 }, async () => {
    cluster = await createPrivateCluster()
    const c = cluster
    const admin = new pg.Client({ connectionString: c.url })
    await admin.connect()
    await admin.query('CREATE DATABASE irs')
    await admin.end()
    await c.stop('fast')
    const port = await freePort()
    const url = `http://127.0.0.1:${port}`
    const proc = service(port, { DATABASE_URL: c.urlOf('irs'), DATABASE_CONNECT_TIMEOUT_SECONDS: '240' })
    await proc.waitForOutput(/ is not reachable yet /, 90_000)
    await answersWhileWaiting(url)
    // Long enough for a second report (the first at once, the next 5 s or more later, its attempt not the next).
    await proc.waitForOutput(/attempt [2-9]\d*, /, 90_000)
    await answersWhileWaiting(url)
    await c.start()
    await proc.waitReady(url, 90_000)
    const waiting = waitingLines(proc.output())
    assert.equal(waiting[0]?.attempt, 1)
    assert.ok((waiting[1]?.attempt ?? 0) > 2, 'not every attempt is reported')
    const migrated = new pg.Client({ connectionString: c.urlOf('irs') })
    await migrated.connect()
    const versions = (await migrated.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations')).rows[0]?.n
    await migrated.end()
    assert.ok((versions ?? 0) > 0)
    const key = await seedTenant(url, 'late', ['customers:read', 'customers:write'])
    const body = { type: 'person', name: { firstName: 'Ada', lastName: 'Late' }, sourceReference: 'ledger/c/late-1' }
    const put = await fetch(`${url}/v1/clients/late/customers/late-1`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    assert.equal(put.status, 201)
    const written = await put.json()
    assert.deepEqual((await http(url, 'GET', '/v1/clients/late/customers/late-1', { token: key })).json, written)
    proc.child.kill('SIGTERM')
    assert.equal((await proc.exited).code, 0)
    noStackTrace(proc.output())
  })
})
