import { randomUUID } from 'node:crypto'
import { isProblem, Problem } from '../domain/problems.ts'
import { type Clock, isoNow } from '../domain/time.ts'
import { type Grant, grantWithScopes, loadActiveGrant } from '../http/auth.ts'
import { parseOrThrow } from '../http/validation.ts'
import type { OperationsByKind } from '../resources/batches/service.ts'
import {
  type BatchRecordRow,
  type ClaimedBatch,
  claimBatch,
  completeBatch,
  holdLease,
  type RecordOutcome,
  recordsToRun,
  saveOutcomes,
} from '../resources/batches/store.ts'
import { changeMark, discardChangesAfter } from '../resources/changes/store.ts'
import { type RecordKind, runOperation } from '../resources/operations.ts'
import type { Store, Tx } from '../store/store.ts'

/** The synchronous routes' answer to an unexpected error (http/server.ts), for a record that met one. */
const UNEXPECTED = 'An unexpected error prevented a safe commit. Nothing was saved. Retry with backoff.'

/**
 * The batch runner. Guarantees:
 * - Durable: the queue is the `batches` table; an accepted batch is committed before 202 is answered.
 * - Exactly once per record: records run in chunks, each chunk one transaction holding the batch row
 *   (lease checked), with every record's effect and its outcome committed together. A crash rolls back
 *   the open chunk; its records are still `pending` and run again by whoever claims the batch next.
 * - Shared by instances: claiming uses FOR UPDATE SKIP LOCKED and a lease token; a dead worker's lease
 *   expires and another instance resumes the batch where the last committed chunk ended.
 * - One code path: each record runs the same WriteOperation as its PUT route, with the grant re-read
 *   when its chunk runs, inside a savepoint so a refused record leaves nothing behind. A refused record
 *   keeps the whole problem the route would have answered (detail, errors[] with pointers into the record
 *   body, extension members), so the integrator can fix it without replaying it.
 */
export interface BatchRunnerOptions {
  store: Store
  clock: Clock
  operations: OperationsByKind
  chunkSize?: number
  leaseSeconds?: number
  pollMs?: number
  concurrency?: number
  onError?: (err: unknown) => void
}

export function createBatchRunner(opts: BatchRunnerOptions) {
  const { store, clock, operations } = opts
  const chunkSize = opts.chunkSize ?? 25
  const leaseSeconds = opts.leaseSeconds ?? 30
  const pollMs = opts.pollMs ?? 500
  const runnerId = randomUUID()
  let stopped = true
  let stopping = false
  let wakeUp: (() => void) | null = null
  const loops: Promise<void>[] = []

  async function runRecord(
    tx: Tx,
    b: ClaimedBatch,
    grant: Grant | null,
    rec: BatchRecordRow,
    done: Map<string, string>,
  ): Promise<RecordOutcome> {
    const blocker = rec.depends_on.find((dep) => done.get(dep) !== 'succeeded')
    if (blocker !== undefined) {
      return { position: rec.position, status: 'dependency_failed', httpStatus: null, problemCode: null, problem: null, blockedBy: blocker }
    }
    const failed = (problem: Problem): RecordOutcome => ({
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
    })
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
    await tx.query('SAVEPOINT batch_record')
    const mark = changeMark(tx)
    try {
      const result = await runOperation(tx, op, { clientCode: b.client_code, grant: current, id: rec.external_id }, body, isoNow(clock))
      return { position: rec.position, status: 'succeeded', httpStatus: result.status, problemCode: null, problem: null, blockedBy: null }
    } catch (err) {
      await tx.query('ROLLBACK TO SAVEPOINT batch_record')
      discardChangesAfter(tx, mark)
      if (isProblem(err)) return failed(err)
      opts.onError?.(err)
      return failed(new Problem('projection_unavailable', UNEXPECTED))
    }
  }

  /** One chunk in one transaction; returns false when the batch is finished or the lease was lost. */
  async function runChunk(b: ClaimedBatch, token: string): Promise<boolean> {
    return store.transaction(async (tx) => {
      if (!(await holdLease(tx, b, token, leaseSeconds))) return false
      const records = await recordsToRun(tx, b)
      const done = new Map(records.map((r) => [r.record_id, r.status]))
      const pending = records.filter((r) => r.status === 'pending').slice(0, chunkSize)
      if (pending.length === 0) {
        const succeeded = records.filter((r) => r.status === 'succeeded').length
        const status = succeeded === records.length ? 'succeeded' : succeeded === 0 ? 'failed' : 'partially_succeeded'
        await completeBatch(tx, b, status, isoNow(clock))
        return false
      }
      const grant = await loadActiveGrant(tx, b.integration_id, b.client_code)
      const outcomes: RecordOutcome[] = []
      for (const rec of pending) {
        const outcome = await runRecord(tx, b, grant, rec, done)
        done.set(rec.record_id, outcome.status)
        outcomes.push(outcome)
      }
      await saveOutcomes(tx, b, outcomes)
      return true
    })
  }

  /** Claims and finishes at most one batch; true when one was claimed. */
  async function runOnce(): Promise<boolean> {
    const token = randomUUID()
    const claimed = await claimBatch(store, token, leaseSeconds, runnerId, isoNow(clock))
    if (!claimed) return false
    while (await runChunk(claimed, token)) {
      if (stopping) {
        // Hand the rest to any instance now rather than after the lease expires.
        await store.query(
          'UPDATE batches SET lease_expires_at = clock_timestamp() WHERE client_code = $1 AND external_batch_id = $2 AND lease_token = $3',
          [claimed.client_code, claimed.external_batch_id, token],
        )
        break
      }
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
