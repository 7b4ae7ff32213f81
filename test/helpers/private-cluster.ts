import { execFile, execFileSync } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { freePort } from './service-process.ts'

/**
 * A PostgreSQL cluster of our own (initdb into a temporary directory, on a free loopback port), for tests
 * that stop, crash or restart the server. The machine's shared cluster is never touched.
 *
 * initdb and postgres refuse to run as root, so when the tests run as root every server binary runs as the
 * `postgres` OS user (through runuser) and the directory is handed to that user.
 */
const run = promisify(execFile)
const isRoot = process.getuid?.() === 0

/** The newest installed server binaries (Debian layout), or null when there are none. */
export function postgresBinDir(): string | null {
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return null
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v) && existsSync(join(root, v, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a))
  return versions[0] ? join(root, versions[0], 'bin') : null
}

/** Why a private cluster cannot be made here, or null when it can. */
export function privateClusterUnavailable(): string | null {
  if (!postgresBinDir()) return 'no PostgreSQL server binaries under /usr/lib/postgresql'
  if (isRoot) {
    try {
      execFileSync('id', ['-u', 'postgres'], { stdio: 'ignore' })
    } catch {
      return 'running as root and there is no postgres OS user to run the server as'
    }
  }
  return null
}

export interface PrivateCluster {
  port: number
  /** Connection string of the cluster's `postgres` database (trust authentication, user postgres). */
  url: string
  /** Connection string of another database on this cluster. */
  urlOf(database: string): string
  start(): Promise<void>
  /** `pg_ctl stop`: 'fast' terminates sessions (57P01), 'immediate' kills every backend without a word. */
  stop(mode: 'fast' | 'immediate'): Promise<void>
  restart(mode: 'fast' | 'immediate'): Promise<void>
  /** Stops the server (if running) and removes the directory; safe to call twice. */
  destroy(): Promise<void>
  /** The server log, for failure messages. */
  log(): string
}

export async function createPrivateCluster(): Promise<PrivateCluster> {
  const bin = postgresBinDir()
  if (!bin) throw new Error('no PostgreSQL server binaries')
  const dir = mkdtempSync(join(tmpdir(), 'irs-pg-'))
  if (isRoot)
    chownSync(dir, Number(execFileSync('id', ['-u', 'postgres']).toString()), Number(execFileSync('id', ['-g', 'postgres']).toString()))
  const data = join(dir, 'data')
  const logFile = join(dir, 'server.log')
  const port = await freePort()
  const pg = (tool: string, args: string[]) =>
    isRoot ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]) : run(join(bin, tool), args)
  const pgSync = (tool: string, args: string[]) =>
    isRoot
      ? execFileSync('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args], { stdio: 'ignore' })
      : execFileSync(join(bin, tool), args, { stdio: 'ignore' })

  let destroyed = false
  // If the test process ends without destroy() (a crash, an interrupted run), the server must not outlive it.
  const onExit = () => {
    if (destroyed) return
    try {
      pgSync('pg_ctl', ['stop', '-D', data, '-m', 'immediate', '-w'])
    } catch {}
    rmSync(dir, { recursive: true, force: true })
  }
  process.once('exit', onExit)

  const cluster: PrivateCluster = {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    urlOf: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async start() {
      // Sockets in our own directory, TCP only on loopback. fsync off: these tests crash the server
      // process, never the machine, so the page cache keeps every committed write.
      const opts = `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off -c max_connections=40 -c shared_buffers=16MB`
      await pg('pg_ctl', ['start', '-D', data, '-w', '-t', '60', '-l', logFile, '-o', opts])
    },
    async stop(mode) {
      await pg('pg_ctl', ['stop', '-D', data, '-m', mode, '-w', '-t', '60'])
    },
    async restart(mode) {
      await pg('pg_ctl', ['restart', '-D', data, '-m', mode, '-w', '-t', '60', '-l', logFile])
    },
    async destroy() {
      if (destroyed) return
      destroyed = true
      process.removeListener('exit', onExit)
      try {
        if (existsSync(join(data, 'postmaster.pid'))) await pg('pg_ctl', ['stop', '-D', data, '-m', 'immediate', '-w', '-t', '60'])
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    },
    log: () => {
      try {
        return readFileSync(logFile, 'utf8')
      } catch {
        return ''
      }
    },
  }
  try {
    await pg('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8', '--locale=C'])
    await cluster.start()
  } catch (err) {
    await cluster.destroy().catch(() => {})
    throw err
  }
  return cluster
}
