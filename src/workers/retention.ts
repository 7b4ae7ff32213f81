import type { ClientClocks } from '../resources/client-clocks.ts'
import { runRetention } from '../resources/retention/service.ts'
import type { Queryable } from '../store/store.ts'
import { createWorker, type Worker } from './worker.ts'

export const RETENTION_EVERY_MS = 60_000

export interface RetentionWorkerOptions {
  db: Queryable
  /** Sandbox: each client at its own time. */
  sandbox?: ClientClocks | undefined
  intervalMs?: number
  onError: (err: unknown) => void
}

/** The retention worker: the rule (src/resources/retention/service.ts) every minute, the first run a minute after start. */
export function createRetentionWorker(opts: RetentionWorkerOptions): Worker {
  const intervalMs = opts.intervalMs ?? RETENTION_EVERY_MS
  return createWorker({
    name: 'retention',
    intervalMs,
    firstTurnAfterMs: intervalMs,
    runOnce: async () => {
      await runRetention(opts.db, opts.sandbox)
      return false
    },
    onError: opts.onError,
  })
}
