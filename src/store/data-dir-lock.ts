import { randomUUID } from 'node:crypto'
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs'
import { hostname } from 'node:os'
import { join, resolve } from 'node:path'

/**
 * One process at a time on an embedded data directory (issue 15.1).
 *
 * PGlite has no lock of its own: two processes on one directory each work on their own copy in memory and
 * whichever writes its files last wins, losing the other's acknowledged writes. So the service holds
 * `<DATA_DIR>/inbound.lock` from before the store opens until after it closes.
 *
 * - Taking it is atomic and never half-written: the holder's identity (pid, host, process start, a random
 *   nonce) goes to a private temporary file, synced, then hard-linked to the lock's name; link(2) fails when
 *   the name exists (also on NFS, unlike O_EXCL on old versions).
 * - A lock whose holder is gone is stale and taken over with no manual step: on this host, no process has
 *   that pid any more, or the process with that pid started at another moment (the pid was reused, or the
 *   machine restarted; on Linux, `/proc/<pid>/stat` start time and the boot id). A lock from another host,
 *   or one this host cannot judge, is never taken: the error says which file to delete if it is known dead.
 * - A takeover never removes a live holder's lock, even when several processes start at once on a stale
 *   lock: removing the stale file F written by nonce N first requires creating `F.takeover-N` exclusively,
 *   and the winner re-reads F before removing it. Only the winner can remove F while it still names N, and
 *   a lock written after F's removal has another nonce, so a slow contender finds it changed and leaves it.
 *   A contender that died during a takeover left its own stale marker, recovered the same way.
 * - Released on clean shutdown (and, synchronously, at process exit), only while it still names this holder.
 *
 * proper-lockfile was considered: it judges staleness by an mtime refreshed on a timer, so a SIGKILLed
 * holder's lock is free only after the stale period, and a live holder whose event loop stalls (a long
 * synchronous WASM step, a suspended VM) can have its lock taken over. A dead pid is a certain answer.
 */
export const LOCK_FILE = 'inbound.lock'

export interface LockHolder {
  pid: number
  hostname: string
  /** `<boot id>/<start time in clock ticks>` on Linux; absent where it cannot be read. */
  processStart?: string
  nonce: string
  since: string
}

export interface DataDirLock {
  readonly path: string
  readonly holder: LockHolder
  /** Removes the lock if it still names this holder. Synchronous, so it can run at process exit. */
  release(): void
}

/** The data directory is in use by a live process (or one this host cannot judge). */
export class DataDirLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly lockPath: string,
    readonly holder: LockHolder | null,
    reason: string,
  ) {
    super(reason)
    this.name = 'DataDirLockedError'
  }
}

const heldHere = new Set<string>()

function bootId(): string | undefined {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
  } catch {
    return undefined
  }
}

/** When the process with this pid started, in clock ticks since boot (Linux), or undefined. */
function processStartOf(pid: number): string | undefined {
  const boot = bootId()
  if (!boot) return undefined
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces and parentheses); start time is field 22.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const start = fields[22 - 3]
    return start ? `${boot}/${start}` : undefined
  } catch {
    return undefined
  }
}

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException).code
}

function readHolder(path: string): LockHolder | null | 'unreadable' {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    if (errno(err) === 'ENOENT') return null
    throw err
  }
  try {
    const h = JSON.parse(text) as LockHolder
    if (Number.isSafeInteger(h.pid) && typeof h.hostname === 'string' && typeof h.nonce === 'string') return h
  } catch {}
  return 'unreadable'
}

type Liveness = 'alive' | 'dead' | 'unknown-host'

function liveness(h: LockHolder): Liveness {
  if (heldHere.has(h.nonce)) return 'alive'
  if (h.hostname !== hostname()) return 'unknown-host'
  // Our own pid in a lock we do not hold: an earlier process of this pid (a container restarted as pid 1).
  if (h.pid === process.pid) return 'dead'
  try {
    process.kill(h.pid, 0)
  } catch (err) {
    if (errno(err) === 'ESRCH') return 'dead'
    // EPERM: a process with that pid exists under another user; judged below if possible.
  }
  if (h.processStart) {
    const now = processStartOf(h.pid)
    if (now !== undefined && now !== h.processStart) return 'dead'
    // The recorded boot is over: whatever has this pid now is not the holder.
    const boot = bootId()
    if (boot && !h.processStart.startsWith(`${boot}/`)) return 'dead'
  }
  return 'alive'
}

/** Writes `holder` to a fresh private file, synced, so that linking it publishes a complete lock. */
function writeIdentity(path: string, holder: LockHolder): void {
  const fd = openSync(path, 'wx', 0o644)
  try {
    writeSync(fd, `${JSON.stringify(holder)}\n`)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path)
  } catch (err) {
    if (errno(err) !== 'ENOENT') throw err
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * Removes `path` if it still names the dead holder `stale`. Returns when it is gone or changed, or when
 * another process is busy taking it over (the caller tries again).
 */
function removeStale(path: string, stale: LockHolder, identityFile: string, depth: number): void {
  const marker = `${path}.takeover-${stale.nonce}`
  try {
    linkSync(identityFile, marker)
  } catch (err) {
    if (errno(err) !== 'EEXIST') throw err
    const owner = readHolder(marker)
    if (owner === null || owner === 'unreadable' || liveness(owner) !== 'dead') return
    if (depth >= 3) throw new Error(`stale takeover files ${marker}*: remove them`)
    removeStale(marker, owner, identityFile, depth + 1)
    return
  }
  try {
    const now = readHolder(path)
    if (now !== null && now !== 'unreadable' && now.nonce === stale.nonce) unlinkQuietly(path)
  } finally {
    unlinkQuietly(marker)
  }
}

function lockedMessage(dir: string, lockPath: string, h: LockHolder, state: Liveness): string {
  if (state === 'unknown-host') {
    return (
      `DATA_DIR ${dir} is locked by pid ${h.pid} on host ${h.hostname} since ${h.since}, which this host cannot check; ` +
      `if no service uses it any more, delete ${lockPath}`
    )
  }
  return `DATA_DIR ${dir} is in use by another process (pid ${h.pid}, since ${h.since}); stop that process or set another DATA_DIR`
}

/** Takes the lock of `dataDir` (created if missing), or throws DataDirLockedError naming the holder. */
export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  const dir = resolve(dataDir)
  mkdirSync(dir, { recursive: true })
  const path = join(dir, LOCK_FILE)
  const processStart = processStartOf(process.pid)
  const holder: LockHolder = {
    pid: process.pid,
    hostname: hostname(),
    ...(processStart ? { processStart } : {}),
    nonce: randomUUID(),
    since: new Date().toISOString(),
  }
  const identityFile = `${path}.${holder.nonce}.tmp`
  writeIdentity(identityFile, holder)
  try {
    for (let attempt = 0; attempt < 100; attempt++) {
      try {
        linkSync(identityFile, path)
      } catch (err) {
        if (errno(err) !== 'EEXIST') throw err
        const current = readHolder(path)
        if (current === null) continue
        if (current === 'unreadable') {
          throw new DataDirLockedError(
            dir,
            path,
            null,
            `DATA_DIR ${dir} has a lock file this version cannot read; if no service uses the directory, delete ${path}`,
          )
        }
        const state = liveness(current)
        if (state !== 'dead') throw new DataDirLockedError(dir, path, current, lockedMessage(dir, path, current, state))
        removeStale(path, current, identityFile, 0)
        // Another process may be in the middle of the same takeover: give it a moment.
        await sleep(10)
        continue
      }
      heldHere.add(holder.nonce)
      return lockHandle(path, holder)
    }
    throw new Error(`could not take ${path}: it kept changing`)
  } finally {
    unlinkQuietly(identityFile)
  }
}

function lockHandle(path: string, holder: LockHolder): DataDirLock {
  let released = false
  const release = () => {
    if (released) return
    released = true
    process.removeListener('exit', release)
    heldHere.delete(holder.nonce)
    const current = readHolder(path)
    if (current !== null && current !== 'unreadable' && current.nonce === holder.nonce) unlinkQuietly(path)
  }
  // A process that exits without closing its store (process.exit after a fatal error) still frees it.
  process.on('exit', release)
  return { path, holder, release }
}
