import { randomUUID } from 'node:crypto'
import { MAX_BATCH_CHUNK_SIZE } from '../config.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import type { OperationsByKind } from '../resources/batches/service.ts'
import { type ClaimedBatch, claimBatch, handBackLease, recordChunkFailure } from '../resources/batches/store.ts'
import { claimKey } from '../store/lease-holder.ts'
import { analyzeGrownTables } from '../store/statistics.ts'
import type { Store } from '../store/store.ts'
import { type ChunkDeps, runChunk } from './batch-chunk.ts'
import { describeError } from './batch-errors.ts'
import { createWorker, type Worker } from './worker.ts'

export { MAX_RECORD_SAVEPOINTS_PER_CHUNK } from './batch-chunk.ts'
export { isTransientStoreError } from './batch-errors.ts'

/**
 * The batch runner. Guarantees:
 * - Durable: the queue is the `batches` table; an accepted batch is committed before 202 is answered.
 * - Exactly once per record: records run in chunks, each chunk one transaction holding the batch row
 *   (lease checked), with every record's effect and its outcome committed together. A crash rolls back
 *   the open chunk; its records are still `pending` and run again by whoever claims the batch next.
 * - Shared by instances: claiming uses FOR UPDATE SKIP LOCKED and a lease token. A lease names its holder
 *   (src/store/lease-holder.ts): a killed process's lease, or one whose holder lost its lock connection, is
 *   taken at once by any instance (a restarted embedded store takes its own at start); otherwise a lease no one
 *   renews expires. Either way the batch resumes where the last committed chunk ended.
 * - One code path: each record runs the same WriteOperation as its PUT route, with the grant re-read
 *   when its chunk runs, inside a savepoint so a refused record leaves nothing behind. A refused record
 *   keeps the whole problem the route would have answered (detail, errors[] with pointers into the record
 *   body, extension members), so the integrator can fix it without replaying it.
 * - Failures of the store are not records' outcomes: an error that says the store could not do the work now
 *   (`isTransientStoreError`: deadlock, serialization failure, lost connection, commit outcome unknown,
 *   operator intervention) rolls the whole chunk back, as does any error outside a record (the lease, the
 *   grant, saving outcomes, COMMIT). The failed chunk is counted (`failed_attempts`, reset by a chunk that
 *   commits), its error kept in `last_error`, and the lease handed back with a backoff (`next_attempt_at`,
 *   doubling from `retryBaseMs` up to `retryCapMs`) so any instance retries it later. After
 *   `maxChunkFailures` failures in a row the batch's remaining records are not run: each fails with 503
 *   `projection_unavailable` and a detail saying so (a record depending on one of them is
 *   `dependency_failed`), and the batch completes, instead of being retried forever.
 */
export interface BatchRunnerOptions {
  store: Store
  clock: Clock
  operations: OperationsByKind
  /** Records per chunk transaction, at most MAX_BATCH_CHUNK_SIZE (src/config.ts says why). */
  chunkSize?: number
  leaseSeconds?: number
  pollMs?: number
  concurrency?: number
  /** Failures of a batch's chunk in a row after which its remaining records fail (default 10). */
  maxChunkFailures?: number
  /** Backoff after the first failure of a chunk, doubled for each next one (default 1 s). */
  retryBaseMs?: number
  /** The longest backoff (default 5 min). */
  retryCapMs?: number
  /**
   * How often, at most, the runner looks for tables that doubled since their last ANALYZE and analyzes them
   * (src/store/statistics.ts), between chunks and after each turn of a worker loop (default 10 s; 0 never).
   */
  analyzeEveryMs?: number
  /** Told, once a chunk's transaction committed, how many records it decided (the metrics). */
  onRecordsProcessed?: (n: number) => void
  /**
   * Runs a chunk at its client's time (the sandbox clock, src/sandbox/clock.ts); absent in
   * production. The lease stays on the database's clock.
   */
  atClientTime?: <T>(clientCode: string, fn: () => Promise<T>) => Promise<T>
  /** Told, once a chunk that appended change-feed events committed (the webhook dispatcher's wake-up). */
  onFeedAppended?: () => void
  onError?: (err: unknown) => void
}

export interface BatchRunner extends Worker {
  readonly runnerId: string
  /** Runs until no batch is left (tests and tools; the service starts the worker). */
  drain(): Promise<void>
}

export function createBatchRunner(opts: BatchRunnerOptions): BatchRunner {
  const { store, clock } = opts
  const chunkSize = opts.chunkSize ?? 25
  if (chunkSize > MAX_BATCH_CHUNK_SIZE) throw new RangeError(`chunkSize ${chunkSize} is over ${MAX_BATCH_CHUNK_SIZE}`)
  const onError = (err: unknown) => opts.onError?.(err)
  const deps: ChunkDeps = {
    store,
    clock,
    operations: opts.operations,
    chunkSize,
    leaseSeconds: opts.leaseSeconds ?? 30,
    maxChunkFailures: opts.maxChunkFailures ?? 10,
    onError,
  }
  const backoff = { baseMs: opts.retryBaseMs ?? 1000, capMs: opts.retryCapMs ?? 300_000 }
  const analyzeIfDue = analyzer(store, opts.analyzeEveryMs ?? 10_000, onError)
  const runnerId = randomUUID()
  /** Set by stop(): the batch in progress hands its lease back after the chunk it is in. */
  let stopping = false

  /** One chunk at its client's time, its committed effects told (metrics, the dispatcher's wake-up). */
  async function chunk(claimed: ClaimedBatch, token: string): Promise<boolean> {
    const run = () => runChunk(deps, claimed, token)
    const { more, decided, appendedFeed } = await (opts.atClientTime ? opts.atClientTime(claimed.client_code, run) : run())
    // Counted once committed: a chunk rolled back counts nothing, and no record is counted twice.
    try {
      if (decided > 0) opts.onRecordsProcessed?.(decided)
      if (appendedFeed) opts.onFeedAppended?.()
    } catch (err) {
      onError(err)
    }
    return more
  }

  /** Claims and finishes at most one batch; true when one was claimed. */
  async function runOnce(): Promise<boolean> {
    // While the instance's lease lock is not held (its connection was lost), it claims nothing (lease-holder.ts).
    const holder = claimKey(store.leaseHolder)
    if (holder === 'not_held') return false
    const token = randomUUID()
    const claimed = await claimBatch(store, token, deps.leaseSeconds, runnerId, isoNow(clock), holder)
    if (!claimed) return false
    // The lock this lease was taken under is gone (it is reconnected under a new key): the lease is forfeited, and
    // any instance takes the batch at once. A chunk already in its transaction holds the batch row and commits
    // under its token; the next one is not started.
    const forfeited = () => holder !== null && store.leaseHolder?.current() !== holder
    try {
      while (!forfeited() && (await chunk(claimed, token))) {
        // A turn of the event loop between chunks: on PGlite every query resolves through promises alone, so
        // without it a long batch would keep HTTP requests and signals waiting until it ended.
        await new Promise<void>((resolve) => setImmediate(resolve))
        await analyzeIfDue()
        if (stopping) {
          // Hand the rest to any instance now rather than after the lease expires.
          await handBackLease(store, claimed, token)
          break
        }
      }
    } catch (err) {
      // The chunk rolled back (or, after CommitOutcomeUnknownError, may have committed: its records are then no
      // longer pending). Count it and back off; if even this fails, the lease expires and the batch is retried.
      onError(err)
      await recordChunkFailure(store, claimed, token, describeError(err), backoff)
    }
    return true
  }

  const worker = createWorker({
    name: 'batch-runner',
    intervalMs: opts.pollMs ?? 500,
    runOnce,
    repeatWhileWorking: true,
    concurrency: opts.concurrency ?? 1,
    // After every batch too, not only between chunks: a batch of one chunk (BATCH_CHUNK_SIZE is 100 by default,
    // the largest batch) has no "between", and a bulk load of such batches must still be analyzed as it grows.
    afterTurn: analyzeIfDue,
    onStarting: () => {
      stopping = false
    },
    onStopping: () => {
      stopping = true
    },
    onError,
  })
  return {
    ...worker,
    runnerId,
    async drain(): Promise<void> {
      while (await runOnce()) {}
    },
  }
}

/**
 * Keeps foreign-key checks on index lookups while bulk loads grow the tables (src/store/statistics.ts): at most
 * every `everyMs` (0: never), tables that doubled since their last ANALYZE are analyzed.
 */
function analyzer(store: Store, everyMs: number, onError: (err: unknown) => void): () => Promise<void> {
  let last = performance.now()
  return async () => {
    if (everyMs <= 0 || performance.now() - last < everyMs) return
    last = performance.now()
    try {
      await analyzeGrownTables(store)
    } catch (err) {
      onError(err)
    }
  }
}
