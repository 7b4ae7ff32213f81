import { randomUUID } from 'node:crypto'
import { MAX_BATCH_CHUNK_SIZE } from '../config.ts'
import { isProblem, Problem } from '../domain/problems.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import { type Grant, grantWithScopes, loadActiveGrant } from '../http/auth.ts'
import { parseOrThrow } from '../http/validation.ts'
import type { OperationsByKind } from '../resources/batches/service.ts'
import {
  type BatchRecordRow,
  type ClaimedBatch,
  claimBatch,
  clearChunkFailures,
  completeBatch,
  holdLease,
  type RecordOutcome,
  recordChunkFailure,
  saveOutcomes,
} from '../resources/batches/store.ts'
import type { ChangeInput } from '../resources/changes/store.ts'
import {
  lockIdentities,
  type RecordKind,
  runOperation,
  type SetOperation,
  type SetOutcome,
  type WriteOperation,
} from '../resources/operations.ts'
import { UnitOfWork, type UnitOfWorkMark } from '../resources/unit-of-work.ts'
import { claimKey } from '../store/lease-holder.ts'
import { analyzeGrownTables } from '../store/statistics.ts'
import { CommitOutcomeUnknownError, type Store } from '../store/store.ts'
import { nextWave, type WaveItem } from './batch-waves.ts'

/**
 * The most records one chunk runs alone, each in its own savepoint (src/config.ts, MAX_BATCH_CHUNK_SIZE, says
 * why): with the chunk's own savepoint, at most 64 subtransaction ids, what a PostgreSQL backend caches. A chunk
 * that reaches it stops there; its remaining records stay pending and run in the batch's next chunk.
 */
export const MAX_RECORD_SAVEPOINTS_PER_CHUNK = 63

/** The synchronous routes' answer to an unexpected error (http/server.ts), for a record that met one. */
const UNEXPECTED = 'An unexpected error prevented a safe commit. Nothing was saved. Retry with backoff.'

/**
 * SQLSTATE classes and codes that say "the store could not do it now", not "this record is wrong": connection
 * exceptions (08), transaction rollback (40: serialization failure 40001, deadlock 40P01), insufficient
 * resources (53), operator intervention (57: statement canceled, backend terminated, server shutting down),
 * system errors (58: I/O), and a lock wait that timed out (55P03).
 */
const TRANSIENT_CLASSES = new Set(['08', '40', '53', '57', '58'])
const TRANSIENT_CODES = new Set(['55P03'])
/** Socket errors and the `pg` driver's words for a connection that broke or never came. */
const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'])
const LOST_CONNECTION =
  /Connection terminated|connection (?:is )?(?:closed|ended|lost)|timeout exceeded when trying to connect|Client has encountered a connection error|not queryable/i

/**
 * True when an error came from the store being unable to run the work at this moment (a retry of the same
 * work may succeed), as opposed to an error of the work itself. Such an error never becomes a record's
 * outcome: the chunk is rolled back and retried.
 */
export function isTransientStoreError(err: unknown): boolean {
  if (err instanceof CommitOutcomeUnknownError) return true
  if (typeof err !== 'object' || err === null) return false
  const { code, message } = err as { code?: unknown; message?: unknown }
  if (typeof code === 'string') {
    if (/^[0-9A-Z]{5}$/.test(code)) return TRANSIENT_CLASSES.has(code.slice(0, 2)) || TRANSIENT_CODES.has(code)
    if (NETWORK_CODES.has(code)) return true
  }
  return typeof message === 'string' && LOST_CONNECTION.test(message)
}

/** What `last_error` keeps of a chunk failure: the SQLSTATE (or error name) and message, never the error's detail. */
function describeError(err: unknown): string {
  const e = (typeof err === 'object' && err !== null ? err : { message: String(err) }) as {
    code?: unknown
    name?: unknown
    message?: unknown
  }
  const label = typeof e.code === 'string' ? e.code : typeof e.name === 'string' ? e.name : 'Error'
  return `${label}: ${String(e.message ?? '')}`.slice(0, 500)
}

/** What an integrator is told about the failure, without the message (it may name store internals). */
function errorClass(err: string): string {
  const label = err.slice(0, err.indexOf(':'))
  return /^[0-9A-Z]{5}$/.test(label) ? `SQLSTATE ${label}` : label || 'an unexpected error'
}

/** A finished batch's status from its records' statuses. */
function batchStatus(statuses: readonly (string | undefined)[]): 'succeeded' | 'failed' | 'partially_succeeded' {
  const succeeded = statuses.filter((s) => s === 'succeeded').length
  return succeeded === statuses.length ? 'succeeded' : succeeded === 0 ? 'failed' : 'partially_succeeded'
}

function blockedOutcome(rec: BatchRecordRow, blocker: string): RecordOutcome {
  return { position: rec.position, status: 'dependency_failed', httpStatus: null, problemCode: null, problem: null, blockedBy: blocker }
}

function failedOutcome(rec: BatchRecordRow, problem: Problem): RecordOutcome {
  return {
    position: rec.position,
    status: 'failed',
    httpStatus: problem.status,
    problemCode: problem.code,
    // Everything the synchronous route's problem body says beyond type, title and status.
    problem: {
      detail: problem.detail,
      ...(problem.errors ? { errors: problem.errors } : {}),
      ...(problem.extensions ? { extensions: problem.extensions } : {}),
    },
    blockedBy: null,
  }
}

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
   * Runs a chunk at its client's time (the sandbox clock, src/resources/sandbox-clock/clock.ts); absent in
   * production. The lease stays on the database's clock.
   */
  atClientTime?: <T>(clientCode: string, fn: () => Promise<T>) => Promise<T>
  onError?: (err: unknown) => void
}

export function createBatchRunner(opts: BatchRunnerOptions) {
  const { store, clock, operations } = opts
  const chunkSize = opts.chunkSize ?? 25
  if (chunkSize > MAX_BATCH_CHUNK_SIZE) throw new RangeError(`chunkSize ${chunkSize} is over ${MAX_BATCH_CHUNK_SIZE}`)
  const maxChunkFailures = opts.maxChunkFailures ?? 10
  const backoff = { baseMs: opts.retryBaseMs ?? 1000, capMs: opts.retryCapMs ?? 300_000 }
  const analyzeEveryMs = opts.analyzeEveryMs ?? 10_000
  let lastAnalyze = performance.now()

  /** Keeps foreign-key checks on index lookups while bulk loads grow the tables (src/store/statistics.ts). */
  async function analyzeIfDue() {
    if (analyzeEveryMs <= 0 || performance.now() - lastAnalyze < analyzeEveryMs) return
    lastAnalyze = performance.now()
    try {
      await analyzeGrownTables(store)
    } catch (err) {
      opts.onError?.(err)
    }
  }
  const leaseSeconds = opts.leaseSeconds ?? 30
  const pollMs = opts.pollMs ?? 500
  const runnerId = randomUUID()
  let stopped = true
  let stopping = false
  let wakeUp: (() => void) | null = null
  const loops: Promise<void>[] = []

  /** Per chunk: how many records it ran alone, each in its own savepoint (MAX_RECORD_SAVEPOINTS_PER_CHUNK). */
  interface SavepointCount {
    used: number
  }

  async function runRecord(
    uow: UnitOfWork,
    b: ClaimedBatch,
    grant: Grant | null,
    rec: BatchRecordRow,
    done: Map<string, string>,
    savepoints: SavepointCount,
  ): Promise<RecordOutcome> {
    const blocker = rec.depends_on.find((dep) => done.get(dep) !== 'succeeded')
    if (blocker !== undefined) return blockedOutcome(rec, blocker)
    const failed = (problem: Problem) => failedOutcome(rec, problem)
    const op = operations[rec.kind as RecordKind]
    // The synchronous route's order: authorization (the grant as it is now), then the body, then the write.
    let current: Grant
    let body: unknown
    try {
      current = grantWithScopes(grant, b.client_code, op.scopes)
      body = parseOrThrow(op.body, rec.body, '', 'The request body')
    } catch (err) {
      if (isProblem(err)) return failed(err)
      throw err
    }
    const { tx } = uow
    savepoints.used++
    await tx.query('SAVEPOINT batch_record')
    const mark = uow.mark()
    try {
      const result = await runOperation(uow, op, { clientCode: b.client_code, grant: current, id: rec.external_id }, body, isoNow(clock))
      return { position: rec.position, status: 'succeeded', httpStatus: result.status, problemCode: null, problem: null, blockedBy: null }
    } catch (err) {
      // The store could not run it now: not this record's outcome. The chunk rolls back and is retried.
      if (isTransientStoreError(err)) throw err
      await tx.query('ROLLBACK TO SAVEPOINT batch_record')
      uow.rollbackTo(mark)
      if (isProblem(err)) return failed(err)
      opts.onError?.(err)
      return failed(new Problem('projection_unavailable', UNEXPECTED))
    }
  }

  /**
   * A chunk's records, set-based: each is checked in memory first (the grant as it is now, then its body:
   * the synchronous route's order), then they run in waves (src/workers/batch-waves.ts), each wave one
   * `runMany` per operation: a handful of multi-row statements however many records it holds. A record of an
   * operation without a set-based form, or one its `runMany` sent back (`fallback`: a rule not done set-based,
   * nothing of it written), runs alone through `runRecord` when its turn in array order comes; once the chunk
   * has run MAX_RECORD_SAVEPOINTS_PER_CHUNK records alone, it stops before the next one (the rest stay pending).
   */
  async function runWaves(
    uow: UnitOfWork,
    b: ClaimedBatch,
    grant: Grant | null,
    pending: BatchRecordRow[],
    done: Map<string, string>,
    savepoints: SavepointCount,
  ): Promise<RecordOutcome[]> {
    interface Prepared {
      rec: BatchRecordRow
      op: WriteOperation
      checked: { grant: Grant; body: unknown } | Problem
      item: WaveItem
    }
    let remaining: Prepared[] = pending.map((rec) => {
      const op = operations[rec.kind as RecordKind]
      let checked: Prepared['checked']
      try {
        checked = { grant: grantWithScopes(grant, b.client_code, op.scopes), body: parseOrThrow(op.body, rec.body, '', 'The request body') }
      } catch (err) {
        if (!isProblem(err)) throw err
        checked = err
      }
      const ok = checked instanceof Problem ? undefined : checked
      return {
        rec,
        op,
        checked,
        item: {
          recordId: rec.record_id,
          dependsOn: rec.depends_on,
          keys: ok && op.many ? op.many.keys(rec.external_id, ok.body) : undefined,
          barrier: ok !== undefined && !op.many,
        },
      }
    })
    // Every identity the chunk's set-based records write, locked at once in a fixed order (one statement; the
    // keys of `SetOperation.keys` are `kind:id`, the identities `lockIdentity` takes).
    await lockIdentities(
      uow.tx,
      b.client_code,
      remaining.flatMap((p) =>
        p.op.many ? (p.item.keys?.writes ?? []).map((k) => [k.slice(0, k.indexOf(':')), k.slice(k.indexOf(':') + 1)] as const) : [],
      ),
    )
    // The feed must tell the chunk in the records' array order, as if they ran one after another: each event is
    // given the position of the record that made it (in a wave, the one record writing that event's resource),
    // and the chunk's events are sorted by it at the end.
    const chunkMark = uow.mark()
    const positionOf = new Map<ChangeInput, number>()
    const attribute = (since: UnitOfWorkMark, position: (c: ChangeInput) => number) => {
      for (const [, c] of uow.eventsSince(since)) if (!positionOf.has(c)) positionOf.set(c, position(c))
    }
    const outcomes: RecordOutcome[] = []
    const settle = (rec: BatchRecordRow, outcome: RecordOutcome) => {
      done.set(rec.record_id, outcome.status)
      outcomes.push(outcome)
    }
    while (remaining.length > 0) {
      const step = nextWave(remaining.map((p) => p.item))
      if ('barrier' in step || step.wave.length === 0) {
        if (savepoints.used >= MAX_RECORD_SAVEPOINTS_PER_CHUNK) break
        const [head, ...rest] = remaining as [Prepared, ...Prepared[]]
        const before = uow.mark()
        settle(head.rec, await runRecord(uow, b, grant, head.rec, done, savepoints))
        attribute(before, () => head.rec.position)
        remaining = rest
        continue
      }
      const wave = step.wave.map((i) => remaining[i] as Prepared)
      const waveMark = uow.mark()
      const settled = new Set<Prepared>()
      const groups = new Map<WriteOperation, { p: Prepared; grant: Grant; body: unknown }[]>()
      for (const p of wave) {
        const blocker = p.rec.depends_on.find((dep) => done.get(dep) !== 'succeeded')
        if (blocker !== undefined || p.checked instanceof Problem) {
          settle(p.rec, blocker !== undefined ? blockedOutcome(p.rec, blocker) : failedOutcome(p.rec, p.checked as Problem))
          settled.add(p)
          continue
        }
        const list = groups.get(p.op) ?? []
        list.push({ p, ...p.checked })
        groups.set(p.op, list)
      }
      const now = isoNow(clock)
      for (const [op, list] of groups) {
        const many = op.many as SetOperation
        const current = (list[0] as { grant: Grant }).grant
        uow.beginOperation()
        const results = await many.runMany(
          uow,
          { clientCode: b.client_code, grant: current, locked: true },
          list.map(({ p, body }) => ({ id: p.rec.external_id, body })),
          now,
        )
        for (const [i, { p }] of list.entries()) {
          const result = results[i] as SetOutcome
          if ('fallback' in result) {
            p.item.barrier = true
            continue
          }
          settle(
            p.rec,
            'problem' in result
              ? failedOutcome(p.rec, result.problem)
              : {
                  position: p.rec.position,
                  status: 'succeeded',
                  httpStatus: result.status,
                  problemCode: null,
                  problem: null,
                  blockedBy: null,
                },
          )
          settled.add(p)
          if (!('problem' in result) && op.source) uow.touchSource(b.client_code, current.feedMode, now)
        }
      }
      // No two records of a wave write one resource, so an event's resource names the record that made it.
      const writer = new Map<string, number>()
      for (const p of wave) for (const k of p.item.keys?.writes ?? []) writer.set(k, p.rec.position)
      const last = Math.max(...wave.map((p) => p.rec.position))
      attribute(waveMark, (c) => writer.get(`${c.resourceType}:${c.resourceId}`) ?? last)
      remaining = remaining.filter((p) => !settled.has(p))
    }
    uow.orderEventsSince(chunkMark, (c) => positionOf.get(c) ?? Number.MAX_SAFE_INTEGER)
    return outcomes
  }

  /** One chunk in one transaction; returns false when the batch is finished or the lease was lost. */
  async function runChunk(b: ClaimedBatch, token: string): Promise<boolean> {
    let decided = 0
    const more = await store.transaction(async (tx) => {
      const lease = await holdLease(tx, b, token, leaseSeconds)
      if (!lease) return false
      const { records } = lease
      const done = new Map(records.map((r) => [r.record_id, r.status]))
      const pending = records.filter((r) => r.status === 'pending').slice(0, chunkSize)
      if (pending.length === 0) {
        await completeBatch(tx, b, batchStatus(records.map((r) => r.status)), isoNow(clock))
        return false
      }
      if (lease.failedAttempts >= maxChunkFailures) {
        const given = notRun(records, done, lease.failedAttempts, lease.lastError ?? '')
        await saveOutcomes(tx, b, given)
        decided = given.length
        return true
      }
      const grant = await loadActiveGrant(tx, b.integration_id, b.client_code)
      // One unit of work for the chunk: its records run set-based, a wave at a time (runWaves), and the source
      // activity and the feed events of every succeeded record are flushed once, before COMMIT. Should the
      // set-based run fail unexpectedly, the chunk runs again record by record, each through runOperation
      // inside its savepoint: correctness never depends on the fast path.
      const uow = new UnitOfWork(tx)
      const savepoints: SavepointCount = { used: 0 }
      let outcomes: RecordOutcome[]
      const doneBefore = new Map(done)
      await tx.query('SAVEPOINT batch_chunk')
      const mark = uow.mark()
      try {
        outcomes = await runWaves(uow, b, grant, pending, done, savepoints)
      } catch (err) {
        if (isTransientStoreError(err)) throw err
        opts.onError?.(err)
        await tx.query('ROLLBACK TO SAVEPOINT batch_chunk')
        uow.rollbackTo(mark)
        for (const rec of pending) done.set(rec.record_id, doneBefore.get(rec.record_id) ?? 'pending')
        outcomes = []
        savepoints.used = 0
        for (const rec of pending) {
          if (savepoints.used >= MAX_RECORD_SAVEPOINTS_PER_CHUNK) break
          const outcome = await runRecord(uow, b, grant, rec, done, savepoints)
          done.set(rec.record_id, outcome.status)
          outcomes.push(outcome)
        }
      }
      await uow.flush()
      await saveOutcomes(tx, b, outcomes)
      decided = outcomes.length
      if (lease.failedAttempts > 0) await clearChunkFailures(tx, b)
      // The chunk that runs the last records completes the batch too: no transaction of its own for that.
      if (records.every((r) => done.get(r.record_id) !== 'pending')) {
        await completeBatch(tx, b, batchStatus(records.map((r) => done.get(r.record_id))), isoNow(clock))
        return false
      }
      return true
    })
    // Counted once committed: a chunk rolled back counts nothing, and no record is counted twice.
    try {
      if (decided > 0) opts.onRecordsProcessed?.(decided)
    } catch (err) {
      opts.onError?.(err)
    }
    return more
  }

  /**
   * The outcomes of a batch given up on: every pending record, in array order, fails with 503 saying it was
   * not run, or is `dependency_failed` when a record it depends on did not succeed (the runner's rule).
   */
  function notRun(records: BatchRecordRow[], done: Map<string, string>, failures: number, lastError: string): RecordOutcome[] {
    const problem = new Problem(
      'projection_unavailable',
      `This record was not run: the batch stopped after its chunk transaction failed ${failures} times in a row (last: ${errorClass(lastError)}). Nothing of this record was saved; submit it again in a new batch.`,
    )
    const outcomes: RecordOutcome[] = []
    for (const rec of records) {
      if (rec.status !== 'pending') continue
      const blocker = rec.depends_on.find((dep) => done.get(dep) !== 'succeeded')
      const outcome: RecordOutcome =
        blocker !== undefined
          ? { position: rec.position, status: 'dependency_failed', httpStatus: null, problemCode: null, problem: null, blockedBy: blocker }
          : {
              position: rec.position,
              status: 'failed',
              httpStatus: problem.status,
              problemCode: problem.code,
              problem: { detail: problem.detail },
              blockedBy: null,
            }
      done.set(rec.record_id, outcome.status)
      outcomes.push(outcome)
    }
    return outcomes
  }

  /** Claims and finishes at most one batch; true when one was claimed. */
  async function runOnce(): Promise<boolean> {
    // While the instance's lease lock is not held (its connection was lost), it claims nothing (lease-holder.ts).
    const holder = claimKey(store.leaseHolder)
    if (holder === 'not_held') return false
    const token = randomUUID()
    const claimed = await claimBatch(store, token, leaseSeconds, runnerId, isoNow(clock), holder)
    if (!claimed) return false
    // The lock this lease was taken under is gone (it is reconnected under a new key): the lease is forfeited, and
    // any instance takes the batch at once. A chunk already in its transaction holds the batch row and commits
    // under its token; the next one is not started.
    const forfeited = () => holder !== null && store.leaseHolder?.current() !== holder
    try {
      const chunk = () => runChunk(claimed, token)
      while (!forfeited() && (await (opts.atClientTime ? opts.atClientTime(claimed.client_code, chunk) : chunk()))) {
        // A turn of the event loop between chunks: on PGlite every query resolves through promises alone, so
        // without it a long batch would keep HTTP requests and signals waiting until it ended.
        await new Promise<void>((resolve) => setImmediate(resolve))
        await analyzeIfDue()
        if (stopping) {
          // Hand the rest to any instance now rather than after the lease expires.
          await store.query(
            'UPDATE batches SET lease_expires_at = clock_timestamp() WHERE client_code = $1 AND external_batch_id = $2 AND lease_token = $3',
            [claimed.client_code, claimed.external_batch_id, token],
          )
          break
        }
      }
    } catch (err) {
      // The chunk rolled back (or, after CommitOutcomeUnknownError, may have committed: its records are then no
      // longer pending). Count it and back off; if even this fails, the lease expires and the batch is retried.
      opts.onError?.(err)
      await recordChunkFailure(store, claimed, token, describeError(err), backoff)
    }
    return true
  }

  async function loop() {
    while (!stopped) {
      let worked = false
      try {
        worked = await runOnce()
      } catch (err) {
        opts.onError?.(err)
      }
      await new Promise<void>((resolve) => setImmediate(resolve))
      // After every batch too, not only between chunks: a batch of one chunk (BATCH_CHUNK_SIZE is 100 by default,
      // the largest batch) has no "between", and a bulk load of such batches must still be analyzed as it grows.
      await analyzeIfDue()
      if (!worked && !stopped) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pollMs)
          wakeUp = () => {
            clearTimeout(timer)
            resolve()
          }
        })
        wakeUp = null
      }
    }
  }

  return {
    runnerId,
    runOnce,
    /** Runs until no batch is left (tests and tools; the service uses start()). */
    async drain(): Promise<void> {
      while (await runOnce()) {}
    },
    start() {
      if (!stopped) return
      stopped = false
      stopping = false
      for (let i = 0; i < (opts.concurrency ?? 1); i++) loops.push(loop())
    },
    wake() {
      wakeUp?.()
    },
    async stop() {
      stopped = true
      stopping = true
      wakeUp?.()
      await Promise.all(loops.splice(0))
    },
  }
}

export type BatchRunner = ReturnType<typeof createBatchRunner>
