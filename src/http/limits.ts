import { randomUUID } from 'node:crypto'
import type { Environment } from '../config.ts'
import type { Clock } from '../domain/time.ts'
import type { Queryable, Store } from '../store/store.ts'
import { type Caller, type CallerRow, callerFromRow, lookupKey } from './auth.ts'

/**
 * The request gate: an API key, its grant for the Client in the path, the per-minute count and the concurrency
 * slots, decided together, before any work.
 *
 * Rate: fixed one-minute windows aligned to the minute of the service's clock (the injected `Clock`), one counter
 * per bucket and window; every identified request counts, refused ones included. Chosen over a token bucket
 * because "60 requests per minute" then means exactly that for any calendar minute, and over a sliding log
 * because it is one counter per key per minute.
 *
 * Concurrency: a bucket has N slots. A request holds one in every bucket from the gate to the end of its HTTP
 * exchange (src/http/server.ts gives it back before the response is written, or when the connection ends first).
 *
 * Two implementations, chosen by the store:
 * - PostgreSQL (several instances may share it): the whole gate is one statement, `request_gate` (migration
 *   0012), on UNLOGGED tables; a slot is a row whose primary key makes the claim atomic across instances, and
 *   its lease (`leaseSeconds` of the service's clock) frees the slot of a process that died mid-request. A
 *   release is one statement; a failed release is retried in the background, and should every retry fail the
 *   lease frees the slot.
 * - the embedded store (PGlite), which one process owns (DATA_DIR is locked to it): the key lookup is the one
 *   round trip, the counters and slots live in this process's memory. The key's slot is taken before the
 *   lookup, so a second request of the key is refused even while the first waits for the single PGlite
 *   connection; a process that dies takes its slots with it.
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
   * to the request's `log` and retried in the background after each of `RELEASE_RETRY_DELAYS_MS`; should every
   * retry fail, the lease's expiry frees the slots.
   */
  release(): Promise<void>
}

export interface GateRequest {
  /** SHA-256 digest of the presented API key (its shape and environment prefix already checked). */
  digest: string
  environment: Environment
  /** The Client in the path: its grant is looked up, and in sandbox it is a bucket too. */
  clientCode: string
  log?: ReleaseLog
}

/**
 * `caller` null: the key is unknown, revoked or of another environment (401; nothing counted, nothing held).
 * Otherwise `refused` says why no slot is held (`rate`: over the minute's budget; `concurrency`: a bucket has
 * no free slot), or `lease` is the slots held.
 */
export type GateOutcome =
  | { caller: null }
  | { caller: Caller; rate: RateResult; refused: 'rate' | 'concurrency'; lease: null }
  | { caller: Caller; rate: RateResult; refused: null; lease: Lease }

export interface Gate {
  enter(req: GateRequest): Promise<GateOutcome>
}

export interface GateOptions {
  perMinute: number
  concurrency: number
  clock: Clock
  leaseSeconds?: number
  releaseRetryDelaysMs?: readonly number[]
}

/**
 * Background retries of a failed release: seen failing while PostgreSQL restarts, which takes seconds. They
 * end (about 15 s) well inside the 30 s lease, after which expiry would free the slot anyway.
 */
export const RELEASE_RETRY_DELAYS_MS = [250, 1000, 2000, 4000, 8000] as const

const MINUTE_MS = 60_000

function rateOf(perMinute: number, used: number, now: number, windowStart: number): RateResult {
  return {
    allowed: used <= perMinute,
    limit: perMinute,
    remaining: Math.max(0, perMinute - used),
    resetSeconds: Math.max(1, Math.ceil((windowStart + MINUTE_MS - now) / 1000)),
  }
}

/** The buckets of a request: its key, and in sandbox its Client (only one the key is granted). */
function bucketsOf(caller: Caller, req: GateRequest): string[] {
  const buckets = [`key:${caller.apiKeyId}`]
  if (req.environment === 'sandbox' && caller.grant) buckets.push(`client:${req.clientCode}`)
  return buckets
}

/** The gate for the store: in the database for PostgreSQL, in this process for the embedded store. */
export function createGate(store: Pick<Store, 'kind'> & Queryable, opts: GateOptions): Gate {
  return store.kind === 'pglite' ? createMemoryGate(store, opts) : createStoreGate(store, opts)
}

interface GateRow {
  key_id: string
  key_integration_id: string
  grant_status: string | null
  grant_scopes: string[] | null
  grant_ip_allowlist: string[] | null
  grant_recovery_entry_mode: string | null
  grant_feed_mode: string | null
  grant_industry_profile: string | null
  grant_receipt_delivery_owner: string | null
  used: number
  admitted: boolean
}

/** Limits in the database, exact across every instance sharing it: one statement per request, one per release. */
export function createStoreGate(db: Queryable, opts: GateOptions): Gate {
  const leaseSeconds = opts.leaseSeconds ?? 30
  const retryDelays = opts.releaseRetryDelaysMs ?? RELEASE_RETRY_DELAYS_MS
  /**
   * Holders of this process whose request is over but whose release has not reached the store yet (it failed,
   * say while PostgreSQL restarted, and is being retried). Their slots are free in fact, so a claim of this
   * process may take them over at once: the key serves again as soon as the store is back, not after the
   * next retry. Other instances still wait for the release or the lease's expiry, which is what they can know.
   */
  const unreleased = new Set<string>()

  /**
   * By bucket and holder, not by slot. `buckets` null: a gate statement whose answer was lost (the connection
   * dropped after it committed), so its buckets are unknown; the holder alone finds its rows.
   */
  async function releaseSlots(buckets: string[] | null, holder: string): Promise<void> {
    if (buckets === null) await db.query('DELETE FROM inflight_requests WHERE holder = $1', [holder])
    else await db.query('DELETE FROM inflight_requests WHERE bucket = ANY($1::text[]) AND holder = $2', [buckets, holder])
  }

  async function releaseWithRetries(buckets: string[] | null, holder: string, log: ReleaseLog | undefined, attempt: number) {
    try {
      await releaseSlots(buckets, holder)
      unreleased.delete(holder)
    } catch (err) {
      const e = err as { name?: string; code?: string; message?: string }
      const failure = { errName: e.name, errCode: e.code, errMessage: e.message, attempt: attempt + 1, buckets: buckets?.length ?? null }
      const delay = retryDelays[attempt]
      if (delay === undefined) {
        unreleased.delete(holder)
        log?.error(failure, 'concurrency slot release failed; its lease expiry will free it')
        return
      }
      unreleased.add(holder)
      log?.warn({ ...failure, retryInMs: delay }, 'concurrency slot release failed; retrying in the background')
      // unref: a pending retry never keeps a stopping process alive (the lease expires on its own).
      setTimeout(() => void releaseWithRetries(buckets, holder, log, attempt + 1), delay).unref()
    }
  }

  return {
    async enter(req) {
      const holder = randomUUID()
      const now = opts.clock.now().getTime()
      const windowStart = now - (now % MINUTE_MS)
      let rows: GateRow[]
      try {
        rows = await db.query<GateRow>('SELECT * FROM request_gate($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)', [
          req.digest,
          req.environment,
          req.clientCode,
          req.environment === 'sandbox',
          new Date(windowStart).toISOString(),
          new Date(now).toISOString(),
          opts.perMinute,
          opts.concurrency,
          leaseSeconds,
          holder,
          [...unreleased],
        ])
      } catch (err) {
        // The statement may have committed before its answer was lost: give back whatever it took.
        await releaseWithRetries(null, holder, req.log, 0)
        throw err
      }
      const row = rows[0]
      if (!row) return { caller: null }
      const caller = callerFromRow(req.clientCode, {
        api_key_id: row.key_id,
        integration_id: row.key_integration_id,
        grant_status: row.grant_status,
        scopes: row.grant_scopes,
        ip_allowlist: row.grant_ip_allowlist,
        recovery_entry_mode: row.grant_recovery_entry_mode,
        feed_mode: row.grant_feed_mode,
        industry_profile: row.grant_industry_profile,
        receipt_delivery_owner: row.grant_receipt_delivery_owner,
      } as CallerRow)
      const rate = rateOf(opts.perMinute, row.used, now, windowStart)
      if (!row.admitted) return { caller, rate, refused: rate.allowed ? 'concurrency' : 'rate', lease: null }
      const buckets = bucketsOf(caller, req)
      let released = false
      return {
        caller,
        rate,
        refused: null,
        lease: {
          async release() {
            if (released) return
            released = true
            await releaseWithRetries(buckets, holder, req.log, 0)
          },
        },
      }
    },
  }
}

/**
 * Limits in this process's memory, for a store only this process uses (the embedded one). Exact, and free of
 * round trips: the key lookup is the gate's only statement.
 */
export function createMemoryGate(db: Queryable, opts: GateOptions): Gate {
  /** Per bucket: the window it was last counted in, and its count there. */
  const windows = new Map<string, { start: number; count: number }>()
  /** Per bucket: slots held. */
  const held = new Map<string, number>()

  function take(bucket: string): boolean {
    const n = held.get(bucket) ?? 0
    if (n >= opts.concurrency) return false
    held.set(bucket, n + 1)
    return true
  }
  function give(bucket: string): void {
    const n = (held.get(bucket) ?? 0) - 1
    if (n > 0) held.set(bucket, n)
    else held.delete(bucket)
  }
  function count(bucket: string, windowStart: number): number {
    const w = windows.get(bucket)
    if (w && w.start === windowStart) return ++w.count
    windows.set(bucket, { start: windowStart, count: 1 })
    return 1
  }

  return {
    async enter(req) {
      // The key's slot, by its digest (one key has one digest), taken before the lookup: while the lookup waits
      // for the store, a second request of the key already finds it taken.
      const early = `digest:${req.digest}`
      const tookEarly = take(early)
      let caller: Caller | null
      try {
        // PGlite runs its statements synchronously on this thread: without a turn of the event loop here, a
        // request would be served to its end before the server even read the next one, and no request would
        // ever meet another in flight. One turn lets requests already received reach this gate (and find the
        // slot taken) while this one is served.
        if (tookEarly) await new Promise<void>((resolve) => setImmediate(resolve))
        caller = await lookupKey(db, req.digest, req.environment, req.clientCode)
      } catch (err) {
        if (tookEarly) give(early)
        throw err
      }
      if (!caller) {
        if (tookEarly) give(early)
        return { caller: null }
      }
      const now = opts.clock.now().getTime()
      const windowStart = now - (now % MINUTE_MS)
      const buckets = bucketsOf(caller, req)
      let used = 0
      for (const b of buckets) used = Math.max(used, count(b, windowStart))
      const rate = rateOf(opts.perMinute, used, now, windowStart)
      const taken = tookEarly ? [early] : []
      const giveBack = () => {
        for (const b of taken.splice(0)) give(b)
      }
      if (!rate.allowed) {
        giveBack()
        return { caller, rate, refused: 'rate', lease: null }
      }
      // The other buckets (the Client's, in sandbox) are only known now.
      const rest = buckets.slice(1)
      if (!tookEarly || !rest.every((b) => take(b) && taken.push(b) > 0)) {
        giveBack()
        return { caller, rate, refused: 'concurrency', lease: null }
      }
      return {
        caller,
        rate,
        refused: null,
        lease: {
          async release() {
            giveBack()
          },
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
