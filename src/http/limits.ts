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
 * its response is written. A slot of a process that died mid-request expires after `leaseSeconds`.
 */
export interface RateResult {
  allowed: boolean
  limit: number
  remaining: number
  resetSeconds: number
}

export interface Lease {
  release(): Promise<void>
}

export interface Limiter {
  count(buckets: string[]): Promise<RateResult>
  acquire(buckets: string[]): Promise<Lease | null>
}

export function createLimiter(db: Queryable, opts: { perMinute: number; concurrency: number; leaseSeconds?: number }): Limiter {
  const leaseSeconds = opts.leaseSeconds ?? 30

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
                             WHERE i.bucket = $1 AND i.slot = (g + $5::int) % $2::int AND i.expires_at > clock_timestamp())
           LIMIT 1)
         INSERT INTO inflight_requests (bucket, slot, holder, expires_at)
         SELECT $1, slot, $3, clock_timestamp() + make_interval(secs => $4) FROM free
         ON CONFLICT (bucket, slot) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
           WHERE inflight_requests.expires_at <= clock_timestamp()
         RETURNING slot`,
        [bucket, opts.concurrency, holder, leaseSeconds, offset],
      )
      if (rows[0]) return rows[0].slot
      if (opts.concurrency <= 16) return null
    }
    return null
  }

  async function releaseSlots(held: { bucket: string; slot: number }[], holder: string): Promise<void> {
    if (held.length === 0) return
    await db.query(
      `DELETE FROM inflight_requests i USING unnest($1::text[], $2::int[]) AS h(bucket, slot)
       WHERE i.bucket = h.bucket AND i.slot = h.slot AND i.holder = $3`,
      [held.map((h) => h.bucket), held.map((h) => h.slot), holder],
    )
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
    async acquire(buckets) {
      const holder = randomUUID()
      const held: { bucket: string; slot: number }[] = []
      for (const bucket of buckets) {
        const slot = await claim(bucket, holder)
        if (slot === null) {
          await releaseSlots(held, holder)
          return null
        }
        held.push({ bucket, slot })
      }
      let released = false
      return {
        async release() {
          if (released) return
          released = true
          await releaseSlots(held, holder)
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
