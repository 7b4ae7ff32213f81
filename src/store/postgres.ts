import { createHash } from 'node:crypto'
import type { Writable } from 'node:stream'
import pg from 'pg'
import { sessionLeaseHolder } from './lease-holder.ts'
import {
  type AheadOfBegin,
  CommitOutcomeUnknownError,
  FailedAfterCommitError,
  normalizeRow,
  type Queryable,
  type QueryOptions,
  type Store,
  type Tx,
} from './store.ts'

/**
 * The PostgreSQL store: one `pg` pool.
 *
 * Connection loss (server restart or crash, failover, pg_terminate_backend, a network reset) can happen at
 * any moment, and `pg` reports it as an 'error' event on the client; an event nobody listens to kills the
 * process. So every client gets a listener of ours the moment the pool has connected it (the pool's 'connect'
 * event), for its whole life: idle, checked out, between a checkout and our use of it, inside `pool.query`
 * (whose own listener is a `once`), released with an error and being destroyed. The listener records the first
 * error on the client's state (`lostConnections`), which a transaction reads. Listeners of the pool's own come
 * and go beside it; ours never leaves. Before 'connect', while the client is connecting, `pg` hands errors to
 * the pool's connect callback instead. A client whose connection broke is released with its error, which
 * destroys it instead of returning it to the pool; the next checkout opens a new connection, so the service
 * serves again as soon as the server is back.
 */
export interface PostgresOptions {
  max?: number
  /**
   * How long a checkout may wait, to open a connection or for a free one in a full pool, before it fails
   * (the request answers 503). Refused connections fail at once; this bounds an unreachable server.
   */
  connectionTimeoutMillis?: number
  /** Told about each idle connection that was lost (the pool has already discarded it). */
  onIdleError?: (err: Error) => void
  /** Told when the lease holder's connection was lost (it reconnects with a new key; lease-holder.ts). */
  onLeaseHolderError?: (err: Error) => void
}

/**
 * `pg`'s own mapping of a parameter to its wire form (exported at run time, not typed). A transaction's statement
 * maps its parameters with it before the statement is queued, so that one whose parameters cannot be sent fails
 * here, before anything after it leaves; mapped values pass through `pg`'s mapping unchanged.
 */
const prepareValue = (pg as unknown as { utils: { prepareValue(value: unknown): unknown } }).utils.prepareValue

/**
 * Every pool connection's settings, one statement sent ahead of its first: no JIT compilation (docs/decisions.md,
 * "JIT off on every PostgreSQL connection"): every statement here is a short OLTP statement, and a plan costed past
 * `jit_above_cost` (a generic plan over the partitioned layout's tables was) cost the backend up to a second of LLVM
 * compilation at every execution. Plans are left to PostgreSQL's `auto` mode ("Generic plans, tried and withdrawn").
 */
export const CONNECTION_SETTINGS = "SELECT set_config('jit', 'off', false)"

/** The socket under a `pg` client (not in its types). */
const socketOf = (client: pg.ClientBase): Writable => (client as unknown as { connection: { stream: Writable } }).connection.stream

/** An error the server sent as an ordinary ERROR: the statement failed, the connection is fine. */
function isStatementError(err: unknown): boolean {
  return err instanceof pg.DatabaseError && err.severity === 'ERROR'
}

export function openPostgres(connectionString: string, opts: PostgresOptions = {}): Store {
  const max = opts.max ?? 10
  const pool = new pg.Pool({
    connectionString,
    max,
    connectionTimeoutMillis: opts.connectionTimeoutMillis ?? 10_000,
    // A peer that vanished without closing the socket (network partition, host power loss) is found by
    // TCP keepalive instead of holding a connection forever.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // Statements are sent without waiting for the answers of earlier ones (docs/decisions.md, "A write in few
    // round trips"): a transaction's statements issued together (BEGIN with its first ones, a write's flush with
    // its render and its slot's release) travel as one round trip. Each keeps its own Sync, so an error is that
    // statement's alone outside a transaction, and inside one it fails the statements after it (25P02) as before.
    pipeline: true,
  })
  // An idle client that errors has already been removed by the pool; the next checkout reconnects.
  pool.on('error', (err) => opts.onIdleError?.(err))
  /** The first error of each client whose connection broke: set by its permanent listener, never cleared. */
  const lostConnections = new WeakMap<pg.ClientBase, Error>()
  pool.on('connect', (client) => {
    client.on('error', (err) => {
      if (!lostConnections.has(client)) lostConnections.set(client, err)
    })
    // Sent before the client is handed out, ahead of its first statement; should it fail, the connection is lost and
    // so is that statement.
    client.query(CONNECTION_SETTINGS).catch(() => {})
  })

  function hold(client: pg.PoolClient): Held {
    const socket = socketOf(client)
    let gathering = false
    const held: Held = {
      client,
      sending() {
        if (!gathering) {
          gathering = true
          socket.cork()
          process.nextTick(() => {
            gathering = false
            socket.uncork()
          })
        }
        return client
      },
      get lost() {
        return lostConnections.get(client) ?? null
      },
      markLost(err) {
        if (!lostConnections.has(client)) lostConnections.set(client, err)
      },
      release(err) {
        // Any error destroys the client: a broken connection must never go back to the pool.
        client.release(held.lost ?? (err as Error | undefined))
      },
    }
    return held
  }

  // The instance's lease lock, on a connection of its own outside the pool (lease-holder.ts).
  const leaseHolder = sessionLeaseHolder(connectionString, { onError: (err) => opts.onLeaseHolderError?.(err) })
  return {
    kind: 'postgres',
    leaseHolder,
    query: (sql, params, options) => run(pool, sql, params, options),
    exec: async (sql) => {
      await pool.query(sql)
    },
    async transaction<T>(fn: (tx: Tx) => Promise<T>, ahead?: AheadOfBegin): Promise<T> {
      for (let attempt = 1; ; attempt++) {
        const held = hold(await pool.connect())
        // The statement ahead of BEGIN (the request gate) leaves first, outside the transaction, unawaited.
        const admission = ahead ? ahead(connectionOf(held)) : null
        admission?.catch(() => {})
        // BEGIN is not waited for: it leaves with the transaction's first statements, in their round trip.
        let begun = false
        const beginning = held
          .sending()
          .query('BEGIN')
          .then(() => {
            begun = true
          })
        try {
          return await runTransaction(held, beginning, () => begun, fn, admission)
        } catch (err) {
          // The connection was lost before BEGIN was answered (a stale pooled connection, a backend terminated
          // just then): no statement's answer reached `fn` and COMMIT was never sent, so nothing was saved, and one
          // more attempt on a fresh connection is safe. `fn` runs again then; no transaction's work acts outside
          // the database before its first statement is answered (what a write does outside it follows COMMIT).
          if (begun || !held.lost || attempt >= 2 || err instanceof CommitOutcomeUnknownError) throw err
        }
      }
    },
    async close() {
      try {
        await pool.end()
      } finally {
        await leaseHolder.close()
      }
    },
    poolStats: () => ({ max, total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
  }
}

/** One statement on the pool or a checked-out client, its rows normalized (store.ts). */
const run = async <T extends object>(c: pg.Pool | pg.PoolClient, sql: string, params?: readonly unknown[], options?: QueryOptions) => {
  const values = params as unknown[] | undefined
  const res = await (options?.prepared ? runPrepared(c, sql, values) : c.query(sql, values))
  return res.rows.map((r) => normalizeRow<T>(r))
}

/** A connection failure (anything but an ordinary ERROR) of a statement on `held` marks its connection lost. */
async function watchedOn<R>(held: Held, work: Promise<R>): Promise<R> {
  try {
    return await work
  } catch (err) {
    if (!isStatementError(err)) held.markLost(err as Error)
    throw err
  }
}

/** `held`'s connection outside any transaction: for the statement sent ahead of BEGIN (AheadOfBegin). */
function connectionOf(held: Held): Queryable {
  return {
    query: (sql, params, options) => watchedOn(held, run(held.sending(), sql, params, options)),
    exec: async (sql) => {
      await watchedOn(held, held.sending().query(sql))
    },
  }
}

/** A checked-out client and what happened to its connection while we held it. */
interface Held {
  client: pg.PoolClient
  /**
   * The client, its socket corked until the end of this turn of the event loop: the statements sent in one turn
   * (BEGIN with a transaction's first statements, a write's flush with COMMIT) leave in one write, not one each.
   * Measured: a Receivable create made 11 writes to its connection; each is a system call whose loopback delivery
   * and wake-up of the backend the writer pays (docs/performance.md).
   */
  sending(): pg.PoolClient
  /** The connection error, once the connection broke (the client's listener, or a statement that failed so). */
  readonly lost: Error | null
  markLost(err: Error): void
  release(err?: unknown): void
}

/**
 * `fn` in the transaction `held` has begun (BEGIN sent, `beginning` its answer, `begun` true once it came), then
 * COMMIT or ROLLBACK. COMMIT is sent when `fn` resolves, or earlier by `fn` itself (`Tx.commit`), pipelined behind
 * its last statements. `admission`: the answer of the statement sent ahead of BEGIN (AheadOfBegin), which every
 * answer `fn` receives waits for, and whose failure is theirs.
 */
async function runTransaction<T>(
  held: Held,
  beginning: Promise<void>,
  begun: () => boolean,
  fn: (tx: Tx) => Promise<T>,
  admission: Promise<void> | null,
): Promise<T> {
  const client = () => held.sending()
  // A statement that failed other than with an ordinary ERROR (a FATAL, a socket error) means the
  // connection is gone, even before the client's 'error' event says so, and even if `fn` catches it.
  const watched = <R>(work: Promise<R>): Promise<R> => watchedOn(held, work)
  /** True once the statement ahead succeeded (or there was none): COMMIT may leave early only then. */
  let admitted = admission === null
  admission?.then(
    () => {
      admitted = true
    },
    () => {},
  )
  /** A statement's answer, handed to `fn` only behind the statement ahead's (its failure fails every one). */
  const behindAdmission = <R>(answer: Promise<R>): Promise<R> => {
    if (!admission) return answer
    answer.catch(() => {})
    return admission.then(() => answer)
  }
  // BEGIN's failure is its statements' failure too (they fail with it); it is reported through them, or below.
  beginning.catch((err) => {
    if (!isStatementError(err)) held.markLost(err as Error)
  })
  let releaseWith: unknown
  // Once the transaction has ended its client is back in the pool, perhaps in another request's transaction: a
  // statement sent through this `tx` after the end is refused, never run there.
  let ended = false
  /** COMMIT, once sent (by `fn` through `Tx.commit`, or here after `fn`). */
  let committing: Promise<pg.QueryResult> | null = null
  /**
   * A statement whose parameters could not be put on the wire: `pg` then skips it and goes on with the statements
   * after it, so a COMMIT sent early would commit without it. COMMIT then waits for `fn`.
   */
  let unsent = false
  const open = () => {
    if (ended) throw new Error('Transaction is closed')
    if (committing) throw new Error('COMMIT was sent: the transaction takes no more statements')
  }
  /**
   * COMMIT's answer: true when it committed, false when the server rolled back (a statement before it failed, so
   * COMMIT answered ROLLBACK, or the server refused it: a deferred constraint, a serialization failure). Anything
   * else (the connection failed, a FATAL) may have come after the commit was durable: CommitOutcomeUnknownError.
   */
  const settle = async (sent: Promise<pg.QueryResult>): Promise<boolean> => {
    try {
      return (await sent).command === 'COMMIT'
    } catch (err) {
      if (isStatementError(err) && !held.lost) return false
      releaseWith = err
      throw new CommitOutcomeUnknownError(err)
    }
  }
  try {
    let result: T
    try {
      result = await fn({
        query: async (sql, params, options) => {
          open()
          let values: unknown[] | undefined
          try {
            values = params?.map(prepareValue)
          } catch (err) {
            unsent = true
            throw err
          }
          return behindAdmission(watched(run(client(), sql, values, options)))
        },
        exec: async (sql) => {
          open()
          await behindAdmission(watched(client().query(sql)))
        },
        serialized: false,
        commit: () => {
          open()
          // Before BEGIN's answer the transaction could still run again on a fresh connection: COMMIT then
          // follows `fn`, so that nothing can have committed unseen. After a statement that never left, likewise;
          // and before the statement ahead of BEGIN succeeded (the request is not admitted yet).
          if (!begun() || unsent || !admitted) return
          committing = client().query('COMMIT')
          committing.catch(() => {})
        },
      })
    } catch (err) {
      if (!committing) throw err
      // COMMIT left before `fn` failed: whether the writes stand is COMMIT's answer.
      if (await settle(committing)) throw new FailedAfterCommitError(err)
      throw err
    }
    // Answered long since whenever `fn` ran a statement (answers come in order); a BEGIN that failed fails here, and
    // so does a statement ahead of it that failed (the request was refused): nothing is committed then.
    if (admission) await admission
    await watched(beginning)
    if (!committing) {
      // Lost before COMMIT was sent: the server rolls the transaction back, so nothing was saved.
      if (held.lost) throw held.lost
      committing = client().query('COMMIT')
    }
    if (!(await settle(committing))) throw new Error('The transaction was rolled back: a statement before its COMMIT failed.')
    return result
  } catch (err) {
    if (!committing && !held.lost) {
      try {
        await client().query('ROLLBACK')
      } catch (rollbackErr) {
        releaseWith = rollbackErr
      }
    }
    throw err
  } finally {
    ended = true
    held.release(releaseWith)
  }
}

/** A prepared statement's name: from its text, so one text has one name on every connection. */
const statementNames = new Map<string, string>()
function statementName(sql: string): string {
  let name = statementNames.get(sql)
  if (!name) {
    name = `irs_${createHash('sha256').update(sql).digest('hex').slice(0, 24)}`
    statementNames.set(sql, name)
  }
  return name
}

/**
 * A named statement, prepared on the connection at its first run. Should a migration of another instance have
 * changed what it reads since ("cached plan must not change result type"), the pool has already dropped that
 * connection (an error destroys the client): outside a transaction the statement runs once more, unnamed.
 */
async function runPrepared(c: pg.Pool | pg.PoolClient, sql: string, values: unknown[] | undefined) {
  try {
    return await c.query({ name: statementName(sql), text: sql, values })
  } catch (err) {
    const e = err as { code?: string; message?: string }
    if (c instanceof pg.Pool && e.code === '0A000' && /cached plan must not change result type/.test(e.message ?? ''))
      return c.query(sql, values)
    throw err
  }
}
