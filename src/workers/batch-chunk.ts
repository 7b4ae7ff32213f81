import { type Grant, grantWithScopes } from '../access/grants.ts'
import { loadActiveGrant } from '../access/store.ts'
import { isProblem, Problem } from '../domain/problems.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import { parseOrThrow } from '../http/validation.ts'
import type { OperationsByKind } from '../resources/batches/service.ts'
import {
  type BatchRecordRow,
  type ClaimedBatch,
  clearChunkFailures,
  completeBatch,
  holdLease,
  type RecordOutcome,
  saveOutcomes,
} from '../resources/batches/store.ts'
import type { ChangeInput } from '../resources/feed/store.ts'
import { type RecordKind, runOperation, type SetOperation, type SetOutcome, type WriteOperation } from '../resources/operations.ts'
import { inUnitOfWork, type UnitOfWork, type UnitOfWorkMark } from '../resources/unit-of-work.ts'
import { lockIdentities } from '../store/locks.ts'
import { rollbackToSavepoint, setSavepoint } from '../store/savepoints.ts'
import type { Store } from '../store/store.ts'
import { answersInOrder } from '../store/transactions.ts'
import { errorClass, isTransientStoreError } from './batch-errors.ts'
import { nextWave, type WaveItem } from './batch-waves.ts'

/**
 * One chunk of a batch in one transaction (the batch runner's unit of progress; src/workers/batch-runner.ts says
 * what it guarantees): its records run set-based, a wave at a time, with the per-record path for what has no
 * set-based form, and their outcomes are saved with their effects before COMMIT.
 */

/**
 * The most records one chunk runs alone, each in its own savepoint (src/config.ts, MAX_BATCH_CHUNK_SIZE, says
 * why): with the chunk's own savepoint, at most 64 subtransaction ids, what a PostgreSQL backend caches. A chunk
 * that reaches it stops there; its remaining records stay pending and run in the batch's next chunk.
 */
export const MAX_RECORD_SAVEPOINTS_PER_CHUNK = 63

/** The synchronous routes' answer to an unexpected error (http/server.ts), for a record that met one. */
const UNEXPECTED = 'An unexpected error prevented a safe commit. Nothing was saved. Retry with backoff.'

export interface ChunkDeps {
  store: Store
  clock: Clock
  operations: OperationsByKind
  chunkSize: number
  leaseSeconds: number
  maxChunkFailures: number
  onError: (err: unknown) => void
}

/** What every record of one chunk shares while it runs. */
interface ChunkRun {
  deps: ChunkDeps
  uow: UnitOfWork
  batch: ClaimedBatch
  /** The integration's grant as it is now (re-read per chunk); null when revoked. */
  grant: Grant | null
  /** Each record's status so far, by record id: earlier chunks' and this chunk's. */
  done: Map<string, string>
  /** How many records the chunk ran alone, each in its own savepoint (MAX_RECORD_SAVEPOINTS_PER_CHUNK). */
  savepoints: number
}

/** A finished batch's status from its records' statuses. */
function batchStatus(statuses: readonly (string | undefined)[]): 'succeeded' | 'failed' | 'partially_succeeded' {
  const succeeded = statuses.filter((s) => s === 'succeeded').length
  return succeeded === statuses.length ? 'succeeded' : succeeded === 0 ? 'failed' : 'partially_succeeded'
}

function blockedOutcome(rec: BatchRecordRow, blocker: string): RecordOutcome {
  return { position: rec.position, status: 'dependency_failed', httpStatus: null, problemCode: null, problem: null, blockedBy: blocker }
}

function succeededOutcome(rec: BatchRecordRow, httpStatus: number): RecordOutcome {
  return { position: rec.position, status: 'succeeded', httpStatus, problemCode: null, problem: null, blockedBy: null }
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

/** The first record this one depends on that did not succeed, if any. */
function blockerOf(run: ChunkRun, rec: BatchRecordRow): string | undefined {
  return rec.depends_on.find((dep) => run.done.get(dep) !== 'succeeded')
}

/** The synchronous route's order: authorization (the grant as it is now), then the body. A refusal is a Problem. */
function checkRecord(run: ChunkRun, op: WriteOperation, rec: BatchRecordRow): { grant: Grant; body: unknown } | Problem {
  try {
    return {
      grant: grantWithScopes(run.grant, run.batch.client_code, op.scopes),
      body: parseOrThrow(op.body, rec.body, '', 'The request body'),
    }
  } catch (err) {
    if (isProblem(err)) return err
    throw err
  }
}

/** One record alone, through runOperation inside its own savepoint, so a refused record leaves nothing behind. */
async function runRecord(run: ChunkRun, rec: BatchRecordRow): Promise<RecordOutcome> {
  const blocker = blockerOf(run, rec)
  if (blocker !== undefined) return blockedOutcome(rec, blocker)
  const op = run.deps.operations[rec.kind as RecordKind]
  const checked = checkRecord(run, op, rec)
  if (checked instanceof Problem) return failedOutcome(rec, checked)
  const { uow, batch } = run
  run.savepoints++
  await setSavepoint(uow.tx, 'batch_record')
  const mark = uow.mark()
  try {
    const ctx = { clientCode: batch.client_code, grant: checked.grant, id: rec.external_id }
    const result = await runOperation(uow, op, ctx, checked.body, isoNow(run.deps.clock))
    // What it sent ahead of the flush (UnitOfWork.send) is answered inside its savepoint: its failure is its own.
    await uow.settleSent()
    return succeededOutcome(rec, result.status)
  } catch (err) {
    // The store could not run it now: not this record's outcome. The chunk rolls back and is retried.
    if (isTransientStoreError(err)) throw err
    // What it sent ahead, answered (whatever the answer: the savepoint takes it back), so the next record can mark.
    await uow.settleSent().catch(() => {})
    await rollbackToSavepoint(uow.tx, 'batch_record')
    uow.rollbackTo(mark)
    if (isProblem(err)) return failedOutcome(rec, err)
    run.deps.onError(err)
    return failedOutcome(rec, new Problem('projection_unavailable', UNEXPECTED))
  }
}

/** A pending record of the chunk, checked in memory before any wave runs. */
interface Prepared {
  rec: BatchRecordRow
  op: WriteOperation
  checked: { grant: Grant; body: unknown } | Problem
  item: WaveItem
}

function prepare(run: ChunkRun, rec: BatchRecordRow): Prepared {
  const op = run.deps.operations[rec.kind as RecordKind]
  const checked = checkRecord(run, op, rec)
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
}

/**
 * The feed must tell the chunk in the records' array order, as if they ran one after another: each event is
 * given the position of the record that made it (in a wave, the one record writing that event's resource), and
 * the chunk's events are sorted by it at the end.
 */
class EventPositions {
  private readonly positionOf = new Map<ChangeInput, number>()
  private readonly start: UnitOfWorkMark
  constructor(private readonly uow: UnitOfWork) {
    this.start = uow.mark()
  }
  attribute(since: UnitOfWorkMark, position: (c: ChangeInput) => number): void {
    for (const [, c] of this.uow.eventsSince(since)) if (!this.positionOf.has(c)) this.positionOf.set(c, position(c))
  }
  sort(): void {
    this.uow.orderEventsSince(this.start, (c) => this.positionOf.get(c) ?? Number.MAX_SAFE_INTEGER)
  }
}

/**
 * One wave: its records' refusals and blocked dependencies settled in memory, then one `runMany` per operation, a
 * handful of multi-row statements however many records the wave holds. Returns the records it settled; a record
 * its operation sent back (`fallback`: a rule not done set-based, nothing of it written) becomes a barrier that
 * runs alone when its turn comes.
 */
async function runWave(run: ChunkRun, wave: Prepared[], settle: (rec: BatchRecordRow, o: RecordOutcome) => void): Promise<Set<Prepared>> {
  const { uow, batch } = run
  const settled = new Set<Prepared>()
  const groups = new Map<WriteOperation, { p: Prepared; grant: Grant; body: unknown }[]>()
  for (const p of wave) {
    const blocker = blockerOf(run, p.rec)
    if (blocker !== undefined || p.checked instanceof Problem) {
      settle(p.rec, blocker !== undefined ? blockedOutcome(p.rec, blocker) : failedOutcome(p.rec, p.checked as Problem))
      settled.add(p)
      continue
    }
    const list = groups.get(p.op) ?? []
    list.push({ p, ...p.checked })
    groups.set(p.op, list)
  }
  const now = isoNow(run.deps.clock)
  for (const [op, list] of groups) {
    const many = op.many as SetOperation
    const current = (list[0] as { grant: Grant }).grant
    uow.beginOperation()
    const results = await many.runMany(
      uow,
      { clientCode: batch.client_code, grant: current, locked: true },
      list.map(({ p, body }) => ({ id: p.rec.external_id, body })),
      now,
    )
    for (const [i, { p }] of list.entries()) {
      const result = results[i] as SetOutcome
      if ('fallback' in result) {
        p.item.barrier = true
        continue
      }
      settle(p.rec, 'problem' in result ? failedOutcome(p.rec, result.problem) : succeededOutcome(p.rec, result.status))
      settled.add(p)
      if (!('problem' in result) && op.source) uow.touchSource(batch.client_code, current.feedMode, now)
    }
  }
  return settled
}

/**
 * A chunk's records, set-based: each is checked in memory first (the grant as it is now, then its body: the
 * synchronous route's order), then they run in waves (src/workers/batch-waves.ts). A record of an operation
 * without a set-based form, or one its `runMany` sent back, runs alone through `runRecord` when its turn in array
 * order comes; once the chunk has run MAX_RECORD_SAVEPOINTS_PER_CHUNK records alone, it stops before the next one
 * (the rest stay pending).
 */
async function runWaves(run: ChunkRun, pending: BatchRecordRow[], saving: Promise<void>): Promise<RecordOutcome[]> {
  const { uow, batch } = run
  let remaining = pending.map((rec) => prepare(run, rec))
  // Every identity the chunk's set-based records write, locked at once in a fixed order (one statement; the
  // keys of `SetOperation.keys` are `kind:id`, the identities `lockIdentity` takes), behind the chunk's savepoint.
  await answersInOrder([
    saving,
    lockIdentities(
      uow.tx,
      batch.client_code,
      remaining.flatMap((p) =>
        p.op.many ? (p.item.keys?.writes ?? []).map((k) => [k.slice(0, k.indexOf(':')), k.slice(k.indexOf(':') + 1)] as const) : [],
      ),
    ),
  ])
  const positions = new EventPositions(uow)
  const outcomes: RecordOutcome[] = []
  const settle = (rec: BatchRecordRow, outcome: RecordOutcome) => {
    run.done.set(rec.record_id, outcome.status)
    outcomes.push(outcome)
  }
  while (remaining.length > 0) {
    const step = nextWave(remaining.map((p) => p.item))
    if ('barrier' in step || step.wave.length === 0) {
      if (run.savepoints >= MAX_RECORD_SAVEPOINTS_PER_CHUNK) break
      const [head, ...rest] = remaining as [Prepared, ...Prepared[]]
      const before = uow.mark()
      settle(head.rec, await runRecord(run, head.rec))
      positions.attribute(before, () => head.rec.position)
      remaining = rest
      continue
    }
    const wave = step.wave.map((i) => remaining[i] as Prepared)
    const waveMark = uow.mark()
    const settled = await runWave(run, wave, settle)
    // No two records of a wave write one resource, so an event's resource names the record that made it.
    const writer = new Map<string, number>()
    for (const p of wave) for (const k of p.item.keys?.writes ?? []) writer.set(k, p.rec.position)
    const last = Math.max(...wave.map((p) => p.rec.position))
    positions.attribute(waveMark, (c) => writer.get(`${c.resourceType}:${c.resourceId}`) ?? last)
    remaining = remaining.filter((p) => !settled.has(p))
  }
  positions.sort()
  return outcomes
}

/**
 * The chunk's records in one unit of work: set-based (runWaves); should that fail unexpectedly, the chunk runs
 * again record by record, each through runOperation inside its savepoint: correctness never depends on the fast
 * path. The source activity and the feed events of every succeeded record are flushed once, by the caller.
 */
async function runPending(run: ChunkRun, pending: BatchRecordRow[]): Promise<RecordOutcome[]> {
  const { uow } = run
  const doneBefore = new Map(run.done)
  // Sent with the chunk's identity locks (runWaves): one round trip.
  const saving = setSavepoint(uow.tx, 'batch_chunk')
  // Awaited with the locks; should the chunk fail before that, its failure is the chunk's, not an unhandled one.
  saving.catch(() => {})
  const mark = uow.mark()
  try {
    return await runWaves(run, pending, saving)
  } catch (err) {
    if (isTransientStoreError(err)) throw err
    run.deps.onError(err)
    await rollbackToSavepoint(uow.tx, 'batch_chunk')
    uow.rollbackTo(mark)
    for (const rec of pending) run.done.set(rec.record_id, doneBefore.get(rec.record_id) ?? 'pending')
    const outcomes: RecordOutcome[] = []
    run.savepoints = 0
    for (const rec of pending) {
      if (run.savepoints >= MAX_RECORD_SAVEPOINTS_PER_CHUNK) break
      const outcome = await runRecord(run, rec)
      run.done.set(rec.record_id, outcome.status)
      outcomes.push(outcome)
    }
    return outcomes
  }
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
        ? blockedOutcome(rec, blocker)
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

/** What a committed chunk did: whether the batch has more to run, and how many records it decided. */
export interface ChunkResult {
  more: boolean
  decided: number
  /** The chunk appended change-feed events (told once it committed). */
  appendedFeed: boolean
}

/** The chunk's work inside its transaction, the lease held; its unit of work is flushed once, before COMMIT (inUnitOfWork). */
async function chunkInTransaction(
  deps: ChunkDeps,
  uow: UnitOfWork,
  batch: ClaimedBatch,
  token: string,
): Promise<Omit<ChunkResult, 'appendedFeed'>> {
  const { tx } = uow
  // The lease and the grant in one round trip (the grant is read even when the lease turns out lost).
  const [lease, grant] = await answersInOrder([
    holdLease(tx, batch, token, deps.leaseSeconds),
    loadActiveGrant(tx, batch.integration_id, batch.client_code),
  ])
  if (!lease) return { more: false, decided: 0 }
  const { records } = lease
  const done = new Map(records.map((r) => [r.record_id, r.status]))
  const pending = records.filter((r) => r.status === 'pending').slice(0, deps.chunkSize)
  if (pending.length === 0) {
    await completeBatch(tx, batch, batchStatus(records.map((r) => r.status)), isoNow(deps.clock))
    return { more: false, decided: 0 }
  }
  if (lease.failedAttempts >= deps.maxChunkFailures) {
    const given = notRun(records, done, lease.failedAttempts, lease.lastError ?? '')
    await saveOutcomes(tx, batch, given)
    return { more: true, decided: given.length }
  }
  const outcomes = await runPending({ deps, uow, batch, grant, done, savepoints: 0 }, pending)
  // The chunk that runs the last records completes the batch too: no transaction of its own for that.
  const finished = records.every((r) => done.get(r.record_id) !== 'pending')
  // Three independent writes of the chunk's own rows, sent together: one round trip (docs/decisions.md).
  await Promise.all([
    saveOutcomes(tx, batch, outcomes),
    lease.failedAttempts > 0 ? clearChunkFailures(tx, batch) : undefined,
    finished ? completeBatch(tx, batch, batchStatus(records.map((r) => done.get(r.record_id))), isoNow(deps.clock)) : undefined,
  ])
  return { more: !finished, decided: outcomes.length }
}

/** One chunk in one transaction; `more` is false when the batch is finished or the lease was lost. */
export async function runChunk(deps: ChunkDeps, batch: ClaimedBatch, token: string): Promise<ChunkResult> {
  let appendedFeed = false
  const result = await inUnitOfWork(
    deps.store,
    (uow) => {
      // A batch's records are its Integration's writes (the key that sent the batch is not kept: docs/decisions.md).
      uow.actor = { type: 'integration' }
      return chunkInTransaction(deps, uow, batch, token)
    },
    () => {
      appendedFeed = true
    },
  )
  return { ...result, appendedFeed }
}
