import type { Clock } from '../domain/time.ts'
import type { Queryable } from '../store/store.ts'
import { recordKeyUses } from './store.ts'

/**
 * An API key's `lastUsedAt`, kept off the request path.
 *
 * Authenticating a request is a read (on PostgreSQL the one statement of `request_gate`; on the embedded store
 * `lookupKey`), and it stays one: a write per request would put a row lock and a WAL record on every call of a
 * busy key. Instead each process remembers in memory when each key was last used (`record`, a Map update), and a
 * worker (`flush`, every FLUSH_INTERVAL_MS and once more when the process stops) writes the keys that are due in
 * one set-based statement (`recordKeyUses`). A key is due when it was used and this process has not written it in
 * the last minute; the statement itself writes a row only when the stored time is at least a minute older, so with
 * several instances sharing a database a key's row is still written at most once a minute.
 *
 * What an operator reads is therefore accurate to about a minute: `lastUsedAt` is never later than the key's real
 * last use, and never more than a minute earlier once the flush that follows it has run. A process killed with
 * kill -9 loses at most the uses it had not flushed yet (FLUSH_INTERVAL_MS of them), never a key or a request.
 */
export interface KeyUsage {
  /** The key authenticated a request now (its key was found active; the request may still be refused a limit). */
  record(apiKeyId: string): void
  /** Writes the keys that are due; returns how many rows changed. Errors are the caller's (the worker logs them). */
  flush(): Promise<number>
  /** Keys waiting in memory for a flush (tests, metrics). */
  pending(): number
}

/** How often the worker looks for keys to write: well under the minute of precision promised. */
export const KEY_USAGE_FLUSH_INTERVAL_MS = 15_000

/** A key's row is written at most once in this long. */
export const KEY_USAGE_PRECISION_MS = 60_000

export function createKeyUsage(opts: { db: Queryable; clock: Clock }): KeyUsage {
  /** Per key: its latest use not written yet (null: none), and when this process last wrote it. */
  const keys = new Map<string, { usedAt: number | null; writtenAt: number }>()
  return {
    record(apiKeyId) {
      const at = opts.clock.now().getTime()
      const k = keys.get(apiKeyId)
      if (!k) keys.set(apiKeyId, { usedAt: at, writtenAt: Number.NEGATIVE_INFINITY })
      else if (k.usedAt === null || at > k.usedAt) k.usedAt = at
    },
    async flush() {
      const now = opts.clock.now().getTime()
      const due: { apiKeyId: string; at: string }[] = []
      for (const [apiKeyId, k] of keys) {
        if (k.usedAt === null) {
          // Written and not used since: forgotten once its minute is over, so the map holds only keys in use.
          if (now - k.writtenAt >= KEY_USAGE_PRECISION_MS) keys.delete(apiKeyId)
          continue
        }
        if (now - k.writtenAt >= KEY_USAGE_PRECISION_MS) due.push({ apiKeyId, at: new Date(k.usedAt).toISOString() })
      }
      if (due.length === 0) return 0
      const written = await recordKeyUses(opts.db, due)
      // Only after the statement succeeded: a failed flush keeps every use for the next one.
      for (const d of due) {
        const k = keys.get(d.apiKeyId)
        if (!k) continue
        k.writtenAt = now
        if (k.usedAt !== null && k.usedAt <= Date.parse(d.at)) k.usedAt = null
      }
      return written
    },
    pending() {
      let n = 0
      for (const k of keys.values()) if (k.usedAt !== null) n++
      return n
    },
  }
}
