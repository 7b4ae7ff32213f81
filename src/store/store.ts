/**
 * One small interface over the two real engines (PostgreSQL through `pg`, embedded PGlite).
 * Both speak the same SQL dialect. What differs between them is decided in this folder, as a property the code
 * above asks for, never as a test of `kind` there: `Tx.serialized` (whether locks that only order concurrent
 * writers are needed) and `limitsLiveInStore` (gate-store.ts: whether the request gate's counters and slots live in
 * the database or in the one process that owns the embedded store). Above this folder `kind` is only reported: the
 * start log line and the /metrics labels.
 *
 * Guarantees:
 * - `transaction(fn)` runs `fn` in one database transaction (READ COMMITTED); it commits when `fn`
 *   resolves and rolls back when it throws. Every write of a request goes through exactly one.
 * - A lost connection is a failed transaction, never a dead process: `transaction` rejects and nothing
 *   was saved, except when the connection is lost while COMMIT is in flight, where it rejects with
 *   `CommitOutcomeUnknownError` (the write may have committed).
 * - Rows come back with int8/numeric as strings (exact) and timestamptz as ISO-8601 UTC strings with
 *   millisecond precision, the same on both engines.
 */
import type { LeaseHolder } from './lease-holder.ts'

export type Row = Record<string, unknown>

export interface QueryOptions {
  /**
   * Prepare the statement by name on each connection, so PostgreSQL parses and plans it once per connection
   * instead of at every run. Only for statements whose text never varies and that run all the time: the request
   * path's (the gate, a slot's release, a one-read route's read) and the set-based write path's (arrays through
   * `unnest`/`ANY`, so one text for any number of records). Named statements stay on the connection for its life,
   * so the set is bounded; a statement whose generic plan turned out slower than a fresh one (the feed insert) is
   * left unprepared. The embedded store ignores it.
   */
  prepared?: boolean
}

export interface Queryable {
  query<T extends object = Row>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<T[]>
  /** Several statements, no parameters (migrations). */
  exec(sql: string): Promise<void>
}

export interface Tx extends Queryable {
  /**
   * True when the engine runs one transaction at a time (PGlite): no other transaction can interleave,
   * so locks that only order concurrent writers can be skipped.
   */
  readonly serialized: boolean
  /**
   * Sends COMMIT now, behind the statements already sent and before their answers are awaited, so that it travels
   * in their round trip (docs/decisions.md, "A write in two round trips"). The transaction's function sends no
   * statement after it (refused) and should await what it sent; the store then waits for COMMIT's answer. Should a
   * statement before COMMIT fail, the server turns COMMIT into a rollback: nothing was saved. Should the function
   * throw for a reason of its own after COMMIT left (its answer failed a check), the transaction may well have
   * committed: the store reports that as `FailedAfterCommitError`, never as "nothing was saved". Absent where there is
   * no round trip to save (PGlite runs in this thread: COMMIT follows the function, as without it); a call before the
   * transaction's first answer is ignored (COMMIT then follows the function), so a transaction whose BEGIN is lost on
   * a stale connection can still run again.
   */
  commit?(): void
}

/** How the store's connections are used at this moment (the /metrics gauges, src/http/metrics.ts). */
export interface PoolStats {
  /** Connections the store may open at most (PGlite: its one backend). */
  max: number
  /** Connections open now. */
  total: number
  /** Open connections doing nothing. */
  idle: number
  /** Work waiting for a connection: checkouts of a full pool (PostgreSQL), calls queued behind the running one (PGlite). */
  waiting: number
}

/**
 * A statement of the request's own sent on the transaction's connection ahead of its BEGIN, outside the transaction
 * (its own implicit transaction, committed at once): the request gate of a write (src/http/admission.ts, "the gate
 * in the write's first round trip"). It leaves with BEGIN and the transaction's first statements, in their round
 * trip. Every answer the transaction's function receives waits for it, and should it fail (the gate refused the
 * request) every one fails with its error: the function decides nothing on a request that was not admitted, and
 * COMMIT is never sent before it succeeded. Run again with the function when the transaction is.
 */
export type AheadOfBegin = (connection: Queryable) => Promise<void>

export interface Store extends Queryable {
  readonly kind: 'postgres' | 'pglite'
  /** `ahead`: a statement sent before BEGIN on the transaction's connection (AheadOfBegin). */
  transaction<T>(fn: (tx: Tx) => Promise<T>, ahead?: AheadOfBegin): Promise<T>
  close(): Promise<void>
  /** Connection usage now; optional so that a wrapping store (tests, tools) need not report it. */
  poolStats?(): PoolStats
  /**
   * This instance's lease holder (lease-holder.ts): the key the workers write on the leases they take, tied to a
   * lock that ends with the process (PGlite) or with a dedicated connection (PostgreSQL). Optional so that a
   * wrapping store need not forward it: without one, leases carry no holder and only expire.
   */
  readonly leaseHolder?: LeaseHolder
}

/**
 * The connection was lost while COMMIT was in flight, so the transaction may or may not have committed.
 * It must never be reported as "nothing was saved". Every write is idempotent by its identity, so the
 * caller can safely retry the identical request to learn (or complete) the outcome.
 */
export class CommitOutcomeUnknownError extends Error {
  override readonly name = 'CommitOutcomeUnknownError'
  constructor(cause: unknown) {
    super('The database connection was lost while COMMIT was in flight; the outcome is unknown.', { cause })
  }
}

/**
 * The transaction's function failed after it had sent COMMIT (`Tx.commit`), and COMMIT succeeded: the writes are
 * saved though the function did not finish (a write's answer failed its response schema). Never "nothing was saved".
 */
export class FailedAfterCommitError extends Error {
  override readonly name = 'FailedAfterCommitError'
  constructor(cause: unknown) {
    super('The transaction committed, but what its function did after sending COMMIT failed.', { cause })
  }
}

/** Both drivers hand timestamptz back as Date; the service speaks ISO strings with a literal Z. */
export function normalizeRow<T extends object>(row: Row): T {
  for (const key in row) {
    const v = row[key]
    if (v instanceof Date) row[key] = v.toISOString()
  }
  return row as T
}
