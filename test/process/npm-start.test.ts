import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { LOCK_FILE } from '../../src/store/data-dir-lock.ts'
import { ADMIN_TOKEN } from '../helpers/app.ts'
import { customerRecords, harness, waitFor, waitingOnAdvisoryLock } from '../helpers/batch-process.ts'
import {
  freePort,
  http,
  type ServiceProcess,
  type SpawnedProcess,
  seedTenant,
  spawnProcess,
  startService,
} from '../helpers/service-process.ts'
import { splitPut } from '../helpers/slow-request.ts'
import { createTestDatabase, onPostgres, type TestDatabase } from '../helpers/store.ts'

/**
 * Issue 15.2: `npm start` exactly as an operator runs it, signalled at exactly the PID it gives. Every
 * process of its tree must exit 0, the port and the DATA_DIR lock must be free, requests in flight are
 * answered, batch leases are handed back, and it logs that it stopped.
 */
const dirs: string[] = []
const children: SpawnedProcess[] = []
const services: ServiceProcess[] = []
let db: TestDatabase | undefined
const h = harness(() => db as TestDatabase)
after(async () => {
  for (const c of children) await c.kill()
  for (const s of services) await s.kill()
  await h.cleanup()
  await db?.drop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

before(async () => {
  // Built once here, so the starts below measure the start alone.
  const build = spawnProcess('npm', ['run', '--silent', 'build'], {})
  const { code } = await build.exited
  assert.equal(code, 0, build.output())
})

async function npmStart(env: Record<string, string | undefined> = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'irs-npm-start-'))
  dirs.push(dataDir)
  const port = await freePort()
  const proc = spawnProcess('npm', ['start'], {
    DATABASE_URL: undefined,
    HOST: '127.0.0.1',
    PORT: String(port),
    DATA_DIR: dataDir,
    ADMIN_TOKEN,
    SEED_DEMO: '0',
    LOG_LEVEL: 'info',
    ...env,
  })
  children.push(proc)
  const url = `http://127.0.0.1:${port}`
  await proc.waitReady(url)
  return { proc, url, port, dataDir, pid: proc.child.pid as number, tree: processTree(proc.child.pid as number) }
}

/** `pid` and all its descendants now (Linux /proc). */
function processTree(pid: number): number[] {
  const parentOf = new Map<number, number>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      parentOf.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]))
    } catch {}
  }
  const tree = [pid]
  for (let i = 0; i < tree.length; i++) for (const [p, pp] of parentOf) if (pp === tree[i]) tree.push(p)
  return tree
}

const running = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

async function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve(false)
    })
    socket.once('error', () => resolve(true))
  })
}

const logLines = (out: string) =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; signal?: string })

/** After the npm process exited: nothing of its tree runs, the port and the lock are free, "stopped" logged. */
async function assertFullyStopped(s: Awaited<ReturnType<typeof npmStart>>, signal: NodeJS.Signals) {
  assert.deepEqual(await s.proc.exited, { code: 0, signal: null })
  await waitFor('every process of the tree gone', async () => (s.tree.some(running) ? undefined : true), 10_000)
  assert.equal(await portIsFree(s.port), true)
  assert.equal(existsSync(join(s.dataDir, LOCK_FILE)), false)
  const msgs = logLines(s.proc.output()).map((l) => l.msg)
  assert.equal(msgs.filter((m) => m === stoppingLine(signal)).length, 1)
  assert.equal(msgs.at(-1), 'stopped')
  return msgs
}

const stoppingLine = (signal: NodeJS.Signals) => `${signal}: stopping (finishing requests in flight, handing back batch leases)`

describe('npm start, signalled at its PID', () => {
  test('SIGTERM: the whole tree exits 0, port and DATA_DIR lock free, "stopped" logged', { timeout: 300_000 }, async () => {
    const s = await npmStart()
    assert.ok(s.tree.length >= 2, `npm and the service: ${s.tree}`)
    assert.ok(s.tree.every(running))
    assert.equal(existsSync(join(s.dataDir, LOCK_FILE)), true)
    process.kill(s.pid, 'SIGTERM')
    const msgs = await assertFullyStopped(s, 'SIGTERM')
    assert.deepEqual(msgs.slice(-2), [stoppingLine('SIGTERM'), 'stopped'])
  })

  test('SIGINT with a request in flight: the request is answered, then the tree exits 0', { timeout: 300_000 }, async () => {
    const s = await npmStart()
    const key = await seedTenant(s.url, 'inflight', ['customers:write', 'customers:read'])
    const body = JSON.stringify({ type: 'person', name: { firstName: 'Ada', lastName: 'Inflight' }, sourceReference: 'ref/1' })
    const put = splitPut(`${s.url}/v1/clients/inflight/customers/c-1`, key, body)
    // The rest once the service is stopping: the request is then in flight across the signal.
    s.proc
      .waitForOutput(/"msg":"SIGINT: stopping/)
      .then(put.sendRest)
      .catch(put.abort)
    await s.proc.waitForOutput(/"url":"\/v1\/clients\/inflight\/customers\/c-1"[^\n]*"msg":"incoming request"/)
    process.kill(s.pid, 'SIGINT')
    const res = await put.answer
    assert.equal(res.status, 201, res.body)
    assert.equal(JSON.parse(res.body).externalCustomerId, 'c-1')
    const msgs = await assertFullyStopped(s, 'SIGINT')
    assert.deepEqual(msgs.slice(-3), [stoppingLine('SIGINT'), 'request completed', 'stopped'])
  })

  test('SIGTERM hands back the lease of the batch it was running: another instance finishes it at once', {
    skip: onPostgres ? false : 'needs PostgreSQL: set DATABASE_URL (a second instance shares the batch queue)',
    timeout: 600_000,
  }, async () => {
    db = await createTestDatabase()
    const batchEnv = {
      DATABASE_URL: db.url as string,
      BATCH_CHUNK_SIZE: '1',
      // Far longer than the test: only a handed-back lease lets another instance claim the batch.
      BATCH_LEASE_SECONDS: '3600',
      BATCH_POLL_MS: '50',
      RATE_LIMIT_PER_MINUTE: '1000000',
      CONCURRENCY_PER_KEY: '1000',
    }
    const a = await npmStart(batchEnv)
    const key = await seedTenant(a.url, 'lease', ['customers:write', 'customers:read'])
    const block = await h.blockCustomer('lease', 'h-2')
    const put = await http(a.url, 'PUT', '/v1/clients/lease/batches/b-1', { token: key, body: { records: customerRecords('h', 5) } })
    assert.equal(put.status, 202, JSON.stringify(put.json))
    // Record 1 committed in its own chunk; record 2's chunk waits on the blocked Customer.
    await waitFor('the worker blocked on h-2', async () => ((await waitingOnAdvisoryLock(db as TestDatabase)) > 0 ? true : undefined))

    process.kill(a.pid, 'SIGTERM')
    await a.proc.waitForOutput(/"msg":"SIGTERM: stopping/)
    await block.release()
    await assertFullyStopped(a, 'SIGTERM')

    const rows = await db.store.query<{ status: string; free: boolean; pending: number }>(
      `SELECT b.status, b.lease_expires_at <= clock_timestamp() AS free,
              (SELECT count(*)::int FROM batch_records r
                WHERE r.client_code = b.client_code AND r.external_batch_id = b.external_batch_id AND r.status = 'pending') AS pending
         FROM batches b WHERE client_code = 'lease'`,
    )
    assert.deepEqual(rows, [{ status: 'running', free: true, pending: 3 }])

    const b = await startService(batchEnv)
    services.push(b)
    await waitFor('the batch finished by the second instance', async () => {
      const r = await http(b.url, 'GET', '/v1/clients/lease/batches/b-1', { token: key })
      return r.json?.status === 'succeeded' ? r.json : undefined
    })
  })
})
