import { randomInt } from 'node:crypto'
import pg from 'pg'

/**
 * Leases tied to their holder's session (issue 20, item 9).
 *
 * A worker's lease (a batch, a webhook delivery) names its holder: this instance's key, a random int4, whose
 * session-level advisory lock `pg_advisory_lock(LEASE_LOCK_CLASS, key)` the instance holds for as long as it
 * may work. A lease whose holder's lock is not held any more (`leaseHolderGone`, read from `pg_locks`) belongs to
 * a dead process or a lost connection: any instance takes it at once instead of waiting for it to expire. The
 * expiry stays as the backstop (a holder whose lock the server still believes held, such as a hung process or a
 * half-open connection, and rows written before holders existed).
 *
 * - PostgreSQL: the lock is held on a connection of its own, outside the pool, so that it lives exactly as long
 *   as the instance can reach the server. When that connection is lost (restart, failover, pg_terminate_backend,
 *   a network reset) the instance holds no key: it claims nothing, and treats every lease it took as forfeited
 *   (its workers stop before their next step); it reconnects every `retryMs` and takes a new key. The old key's
 *   leases are then free for any instance, this one included.
 * - PGlite: the engine is one backend in this process, so the lock lives as long as the process (the data
 *   directory lock, data-dir-lock.ts, makes it the only one). Every lease found at start names a key no backend
 *   holds, so a start takes its own interrupted work at once.
 * - Fencing does not rest on the lock: a lease is still guarded by its token, checked under the work row's lock
 *   in the transaction that commits the work (batches/store.ts holdLease, webhooks/store.ts completeAttempts).
 *   A stale holder (one that has not noticed its connection is gone) can at worst begin a step that then
 *   changes nothing; it can never complete work another instance took. The lock only decides how soon work
 *   is taken over.
 */
export interface LeaseHolder {
  /** The key to write on leases taken now, or null while the lock is not held (then nothing may be claimed). */
  current(): number | null
  /** Settles once the first attempt to take the lock has ended (PostgreSQL; the store's open waits for it). */
  readonly ready?: Promise<void>
}

/** The first key of the two-key advisory lock ('IRSL'); the lock's second key is the holder's own. */
export const LEASE_LOCK_CLASS = 0x4952534c

/**
 * SQL: true when the lease holder in `column` (a bigint column, NULL for a lease with no holder) holds no lock in
 * this database any more. `pg_locks` is read once per statement (an uncorrelated subquery, hashed); it shows
 * two-key advisory locks as classid = the first key, objid = the second, objsubid = 2.
 */
export function leaseHolderGone(column: string): string {
  return `(${column} IS NOT NULL AND ${column} NOT IN (
    SELECT hl.objid::text::bigint FROM pg_locks hl
     WHERE hl.locktype = 'advisory' AND hl.classid = ${LEASE_LOCK_CLASS} AND hl.objsubid = 2 AND hl.granted
       AND hl.database = (SELECT oid FROM pg_database WHERE datname = current_database())))`
}

/** The key a claim writes, or 'not_held': the store has a holder whose lock is not held now (claim nothing). */
export function claimKey(holder: LeaseHolder | undefined): number | null | 'not_held' {
  if (!holder) return null
  return holder.current() ?? 'not_held'
}

const newKey = () => randomInt(1, 2 ** 31)

/** The embedded store's holder: its lock is taken once on the one backend and lives as long as the process. */
export async function embeddedLeaseHolder(query: (sql: string, params: unknown[]) => Promise<unknown>): Promise<LeaseHolder> {
  const key = newKey()
  await query('SELECT pg_advisory_lock($1, $2)', [LEASE_LOCK_CLASS, key])
  return { current: () => key }
}

export interface SessionLeaseHolder extends LeaseHolder {
  /** Resolves once the lock is held for the first time (or rejects when the first connection fails). */
  readonly ready: Promise<void>
  close(): Promise<void>
}

/**
 * PostgreSQL's holder: a dedicated connection holding the instance's advisory lock. It needs a real session
 * (a direct connection, or a pooler in session mode): behind a transaction-mode pooler a session lock does not
 * follow the client.
 */
export function sessionLeaseHolder(
  connectionString: string,
  opts: { retryMs?: number; onError?: (err: Error) => void } = {},
): SessionLeaseHolder {
  const retryMs = opts.retryMs ?? 1000
  let key: number | null = null
  let client: pg.Client | null = null
  let closed = false
  let timer: NodeJS.Timeout | undefined

  function lost(c: pg.Client, err?: Error) {
    if (client !== c) return
    client = null
    key = null
    if (err) opts.onError?.(err)
    c.end().catch(() => {})
    if (!closed) {
      timer = setTimeout(() => void acquire().catch(() => {}), retryMs)
      timer.unref()
    }
  }

  async function acquire(): Promise<void> {
    const c = new pg.Client({ connectionString, keepAlive: true, keepAliveInitialDelayMillis: 10_000 })
    client = c
    // Never without a listener: a lost connection is an event, not a dead process.
    c.on('error', (err) => lost(c, err))
    c.on('end', () => lost(c))
    try {
      await c.connect()
      await c.query("SET application_name = 'inbound-lease-holder'")
      // A key another live instance holds is refused (try), and another is drawn.
      for (let attempt = 0; attempt < 8; attempt++) {
        const k = newKey()
        const rows = await c.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', [LEASE_LOCK_CLASS, k])
        if (rows.rows[0]?.ok) {
          if (client !== c || closed) {
            // Closed meanwhile: the lock goes with the connection.
            await c.end().catch(() => {})
            return
          }
          key = k
          // Held, and idle from now on: it never keeps the process alive by itself (as the pool's idle ones time out).
          const socket = c.connection.stream as { unref?: () => void }
          socket.unref?.()
          return
        }
      }
      throw new Error('no free lease holder key after 8 attempts')
    } catch (err) {
      lost(c, err as Error)
      throw err
    }
  }

  const ready = acquire()
  ready.catch(() => {})
  return {
    current: () => key,
    ready,
    async close() {
      closed = true
      clearTimeout(timer)
      const c = client
      client = null
      key = null
      if (!c) return
      // Referenced again while it closes, so that a caller awaiting the close keeps the process alive until it ends.
      const socket = c.connection.stream as { ref?: () => void }
      socket.ref?.()
      await c.end().catch(() => {})
    },
  }
}
