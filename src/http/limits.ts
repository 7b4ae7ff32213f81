import { randomUUID } from 'node:crypto'
import type { Queryable } from '../store/store.ts'

/**
 * Request-rate and concurrency limits kept in the store, so they hold across every instance sharing one
 * database and survive no process memory.
 *
 * Rate: fixed one-minute windows (aligned to the database clock's minute), one counter row per bucket and
 * window, incremented by a single upsert; every request counts, refused ones included. Chosen over a
 * token bucket because "60 requests per minute" then means exactly that for any calendar minute, and
 * over a sliding log because it is one row per key per minute.
 *
 * Concurrency: a bucket has N slots; a request claims a free or expired slot with one INSERT .. ON
 * CONFLICT statement (the primary key makes the claim atomic across instances) and releases it before
 * its response is written, or when its connection ends first (src/http/server.ts ties the slot to the HTTP
 * exchange). Releasing is best effort: a failed release is retried in the background a few times, and a
 * slot nobody released (a process that died mid-request, a store that stayed down) expires after `leaseSeconds`.
 */
export interface RateResult {
  allowed: boolean
  limit: number
  remaining: number
  resetSeconds: number
}

/** Where a failed release is reported (a pino logger fits); only the error's name, code and message are passed. */
export interface ReleaseLog {
  warn(obj: Record<string, unknown>, msg: string): void
  error(obj: Record<string, unknown>, msg: string): void
}

export interface Lease {
  /**
   * Frees the slots; the first call does it, later calls do nothing. Never rejects: it runs after the request's
   * work is done (often after commit), and nothing there may change the answer. A failed release is reported
   * to the `log` given to `acquire` and retried in the background after each of `RELEASE_RETRY_DELAYS_MS`;
   * should every retry fail, the lease's expiry frees the slots.
   */
  release(): Promise<void>
}

export interface Limiter {
  count(buckets: string[]): Promise<RateResult>
  /** A slot in every bucket, or null (and nothing held) when one of them is full. */
  acquire(buckets: string[], log?: ReleaseLog): Promise<Lease | null>
}

/**
 * Background retries of a failed release: seen failing while PostgreSQL restarts, which takes seconds. They
 * end (about 15 s) well inside the 30 s lease, after which expiry would free the slot anyway.
 */
export const RELEASE_RETRY_DELAYS_MS = [250, 1000, 2000, 4000, 8000] as const

export function createLimiter(
  db: Queryable,
  opts: { perMinute: number; concurrency: number; leaseSeconds?: number; releaseRetryDelaysMs?: readonly number[] },
): Limiter {
  const leaseSeconds = opts.leaseSeconds ?? 30
  const retryDelays = opts.releaseRetryDelaysMs ?? RELEASE_RETRY_DELAYS_MS
  /**
   * Holders of this process whose request is over but whose release has not reached the store yet (it failed,
   * say while PostgreSQL restarted, and is being retried). Their slots are free in fact, so a claim of this
   * process may take them over at once: the key serves again as soon as the store is back, not after the
   * next retry. Other instances still wait for the release or the lease's expiry, which is what they can know.
   */
  const unreleased = new Set<string>()

  async function claim(bucket: string, holder: string): Promise<number | null> {
    // Racing requests start their search for a free slot at random offsets, so they rarely pick the same
    // one; a loser of a race gets no row and searches again. Each search looks at no more than 16 slots
    // from its offset (a set-returning function is materialized, so scanning all N would cost O(N) per
    // request when the limit is raised). With up to 16 slots the answer is exact.
    for (let attempt = 0; attempt < 5; attempt++) {
      const offset = opts.concurrency === 1 ? 0 : Math.floor(Math.random() * opts.concurrency)
      const rows = await db.query<{ slot: number }>(
        `WITH free AS (
           SELECT (g + $5::int) % $2::int AS slot FROM generate_series(0, least($2::int, 16) - 1) AS g
           WHERE NOT EXISTS (SELECT 1 FROM inflight_requests i
                             WHERE i.bucket = $1 AND i.slot = (g + $5::int) % $2::int AND i.expires_at > clock_timestamp()
                               AND i.holder <> ALL($6::uuid[]))
           LIMIT 1)
         INSERT INTO inflight_requests (bucket, slot, holder, expires_at)
         SELECT $1, slot, $3, clock_timestamp() + make_interval(secs => $4) FROM free
         ON CONFLICT (bucket, slot) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
           WHERE inflight_requests.expires_at <= clock_timestamp() OR inflight_requests.holder = ANY($6::uuid[])
         RETURNING slot`,
        [bucket, opts.concurrency, holder, leaseSeconds, offset, [...unreleased]],
      )
      if (rows[0]) return rows[0].slot
      if (opts.concurrency <= 16) return null
    }
    return null
  }

  /**
   * By bucket and holder, not by slot: a claim whose answer was lost (the connection dropped after the INSERT)
   * is released too. The primary key's leading `bucket` column finds the bucket's few slots.
   */
  async function releaseSlots(buckets: string[], holder: string): Promise<void> {
    if (buckets.length === 0) return
    await db.query(`DELETE FROM inflight_requests WHERE bucket = ANY($1::text[]) AND holder = $2`, [buckets, holder])
  }

  async function releaseWithRetries(held: string[], holder: string, log: ReleaseLog | undefined, attempt: number) {
    try {
      await releaseSlots(held, holder)
      unreleased.delete(holder)
    } catch (err) {
      const e = err as { name?: string; code?: string; message?: string }
      const failure = { errName: e.name, errCode: e.code, errMessage: e.message, attempt: attempt + 1, buckets: held.length }
      const delay = retryDelays[attempt]
      if (delay === undefined) {
        unreleased.delete(holder)
        log?.error(failure, 'concurrency slot release failed; its lease expiry will free it')
        return
      }
      unreleased.add(holder)
      log?.warn({ ...failure, retryInMs: delay }, 'concurrency slot release failed; retrying in the background')
      // unref: a pending retry never keeps a stopping process alive (the lease expires on its own).
      setTimeout(() => void releaseWithRetries(held, holder, log, attempt + 1), delay).unref()
    }
  }

  return {
    async count(buckets) {
      const rows = await db.query<{ count: number; reset_in: number }>(
        `INSERT INTO rate_limit_windows (bucket, window_start, count)
         SELECT b, date_trunc('minute', clock_timestamp()), 1 FROM unnest($1::text[]) AS b
         ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_limit_windows.count + 1
         RETURNING count, extract(epoch FROM window_start + interval '1 minute' - clock_timestamp())::float8 AS reset_in`,
        [buckets],
      )
      const worst = Math.max(...rows.map((r) => r.count))
      const resetSeconds = Math.max(1, Math.ceil(rows[0]?.reset_in ?? 60))
      return {
        allowed: worst <= opts.perMinute,
        limit: opts.perMinute,
        remaining: Math.max(0, opts.perMinute - worst),
        resetSeconds,
      }
    },
    async acquire(buckets, log) {
      const holder = randomUUID()
      // Every bucket a claim was attempted for: what a failed or refused acquisition must give back.
      const held: string[] = []
      try {
        for (const bucket of buckets) {
          held.push(bucket)
          const slot = await claim(bucket, holder)
          if (slot === null) {
            await releaseWithRetries(held, holder, log, 0)
            return null
          }
        }
      } catch (err) {
        // A claim that failed part-way must not leave the slots it did take held until they expire.
        await releaseWithRetries(held, holder, log, 0)
        throw err
      }
      let released = false
      return {
        async release() {
          if (released) return
          released = true
          await releaseWithRetries(held, holder, log, 0)
        },
      }
    },
  }
}

/** Old windows and expired leases are only clutter: the retention worker calls this. */
export async function purgeLimitRows(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM rate_limit_windows WHERE window_start < now() - interval '5 minutes'`)
  await db.query(`DELETE FROM inflight_requests WHERE expires_at < now() - interval '5 minutes'`)
}
