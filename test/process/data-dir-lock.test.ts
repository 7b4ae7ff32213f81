import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { DataDirLockedError, LOCK_FILE, type LockHolder, lockDataDir } from '../../src/store/data-dir-lock.ts'
import { ADMIN_TOKEN } from '../helpers/app.ts'
import { freePort, http, type SpawnedProcess, seedTenant, spawnProcess } from '../helpers/service-process.ts'

/**
 * Issue 15.1: one process at a time on an embedded DATA_DIR. Real service processes on one directory, and
 * the lock itself against stale, reused, foreign and concurrently contended lock files.
 */
const dirs: string[] = []
const children: SpawnedProcess[] = []
after(async () => {
  for (const c of children) await c.kill()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'irs-lock-'))
  dirs.push(d)
  return d
}

async function service(dataDir: string): Promise<{ proc: SpawnedProcess; url: string }> {
  const port = await freePort()
  const proc = spawnProcess(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    DATABASE_URL: undefined,
    DATA_DIR: dataDir,
    HOST: '127.0.0.1',
    PORT: String(port),
    ADMIN_TOKEN,
    SEED_DEMO: '0',
    LOG_LEVEL: 'info',
  })
  children.push(proc)
  return { proc, url: `http://127.0.0.1:${port}` }
}

async function exitWithin(proc: SpawnedProcess, ms: number) {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`still running after ${ms} ms:\n${proc.output()}`)), ms)
  })
  try {
    return await Promise.race([proc.exited, timeout])
  } finally {
    clearTimeout(timer)
  }
}

const customer = (n: number) => ({ type: 'person', name: { firstName: 'Ada', lastName: `L${n}` }, sourceReference: `ref/${n}` })

/** A pid that no process has now: a child that has already exited. */
async function deadPid(): Promise<number> {
  const c = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' })
  await new Promise((r) => c.once('exit', r))
  return c.pid as number
}

function writeLock(dir: string, holder: Partial<LockHolder>): void {
  const full = { pid: 1, hostname: hostname(), nonce: 'stale-nonce', since: '2026-01-01T00:00:00.000Z', ...holder }
  writeFileSync(join(dir, LOCK_FILE), `${JSON.stringify(full)}\n`)
}

const lockOf = (dir: string) => JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')) as LockHolder

describe('two service processes on one DATA_DIR', () => {
  test('the second exits 1 with one line naming the directory and the holder; after a SIGKILL the next start recovers the lock and every acknowledged write', {
    timeout: 600_000,
  }, async () => {
    const dir = tempDir()
    const first = await service(dir)
    await first.proc.waitReady(first.url)
    const key = await seedTenant(first.url, 'lock', ['customers:write', 'customers:read'])
    const put1 = await http(first.url, 'PUT', '/v1/clients/lock/customers/c-1', { token: key, body: customer(1) })
    assert.equal(put1.status, 201)

    const second = await service(dir)
    const { code } = await exitWithin(second.proc, 180_000)
    assert.equal(code, 1)
    const lines = second.proc.output().trim().split('\n')
    assert.equal(lines.length, 1, second.proc.output())
    const line = JSON.parse(lines[0] as string)
    assert.equal(line.level, 60)
    assert.equal(
      line.msg,
      `DATA_DIR ${dir} is in use by another process (pid ${first.proc.child.pid}, since ${lockOf(dir).since}); stop that process or set another DATA_DIR`,
    )

    // The first one kept serving, and still holds the lock.
    const put2 = await http(first.url, 'PUT', '/v1/clients/lock/customers/c-2', { token: key, body: customer(2) })
    assert.equal(put2.status, 201)
    assert.equal(lockOf(dir).pid, first.proc.child.pid)

    await first.proc.kill()
    assert.equal(lockOf(dir).pid, first.proc.child.pid, 'a SIGKILLed holder leaves its lock behind')

    const third = await service(dir)
    await third.proc.waitReady(third.url)
    assert.equal(lockOf(dir).pid, third.proc.child.pid)
    for (const id of ['c-1', 'c-2']) {
      const got = await http(third.url, 'GET', `/v1/clients/lock/customers/${id}`, { token: key })
      assert.equal(got.status, 200, `${id}: ${JSON.stringify(got.json)}`)
    }
  })
})

describe('the lock file', () => {
  test('is taken when free, names this process, and is removed on release', async () => {
    const dir = tempDir()
    const lock = await lockDataDir(dir)
    assert.deepEqual(
      { pid: lockOf(dir).pid, hostname: lockOf(dir).hostname, nonce: lockOf(dir).nonce },
      { pid: process.pid, hostname: hostname(), nonce: lock.holder.nonce },
    )
    await assert.rejects(lockDataDir(dir), DataDirLockedError, 'a second open in the same process is refused too')
    lock.release()
    assert.deepEqual(readdirSync(dir), [], 'no lock, identity or takeover file left')
  })

  test('a lock of a live process is never taken', async () => {
    const dir = tempDir()
    const holder = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
    try {
      writeLock(dir, { pid: holder.pid as number })
      await assert.rejects(lockDataDir(dir), (err: DataDirLockedError) => {
        assert.ok(err instanceof DataDirLockedError)
        assert.equal(err.holder?.pid, holder.pid)
        assert.match(err.message, new RegExp(`^DATA_DIR ${dir} is in use by another process \\(pid ${holder.pid}, `))
        return true
      })
      assert.equal(lockOf(dir).pid, holder.pid)
    } finally {
      holder.kill('SIGKILL')
    }
  })

  test('a lock of a process that is gone is taken over', async () => {
    const dir = tempDir()
    writeLock(dir, { pid: await deadPid() })
    const lock = await lockDataDir(dir)
    assert.equal(lockOf(dir).nonce, lock.holder.nonce)
    lock.release()
  })

  test('a lock naming this pid but not held by this process (a restarted container) is taken over', async () => {
    const dir = tempDir()
    writeLock(dir, { pid: process.pid })
    const lock = await lockDataDir(dir)
    assert.equal(lockOf(dir).nonce, lock.holder.nonce)
    lock.release()
  })

  test('a lock whose pid now belongs to a process started at another moment (pid reused) is taken over', {
    skip: process.platform === 'linux' ? false : 'process start times are read from /proc',
  }, async () => {
    const dir = tempDir()
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
    try {
      const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
      writeLock(dir, { pid: other.pid as number, processStart: `${boot}/1` })
      const lock = await lockDataDir(dir)
      assert.equal(lockOf(dir).nonce, lock.holder.nonce)
      lock.release()
    } finally {
      other.kill('SIGKILL')
    }
  })

  test('a lock from another host is never taken, and the message says which file to delete', async () => {
    const dir = tempDir()
    writeLock(dir, { pid: await deadPid(), hostname: 'another-host.example' })
    await assert.rejects(lockDataDir(dir), (err: Error) => {
      assert.ok(err instanceof DataDirLockedError)
      assert.match(err.message, /on host another-host\.example .* which this host cannot check; if no service uses it any more, delete /)
      assert.ok(err.message.endsWith(join(dir, LOCK_FILE)))
      return true
    })
  })

  test('six processes released at once on a stale lock: exactly one wins, the others name it', { timeout: 300_000 }, async () => {
    const dir = tempDir()
    writeLock(dir, { pid: await deadPid() })
    const contenders: { child: ChildProcess; out: () => string }[] = []
    for (let i = 0; i < 6; i++) {
      const child = spawn(process.execPath, ['--import', 'tsx', 'test/process/lock-contender.ts', dir], {
        stdio: ['pipe', 'pipe', 'inherit'],
      })
      let out = ''
      child.stdout?.on('data', (d) => {
        out += d.toString()
      })
      contenders.push({ child, out: () => out })
    }
    const waitAll = async (what: string, ok: (out: string) => boolean) => {
      const deadline = Date.now() + 240_000
      while (!contenders.every((c) => ok(c.out()))) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${contenders.map((c) => c.out()).join(' | ')}`)
        await new Promise((r) => setTimeout(r, 20))
      }
    }
    try {
      await waitAll('ready', (o) => o.includes('ready'))
      for (const c of contenders) c.child.stdin?.write('go\n')
      await waitAll('an answer', (o) => /\n(won|lost .*)\n/.test(o))
      const won = contenders.filter((c) => c.out().includes('\nwon\n'))
      assert.equal(won.length, 1, contenders.map((c) => c.out()).join(' | '))
      const winner = won[0]?.child.pid
      assert.equal(lockOf(dir).pid, winner)
      for (const c of contenders.filter((c) => c !== won[0])) {
        assert.match(c.out(), new RegExp(`\\nlost DATA_DIR ${dir} is in use by another process \\(pid ${winner}, `))
      }
    } finally {
      for (const c of contenders) c.child.stdin?.end()
      await Promise.all(contenders.map((c) => new Promise((r) => (c.child.exitCode !== null ? r(null) : c.child.once('exit', r)))))
    }
    assert.deepEqual(readdirSync(dir), [], 'the winner released it; no identity or takeover file left')
  })
})
