/**
 * One shape for every background worker of the process (the batch runner, the webhook dispatcher, the client
 * fan-out, payment expiry, retention, the freshness sweep): a `runOnce` that does one turn of work, run on a
 * schedule by `createWorker`, started and stopped from one list (src/app.ts `workers`, src/main.ts).
 *
 * Guarantees:
 * - One turn at a time per loop (`concurrency` loops, 1 unless said otherwise); a slow turn is never overlapped by
 *   the next one.
 * - The next turn starts `intervalMs` after the previous one started, or at once when the previous one did work
 *   and the worker drains a queue (`repeatWhileWorking`).
 * - Wake-ups are coalesced: any number of `wake()` calls while a loop sleeps or runs give one more turn, no sooner
 *   than `minWakeGapMs` after the previous turn started (a worker with a per-run budget is not run back to back).
 * - `stop()` starts no new turn, tells the worker (`onStopping`: a turn in progress then finishes what it holds and
 *   claims nothing more), waits for the turns in progress, then runs `afterStop`.
 * - An error of a turn, or of `afterTurn`, is given to `onError`, never thrown.
 */
export interface Worker {
  readonly name: string
  readonly intervalMs: number
  /** One turn, outside the schedule (tests, tools): true when it did work. Errors are the caller's. */
  runOnce(): Promise<boolean>
  start(): void
  /** Work was just recorded in this process: take a turn soon rather than at the next interval. */
  wake(): void
  stop(): Promise<void>
}

export interface WorkerSpec {
  name: string
  /** Between the starts of two turns; for a queue worker, how often an idle loop looks again. */
  intervalMs: number
  runOnce(): Promise<boolean>
  /** The first turn after start(): at once (default) or after this long. */
  firstTurnAfterMs?: number
  /** A turn that did work is followed at once by the next (a queue); otherwise the next waits for the interval. */
  repeatWhileWorking?: boolean
  /** The least time between the start of a turn and a turn a wake-up brings (default 0). */
  minWakeGapMs?: number
  concurrency?: number
  /** Runs after every turn of the schedule (the batch runner's ANALYZE check). */
  afterTurn?: () => Promise<void>
  /** Told at once when stop() is called, before the turns in progress are waited for. */
  onStopping?: () => void
  /** Told when start() is called, before the first turn (the worker clears its own stop flag). */
  onStarting?: () => void
  /** Runs once every turn in progress has ended. */
  afterStop?: () => Promise<void>
  onError: (err: unknown) => void
}

export function createWorker(spec: WorkerSpec): Worker {
  const concurrency = spec.concurrency ?? 1
  let stopped = true
  let loops: Promise<void>[] = []
  /** A wake-up not answered by a turn yet. */
  let woken = false
  let lastTurnStart = Number.NEGATIVE_INFINITY
  const sleepers = new Set<() => void>()

  /** Sleeps `ms`, or less when woken or stopped. */
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer)
        sleepers.delete(done)
        resolve()
      }
      const timer = setTimeout(done, ms)
      sleepers.add(done)
    })

  /** Waits until `ms` have passed, or until a wake-up's turn is due; false when stopped meanwhile. */
  async function pause(ms: number): Promise<boolean> {
    const until = performance.now() + ms
    while (!stopped) {
      const now = performance.now()
      if (woken) {
        const gap = lastTurnStart + (spec.minWakeGapMs ?? 0) - now
        if (gap <= 0) {
          woken = false
          return true
        }
        if (now >= until) return true
        await sleep(Math.min(gap, until - now))
        continue
      }
      if (now >= until) return true
      await sleep(until - now)
    }
    return false
  }

  async function loop(): Promise<void> {
    let delay = spec.firstTurnAfterMs ?? 0
    while (await pause(delay)) {
      const started = performance.now()
      lastTurnStart = started
      let worked = false
      try {
        worked = await spec.runOnce()
      } catch (err) {
        spec.onError(err)
      }
      try {
        await spec.afterTurn?.()
      } catch (err) {
        spec.onError(err)
      }
      // A turn of the event loop between turns: on PGlite every query resolves through promises alone, so a
      // worker with work to do would otherwise keep HTTP requests and signals waiting.
      await new Promise<void>((resolve) => setImmediate(resolve))
      delay = worked && spec.repeatWhileWorking ? 0 : Math.max(0, spec.intervalMs - (performance.now() - started))
    }
  }

  return {
    name: spec.name,
    intervalMs: spec.intervalMs,
    runOnce: () => spec.runOnce(),
    start() {
      if (!stopped) return
      stopped = false
      woken = false
      spec.onStarting?.()
      for (let i = 0; i < concurrency; i++) loops.push(loop())
    },
    wake() {
      if (stopped) return
      woken = true
      for (const wakeUp of [...sleepers]) wakeUp()
    },
    async stop() {
      stopped = true
      spec.onStopping?.()
      for (const wakeUp of [...sleepers]) wakeUp()
      const running = loops
      loops = []
      await Promise.all(running)
      await spec.afterStop?.()
    },
  }
}

/** Starts every worker of the list. */
export function startWorkers(workers: readonly Worker[]): void {
  for (const w of workers) w.start()
}

/** Stops every worker of the list at once and waits for all of them. */
export async function stopWorkers(workers: readonly Worker[]): Promise<void> {
  await Promise.all(workers.map((w) => w.stop()))
}

/**
 * Serves `items` in `concurrency` lanes, each taking the next item until none is left or `stopping()` says so (the
 * items being served finish: every attempt has its timeout). A failing item is reported and the lane goes on.
 * Returns the sum of what `serve` returned (a dispatcher's attempts).
 */
export async function serveInLanes<T>(
  items: readonly T[],
  concurrency: number,
  serve: (item: T) => Promise<number>,
  opts: { stopping: () => boolean; onError?: (err: unknown) => void },
): Promise<number> {
  let total = 0
  let next = 0
  const lanes = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length && !opts.stopping()) {
      const item = items[next++] as T
      try {
        total += await serve(item)
      } catch (err) {
        opts.onError?.(err)
      }
    }
  })
  await Promise.all(lanes)
  return total
}
