import { mkdirSync } from 'node:fs'
import { resolve } from 'node:path'
import { lockDataDir } from './data-dir-lock.ts'
import type { DatabaseLayout } from './layout.ts'
import { migrate } from './migrate.ts'
import { openPglite } from './pglite.ts'
import { openPostgres } from './postgres.ts'
import { CommitOutcomeUnknownError, type Store } from './store.ts'

/**
 * PostgreSQL when a URL is given, otherwise the embedded store in `dataDir`; migrated before use.
 * The embedded store's directory is locked to this process until the store is closed (data-dir-lock.ts);
 * a second process gets DataDirLockedError. With `wait`, a PostgreSQL server not reachable yet (not started,
 * starting, restarting) is waited for, with backoff, up to `wait.timeoutMs`.
 */
export async function openStore(opts: {
  databaseUrl?: string
  dataDir?: string
  wait?: WaitOptions
  layout?: DatabaseLayout
}): Promise<Store> {
  const layout = opts.layout ?? 'plain'
  if (opts.databaseUrl)
    return opts.wait ? openPostgresWhenReachable(opts.databaseUrl, opts.wait, layout) : migrated(openPostgres(opts.databaseUrl), layout)
  if (!opts.dataDir) return migrated(await openPglite(), layout)
  const lock = await lockDataDir(opts.dataDir)
  try {
    const dir = resolve(opts.dataDir, 'pglite')
    mkdirSync(dir, { recursive: true })
    const store = await openPglite(dir)
    const locked: Store = {
      ...store,
      async close() {
        try {
          await store.close()
        } finally {
          lock.release()
        }
      },
    }
    return await migrated(locked, layout)
  } catch (err) {
    lock.release()
    throw err
  }
}

async function migrated(store: Store, layout: DatabaseLayout): Promise<Store> {
  try {
    await migrate(store, { layout })
    // So that the workers' first claims carry the instance's lease key (a failed first attempt is retried there).
    await store.leaseHolder?.ready?.catch(() => {})
  } catch (err) {
    await store.close().catch(() => {})
    throw err
  }
  return store
}

/** The store before the database has been reached: every call fails with this (readiness answers 503 meanwhile). */
export class StoreNotReadyError extends Error {
  override readonly name = 'StoreNotReadyError'
  constructor() {
    super('The database has not been reached yet.')
  }
}

/**
 * A store that exists before its database is reachable, so that the HTTP server can listen (and answer
 * /healthz) while the service waits for PostgreSQL: until `ready(real)` every call fails with
 * StoreNotReadyError; from then on each call is the real store's.
 */
export function pendingStore(kind: Store['kind']): { store: Store; ready(real: Store): void; isReady(): boolean } {
  let real: Store | undefined
  const current = (): Store => {
    if (!real) throw new StoreNotReadyError()
    return real
  }
  const store: Store = {
    kind,
    query: async (sql, params, options) => current().query(sql, params, options),
    exec: async (sql) => current().exec(sql),
    transaction: async (fn, ahead) => current().transaction(fn, ahead),
    close: async () => real?.close(),
    poolStats: () => real?.poolStats?.() ?? { max: 0, total: 0, idle: 0, waiting: 0 },
    // Read at each claim by the workers, which start only once the store is ready.
    get leaseHolder() {
      return real?.leaseHolder
    },
  }
  return {
    store,
    ready(r) {
      real = r
    },
    isReady: () => real !== undefined,
  }
}

export interface WaitOptions {
  /** How long to wait for PostgreSQL to become reachable (DATABASE_CONNECT_TIMEOUT_SECONDS). */
  timeoutMs: number
  /** Aborts the wait (SIGTERM): openStore rejects with the signal's reason. */
  signal?: AbortSignal
  /** Told about a failed attempt, at most once per WAIT_REPORT_EVERY_MS (the first failure at once). */
  onWaiting?(report: { attempt: number; elapsedMs: number; error: Error }): void
}

/** A waiting service reports at most this often. */
export const WAIT_REPORT_EVERY_MS = 5000
/** Pauses between attempts: 250 ms doubling, at most 5 s. */
const FIRST_PAUSE_MS = 250
const MAX_PAUSE_MS = 5000

/** The database was not reachable within the configured time. */
export class DatabaseUnreachableError extends Error {
  override readonly name = 'DatabaseUnreachableError'
  constructor(
    message: string,
    readonly lastError: Error,
  ) {
    super(message, { cause: lastError })
  }
}

/** Where the database is, without user or password: host:port/database. */
export function databaseLocation(url: string): string {
  try {
    const u = new URL(url)
    return `${u.hostname}:${u.port || '5432'}${u.pathname || '/'}`
  } catch {
    return 'DATABASE_URL'
  }
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'EPIPE',
  'EADDRNOTAVAIL',
])

/**
 * An error that means "not reachable yet", worth another attempt: no connection (refused, reset, no route, no
 * name yet, timed out), a server that is starting or stopping (SQLSTATE class 57: 57P01 to 57P03) or full (53300),
 * a connection exception (class 08), a connection lost mid-migration. Anything else the server answered (a wrong
 * password, no such database, a failing migration) will not change by waiting: it fails the start at once.
 */
export function isUnreachable(err: unknown, depth = 0): boolean {
  if (!(err instanceof Error) || depth > 4) return false
  const e = err as Error & { code?: unknown; errors?: unknown[] }
  if (typeof e.code === 'string') {
    if (NETWORK_CODES.has(e.code) || /^57P0[123]$/.test(e.code) || e.code === '53300' || e.code.startsWith('08')) return true
  }
  if (/^Connection terminated/.test(e.message) || /connection timeout/i.test(e.message)) return true
  if (e instanceof CommitOutcomeUnknownError) return true
  if (Array.isArray(e.errors) && e.errors.some((x) => isUnreachable(x, depth + 1))) return true
  return isUnreachable(e.cause, depth + 1)
}

/**
 * PostgreSQL, migrated, once it is reachable: attempts with backoff until `wait.timeoutMs` has passed, then
 * DatabaseUnreachableError. Migrations run in one transaction, so an attempt cut off half-way is simply retried.
 */
async function openPostgresWhenReachable(url: string, wait: WaitOptions, layout: DatabaseLayout): Promise<Store> {
  const started = Date.now()
  const deadline = started + wait.timeoutMs
  const store = openPostgres(url)
  let lastReport = -Infinity
  let last: Error | undefined
  const giveUp = (why: unknown) => {
    void store.close().catch(() => {})
    throw why
  }
  const timedOut = () =>
    new DatabaseUnreachableError(
      `PostgreSQL at ${databaseLocation(url)} was not reachable within ${Math.round(wait.timeoutMs / 1000)} s (DATABASE_CONNECT_TIMEOUT_SECONDS)` +
        `${last ? `; last error: ${last.message}` : ''}. Start it, check DATABASE_URL, or set DATABASE_CONNECT_TIMEOUT_SECONDS higher`,
      last ?? new Error('no answer'),
    )
  for (let attempt = 1; ; attempt++) {
    try {
      const migrating = migrate(store, { layout })
      // Settled either way, so that an attempt the deadline or a signal cut short never rejects unheard.
      migrating.catch(() => {})
      await within(migrating, deadline - Date.now(), wait.signal)
      // As `migrated` does: the workers' first claims carry the instance's lease key.
      await within(store.leaseHolder?.ready?.catch(() => {}) ?? Promise.resolve(), deadline - Date.now(), wait.signal).catch(() => {})
      return store
    } catch (err) {
      if (err === TIME_UP) giveUp(timedOut())
      if (wait.signal?.aborted) giveUp(wait.signal.reason)
      if (!isUnreachable(err)) giveUp(err)
      last = err as Error
    }
    const now = Date.now()
    if (now - lastReport >= WAIT_REPORT_EVERY_MS) {
      lastReport = now
      wait.onWaiting?.({ attempt, elapsedMs: now - started, error: last })
    }
    if (now >= deadline) giveUp(timedOut())
    try {
      await within(
        new Promise<never>(() => {}),
        Math.min(FIRST_PAUSE_MS * 2 ** Math.min(attempt - 1, 10), MAX_PAUSE_MS, deadline - now),
        wait.signal,
      )
    } catch (err) {
      if (err !== TIME_UP) giveUp(err)
    }
  }
}

const TIME_UP = Symbol('time up')

/** `work`, unless `ms` pass first (rejects with TIME_UP) or `signal` aborts (rejects with its reason). */
function within<T>(work: Promise<T>, ms: number, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason)
    const onAbort = () => finish(() => reject(signal?.reason))
    const timer = setTimeout(() => finish(() => reject(TIME_UP)), Math.max(0, ms))
    const finish = (settle: () => void) => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      settle()
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    work.then(
      (v) => finish(() => resolve(v)),
      (e) => finish(() => reject(e)),
    )
  })
}
