import {
  advanceReceivables,
  claimFanout,
  dueFanoutClients,
  fanoutPending,
  receivablesBehind,
  recordFanoutFailure,
  saveFanoutProgress,
} from '../resources/holds/client-facts-store.ts'
import { inUnitOfWork } from '../resources/unit-of-work.ts'
import type { Store } from '../store/store.ts'
import { createWorker, type Worker } from './worker.ts'

/**
 * The client fan-out: after a client-wide change recorded its fact (a collection toggle, a freshness flip;
 * src/resources/holds/client-facts-store.ts), gives every Receivable of the client its new revision and its
 * `receivable.updated` event, in chunks. Guarantees:
 *
 * - **Exactly once.** A Receivable is taken only while its `client_fact_seq` is below the pass's target, and
 *   the same statement that gives it the new revision sets it to the target; its event is written in the same
 *   transaction. A Receivable a write gave a newer revision after the fact was brought up to date by that
 *   write (UnitOfWork flush) and is skipped.
 * - **Bounded chunks, in feed order.** Each chunk is one transaction: at most `chunkSize` Receivables, in id
 *   order after the pass's cursor, their events appended to the feed in that order; facts of one client are
 *   reached in the order they were recorded (a pass targets the client's last fact when it starts; facts
 *   recorded meanwhile are the next pass's).
 * - **Crash-safe, any number of instances.** A chunk claims its client's fan-out row with FOR UPDATE SKIP LOCKED
 *   for its transaction, and commits its progress (cursor, count) with its revisions and events: a killed
 *   worker's open chunk rolls back and its row lock ends with its connection; any instance resumes at the
 *   last committed cursor. Two workers never run one client's chunks at once; they share clients.
 * - Receivables a write holds locked when a chunk reaches them are skipped (SKIP LOCKED: a fan-out never waits
 *   on a request, so it cannot deadlock with one); the pass is repeated for those still behind once it ends.
 * - A chunk that fails is counted in `client_fanouts.failed_attempts`, kept in `last_error`, and retried after
 *   1 s, 2 s, 4 s ... at most 5 minutes.
 */
export interface ClientFanoutOptions {
  store: Store
  /** Receivables per chunk transaction (default 500). */
  chunkSize?: number
  /** How often an idle worker looks for work another instance recorded (default 1 s). */
  pollMs?: number
  /** How long a pass waits before revisiting Receivables that writes held locked (default 200 ms). */
  revisitMs?: number
  /** Told once a chunk that appended change-feed events committed (the webhook dispatcher's wake-up). */
  onFeedAppended?: () => void
  onError?: (err: unknown) => void
}

export const DEFAULT_FANOUT_CHUNK_SIZE = 500

/** Due clients one search returns: a claim skips those another worker holds, so a few more than the workers. */
const DUE_CLIENTS_PER_SEARCH = 16

export interface ClientFanout extends Worker {
  readonly chunkSize: number
  /** One chunk of one client's fan-out (any due client, or only `clientCode`): the client it worked on. */
  runChunk(clientCode?: string): Promise<string | undefined>
  runUntilIdle(): Promise<void>
  runClientUntilIdle(clientCode: string): Promise<void>
}

export function createClientFanout(opts: ClientFanoutOptions): ClientFanout {
  const { store } = opts
  const chunkSize = opts.chunkSize ?? DEFAULT_FANOUT_CHUNK_SIZE
  const pollMs = opts.pollMs ?? 1000
  const revisitMs = opts.revisitMs ?? 200
  if (!Number.isInteger(chunkSize) || chunkSize < 1) throw new Error(`chunkSize must be a positive integer, not ${chunkSize}`)

  /**
   * One chunk of one client's fan-out (any due client, or only `clientCode`). Returns the client it worked on, or
   * undefined when nothing was due. Any due client: the due clients are found by one read across clients, then
   * claimed one by one until a claim succeeds (another worker holds the others), so every statement that locks or
   * writes names its client (docs/scaling.md).
   */
  async function runChunk(clientCode?: string, opt: { rethrow?: boolean } = {}): Promise<string | undefined> {
    if (clientCode !== undefined) return runClientChunk(clientCode, opt)
    for (const due of await dueFanoutClients(store, DUE_CLIENTS_PER_SEARCH)) {
      const ran = await runClientChunk(due, opt)
      if (ran !== undefined) return ran
    }
    return undefined
  }

  /** One chunk of the client's fan-out, in one transaction; undefined when it was not due or another worker has it. */
  async function runClientChunk(clientCode: string, opt: { rethrow?: boolean }): Promise<string | undefined> {
    let claimed: string | undefined
    try {
      return await inUnitOfWork(
        store,
        async (uow) => {
          const { tx } = uow
          const f = await claimFanout(tx, clientCode)
          if (!f) return undefined
          claimed = f.client_code
          const done = Number(f.done_seq)
          let target = Number(f.target_seq)
          let afterId = f.after_id ?? ''
          let reached = Number(f.reached)
          if (target <= done) {
            // A new pass, to the client's last fact now.
            target = Number(f.last_seq)
            afterId = ''
            reached = 0
          }
          const at = f.target_recorded_at ?? new Date().toISOString()
          const { events, lastId } = await advanceReceivables(tx, f.client_code, afterId, target, chunkSize, at)
          // Flushed before COMMIT (inUnitOfWork), after the progress below: the feed statement comes last.
          uow.appendChanges(f.client_code, events)
          reached += events.length
          if (events.length === chunkSize) {
            await saveFanoutProgress(tx, f.client_code, { targetSeq: target, afterId: lastId ?? afterId, reached })
          } else if ((await receivablesBehind(tx, f.client_code, target)) === 0) {
            await saveFanoutProgress(tx, f.client_code, { targetSeq: target, afterId: null, reached, doneSeq: target })
          } else {
            // The end of the pass, with Receivables a write held locked: another pass shortly.
            await saveFanoutProgress(tx, f.client_code, { targetSeq: target, afterId: '', reached, retryInMs: revisitMs })
          }
          return f.client_code
        },
        () => tell(opts.onFeedAppended),
      )
    } catch (err) {
      opts.onError?.(err)
      if (claimed) {
        const e = err as { code?: string; message?: string }
        await recordFanoutFailure(store, claimed, e.code ? `SQLSTATE ${e.code}: ${e.message}` : String(e.message ?? err)).catch((e2) =>
          opts.onError?.(e2),
        )
      }
      if (opt.rethrow) throw err
      // Worked, in the sense that the caller should look again (another client may be due).
      return claimed
    }
  }

  /** One chunk of any due client; true when one ran. */
  async function runOnce(opt: { rethrow?: boolean } = {}): Promise<boolean> {
    return (await runChunk(undefined, opt)) !== undefined
  }

  /**
   * Runs chunks until no fan-out is left at all, waiting out a pass's revisit delay (tests and tools: the
   * service uses start()). A chunk that fails is recorded as in the service and its error thrown here.
   */
  async function runUntilIdle(): Promise<void> {
    for (;;) {
      if (await runOnce({ rethrow: true })) continue
      if (!(await fanoutPending(store))) return
      await new Promise((r) => setTimeout(r, 20))
    }
  }

  /** Runs one client's fan-out until every Receivable of it has reached its last fact (the sandbox clock). */
  async function runClientUntilIdle(clientCode: string): Promise<void> {
    for (;;) {
      if ((await runChunk(clientCode, { rethrow: true })) !== undefined) continue
      if (!(await fanoutPending(store, clientCode))) return
      await new Promise((r) => setTimeout(r, 20))
    }
  }

  /** After COMMIT: a hook that fails is logged, the committed chunk stands. */
  function tell(hook: (() => void) | undefined) {
    try {
      hook?.()
    } catch (err) {
      opts.onError?.(err)
    }
  }

  const worker = createWorker({
    name: 'client-fanout',
    intervalMs: pollMs,
    runOnce: () => runOnce(),
    // Chunk after chunk while there is work, letting requests in between (on PGlite they share the one backend).
    repeatWhileWorking: true,
    onError: (err) => opts.onError?.(err),
  })
  return {
    ...worker,
    chunkSize,
    runChunk: (clientCode?: string) => runChunk(clientCode),
    runUntilIdle,
    runClientUntilIdle,
  }
}
